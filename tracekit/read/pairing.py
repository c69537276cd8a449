"""Parsed entries -> the per-rank model: pairing artifacts into graphs, files into ranks.

Pairing is per rank and compile id, never by adjacency (other frames' graphs often come between
a frame's forward and its lazily compiled backward):

- ``graph_index`` is the position of a ``pre_bucketing_fsdp_collectives`` outcome among the
  outcomes of its compile id in log order: 0 is the forward, 1 the backward.
- ``pre_bucketing_collective_sizes`` / ``..._after`` attach to the next outcome of the same rank
  and compile id; ``tracekit_fsdp_buckets`` / ``tracekit_fsdp_input_graph`` before an outcome
  mark it ``source="tracekit"`` (our pass, ``bucketing.install()``).
- ``before_post_grad_graph`` is counted per rank (``Rank.compiled_graphs``), ``fx_graph_cache_hit``
  too (``Rank.cache_hits``); ``create_symbol`` hints are kept per compile id (replay).
- The collectives that run (``Graph.final``, a :class:`tracekit.model.FinalSchedule`) are paired
  by *post-grad position*: the k-th graph of a compile id that inductor compiled or loaded, in
  log order (0 the forward, 1 the backward). A position starts at each ``before_post_grad_graph``
  and at each ``fx_graph_cache_hit`` (a graph loaded from the cache: no passes, no schedule);
  the outcome, ``fx_collectives_analytical_estimation`` (the last one wins) and
  ``inductor_collective_schedule`` that follow belong to the compile id's current position. An
  outcome, estimation or schedule that finds no open position (none yet, a cache hit, or one
  whose schedule came already: its ``before_post_grad_graph`` is missing) starts a new one, so
  a schedule is never attached to an earlier graph. A schedule whose position has an outcome
  becomes that Graph's ``final``; one without (a graph with collectives but no FSDP ones) goes to
  ``Rank.schedules_without_outcome``. ``FinalSchedule.position`` equals the outcome's
  ``graph_index`` when every post-grad graph of the compile id had an outcome.
- ``dynamo_start`` gives ``Rank.compile_ids`` (each once, in order); ``fx_graph_cache_hit`` /
  ``_miss`` / ``_bypass`` give ``Rank.cache_events`` (``[compile_id, state]`` in order).
- Entries with no compile id (a pass called outside torch.compile) get compile id ``"-"``.
- A file's rank is the first ``rank`` an envelope carries (else the ``rank_N`` of its name).
  Several files of one rank are merged in the order given; graph indices continue across them
  (:func:`tracekit.read.merge.merge_files`).

:class:`RankBuilder` implements :class:`tracekit.read.entry_parser.ModelBuilder`: the parsers hand it their
values, in log order. :func:`build_file` applies one file's parsed events (from one or more
segments, see :mod:`tracekit.read.segments`; :class:`FileBuilder` a segment at a time, as they come);
:func:`tracekit.read.merge.merge_files` merges files into a Run.
"""

from __future__ import annotations

import os
import re
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tracekit.model import (
    COMPILED,
    EAGER,
    FAILED,
    CollectiveSize,
    CompileEvent,
    Diagnostics,
    FinalSchedule,
    FrameCompile,
    Graph,
)
from tracekit.model.rankset import MAX_RANK
from tracekit.read.entry_parser import ComputeEstimates, EntryKey, EntryParser, Estimation, Outcome
from tracekit.read.interning import BuildMemo
from tracekit.read.parsers import key_table
from tracekit.read.sources import LogFile

NO_COMPILE_ID = "-"

#: One parsed entry, in log order: (entry key, parsed value, compile id, line).
Event = tuple[EntryKey, Any, str, int]


class Events:
    """A segment's events, in order, kept as four columns: the keys, values and compile ids are
    shared objects (one a kind, a distinct payload, an id), so an event costs three pointers and
    its line number (8 bytes), not a tuple and an int object (a log dense in wanted entries holds
    hundreds of thousands until its file is built). Iterates as :data:`Event` tuples."""

    __slots__ = ("keys", "values", "cids", "lines")

    def __init__(self) -> None:
        self.keys: list[EntryKey] = []
        self.values: list[Any] = []
        self.cids: list[str] = []
        self.lines = array("L")  # unsigned long: 8 bytes here, no int object a line

    def __len__(self) -> int:
        return len(self.keys)

    def __iter__(self):
        return zip(self.keys, self.values, self.cids, self.lines, strict=False)

    def __getitem__(self, i: int) -> Event:
        return (self.keys[i], self.values[i], self.cids[i], self.lines[i])

    def __getstate__(self):
        return (self.keys, self.values, self.cids, self.lines)

    def __setstate__(self, state) -> None:
        self.keys, self.values, self.cids, self.lines = state


@dataclass
class PendingGraph:
    """What was seen for one compile id since its last outcome."""

    sizes_before: list[CollectiveSize] | None = None
    sizes_after: list[CollectiveSize] | None = None
    tracekit: bool = False
    tracekit_text: str | None = None
    graph_text: str | None = None
    buckets: dict[str, list[list[str]]] = field(default_factory=dict)  # recorded members by kind


@dataclass
class PostGradGraph:
    """One post-grad position of a compile id (see the module docstring) and what it holds."""

    position: int
    cache_hit: bool = False
    graph: Graph | None = None
    estimation: Estimation | None = None
    final: FinalSchedule | None = None
    dtypes: dict[str, list[str]] | None = None  # collectives' dtypes from inductor_post_grad_graph
    # fx_collectives_estimations_after_overlap_bucketing
    estimation_after_overlap: Estimation | None = None
    #: the scheduler's compute estimates: the first fx_compute_nodes_runtime_estimation, then
    #: the second folded in (ComputeEstimates.then)
    compute_estimates: ComputeEstimates | None = None
    compute_estimates_aligned: bool = False
    #: fx_collectives_node_runtime_estimation: {torch's collective key: benchmarked ms}
    collective_benchmarks: dict[str, float] | None = None
    overlap_before: bool = False  # overlap_scheduling_graph_before was logged: the scheduler ran
    overlap_after: bool = False

    def is_open(self) -> bool:
        return not self.cache_hit and self.final is None

    def scheduler_estimates_us(self) -> dict[str, float] | None:
        """The estimates the run's scheduler used that the log records, in us: compute nodes by
        name, and benchmarked collectives by torch's collective key (which holds spaces and a
        colon, so it is never a node's name); None when it logged no compute estimates."""
        if self.compute_estimates is None:
            return None
        out = self.compute_estimates.benchmarked_us
        if self.collective_benchmarks:
            out = {**out, **{k: ms * 1e3 for k, ms in self.collective_benchmarks.items()}}
        return out


@dataclass
class GraphSource:
    """One outcome and the graph text it was computed from (see
    :func:`tracekit.read.reader.graph_sources`), with the symbol hints of its compile id."""

    rank: int | None
    compile_id: str
    graph_index: int
    graph: Graph
    text: str | None
    text_artifact: str | None  # "before_post_grad_graph" | "tracekit_fsdp_input_graph" | None
    symbol_hints: dict[str, int] = field(default_factory=dict)
    #: the bucket members the log recorded: {"AG": [[names]] | None, "RS": ...}; a kind is None
    #: when the log cannot tell (no members logged, yet the counts say something merged)
    recorded_buckets: dict[str, list[list[str]] | None] = field(default_factory=dict)
    #: what the overlap scheduler logged for this graph (its post-grad position), for replay:
    #: whether it ran, each compute node's "Benchmarked Est(us)", and whether the recorded
    #: schedule's estimates came from after overlap bucketing
    overlap_scheduled: bool = False
    compute_estimates_us: dict[str, float] | None = None
    estimates_after_overlap: bool = False
    post_grad: PostGradGraph | None = field(default=None, repr=False, compare=False)
    #: the torch that wrote the log (its torch_version entry: "2.14.1+cu132"), None if not logged
    torch_version: str | None = None
    #: the aten_distributed_optimizations settings the run changed, as its fx_graph_runnable
    #: names them ({name: value text}); None when the log has no fx_graph_runnable
    run_settings: dict[str, str] | None = None
    #: its compile id is an inference compile (``aot_inference_graph``: no backward), whose
    #: graph torch's post-grad passes treat as such (replay runs them again)
    inference: bool = False


@dataclass
class NotPrebucketedSource:
    """A post-grad graph that runs collectives but has no pre-bucketing outcome (torch found no
    FSDP group in it: a backward without FSDP all-gather), with the graph text it was compiled
    from: what ``explain`` and ``replay`` rebuild for a graph never pre-bucketed
    (:func:`tracekit.read.reader.graph_and_not_prebucketed_sources`).

    ``graph_index`` is its post-grad position (0 forward, 1 backward); ``forward`` the outcome
    of the same compile id, read before it, that identified FSDP groups (None if none);
    ``line`` the line of its ``before_post_grad_graph`` (0 when not known)."""

    rank: int | None
    compile_id: str
    graph_index: int
    final: FinalSchedule
    text: str | None
    file: str
    line: int = 0
    forward: Graph | None = None
    symbol_hints: dict[str, int] = field(default_factory=dict)
    text_artifact: str | None = "before_post_grad_graph"
    #: the graph's recorded compute estimates ("Benchmarked Est(us)" by node name), if logged
    compute_estimates_us: dict[str, float] | None = None
    #: the torch that wrote the log, None if not logged
    torch_version: str | None = None
    #: whether its file logged any pre_bucketing_fsdp_collectives outcome: False when
    #: pre-bucketing never ran there (an older torch, the pass off, overlap scheduling off)
    prebucketing_logged: bool = True
    #: as :attr:`GraphSource.run_settings` and :attr:`GraphSource.inference`
    run_settings: dict[str, str] | None = None
    inference: bool = False


class RankBuilder:
    """Builds one file's graphs from its parsed entries (see the module docstring)."""

    def __init__(self, file: str, keep_sources: bool = False, memo: BuildMemo | None = None) -> None:
        self.file = file
        self._memo = BuildMemo() if memo is None else memo  # schedules and sizes shared as they come
        self.rank: int | None = None
        self.graphs: list[Graph] = []
        self.compiled_graphs = 0
        self.cache_hits = 0
        self.cid = NO_COMPILE_ID
        self._pending: dict[str, PendingGraph] = {}
        self._index: dict[str, int] = {}
        self.sources: list[GraphSource] | None = [] if keep_sources else None  # for replay
        self.symbol_hints: dict[str, dict[str, int]] = {}  # compile id -> {symbol: hint}
        #: compile id -> the aten_distributed_optimizations settings its fx_graph_runnable names
        self.run_settings: dict[str, dict[str, str]] = {}
        self.inference_ids: set[str] = set()  # compile ids that logged aot_inference_graph
        self.compiles = 0  # dynamo_start entries: compiles started, whatever they logged after
        self.torch_version: str | None = None
        self.first_compile_id: str | None = None  # of the first compile (dynamo_start)
        self.schedules_without_outcome: list[FinalSchedule] = []
        self.compile_ids: dict[str, None] = {}
        self.cache_events: list[list[str]] = []
        self._post_grad: dict[str, PostGradGraph] = {}  # compile id -> its current position
        self.positions: dict[str, int] = {}  # compile id -> positions started
        #: graphs with a schedule but no outcome, with their texts (kept with ``keep_sources``
        #: when the schedule parser runs: tracekit.read.reader.graph_and_not_prebucketed_sources)
        self.not_prebucketed: list[NotPrebucketedSource] | None = [] if keep_sources else None
        self.graph_text_line = 0  # line of the last before_post_grad_graph, when a parser sets it
        self.frames: list[FrameCompile] = []  # frame compiles, as compilation_metrics ends them
        self.compile_events: list[CompileEvent] = []  # graph breaks and recompiles, in order
        self._frame_facts: dict[str, dict[str, Any]] = {}  # compile id -> graph, break seen so far

    def _new_position(self, cache_hit: bool = False) -> PostGradGraph:
        n = self.positions.get(self.cid, 0)
        self.positions[self.cid] = n + 1
        pg = self._post_grad[self.cid] = PostGradGraph(n, cache_hit)
        return pg

    def _open_position(self) -> PostGradGraph:
        pg = self._post_grad.get(self.cid)
        return pg if pg is not None and pg.is_open() else self._new_position()

    def add_compile_id(self) -> None:
        """A compile started (``dynamo_start``): counted, and its compile id kept in order."""
        self.compiles += 1
        if self.first_compile_id is None:
            self.first_compile_id = self.cid
        if self.cid != NO_COMPILE_ID:
            self.compile_ids.setdefault(self.cid, None)

    def add_cache_event(self, state: str) -> None:
        self.cache_events.append([self.cid, state])
        if state == "hit":
            self._new_position(cache_hit=True)

    def set_estimation(self, estimation: Estimation, after_overlap: bool = False) -> None:
        if after_overlap:
            self._open_position().estimation_after_overlap = estimation
        else:
            self._open_position().estimation = estimation

    def set_compute_estimates(self, estimates: ComputeEstimates) -> None:
        pg = self._open_position()
        if pg.compute_estimates is None:
            pg.compute_estimates = estimates
        elif not pg.compute_estimates_aligned:  # the second: the scheduler's aligned estimates
            pg.compute_estimates = pg.compute_estimates.then(estimates)
            pg.compute_estimates_aligned = True

    def mark_overlap_scheduled(self, after: bool) -> None:
        pg = self._open_position()
        if after:
            pg.overlap_after = True
        else:
            pg.overlap_before = True

    def set_dtypes(self, dtypes: dict[str, list[str]]) -> None:
        self._open_position().dtypes = dtypes

    def set_schedule(self, ops: list[tuple[str, str]]) -> None:
        pg = self._open_position()
        # The schedule runs after overlap bucketing: its estimates are the ones logged after
        # it when there are any; the analytical ones (before overlap bucketing) otherwise.
        est = pg.estimation_after_overlap or pg.estimation
        pg.final = self._memo.final(self.cid, pg.position, ops, est, pg.dtypes)
        if pg.graph is not None:
            pg.graph.final = pg.final
        else:
            self.schedules_without_outcome.append(pg.final)
            if self.not_prebucketed is not None:
                p = self._pending.get(self.cid)
                forward = next((g for g in self.graphs if g.compile_id == self.cid and g.fsdp_groups), None)
                self.not_prebucketed.append(
                    NotPrebucketedSource(
                        self.rank,
                        self.cid,
                        pg.position,
                        pg.final,
                        None if p is None else p.graph_text,
                        self.file,
                        self.graph_text_line,
                        forward,
                        compute_estimates_us=pg.scheduler_estimates_us(),
                        torch_version=self.torch_version,
                    )
                )

    def _p(self) -> PendingGraph:
        p = self._pending.get(self.cid)
        if p is None:
            p = self._pending[self.cid] = PendingGraph()
        return p

    def set_sizes(self, after: bool, sizes: list[CollectiveSize]) -> None:
        if after:
            self._p().sizes_after = sizes
        else:
            self._p().sizes_before = sizes

    def count_compiled_graph(self, text: str | None) -> None:
        self.compiled_graphs += 1
        self._new_position()
        p = self._p()
        p.buckets = {}  # a new graph: members logged before it were another graph's
        if text is not None:
            p.graph_text = text

    def set_bucket_members(self, kind: str, buckets: list[list[str]]) -> None:
        self._p().buckets[kind] = buckets

    def count_cache_hit(self) -> None:
        self.cache_hits += 1

    def mark_tracekit(self, buckets: Any = None, input_graph: str | None = None) -> None:
        p = self._p()
        p.tracekit = True
        if buckets is not None:
            p.buckets.update(buckets)
        if input_graph is not None:
            p.tracekit_text = input_graph

    def set_frame_fact(self, kind: str, value: Any) -> None:
        """A fact of the current frame compile (``graph``: its GraphInputs, ``break``: where and
        why its graph broke, ``fsdp2_module``: the FSDP2 module type its guards name), kept until
        its ``compilation_metrics`` ends it."""
        self._frame_facts.setdefault(self.cid, {})[kind] = value

    def end_frame(self, metrics: dict[str, Any]) -> None:
        """The frame compile of the current compile id ends (``compilation_metrics``)."""
        facts = self._frame_facts.pop(self.cid, {})
        graph, brk = facts.get("graph"), facts.get("break")
        fail = metrics.get("fail_type")
        status = COMPILED if fail is None else EAGER if fail == "Unsupported" else FAILED
        break_at, reason = brk if brk is not None else (None, None)
        reason = reason or (f"{fail}: {metrics['reason']}" if fail and metrics.get("reason") else fail)
        self.frames.append(
            FrameCompile(
                self.cid,
                metrics.get("name"),
                metrics.get("where"),
                status,
                reason,
                break_at or metrics.get("fail_at"),
                graph.params if graph is not None else 0,
                graph.param_bytes if graph is not None else None,
                graph.collectives if graph is not None else 0,
                graph is not None,
                facts.get("fsdp2_module"),
            )
        )

    def add_compile_event(self, kind: str, reason: str | None, at: str | None) -> None:
        """A graph break or a recompile (:class:`tracekit.model.CompileEvent`) of the current compile id."""
        self.compile_events.append(CompileEvent(self.cid, kind, reason, at))

    def set_torch_version(self, version: str) -> None:
        if self.torch_version is None:
            self.torch_version = version

    def set_run_settings(self, settings: dict[str, str]) -> None:
        self.run_settings[self.cid] = settings

    def mark_inference(self) -> None:
        self.inference_ids.add(self.cid)

    def set_collective_benchmarks(self, benchmarks: dict[str, float]) -> None:
        self._open_position().collective_benchmarks = benchmarks

    def add_symbol_hint(self, symbol: str, value: int) -> None:
        self.symbol_hints.setdefault(self.cid, {})[symbol] = value

    def add_outcome(self, o: Outcome, file: str, line: int) -> None:
        cid = self.cid
        p = self._pending.pop(cid, None) or PendingGraph()
        idx = self._index.get(cid, 0)
        self._index[cid] = idx + 1
        sizes = None
        if p.sizes_before is not None or p.sizes_after is not None:
            sizes = self._memo.sizes(p.sizes_before, p.sizes_after)
        g = Graph(
            compile_id=cid,
            graph_index=idx,
            fsdp_groups=o.fsdp_groups,
            group_size=o.group_size,
            n_nodes=o.n_nodes,
            bucket_cap_mb=o.bucket_cap_mb,
            collectives=o.collectives,
            sizes_mb=sizes,
            source="tracekit" if p.tracekit else "torch",
            file=file,
            line=line,
        )
        self.graphs.append(g)
        pg = self._open_position()
        if pg.graph is not None:  # a second outcome in one post-grad graph: a graph of its own
            pg = self._new_position()
        pg.graph = g
        if self.sources is None:
            return
        if p.tracekit_text is not None:
            text, art = p.tracekit_text, "tracekit_fsdp_input_graph"
        elif p.graph_text is not None:
            text, art = p.graph_text, "before_post_grad_graph"
        else:
            text, art = None, None
        recorded = {
            kind: p.buckets.get(kind, [] if o.collectives[long].before == o.collectives[long].after else None)
            for kind, long in (("AG", "all_gather"), ("RS", "reduce_scatter"))
        }
        self.sources.append(
            GraphSource(
                self.rank,
                cid,
                idx,
                g,
                text,
                art,
                recorded_buckets=recorded,
                post_grad=pg,
                torch_version=self.torch_version,
            )
        )


@dataclass
class FileResult:
    """What one file gave; small, so it travels back from a worker process cheaply."""

    path: str
    rank: int | None
    graphs: list[Graph] = field(default_factory=list)
    compiled_graphs: int = 0
    cache_hits: int = 0
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    readable: bool = True  # False when the file could not be opened at all
    compiles: int = 0
    # what tells one run from another: the writing processes, the first compile, torch's version
    pids: frozenset[int] = frozenset()
    first_compile_id: str | None = None
    torch_version: str | None = None
    name_rank: int | None = None  # the N of ``rank_N`` in the file name
    schedules_without_outcome: list[FinalSchedule] = field(default_factory=list)
    compile_ids: list[str] = field(default_factory=list)
    cache_events: list[list[str]] = field(default_factory=list)
    positions: dict[str, int] = field(default_factory=dict)  # post-grad positions per compile id
    entries: int = 0  # entries tracekit read from the file (0: not a log, whatever its name)
    bad_rank: str | None = None  # why the file's rank cannot be placed (out of range), if so
    frames: list[FrameCompile] = field(default_factory=list)  # frame compiles (compilation_metrics)
    compile_events: list[CompileEvent] = field(default_factory=list)  # graph breaks, recompiles
    ranked_by_entries: bool = True  # False when no entry gave the rank (it is the name's, or none)
    open_end: tuple[str, int] | None = None  # (entry type, line): the file ends inside a compile


@dataclass
class SegmentResult:
    """The parsed entries of one segment of a file, in order, to be applied to the file's
    builder (see :mod:`tracekit.read.segments`)."""

    events: Events
    rank: int | None
    lines: int  # lines in the segment: the next segment's line numbers start after them
    diagnostics: Diagnostics
    readable: bool = True
    pids: set[int] | tuple[int, ...] = field(default_factory=set)  # processes that wrote the wanted entries
    #: a file's last segment: (entry type, line in the segment) of a whole last entry that closes
    #: no compile (:attr:`tracekit.read.envelopes.Scanner.open_end`), else None
    open_end: tuple[str, int] | None = None


def build_file(
    log: LogFile,
    parts: list[SegmentResult],
    parsers: tuple[EntryParser, ...],
    sink: Callable[[GraphSource], None] | None = None,
    not_prebucketed_sink: Callable[[NotPrebucketedSource], None] | None = None,
) -> FileResult:
    """Build one file's graphs from its segments' events, in order (pairing happens here).

    ``sink`` receives the file's :class:`GraphSource` values, with their symbol hints, once the
    whole file is applied; ``not_prebucketed_sink`` its :class:`NotPrebucketedSource` values (when the
    parsers read schedules)."""
    fb = FileBuilder(log, parsers, sink, not_prebucketed_sink)
    for part in parts:
        fb.add(part)
    return fb.finish()


class FileBuilder:
    """:func:`build_file` a segment at a time: each segment's events are applied as it comes,
    in order, and can be dropped then, so a large file's events are never all held at once
    (a log dense in graphs holds millions; its model, a fraction of that).

    The file's rank is the first a segment gives, else its name's: segments that come before
    any rank is known are held until one is (a file's segments are read with the rank of its
    first lines, so that is none in practice)."""

    def __init__(
        self,
        log: LogFile,
        parsers: tuple[EntryParser, ...],
        sink: Callable[[GraphSource], None] | None = None,
        not_prebucketed_sink: Callable[[NotPrebucketedSource], None] | None = None,
        memo: BuildMemo | None = None,
    ) -> None:
        self.log = log
        self._table = key_table(parsers)
        self._sink, self._not_prebucketed_sink = sink, not_prebucketed_sink
        self.diag = Diagnostics()
        self._b = RankBuilder(
            log.path, keep_sources=sink is not None or not_prebucketed_sink is not None, memo=memo
        )
        self._ranked = False  # the builder's rank is decided
        self._held: list[SegmentResult] = []  # segments before a rank is known
        self._offset = 0  # lines of the segments applied
        self._readable = True
        self._open_end: tuple[str, int] | None = None  # the last segment's SegmentResult.open_end
        self._pids: set[int] = set()
        self._entries = 0

    def add(self, part: SegmentResult) -> None:
        """Apply the file's next segment (held if no segment has given a rank yet)."""
        if not self._ranked:
            if part.rank is None:
                self._held.append(part)
                return
            self._decide(part.rank)
        self._apply(part)

    def _decide(self, rank: int | None) -> None:
        self._b.rank, self._ranked = rank, True
        held, self._held = self._held, []
        for part in held:
            self._apply(part)

    def _apply(self, part: SegmentResult) -> None:
        b, table, path, offset = self._b, self._table, self.log.path, self._offset
        if part.diagnostics.counts:  # (most files: none)
            if offset:
                for ex in part.diagnostics.examples:
                    if ex["line"]:
                        ex["line"] += offset
            self.diag.merge(part.diagnostics)
        ev = part.events
        for key, value, cid, line in zip(ev.keys, ev.values, ev.cids, ev.lines, strict=False):
            b.cid = cid
            table[key].apply(b, key, value, path, line + offset)
        if part.open_end is not None:  # the file's last segment: its line in the file
            self._open_end = (part.open_end[0], part.open_end[1] + offset)
        self._offset = offset + part.lines
        self._readable = self._readable and part.readable
        if part.pids:
            self._pids.update(part.pids)
        self._entries += len(ev.keys)

    def finish(self) -> FileResult:
        """The file's result, once its last segment is added."""
        ranked_by_entries = self._ranked
        if not self._ranked:
            self._decide(self.log.rank_hint)
        b, diag, log = self._b, self.diag, self.log
        sink, not_prebucketed_sink = self._sink, self._not_prebucketed_sink
        if b.sources is not None and sink is not None:
            for src in b.sources:
                src.symbol_hints = b.symbol_hints.get(src.compile_id, {})
                src.run_settings = b.run_settings.get(src.compile_id)
                src.inference = src.compile_id in b.inference_ids
                pg, src.post_grad = src.post_grad, None
                if pg is not None:
                    src.overlap_scheduled = pg.overlap_before or pg.overlap_after
                    src.compute_estimates_us = pg.scheduler_estimates_us()
                    src.estimates_after_overlap = pg.estimation_after_overlap is not None
                sink(src)
        if b.not_prebucketed is not None and not_prebucketed_sink is not None:
            for u in b.not_prebucketed:
                u.symbol_hints = b.symbol_hints.get(u.compile_id, {})
                u.run_settings = b.run_settings.get(u.compile_id)
                u.inference = u.compile_id in b.inference_ids
                u.prebucketing_logged = bool(b.graphs)
                not_prebucketed_sink(u)
        bad_rank = None if b.rank is not None else unplaceable_rank(log.path, diag)
        return FileResult(
            log.path,
            b.rank,
            b.graphs,
            b.compiled_graphs,
            b.cache_hits,
            diag,
            self._readable,
            compiles=b.compiles,
            pids=frozenset(self._pids),
            first_compile_id=b.first_compile_id,
            torch_version=b.torch_version,
            name_rank=log.rank_hint,
            schedules_without_outcome=b.schedules_without_outcome,
            compile_ids=list(b.compile_ids),
            cache_events=b.cache_events,
            positions=b.positions,
            entries=self._entries,
            bad_rank=bad_rank,
            frames=b.frames,
            compile_events=b.compile_events,
            ranked_by_entries=ranked_by_entries,
            open_end=self._open_end,
        )


_NAME_RANK = re.compile(r"rank_(\d+)")


def unplaceable_rank(path: str, diag: Diagnostics) -> str | None:
    """Why a file without a usable rank cannot be placed: its entries or its name give a
    rank that is not one (negative, or :data:`tracekit.model.rankset.MAX_RANK` or more); None when
    it simply logs none."""
    for ex in diag.examples:
        if (
            ex["kind"] == "bad_field_type"
            and ex["detail"].startswith("rank ")
            and ex["detail"].endswith(" is not a rank")
        ):
            return f"its entries say {ex['detail']} (ranks are 0 to {MAX_RANK - 1})"
    m = _NAME_RANK.search(os.path.basename(path))
    if m and int(m.group(1)[:12]) >= MAX_RANK:
        return f"its name says rank {m.group(1)}, which is not a rank (ranks are 0 to {MAX_RANK - 1})"
    return None
