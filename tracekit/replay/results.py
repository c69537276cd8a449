"""What a replay gives: the caps asked for (:class:`CapRequest`) and the engine's options
(:class:`ReplayOptions`); per graph and cap, the result types (:class:`GraphReplay`,
:class:`CapReplay`); and the ``tracekit.replay/3`` document made of them
(:func:`replay_document`), with the whole step per cap (:func:`step_totals`).

The replay itself is :mod:`tracekit.replay.engine` (the flow over graphs and caps) and
:mod:`tracekit.replay.replayer` (one rebuilt graph planned and scheduled at many caps).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from tracekit.model import COLLECTIVE_TYPES, Diagnostics, Graph
from tracekit.model.json_forms import final_to_dict
from tracekit.model.rankset import format_ranks
from tracekit.replay import comm_estimate as ce
from tracekit.replay.schedule_figures import round_ms, schedule_figures, with_versus_recorded
from tracekit.replay.step_graphs import compiles_taken, in_compile_order, step_labels

#: /3: each cap (the recorded one's too) carries torch's overlap schedule (``final``, ``comm_ms``,
#: ``exposed_ms``, ``compute_ms``, ``est_ms``, ``peak_memory_bytes``, ``timeline``) and
#: ``totals.step`` sums them per cap; /2: one entry per distinct replay, with the ``ranks`` it
#: stands for (/1: one per rank and graph)
SCHEMA = "tracekit.replay/3"


@dataclass(frozen=True)
class CapRequest:
    """A cap to replay: ``mb`` in MB, or None for the automatic cap on the requested hardware."""

    mb: float | None

    @property
    def label(self) -> str:
        return "auto" if self.mb is None else f"{self.mb:g}"


@dataclass
class ReplayOptions:
    caps: list[CapRequest] = field(default_factory=list)
    hardware: ce.Hardware = field(default_factory=ce.Hardware)
    apply: bool = False
    mode: str | None = None
    symbols: Mapping[str, int] = field(default_factory=dict)
    # what-if inductor aten_distributed_optimizations.bucket_mode, from which torch's FSDP pass
    # takes its all-gather grouping key, for the other caps (None: as configured); the
    # reproduction of the recorded outcome always uses the configured one
    bucket_mode: str | None = None
    # the overlap scheduler after pre-bucketing (tracekit.replay.overlap_schedule): None runs it
    # on graphs whose log shows it ran (overlap_scheduling_graph_before), True on all, False never
    overlap: bool | None = None
    gpu: str = "H100"  # whose roofline times nodes without a recorded estimate
    scheduler_overrides: dict[str, Any] = field(default_factory=dict)  # OverlapScheduler settings
    # processes for a graph's distinct caps, this one and jobs - 1 workers (:mod:`parallel_caps`);
    # 1: one after another here
    jobs: int = 1
    # the run's process groups read from every rank's logs (:mod:`process_groups`): sizes and
    # members of the groups a graph names without a size (a mesh's all-reduce groups); None: none read
    groups: Any = None


@dataclass
class CapReplay:
    """What bucketing does to one graph at one cap."""

    bucket_cap_mb: float
    cap_source: str  # "recorded", "override" (a --cap-mb), or the auto cap's rule ("saturation", ...)
    collectives: dict[str, dict[str, int]]  # long type -> {"before", "after"}, as summarize
    bucket_sizes_mb: dict[str, list[float]]  # short kind -> size of every collective after, graph order
    merged_buckets: int
    largest_bucket_mb: float
    estimated_comm_ms: float | None
    comm_ms_vs_recorded: float | None = None
    applied: dict[str, Any] | None = None  # --apply: rewrite outcome and lint
    hardware: dict[str, Any] | None = None  # what the comm model assumed: interconnect, group size, nNodes
    report: Any = field(default=None, repr=False, compare=False)  # the BucketingReport (not in JSON)
    schedule: Any = None  # overlap_schedule.ScheduledGraph, when the scheduler ran
    schedule_error: str | None = None  # why it could not run on this graph
    est_ms_vs_recorded: float | None = None

    def schedule_dict(self) -> dict[str, Any]:
        """The cap's figures after torch's overlap scheduler (tracekit.replay/3 fields)."""
        return schedule_figures(
            self.schedule, self.schedule_error, est_ms_vs_recorded=self.est_ms_vs_recorded
        )

    def to_dict(self) -> dict[str, Any]:
        return {**self._plan_dict(), **self.schedule_dict()}

    def _plan_dict(self) -> dict[str, Any]:
        return {
            "bucket_cap_mb": self.bucket_cap_mb,
            "cap_source": self.cap_source,
            "collectives": self.collectives,
            "bucket_sizes_mb": self.bucket_sizes_mb,
            "merged_buckets": self.merged_buckets,
            "largest_bucket_mb": self.largest_bucket_mb,
            "estimated_comm_ms": round_ms(self.estimated_comm_ms),
            "comm_ms_vs_recorded": round_ms(self.comm_ms_vs_recorded),
            "applied": self.applied,
            "hardware": self.hardware,
        }


@dataclass
class GraphReplay:
    """One recorded outcome, rebuilt and replayed (or the reason it could not be), standing
    for every rank in ``ranks`` that recorded the same outcome from the same graph text."""

    rank: int | None  # the rank whose file and line are shown (the first of ``ranks`` read)
    compile_id: str
    graph_index: int
    source: str  # "torch" | "tracekit"
    text_artifact: str | None
    recorded: Graph
    error: str | None = None
    nodes: int = 0
    parse_ms: float = 0.0
    symbols: dict[str, int] = field(default_factory=dict)  # symbolic sizes and the values used
    reproduced: bool | None = None
    mismatches: list[str] = field(default_factory=list)
    note: str | None = None
    reproduction: CapReplay | None = None
    #: the recorded cap scheduled on the what-if hardware (``--interconnect``, ...): the base of
    #: the what-if caps' "est vs recorded" and the step's recorded row (None: no such what-if)
    recorded_what_if: CapReplay | None = None
    recorded_comm_ms: float | None = None  # recorded buckets, costed on the requested hardware
    recorded_hardware: dict[str, Any] | None = None  # what that cost assumed (interconnect, ...)
    replays: list[CapReplay] = field(default_factory=list)
    ranks: list[int | None] = field(default_factory=list)  # empty: just ``rank``
    overlap_scheduled: bool = False  # the log shows torch's overlap scheduler ran on this graph
    compute_estimates_us: dict[str, float] | None = field(default=None, repr=False)
    final_reproduced: bool | None = None  # replayed final sequence == inductor_collective_schedule
    final_mismatches: list[str] = field(default_factory=list)
    estimates_after_overlap: bool = (
        False  # the recorded final's estimates were logged after overlap bucketing
    )
    replayer: Any = field(default=None, repr=False, compare=False)  # the GraphReplayer (not in JSON)
    # why the replay is incomplete beyond its caps' scheduler failures (e.g. a group it could not
    # register): such a graph is "partial", never "reproduced"
    partial_reasons: list[str] = field(default_factory=list)
    log_torch: str | None = None  # the torch that wrote the log (its torch_version entry)
    #: the process groups the graph uses, as registered (process_groups.GraphGroup)
    groups: list[Any] = field(default_factory=list)
    #: on a mesh: collectives pre-bucketing never handles and the what-ifs (:mod:`mesh_what_ifs`)
    mesh_not_prebucketed: dict[str, Any] | None = None
    #: on a mesh: collectives on groups the pass never saw that run once (no finding, no what-if:
    #: nothing to bucket them with), with what they carry read off the graph (mesh_what_ifs.run_once)
    mesh_run_once: list[dict[str, Any]] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.compile_id}:{self.graph_index}"

    @property
    def recorded_base(self) -> CapReplay | None:
        """The recorded cap the other caps are compared with: on the what-if hardware when
        there is one (:attr:`recorded_what_if`), else the reproduction."""
        return self.recorded_what_if or self.reproduction

    def incomplete(self) -> list[str]:
        """Why this replay is partial: the explicit reasons, then every cap whose run of torch's
        overlap scheduler failed (a graph the scheduler refused is never "reproduced")."""
        out = list(self.partial_reasons)
        caps = ([self.reproduction] if self.reproduction is not None else []) + list(self.replays)
        for i, cap in enumerate(caps):
            if cap.schedule_error:
                which = "recorded cap" if i == 0 and self.reproduction is not None else "cap"
                out.append(f"{which} {cap.bucket_cap_mb:g} MB: {cap.schedule_error}")
        return out

    @property
    def verdict(self) -> str:
        """``not rebuilt`` (no replay), ``not reproduced`` (counts, groups or the final sequence
        differ from the log), ``partial`` (reproduced as far as it ran, but a part did not run:
        :meth:`incomplete`), else ``reproduced``. Totals, the last line and the exit status all
        follow this one verdict."""
        if self.error is not None:
            return "not rebuilt"
        if self.reproduced is False or self.final_reproduced is False:
            return "not reproduced"
        if self.incomplete():
            return "partial"
        return "reproduced" if self.reproduced else "not reproduced"

    def on_mesh(self) -> bool:
        """The graph uses more than one group, or groups whose members were read from the logs."""
        return len(self.groups) > 1 or any(g.members for g in self.groups)

    @property
    def rank_set(self) -> list[int | None]:
        return self.ranks or [self.rank]

    def to_dict(self) -> dict[str, Any]:
        g = self.recorded
        return {
            "rank": self.rank,
            "ranks": format_ranks(self.rank_set),
            "compile_id": self.compile_id,
            "graph_index": self.graph_index,
            "source": self.source,
            "text_artifact": self.text_artifact,
            "file": g.file,
            "line": g.line,
            "log_torch": self.log_torch,
            "error": self.error,
            "nodes": self.nodes,
            "symbols": dict(self.symbols),
            "recorded": {
                "bucket_cap_mb": g.bucket_cap_mb,
                "fsdp_groups": list(g.fsdp_groups),
                "group_size": g.group_size,
                "n_nodes": g.n_nodes,
                "collectives": recorded_collectives(g),
                "sizes_mb": None
                if g.sizes_mb is None
                else {
                    "before": [asdict(x) for x in g.sizes_mb.before],
                    "after": None if g.sizes_mb.after is None else [asdict(x) for x in g.sizes_mb.after],
                },
                "estimated_comm_ms": round_ms(self.recorded_comm_ms),
                "hardware": self.recorded_hardware,
            },
            # True only for a complete reproduction; "counts_reproduced" is the counts check alone
            "reproduced": self.reproduced if self.reproduced is not True else self.verdict == "reproduced",
            "counts_reproduced": self.reproduced,
            "verdict": self.verdict,
            "partial": self.incomplete(),
            "mismatches": list(self.mismatches),
            "overlap_scheduled": self.overlap_scheduled,
            "final_reproduced": self.final_reproduced,
            "final_mismatches": list(self.final_mismatches),
            "recorded_final": final_to_dict(g.final, replay=True),
            "note": self.note,
            "reproduction": None if self.reproduction is None else self.reproduction.to_dict(),
            "replays": [r.to_dict() for r in self.replays],
            # on a mesh only (the run's groups were read): a 1-D document is unchanged
            **({"process_groups": [g.to_dict() for g in self.groups]} if self.on_mesh() else {}),
            **({"not_prebucketed_on_mesh": self.mesh_not_prebucketed} if self.mesh_not_prebucketed else {}),
            **({"run_once_on_mesh": self.mesh_run_once} if self.mesh_run_once else {}),
            **(
                {}
                if self.recorded_what_if is None
                else {"recorded_what_if_hardware": self.recorded_what_if.to_dict()}
            ),
        }


def recorded_collectives(g: Graph) -> dict[str, dict[str, int]]:
    return {
        t: {"before": g.collectives[t].before, "after": g.collectives[t].after}
        for t in COLLECTIVE_TYPES
        if t in g.collectives
    }


# --- the document ------------------------------------------------------------------------------


@dataclass
class ReplayRun:
    """What :func:`tracekit.replay.replay` returns: the graphs replayed, how, and bad input."""

    graphs: list[GraphReplay]
    options: ReplayOptions
    diagnostics: Diagnostics

    def to_dict(self) -> dict:
        """The ``tracekit.replay/3`` document."""
        return replay_document(self.graphs, self.options, {"diagnostics": self.diagnostics.to_dict()})


def replay_document(results: list[GraphReplay], options: ReplayOptions, extra: dict | None = None) -> dict:
    """The ``tracekit.replay/3`` JSON document."""
    hw = options.hardware
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "caps": [c.label for c in options.caps],
        "hardware": {
            "interconnect": hw.interconnect,
            "group_size": hw.group_size,
            "gpus_per_node": hw.gpus_per_node,
        },
        "apply": options.apply,
        "bucket_mode": options.bucket_mode,
        "scheduler": {
            "overlap": options.overlap,
            "gpu": options.gpu,
            "overrides": dict(options.scheduler_overrides),
            "estimates": "compute: the log's fx_compute_nodes_runtime_estimation (Benchmarked "
            "Est(us)); collectives: torch's NCCL model; other nodes: torch's roofline "
            "on the named GPU",
        },
        "symbols": dict(options.symbols),
        "graphs": [r.to_dict() for r in results],
        "totals": {
            "graphs": len(results),
            "outcomes": sum(len(r.rank_set) for r in results),  # recorded outcomes the graphs stand for
            "rebuilt": sum(1 for r in results if r.error is None),
            "reproduced": sum(1 for r in results if r.verdict == "reproduced"),
            "partial": sum(1 for r in results if r.verdict == "partial"),
            "not_reproduced": sum(1 for r in results if r.verdict == "not reproduced"),
            "final_reproduced": sum(1 for r in results if r.final_reproduced),
            "final_not_reproduced": sum(1 for r in results if r.final_reproduced is False),
            "failed": sum(1 for r in results if r.error is not None),
        },
    }
    doc["totals"]["step"] = step_totals(results, options)
    if any(r.mesh_not_prebucketed for r in results):  # the whole step at each cap with each what-if
        from tracekit.replay.mesh_whole_step import add_step_what_ifs

        add_step_what_ifs(doc)
    import torch

    from tracekit.replay.torch_versions import EXPOSED_BASIS, torch_section

    doc["torch"] = torch_section(doc["graphs"], torch.__version__)
    doc["scheduler"]["exposed_ms"] = EXPOSED_BASIS
    if extra:
        doc.update(extra)
    return doc


def cap_labels(options: ReplayOptions) -> list[str]:
    """The labels of the caps every graph was replayed at: ``recorded``, then each request."""
    what_if = options.bucket_mode or options.scheduler_overrides
    reqs = [c.label for c in options.caps] or (["recorded (what-if settings)"] if what_if else [])
    return ["recorded"] + reqs


def rank_groups(results: list[GraphReplay]) -> list[list[int]]:
    """The ranks grouped by the graphs they recorded (each graph's compile id, index and
    recorded outcome: counts, groups, sizes), lowest rank first: one group when every rank
    logged the same graphs; more when ranks diverge (one rank with a layer more)."""
    return ranks_by_graphs((x, r.compile_id, r.graph_index, r.recorded) for r in results for x in r.rank_set)


def ranks_by_graphs(graphs: Iterable[tuple[int | None, str, int, Graph]]) -> list[list[int]]:
    """The ranks of ``graphs`` (``(rank, compile id, graph index, recorded graph)``; a rank of
    None is left out) grouped by the set of graphs each recorded (:func:`outcome_key`), each
    group's ranks in order, the groups by their lowest rank."""
    by_rank: dict[int, set[tuple]] = {}
    for rank, compile_id, graph_index, g in graphs:
        if rank is not None:
            by_rank.setdefault(rank, set()).add((compile_id, graph_index, outcome_key(g)))
    groups: dict[frozenset, list[int]] = {}
    for x in sorted(by_rank):
        groups.setdefault(frozenset(by_rank[x]), []).append(x)
    return sorted(groups.values(), key=lambda g: g[0])


def outcome_key(g: Graph) -> tuple:
    """What tells one rank's recorded outcome of a graph from another's: cap, group size, counts
    and sizes (not the file, the compute estimates, nor the group names: on a mesh each rank's
    groups have names of their own)."""

    def sizes(xs: Any) -> Any:
        return None if xs is None else tuple((x.type, x.size_mb) for x in xs)

    return (
        g.bucket_cap_mb,
        g.group_size,
        tuple((t, c.before, c.after) for t, c in g.collectives.items()),
        None if g.sizes_mb is None else (sizes(g.sizes_mb.before), sizes(g.sizes_mb.after)),
    )


def step_totals(results: list[GraphReplay], options: ReplayOptions) -> list[dict[str, Any]]:
    """The whole step per cap (:func:`rank_step`). When the ranks replayed logged different
    graphs (:func:`rank_groups`), each group's step is made and each cap's entry is the slowest
    group's (the slowest rank sets the step), with ``rank_groups`` listing every group's
    ``ranks``, ``est_ms`` and ``exposed_ms`` at that cap."""
    groups = rank_groups(results)
    if len(groups) <= 1:
        return rank_step(results, options, groups[0][0] if groups else None)
    steps = [rank_step(results, options, g[0]) for g in groups]
    out = []
    for i in range(len(steps[0])):
        at_cap = [st[i] for st in steps]
        timed = [e for e in at_cap if e.get("est_ms") is not None]
        slowest = max(timed, key=lambda e: e["est_ms"]) if timed else at_cap[0]
        entry = dict(slowest)
        entry["ranks"] = format_ranks(groups[at_cap.index(slowest)])
        entry["rank_groups"] = [
            {"ranks": format_ranks(g), "est_ms": e.get("est_ms"), "exposed_ms": e.get("exposed_ms")}
            for g, e in zip(groups, at_cap, strict=True)
        ]
        out.append(entry)
    return with_versus_recorded(out)


def rank_step(results: list[GraphReplay], options: ReplayOptions, rank: int | None) -> list[dict[str, Any]]:
    """The whole step of ``rank`` (one graph per frame and pass: the latest compile's, forward
    + backward) per cap, from the graphs whose schedule ran (``compiles`` and
    ``graphs_earlier_compiles`` name the compiles taken and the graphs left out, when a frame
    recompiled): final counts added, times added, peak memory the largest graph's (the graphs
    of a step run one after another; their activations between them are not counted)."""
    out = []
    lowest = rank
    results = [r for r in results if lowest is None or lowest in r.rank_set]
    # one graph per frame and pass: the latest compile of each frame (a recompile replaces the
    # older graphs; a graph break's frames each run) (:mod:`tracekit.replay.step_graphs`)
    taken = step_labels(r.label for r in results)
    earlier = in_compile_order(r.label for r in results if r.label not in taken)
    results = [r for r in results if r.label in taken]
    for i, label in enumerate(cap_labels(options)):
        at_cap = [
            r.recorded_base if i == 0 else (r.replays[i - 1] if i - 1 < len(r.replays) else None)
            for r in results
        ]
        caps = [c for c in at_cap if c is not None]
        scheds = [c.schedule for c in caps if c.schedule is not None]
        failed = len([c for c in caps if c.schedule_error])
        counts: dict[str, int] = {}
        for sc in scheds:
            for k, v in sc.counts().items():
                counts[k] = counts.get(k, 0) + v
        entry: dict[str, Any] = {
            "cap": label,
            "rank": lowest,
            "bucket_cap_mb": sorted({c.bucket_cap_mb for c in caps}),
            "graphs": len(scheds),
            "graphs_without_schedule": len(caps) - len(scheds),
            "graphs_scheduler_failed": failed,
            # the step's figures leave these graphs out: say so wherever they are shown
            "partial": (
                f"partial: {len(scheds)} of {len(scheds) + failed} graph{'s' if len(scheds) + failed != 1 else ''} "
                "(the overlap scheduler "
                f"failed on {failed})"
                if failed
                else None
            ),
            "final": {"counts": counts, "collectives": sum(counts.values())},
            "comm_ms": round_ms(sum(sc.comm_ms for sc in scheds)) if scheds else None,
            "exposed_ms": round_ms(sum(sc.exposed_ms for sc in scheds)) if scheds else None,
            "compute_ms": round_ms(sum(sc.compute_ms for sc in scheds)) if scheds else None,
            "est_ms": round_ms(sum(sc.est_ms for sc in scheds)) if scheds else None,
            "peak_memory_bytes": max((sc.peak_memory_bytes for sc in scheds), default=None),
            "largest_bucket_mb": max((c.largest_bucket_mb for c in caps), default=None),
            "fallback_nodes": sum(len(sc.fallback) for sc in scheds),
        }
        if earlier:  # (only then: the other documents keep their fields)
            entry["compiles"] = compiles_taken(taken)
            entry["graphs_earlier_compiles"] = earlier
        out.append(entry)
    return with_versus_recorded(out)


__all__ = [
    "SCHEMA",
    "CapRequest",
    "CapReplay",
    "GraphReplay",
    "ReplayOptions",
    "ReplayRun",
    "cap_labels",
    "recorded_collectives",
    "rank_groups",
    "ranks_by_graphs",
    "rank_step",
    "replay_document",
    "step_totals",
]
