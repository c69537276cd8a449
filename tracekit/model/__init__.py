"""The per-rank model of a run: what the reader builds and every analysis consumes.

Plain dataclasses, the same objects the Python API hands out and the JSON documents are made
from. Nothing here reads files or imports torch. Beside them: the graph's fields declared once,
the documents and comparisons made from them (:mod:`tracekit.model.fields`), and the JSON forms
of the values a graph holds (:mod:`tracekit.model.json_forms`).

    Run
     ├─ ranks: [Rank]                one per rank seen in the logs (rank None: no rank written)
     │    ├─ graphs: [Graph]         one per recorded ``pre_bucketing_fsdp_collectives`` outcome,
     │    │                          in log order; identified by (compile_id, graph_index);
     │    │                          ``final``: the collectives that run (a FinalSchedule)
     │    ├─ schedules_without_outcome: [FinalSchedule]   post-grad graphs with a collective
     │    │                          schedule but no pre-bucketing outcome (no FSDP collectives)
     │    ├─ compile_ids, cache_events   the compile ids in order, fx graph cache hits/misses
     │    ├─ frames: (FrameCompile,)  each frame dynamo compiled: compiled, fell back to eager or
     │    │                          failed, where it broke, the parameters its graph takes in
     │    └─ compile_events: (CompileEvent,)   graph breaks and recompiles, with their reasons
     └─ diagnostics: Diagnostics     every bad line, counted by kind, first few with file:line
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Collective types, in the order torch reports them, with the short names of its size artifacts.
#: ``SHORT_NAMES.values()`` (AG, RS, AR, in that order) are the kinds the pre-bucketing pass
#: keys its plans and reports by (``bucketing.predicates.KINDS``, which imports nothing of ours).
COLLECTIVE_TYPES: tuple[str, ...] = ("all_gather", "reduce_scatter", "all_reduce")
SHORT_NAMES: dict[str, str] = {"all_gather": "AG", "reduce_scatter": "RS", "all_reduce": "AR"}
LONG_NAMES: dict[str, str] = {v: k for k, v in SHORT_NAMES.items()}


@dataclass(slots=True)
class Counts:
    """How many collectives of one type a graph had before and after bucketing."""

    before: int
    after: int


@dataclass(slots=True)
class CollectiveSize:
    """One entry of a ``pre_bucketing_collective_sizes[_after]`` artifact."""

    type: str  # "AG" | "RS" | "AR"
    size_mb: float
    name: str


@dataclass(slots=True)
class Sizes:
    """Per-collective sizes in MB, graph order by type, before and after bucketing."""

    before: list[CollectiveSize]
    after: list[CollectiveSize] | None  # None when only the "before" artifact was logged


@dataclass(slots=True)
class ScheduledCollective:
    """One collective of ``inductor_collective_schedule`` (waits are not collectives), with what
    ``fx_collectives_analytical_estimation`` says of it when it could be matched (else None)."""

    kind: str  # "all_gather" | "reduce_scatter" | "all_reduce" | another op ("all_to_all_single")
    op: str  # the op's name without namespace and overload: "all_gather_into_tensor_out"
    group: str | None = None  # group_name
    group_size: int | None = None
    bytes: int | None = None  # input_bytes
    est_ms: float | None = None  # torch's NCCL estimate
    dtype: str | None = None  # its tensor's dtype (``f32``) in the post-grad graph, when logged


@dataclass(slots=True)
class FinalSchedule:
    """The collectives a post-grad graph runs, in run order: its ``inductor_collective_schedule``
    (logged after overlap scheduling, which may bucket again) with sizes and estimates matched
    from ``fx_collectives_analytical_estimation`` (see :mod:`tracekit.read.schedule_parsers`).

    "Final" is the one name of this schedule everywhere: ``Graph.final``, the JSON key
    ``final`` (of saved documents and golden outputs, so it stays), replay's recorded and
    replayed finals; the schedule pre-bucketing leaves, before overlap scheduling, is never
    called final.

    ``position``: the graph's place among its compile id's post-grad graphs (0: forward, 1:
    backward; see :mod:`tracekit.read.pairing`). ``sizes``: ``"matched"`` when every kind's
    estimation lines matched the schedule one to one, ``"partial"`` when some kinds' counts
    disagreed (their sizes are None), ``"not_logged"`` when no estimation was logged.
    """

    compile_id: str
    position: int
    counts: dict[str, int]  # by kind: the three COLLECTIVE_TYPES, ``other`` for the rest
    collectives: list[ScheduledCollective]
    world_size: int | None = None
    sizes: str = "not_logged"

    def at(self, compile_id: str, position: int) -> FinalSchedule:
        """This final under another compile id and position (its values shared)."""
        return FinalSchedule(compile_id, position, self.counts, self.collectives, self.world_size, self.sizes)

    @staticmethod
    def count_kinds(collectives: list[ScheduledCollective]) -> dict[str, int]:
        """Collectives by kind: the three COLLECTIVE_TYPES always, ``other`` for the rest."""
        out = {t: 0 for t in COLLECTIVE_TYPES} | {"other": 0}
        for c in collectives:
            out[c.kind if c.kind in out else "other"] += 1
        return out

    def sequence(self) -> list[list[Any]]:
        """What must agree across ranks: ``[kind, group, bytes, dtype]`` per collective, in
        order (a dtype mismatch hangs or corrupts NCCL too)."""
        return [[c.kind, c.group, c.bytes, c.dtype] for c in self.collectives]


@dataclass(slots=True)
class Graph:
    """One bucketing outcome: one compiled graph (forward or backward) of one rank."""

    compile_id: str  # "0/0", "1/0", "0/0_1", "!0/0/0"
    graph_index: int  # position among this compile id's outcomes: 0 forward, 1 backward, ...
    fsdp_groups: list[str]
    group_size: int | None
    n_nodes: int  # nNodes: machines the FSDP group spans
    bucket_cap_mb: float
    collectives: dict[str, Counts]  # keys: COLLECTIVE_TYPES
    sizes_mb: Sizes | None = None  # None unless pre_bucketing_fsdp_collectives_verbose was on
    source: str = "torch"  # "torch": stock pass; "tracekit": our pass (bucketing.install())
    file: str = ""  # where the outcome artifact was read
    line: int = 0
    final: FinalSchedule | None = None  # the schedule that runs; None when none was paired

    @property
    def key(self) -> tuple[str, int]:
        return (self.compile_id, self.graph_index)

    @property
    def label(self) -> str:
        return f"{self.compile_id}:{self.graph_index}"

    def did_nothing(self) -> list[str]:
        """Collective types that had more than one collective and were not merged at all."""
        return [t for t, c in self.collectives.items() if c.before > 1 and c.after == c.before]


#: A frame compile's status (:class:`FrameCompile`).
COMPILED, EAGER, FAILED = "compiled", "eager", "failed"


@dataclass(frozen=True, slots=True)
class FrameCompile:
    """One frame compile (one compile id) as the log tells it: ``compilation_metrics`` (the
    frame's name and place, whether it failed and why), ``dynamo_graph_break_reason`` (where
    a graph break made dynamo skip it), ``dynamo_output_graph`` (the graph's inputs) and
    ``dynamo_cpp_guards_str`` (``fsdp2_module``: the frame is the forward of a module
    ``fully_shard`` wrapped, its type as FSDP2 renamed it).

    ``status``: ``compiled`` (a graph was made), ``eager`` (dynamo skipped the frame at a graph
    break: it runs in eager code) or ``failed`` (a compile error). ``param_bytes``: bytes of the
    graph's parameter inputs (None when a size is symbolic or there is no graph);
    ``collectives``: collective calls in that graph."""

    compile_id: str
    name: str | None = None  # the frame's function (co_name)
    where: str | None = None  # its file:line (co_filename, co_firstlineno)
    status: str = COMPILED
    reason: str | None = None  # first line of the failure or graph-break reason
    break_at: str | None = None  # file:line where the graph broke or the failure was raised
    params: int = 0  # parameter inputs of the compiled graph
    param_bytes: int | None = None
    collectives: int = 0  # collective calls (all-gather, reduce-scatter, all-reduce, ...) in it
    has_graph: bool = False  # a dynamo_output_graph was logged for it
    fsdp2_module: str | None = None  # the guarded module type FSDP2 made (``FSDPBlock``), if any


#: A :class:`CompileEvent`'s kind.
GRAPH_BREAK, RECOMPILE = "graph_break", "recompile"


@dataclass(frozen=True, slots=True)
class CompileEvent:
    """A graph break (``dynamo_graph_break_reason``) or a recompile (``recompile_reasons``) as
    the log tells it, under the compile id it was logged in (the recompile's new one).
    ``reason``: the break's reason or the guard that failed (``1/0: tensor 'x' requires_grad
    mismatch...``: the compile id whose guard failed, then why), first line; ``at``: the
    break's ``file:line`` (None for a recompile)."""

    compile_id: str
    kind: str  # GRAPH_BREAK | RECOMPILE
    reason: str | None
    at: str | None = None


@dataclass(slots=True)
class Rank:
    rank: int | None
    files: list[str] = field(default_factory=list)
    graphs: list[Graph] = field(default_factory=list)
    compiled_graphs: int = 0  # before_post_grad_graph artifacts seen (graphs that ran post-grad)
    cache_hits: int = 0  # fx_graph_cache_hit artifacts seen (graphs that skipped the passes)
    compiles: int = 0  # dynamo_start entries seen (compiles started, with or without graphs)
    torch_version: str | None = None  # the torch_version artifact's pytorch_version
    schedules_without_outcome: list[FinalSchedule] = field(default_factory=list)
    compile_ids: list[str] = field(default_factory=list)  # dynamo_start order, each once
    cache_events: list[list[str]] = field(default_factory=list)  # [compile_id, hit|miss|bypass]
    frames: tuple[FrameCompile, ...] = ()  # each frame compile, in log order (no list a rank)
    compile_events: tuple[CompileEvent, ...] = ()  # graph breaks and recompiles, in log order

    def graph(self, compile_id: str, graph_index: int = 0) -> Graph | None:
        for g in self.graphs:
            if g.compile_id == compile_id and g.graph_index == graph_index:
                return g
        return None


@dataclass
class Diagnostics:
    """Failure is data: every kind of bad input, counted, with the first few places."""

    counts: dict[str, int] = field(default_factory=dict)
    examples: list[dict[str, Any]] = field(default_factory=list)  # {kind, file, line, detail}
    max_examples_per_kind: int = 5

    def add(self, kind: str, file: str, line: int, detail: str = "") -> None:
        n = self.counts.get(kind, 0)
        self.counts[kind] = n + 1
        if n < self.max_examples_per_kind:
            self.examples.append({"kind": kind, "file": file, "line": line, "detail": detail})

    def merge(self, other: Diagnostics) -> None:
        for ex in other.examples:
            if sum(1 for e in self.examples if e["kind"] == ex["kind"]) < self.max_examples_per_kind:
                self.examples.append(ex)
        for kind, n in other.counts.items():
            self.counts[kind] = self.counts.get(kind, 0) + n

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_dict(self) -> dict[str, Any]:
        return {"counts": dict(sorted(self.counts.items())), "examples": list(self.examples)}


@dataclass
class Run:
    paths: list[str]
    ranks: list[Rank] = field(default_factory=list)
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    duplicated: list[int | None] = field(default_factory=list)  # ranks also found in another run
    unplaced: list[str] = field(default_factory=list)  # files read as no rank (see their diagnostics)
    # ranks whose log is cut short: {rank, file, line, detail}, one per cut file (see tracekit.analyze.cut_logs)
    cut: list[dict[str, Any]] = field(default_factory=list)
    not_logs: list[str] = field(default_factory=list)  # files in the directories that hold no log entry
    copies: list[str] = field(default_factory=list)  # copies of a rank's log (plain or .gz), read once
    subdirs: list[str] = field(default_factory=list)  # subdirectories holding logs, beside logs: not read

    def rank(self, rank: int | None) -> Rank | None:
        for r in self.ranks:
            if r.rank == rank:
                return r
        return None
