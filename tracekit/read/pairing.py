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
  Several files of one rank are merged in the order given; graph indices continue across them.

:class:`RankBuilder` implements :class:`tracekit.read.parsers.ModelBuilder`: the parsers hand it their
values, in log order. :func:`build_file` applies one file's parsed events (from one or more
segments, see :mod:`tracekit.read.segments`; :class:`FileBuilder` a segment at a time, as they come)
and :func:`merge_files` merges files into a Run.
"""

from __future__ import annotations

import filecmp
import os
import re
import sys
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tracekit.model import (
    COMPILED,
    EAGER,
    FAILED,
    CollectiveSize,
    Diagnostics,
    FinalSchedule,
    FrameCompile,
    Graph,
    GroupSlots,
    Rank,
    Run,
    Sizes,
)
from tracekit.model.rankset import MAX_RANK
from tracekit.read.estimation_templates import TemplatedEstimation, final_slots
from tracekit.read.parsers import (
    ComputeEstimates,
    EntryKey,
    EntryParser,
    Estimation,
    Outcome,
    final_schedule,
    key_table,
)
from tracekit.read.sources import LogFile, open_log

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


class BuildMemo:
    """What the builders of a read share as they build, so that equal values are one object
    from the start (a long log repeats a schedule under thousands of compile ids, and a job's
    ranks repeat theirs; these were made again for each graph, then shared only at the merge):

    - :meth:`final`: :func:`tracekit.read.parsers.final_schedule` once per distinct schedule. Its
      collectives and counts are shared by every graph whose schedule, estimation and dtypes
      are the very same parsed values (the parsers' memos give one object a distinct payload,
      and a batch of a worker's results keeps them one); only the compile id and position are
      new a graph::

        "0/0", 0, ops, est, dtypes -> FinalSchedule("0/0", 0, counts, colls, 8, "matched")
        "1/0", 0, ops, est, dtypes -> FinalSchedule("1/0", 0, counts, colls, 8, "matched")
                                      (the same counts and colls objects)

      An estimation read through a template (a mesh's shard groups log one text but for
      their group names: :mod:`tracekit.read.estimation_templates`) gives a final built once
      per template, its names bound to it for each estimation.

    - :meth:`sizes`: one :class:`tracekit.model.Sizes` for the very same size lists.

    Keyed by the inputs' identity, each held by its entry (so an id is never another object's
    while the entry lives); each table is cleared when it holds ``limit`` entries. The values
    are read-only, as the merge's shared values are. One a read (:func:`tracekit.read.reader.load`
    gives its files' builders one), so nothing is held once the read is done."""

    def __init__(self, limit: int = 4096) -> None:
        self._limit = limit
        self._finals: dict[tuple[int, int, int], tuple[tuple, FinalSchedule]] = {}
        # of templates: their final (groups: slot numbers) and its slots
        self._templates: dict[tuple[int, int, int], tuple[tuple, tuple[FinalSchedule, GroupSlots]]] = {}
        self._sizes: dict[tuple[int, int], tuple[tuple, Sizes]] = {}

    def final(
        self,
        compile_id: str,
        position: int,
        ops: list[tuple[str, str]],
        est: Estimation | TemplatedEstimation | None,
        dtypes: dict[str, list[str]] | None,
    ) -> FinalSchedule:
        key = (id(ops), id(est), id(dtypes))
        hit = self._finals.get(key)
        if hit is None:
            if isinstance(est, TemplatedEstimation):
                f = self._bound(compile_id, position, ops, est, dtypes)
            else:
                f = final_schedule(compile_id, position, ops, est, dtypes)
            self._keep(self._finals, key, ((ops, est, dtypes), f))
            return f
        return hit[1].at(compile_id, position)

    def _bound(
        self,
        compile_id: str,
        position: int,
        ops: list[tuple[str, str]],
        est: TemplatedEstimation,
        dtypes: dict | None,
    ) -> FinalSchedule:
        """The final of an estimation read through a template: the template's final (built
        once, from its slotted estimation) with ``est``'s group names, bound when its
        collectives are read (:meth:`tracekit.model.FinalSchedule.of_template`)."""
        t = est.template
        key = (id(ops), id(t), id(dtypes))
        hit = self._templates.get(key)
        if hit is None:
            f = final_schedule(compile_id, position, ops, t.slotted, dtypes)
            hit = self._keep(self._templates, key, ((ops, t, dtypes), (f, final_slots(f))))
        f, slots = hit[1]
        return FinalSchedule.of_template(
            compile_id, position, f.counts, f.world_size, f.sizes, slots, est.names
        )

    def sizes(self, before: list[CollectiveSize] | None, after: list[CollectiveSize] | None) -> Sizes:
        """``Sizes(before or [], after)``, one for the very same lists (None for both: one ``[]``)."""
        key = (id(before), id(after))
        hit = self._sizes.get(key)
        if hit is None:
            hit = self._keep(self._sizes, key, ((before, after), Sizes(before=before or [], after=after)))
        return hit[1]

    def _keep(self, table: dict, key: tuple[int, ...], entry: tuple[tuple, Any]) -> tuple[tuple, Any]:
        """``table[key] = entry``: ``(the inputs whose ids are the key, held; the value)``, the
        table cleared first when full."""
        if len(table) >= self._limit:
            table.clear()
        table[key] = entry
        return entry


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
    estimation: Estimation | TemplatedEstimation | None = None
    final: FinalSchedule | None = None
    dtypes: dict[str, list[str]] | None = None  # collectives' dtypes from inductor_post_grad_graph
    # fx_collectives_estimations_after_overlap_bucketing
    estimation_after_overlap: Estimation | TemplatedEstimation | None = None
    compute_estimates: ComputeEstimates | None = None  # the first fx_compute_nodes_runtime_estimation
    overlap_before: bool = False  # overlap_scheduling_graph_before was logged: the scheduler ran
    overlap_after: bool = False

    def is_open(self) -> bool:
        return not self.cache_hit and self.final is None


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

    def set_estimation(
        self, estimation: Estimation | TemplatedEstimation, after_overlap: bool = False
    ) -> None:
        if after_overlap:
            self._open_position().estimation_after_overlap = estimation
        else:
            self._open_position().estimation = estimation

    def set_compute_estimates(self, estimates: ComputeEstimates) -> None:
        pg = self._open_position()
        if pg.compute_estimates is None:  # the second CSV has the same "Benchmarked" column
            pg.compute_estimates = estimates

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
                        compute_estimates_us=None
                        if pg.compute_estimates is None
                        else pg.compute_estimates.benchmarked_us,
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
        why its graph broke), kept until its ``compilation_metrics`` ends it."""
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
            )
        )

    def set_torch_version(self, version: str) -> None:
        if self.torch_version is None:
            self.torch_version = version

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
                pg, src.post_grad = src.post_grad, None
                if pg is not None:
                    src.overlap_scheduled = pg.overlap_before or pg.overlap_after
                    src.compute_estimates_us = (
                        None if pg.compute_estimates is None else pg.compute_estimates.benchmarked_us
                    )
                    src.estimates_after_overlap = pg.estimation_after_overlap is not None
                sink(src)
        if b.not_prebucketed is not None and not_prebucketed_sink is not None:
            for u in b.not_prebucketed:
                u.symbol_hints = b.symbol_hints.get(u.compile_id, {})
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


def another_run(first: FileResult | _Merging, other: FileResult) -> str | None:
    """Why ``other``, a second file of ``first``'s rank, is another run of the job (and must
    not be merged), or None when it continues the same one (a log split across files).
    ``first``: the rank's first file, or what the merge kept of it (:class:`_Merging`)."""
    mine = _pid_set(first.pids)
    if mine and other.pids and mine.isdisjoint(other.pids):
        return f"written by another process: pid {min(other.pids)}, not {min(mine)}"
    if first.torch_version and other.torch_version and first.torch_version != other.torch_version:
        return f"another torch: {other.torch_version}, not {first.torch_version}"
    if other.first_compile_id is not None and other.first_compile_id == first.first_compile_id:
        return f"its compile ids start again at {other.first_compile_id}"
    return None


def _pid_set(pids: int | frozenset[int]) -> frozenset[int]:
    """The pids :class:`_Merging` keeps (an int for one process, the usual case) as a set."""
    return frozenset((pids,)) if isinstance(pids, int) else pids


class _Interner:
    """Shares equal values between ranks once a Run is merged: at 8,192 ranks of one model,
    memory grows with the distinct outcomes, not with ranks x collectives. The shared values
    (size lists, collective counts, FSDP groups, final schedules, compile-id and cache-event
    lists, empty lists of schedules without outcome) are read-only: the model's users copy one
    before they change it."""

    def __init__(self) -> None:
        self._seen: dict[Any, Any] = {}
        self._parts: dict[tuple, int] = {}  # a final's shared parts -> their number
        self._finals: dict[tuple[str, int, int], FinalSchedule] = {}  # (compile id, position, parts)
        # id of a final's GroupSlots -> (it, held so the id stays its own; the shared one)
        self._slots_by_id: dict[int, tuple[GroupSlots, GroupSlots]] = {}

    def share(self, key: Any, value: Any) -> Any:
        return self._seen.setdefault(key, value)

    def _canonical(self, value: Any, key_of: Callable[[Any], Any]) -> Any:
        """The shared value equal to ``value`` (``key_of(value)``: its key)."""
        return self._seen.setdefault(key_of(value), value)

    def _group_slots(self, gs: GroupSlots) -> GroupSlots:
        """The shared GroupSlots equal to ``gs`` (same slots, same template collectives), looked
        up by value once per object (files read in separate batches make their own)."""
        hit = self._slots_by_id.get(id(gs))
        if hit is None or hit[0] is not gs:
            key = ("group_slots", gs.slots, _final_collectives_key(gs.template))
            hit = self._slots_by_id[id(gs)] = (gs, self._seen.setdefault(key, gs))
        return hit[1]

    def rank_lists(self, r: Rank) -> None:
        """The rank's compile-id and cache-event lists, its torch version, and its list of
        schedules without outcome when it is empty (as each of its files is merged)."""
        r.compile_ids = self.share(("compile_ids", *r.compile_ids), r.compile_ids)
        r.cache_events = self.share(("cache", *map(tuple, r.cache_events)), r.cache_events)
        if r.torch_version is not None:
            r.torch_version = self.share(("torch", r.torch_version), r.torch_version)
        if not r.schedules_without_outcome:
            r.schedules_without_outcome = self.share(("no_schedules",), r.schedules_without_outcome)

    def graph(self, g: Graph) -> None:
        """The graph's values (once its file is merged: its final's position is known)."""
        g.fsdp_groups = self._canonical(g.fsdp_groups, _groups_key)
        g.collectives = self._canonical(g.collectives, _counts_key)
        s = g.sizes_mb
        if s is not None:  # a Sizes a graph, of shared lists: known by its lists
            g.sizes_mb = self._canonical(s, _sizes_key)
        f = g.final
        if f is not None:
            # within a rank too: a long log repeats a schedule under thousands of compile ids
            f.counts = self._canonical(f.counts, _final_counts_key)
            # the key of a final is kept for every graph (compile ids differ): small, so it names
            # the rest by a number, one a distinct (counts, collectives, world size, sizes), the
            # shared counts and collectives by identity (held here). A final of a template
            # (FinalSchedule.of_template) is known by its template and names, its collectives
            # left unbound (one list for equal names: GroupSlots.bind)
            if f.group_slots is not None:
                f.group_slots = gs = self._group_slots(f.group_slots)
                parts: tuple = (id(f.counts), id(gs), f.names, f.world_size, f.sizes)
            else:
                f.collectives = self._canonical(f.collectives, _final_collectives_key)
                parts = (id(f.counts), id(f.collectives), f.world_size, f.sizes)
            n = self._parts.get(parts)
            if n is None:
                n = self._parts[parts] = len(self._parts)
            g.final = self._finals.setdefault((f.compile_id, f.position, n), f)


def _groups_key(groups: list[str]) -> tuple:
    return ("groups", *groups)


def _counts_key(counts: dict) -> tuple:
    return ("counts", *((t, c.before, c.after) for t, c in counts.items()))


def _sizes_key(s: Sizes) -> tuple:
    return (
        "sizes",
        tuple((x.type, x.size_mb, x.name) for x in s.before),
        None if s.after is None else tuple((x.type, x.size_mb, x.name) for x in s.after),
    )


def _final_counts_key(counts: dict[str, int]) -> tuple:
    return ("final_counts", tuple(counts.items()))


def _final_collectives_key(colls: list | tuple) -> tuple:
    return (
        "final_collectives",
        tuple((c.kind, c.op, c.group, c.group_size, c.bytes, c.est_ms, c.dtype) for c in colls),
    )


@dataclass(slots=True)
class _Merging:
    """One rank while the files are merged: its :class:`Rank`, and what a later file of the
    rank is checked against (:func:`another_run`: its first file's pids, first compile id and
    torch version) and continued from. Kept for every rank until the merge ends (100,000 rank
    logs), so small: one pid is an int, not a set; the post-grad positions of a rank of one
    file are a tuple shared between ranks; next graph indices are made only when a second
    file comes (a rank's first file starts them at 0)."""

    rank: Rank
    pids: int | frozenset[int]
    first_compile_id: str | None
    torch_version: str | None
    positions: tuple[tuple[str, int], ...] | dict[str, int]  # positions started per compile id
    next_index: dict[str, int] | None = None  # next graph index per compile id, from the 2nd file


def merge_files(paths: list[str], results: Iterable[FileResult], diagnostics: Diagnostics) -> Run:
    """One Run from the files' results, in the order given (a generator is consumed as it
    comes): files of one rank are merged, their graph indices and post-grad positions continued
    per compile id, compile ids kept once; ranks sorted (the rank-less one last).

    A second file of a rank that belongs to another run (:func:`another_run`) is never merged:
    it is a ``duplicate_rank`` diagnostic and its rank is listed in ``Run.duplicated``; unless it
    holds the same log or a start of it (:func:`_same_bytes`): a copy, or a copy cut short,
    read once (``copied_file``, ``Run.copies``); when the rank's first file is the start of the
    second, the second is read instead. Where a copy or another run's file ends is no rank's
    cut. A file
    whose name says another rank than its entries is a ``rank_mismatch`` diagnostic (the
    entries win)."""

    merging: dict[int | None, _Merging] = {}
    duplicated: set[int | None] = set()
    interner = _Interner()
    unplaced: list[str] = []
    cut: list[dict[str, Any]] = []
    # rank -> where its last file ends, when that ends no compile: (path, line, entry kind), the
    # cut's record made at the end, for the reported ones only (a hang can leave every one of
    # 100,000 logs open: a record a rank until then would cost ~380 B a rank, this ~150 B)
    open_ends: dict[int | None, tuple[str, int, str]] = {}
    closed = False  # a file of the run ends with a compile's closing metrics
    copies: list[str] = []
    others: list[str] = []  # files of another run, not merged: where they end is no rank's cut
    for res in results:
        end = open_end(res)
        if res.entries and end is None and not cut_ends(res):
            closed = True
        if (
            res.readable
            and not res.entries
            and not res.graphs
            and (res.diagnostics.total or not res.ranked_by_entries)
        ):  # bad lines only, blank lines, or empty: no log at all, whatever its name
            empty = "empty_file" in res.diagnostics.counts
            bad = 0 if empty else res.diagnostics.total
            diagnostics.add(
                "no_entries",
                res.path,
                0,
                f"no log entries in {res.path}"
                + (" (the file is empty)" if empty else "")
                + (f" ({bad} bad line{'s' if bad != 1 else ''})" if bad else ""),
            )
            unplaced.append(res.path)
            continue
        if res.diagnostics.counts:
            diagnostics.merge(res.diagnostics)
        if not res.readable:
            continue
        cut.extend(cut_ends(res))
        if res.rank is None and res.bad_rank is not None:
            diagnostics.add("unplaced_rank", res.path, 0, f"not placed: {res.bad_rank}; the file is left out")
            unplaced.append(res.path)
            continue
        if res.rank is not None and res.name_rank is not None and res.rank != res.name_rank:
            diagnostics.add(
                "rank_mismatch",
                res.path,
                0,
                f"the entries say rank {res.rank}, the file name rank {res.name_rank}",
            )
        m = merging.get(res.rank)
        why = same = None
        if m is not None:
            why = another_run(m, res)
            same = _same_bytes(m.rank.files[0], res.path) if why is not None else ""
            if same == "cut_a" and len(m.rank.files) == 1:  # the rank's file so far: a cut copy of this one
                first = m.rank.files[0]
                diagnostics.add(
                    "copied_file", first, 0, f"a copy cut short of {res.path}: {res.path} read instead"
                )
                copies.append(first)
                open_ends.pop(res.rank, None)
                del merging[res.rank]
                m = None
        if m is None:
            r = Rank(
                res.rank,
                [res.path],
                list(res.graphs),
                res.compiled_graphs,
                res.cache_hits,
                res.compiles,
                res.torch_version,
                res.schedules_without_outcome,
                res.compile_ids,
                res.cache_events,
                tuple(res.frames),  # () when none: one shared empty tuple, no list a rank
            )
            pids = next(iter(res.pids)) if len(res.pids) == 1 else res.pids
            positions = tuple(res.positions.items())
            merging[res.rank] = _Merging(
                r,
                pids,
                res.first_compile_id,
                res.torch_version,
                interner.share(("positions", positions), positions),
            )
        else:
            r = m.rank
            if same and same != "cut_a":
                how = {
                    "bytes": "a byte-identical copy",
                    "content": "a copy (the same log once decompressed)",
                    "cut_b": "a copy cut short",
                }[same]
                diagnostics.add("copied_file", res.path, 0, f"{how} of {r.files[0]}: read once")
                copies.append(res.path)
                continue
            if why is not None:
                who = "-" if res.rank is None else res.rank
                diagnostics.add(
                    "duplicate_rank",
                    res.path,
                    0,
                    f"rank {who} is also in {r.files[0]}; this file is another run ({why}): not merged",
                )
                duplicated.add(res.rank)
                others.append(res.path)
                continue
            _continue_rank(m, res)
        if end is not None and not cut_ends(res):  # a rank's later file goes on from its earlier
            open_ends[res.rank] = end  # one: its end counts (a file cut otherwise is said cut once)
        else:
            open_ends.pop(res.rank, None)
        for g in res.graphs:  # shared as each file comes: memory never holds every rank's copies
            interner.graph(g)
        interner.rank_lists(r)  # (a later file of the rank makes new lists: never changes these)
    if None in merging and len(merging) > 1:  # a rank-less log among ranked ones: never blamed, never "-"
        for path in merging.pop(None).rank.files:
            diagnostics.add(
                "unknown_rank",
                path,
                0,
                "neither its entries nor its name give a rank; left out of the "
                f"{len(merging)} rank{'s' if len(merging) != 1 else ''} (it cannot be compared with them)",
            )
            unplaced.append(path)
        duplicated.discard(None)
    ranks = [merging[k].rank for k in _rank_order(merging)]
    del merging
    if closed and open_ends:  # its peers end where torch ends a compile: these logs stop early
        ranks_left = {r.rank for r in ranks}
        for rank, end in open_ends.items():
            if rank in ranks_left:
                c = _open_end_cut(rank, *end)
                diagnostics.add(c["kind"], c["file"], c["line"], c["detail"])
                cut.append(c)
    return Run(
        paths=list(paths),
        ranks=ranks,
        diagnostics=diagnostics,
        duplicated=_rank_order(duplicated),
        unplaced=unplaced,
        cut=[
            c
            for c in cut
            if c["file"] not in unplaced and c["file"] not in copies and c["file"] not in others
        ],
        copies=copies,
    )


#: Diagnostics kinds that say a file ends before its writer finished it.
CUT_KINDS = ("truncated_entry", "bad_gzip")


def cut_ends(res: FileResult) -> list[dict[str, Any]]:
    """Where ``res``'s file is cut short (``{rank, file, line, detail}``: it ends inside an
    entry, or its gzip stream stops), from its own diagnostics; ``[]`` for a whole file."""
    return [
        {"rank": res.rank, "file": res.path, "line": e["line"], "detail": e["detail"]}
        for e in res.diagnostics.examples
        if e["kind"] in CUT_KINDS
    ][:1]


def open_end(res: FileResult) -> tuple[str, int, str] | None:
    """Where ``res``'s file stops between two entries inside a compile (its last entry is whole
    but is not the compile's closing ``compilation_metrics``: the file was cut at a line end,
    e.g. during the backward): ``(path, line, last entry's kind)``
    (:func:`tracekit.read.envelopes._open_end`); :func:`_open_end_cut` makes the cut of it, as
    :func:`cut_ends` gives one. None for a file that ends a compile."""
    if res.open_end is None:
        return None
    kind, line = res.open_end
    return (res.path, line, sys.intern(kind))  # one kind string for every file


def _open_end_cut(rank: int | None, path: str, line: int, kind: str) -> dict[str, Any]:
    """The cut (as :func:`cut_ends` gives one) of a file that ends open (:func:`open_end`)."""
    detail = f"it ends between two entries, inside a compile: its last entry, a {kind}, closes none"
    return {"rank": rank, "file": path, "line": line, "detail": detail, "kind": "cut_between_entries"}


def _rank_order(ranks: Iterable[int | None]) -> list[int | None]:
    """Ranks in order, the rank-less one (None) last (ints sorted as such: no key a rank)."""
    ranks = list(ranks)
    ints = sorted(r for r in ranks if r is not None)
    return [*ints, None] if len(ints) < len(ranks) else [*ints]


def _same_bytes(a: str, b: str) -> str:
    """Whether two files hold the same log (a copy of a rank's log is not another run):
    ``"bytes"`` for the same bytes, ``"content"`` for the same bytes once decompressed (a
    ``.gz`` of the plain log), ``"cut_b"`` when ``b`` holds the start of ``a``'s log and
    nothing else (a copy cut short: a backup that stopped, a ``.gz`` cut mid-stream), ``"cut_a"``
    when ``a`` is such a copy of ``b``, ``""`` otherwise."""
    try:
        if filecmp.cmp(a, b, shallow=False):
            return "bytes"
        return _same_content(a, b)
    except OSError:
        return ""


def _same_content(a: str, b: str) -> str:
    """How two logs compare read through :func:`tracekit.read.sources.open_log` (gzip undone),
    1 MiB at a time: ``"content"`` (the same log), ``"cut_a"`` / ``"cut_b"`` (one is a start of
    the other: a copy cut short), ``""`` (they differ)."""
    sa, ra = open_log(a)
    try:
        sb, rb = open_log(b)
        try:
            while True:
                x, y = sa.read(1 << 20), sb.read(1 << 20)
                if x == y:
                    if not x:
                        clean = not getattr(sa, "error", None) and not getattr(sb, "error", None)
                        return "content" if clean and not (sa is ra and sb is rb) else ""
                    continue
                # one ends inside the other: the shorter is a start of the longer, if it ends here
                if x and y.startswith(x) and not sa.read(1):
                    return "cut_a"
                if y and x.startswith(y) and not sb.read(1):
                    return "cut_b"
                return ""
        finally:
            sb.close()
            rb.close()
    finally:
        sa.close()
        ra.close()


def _index_ends(ends: dict[str, int], graphs: list[Graph]) -> dict[str, int]:
    """``ends`` (next graph index per compile id) moved past ``graphs``; returned."""
    for g in graphs:
        ends[g.compile_id] = max(ends.get(g.compile_id, 0), g.graph_index + 1)
    return ends


def _continue_rank(m: _Merging, res: FileResult) -> None:
    """Add a later file of a rank to it: counters, graphs (graph indices continued after those
    of the rank's earlier files, per compile id), schedules (post-grad positions continued),
    compile ids (each once) and cache events."""
    r = m.rank
    r.files.append(res.path)
    r.compiled_graphs += res.compiled_graphs
    r.cache_hits += res.cache_hits
    r.compiles += res.compiles
    if r.torch_version is None:
        r.torch_version = res.torch_version
    offsets = m.next_index
    if offsets is None:  # the rank's second file: its first file's graphs say where they end
        offsets = m.next_index = _index_ends({}, r.graphs)
    for g in res.graphs:
        g.graph_index += offsets.get(g.compile_id, 0)
    r.graphs.extend(res.graphs)
    _index_ends(offsets, res.graphs)
    positions = m.positions = dict(m.positions)
    for f in [g.final for g in res.graphs if g.final is not None] + res.schedules_without_outcome:
        f.position += positions.get(f.compile_id, 0)
    for cid, n in res.positions.items():
        positions[cid] = positions.get(cid, 0) + n
    # new lists, never += : a rank's lists may be shared with other ranks (the interner)
    r.schedules_without_outcome = r.schedules_without_outcome + res.schedules_without_outcome
    seen = set(r.compile_ids)
    r.compile_ids = r.compile_ids + [c for c in res.compile_ids if c not in seen]
    r.cache_events = r.cache_events + res.cache_events
    r.frames = r.frames + tuple(res.frames)
