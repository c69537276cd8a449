"""One rank's profiler trace paired with its compile log: which graph each compiled graph run is,
and which recorded collective each issued collective, transfer and wait is.

The rules (read off real 2-rank gloo runs, /work/shared/FORMAT.md "Profiler traces beside the
compile log"):

- a graph run is one ``## Call CompiledFxGraph ... ##`` span; inside ``CompiledFunction`` it is
  a forward (position 0), inside ``CompiledFunctionBackward`` a backward (position 1); its
  compile id is the enclosing ``Torch-Compiled Region: F/C``. A backward runs outside that
  region: it is the backward of a forward that ran before it, latest first (autograd runs the
  graphs in reverse), whose recorded schedule its collectives match;
- within a graph run, the k-th issued collective is the k-th collective of the graph's recorded
  final schedule (:class:`tracekit.model.FinalSchedule`): kind and bytes must agree (both the
  trace and the estimate table give one rank's input, an all-gather's shard). A run whose
  collectives disagree is reported with its first difference and paired not at all;
- the k-th transfer (gloo's worker events by start time, or NCCL kernels) is the k-th issued
  collective, of a compatible kind (gloo runs a reduce-scatter as an all-reduce); on the GPU form
  a kernel with the issue op's ``External id`` is taken first;
- which wait ends which collective: the log's output code says it
  (:func:`tracekit.read.output_code.wait_orders`: the i-th wait of a graph run ends the collective
  the code's i-th wait names); without it, a wait ends the oldest collective of its graph run
  issued before it and not ended yet, and the rank's ``waits`` says "derived";
- exposed time (:func:`exposed_times`): on the CPU form the main thread's time in the wait that
  ends a collective (a graph run's: all its waits); on the GPU form the part of a collective's
  kernel during which no compute kernel runs (a graph run's: of the union of its collectives'
  kernels): the compute stream idle while the collective runs, an upper bound of its waiting.

Plain functions over :mod:`tracekit.model` and :mod:`tracekit.model.profile`; nothing is read here.
"""

from __future__ import annotations

import bisect
import re
import statistics
from dataclasses import dataclass, field

from tracekit.model import FinalSchedule, Rank
from tracekit.model.profile import GPU_FORM, IssuedCollective, RankTrace, Span, Transfer

#: Region names the profiler writes (``tracekit.read.traces`` keeps these spans).
REGION_RE = re.compile(r"Torch-Compiled Region: (?P<cid>\S+)")
FORWARD, BACKWARD = "CompiledFunction", "CompiledFunctionBackward"
GRAPH_CALL_PREFIX = "## Call CompiledFxGraph"

#: The kinds a transfer may have for an issued collective of a kind (gloo: RS runs as AR).
TRANSFER_KINDS: dict[str, frozenset[str]] = {
    "all_gather": frozenset({"all_gather", "allgather", "all_gather_base", "_allgather_base"}),
    "reduce_scatter": frozenset({"reduce_scatter", "reducescatter", "all_reduce", "allreduce"}),
    "all_reduce": frozenset({"all_reduce", "allreduce"}),
}

PHASES = {0: "forward", 1: "backward"}


def phase(position: int) -> str:
    return PHASES.get(position, f"graph {position}")


@dataclass(slots=True)
class PairedCollective:
    """One recorded collective in one graph run, with what the trace measured of it."""

    position: int  # its place in the graph's final schedule
    issued: IssuedCollective
    transfer: Transfer | None = None
    wait: Span | None = None
    exposed_us: float | None = None  # see :func:`exposed_times`


@dataclass(slots=True)
class GraphRun:
    """One ``## Call CompiledFxGraph`` span and what ran in it."""

    span: Span
    step: int  # index into the steps (or 0: the one window)
    position: int | None  # 0 forward, 1 backward, None: not told
    compile_id: str | None
    issued: list[IssuedCollective] = field(default_factory=list)
    waits: list[Span] = field(default_factory=list)
    final: FinalSchedule | None = None
    paired: list[PairedCollective] = field(default_factory=list)
    exposed_us: float | None = None  # see :func:`exposed_times`
    problem: str | None = None  # why nothing of this run was paired
    on_order_only: bool = False  # no sizes in the trace: paired on kind and order only
    wait_order: list[int] | None = None  # from the output code: the collective each wait ends

    @property
    def label(self) -> str:
        if self.compile_id is None:
            return f"?:{'' if self.position is None else self.position}"
        return f"{self.compile_id}:{self.position}"


@dataclass(slots=True)
class RankPairing:
    """A rank's graph runs, per step, paired with its log; and what could not be."""

    rank: int | None
    trace: RankTrace
    windows: list[tuple[float, float]]  # the steps (``ProfilerStep#N``) or one window
    profiler_steps: bool
    runs: list[GraphRun] = field(default_factory=list)
    unmatched_transfers: int = 0
    waits: str = "derived"  # "output code": every paired run's waits were read off the log's code
    notes: list[str] = field(default_factory=list)


def finals_of(rank: Rank) -> dict[tuple[str, int], FinalSchedule]:
    """Every recorded final schedule of a rank, by (compile id, position)."""
    out: dict[tuple[str, int], FinalSchedule] = {}
    for g in rank.graphs:
        if g.final is not None:
            out.setdefault((g.final.compile_id, g.final.position), g.final)
    for f in rank.schedules_without_outcome:
        out.setdefault((f.compile_id, f.position), f)
    return out


def _inside(inner: Span, outer: Span) -> bool:
    return inner.tid == outer.tid and outer.ts_us <= inner.ts_us and inner.end_us <= outer.end_us + 1e-3


def _innermost_holders(items: list[Span], spans: list[Span]) -> list[Span | None]:
    """For each of ``items``, the innermost of ``spans`` that holds it (same thread; the shortest,
    the first listed of equal ones), or None: one sweep by start time, keeping the spans begun
    and not yet ended, so a trace's steps cost their sum, not their product."""
    order = {id(s): k for k, s in enumerate(spans)}
    events = sorted(
        [(s.ts_us, 0, k, s) for k, s in enumerate(spans)] + [(x.ts_us, 1, k, x) for k, x in enumerate(items)],
        key=lambda e: (e[0], e[1], e[2]),
    )
    open_: dict[int, list[Span]] = {}  # per thread, the spans begun and not ended before now
    out: list[Span | None] = [None] * len(items)
    for ts, is_item, k, x in events:
        held = open_.setdefault(x.tid, [])
        held[:] = [s for s in held if s.end_us + 1e-3 >= ts]
        if not is_item:
            held.append(x)
            continue
        holders = [s for s in held if s is not x and _inside(x, s)]
        out[k] = min(holders, key=lambda s: (s.dur_us, order[id(s)])) if holders else None
    return out


def windows_of(trace: RankTrace) -> tuple[list[tuple[float, float]], bool]:
    """The profiled steps, in order, or one window over the whole trace when it has none."""
    steps = sorted(trace.steps, key=lambda s: s.ts_us)
    if steps:
        return [(s.ts_us, s.end_us) for s in steps], True
    return [(float("-inf"), float("inf"))], False


def median_step(p: RankPairing) -> int:
    """The index of a rank's median profiled step by duration (the lower middle one of an even
    count; 0 without profiler steps): the step a trace-event file draws."""
    if not p.profiler_steps:
        return 0
    durs = [b - a for a, b in p.windows]
    return durs.index(statistics.median_low(durs))


def _step_of(ts: float, windows: list[tuple[float, float]], starts: list[float]) -> int | None:
    """The first window (sorted, ``starts`` their starts) that ``ts`` falls in, by bisection."""
    i = bisect.bisect_right(starts, ts) - 1
    while i > 0 and windows[i - 1][0] <= ts < windows[i - 1][1]:  # windows that overlap: the first
        i -= 1
    return i if i >= 0 and windows[i][0] <= ts < windows[i][1] else None


def issue_kind_mismatch(issued: IssuedCollective, wanted_kind: str, wanted_bytes: int | None) -> str | None:
    """Why an issued collective is not a recorded one (kind, then bytes when both are known)."""
    if issued.kind != wanted_kind:
        return f"issued {issued.kind}, the log records {wanted_kind}"
    if issued.bytes is not None and wanted_bytes is not None and issued.bytes != wanted_bytes:
        return f"issued {issued.kind} of {issued.bytes:,} B, the log records {wanted_bytes:,} B"
    return None


def sequence_problem(issued: list[IssuedCollective], final: FinalSchedule) -> str | None:
    """The first difference between a run's issued collectives and a recorded schedule."""
    colls = final.collectives
    for k, (i, c) in enumerate(zip(issued, colls, strict=False)):
        why = issue_kind_mismatch(i, c.kind, c.bytes)
        if why:
            return f"collective {k}: {why}"
    if len(issued) != len(colls):
        return f"{len(issued)} collectives issued, the log records {len(colls)}"
    return None


def _graph_runs(trace: RankTrace, windows: list[tuple[float, float]]) -> list[GraphRun]:
    regions = [s for s in trace.regions if REGION_RE.match(s.name)]
    wrappers = [s for s in trace.regions if s.name in (FORWARD, BACKWARD)]
    calls = sorted((s for s in trace.regions if s.name.startswith(GRAPH_CALL_PREFIX)), key=lambda s: s.ts_us)
    runs: list[GraphRun] = []
    starts = [a for a, _ in windows]
    for call, wrapper, region in zip(
        calls, _innermost_holders(calls, wrappers), _innermost_holders(calls, regions), strict=True
    ):
        step = _step_of(call.ts_us, windows, starts)
        if step is None:
            continue
        m = REGION_RE.match(region.name) if region is not None else None
        position = 1 if wrapper is not None and wrapper.name == BACKWARD else 0
        if wrapper is None and region is None:
            position = None  # type: ignore[assignment]  # not told: a graph run outside any region
        runs.append(GraphRun(call, step, position, m["cid"] if m else None))
    return runs


class RunIndex:
    """The graph run that holds a span, found by bisection: a thread's graph runs do not
    overlap, so the one to look at is the latest that starts at or before the span (a trace's
    steps times its collectives, not their product)."""

    def __init__(self, runs: list[GraphRun]) -> None:
        self._by_tid: dict[int, tuple[list[float], list[GraphRun]]] = {}
        for r in sorted(runs, key=lambda r: r.span.ts_us):
            starts, held = self._by_tid.setdefault(r.span.tid, ([], []))
            starts.append(r.span.ts_us)
            held.append(r)

    def holding(self, span: Span) -> GraphRun | None:
        """The run whose span holds ``span`` (same thread), or None."""
        starts, held = self._by_tid.get(span.tid, ((), ()))
        k = bisect.bisect_right(starts, span.ts_us) - 1
        return held[k] if k >= 0 and _inside(span, held[k].span) else None


def _assign(runs: list[GraphRun], trace: RankTrace) -> int:
    """Each issued collective and wait to the graph run that holds it; returns how many issued
    collectives ran outside every graph run (eager code)."""
    outside = 0
    index = RunIndex(runs)
    for i in trace.issued:
        run = index.holding(i.span)
        if run is None:
            outside += 1
        else:
            run.issued.append(i)
    for w in trace.waits:
        run = index.holding(w)
        if run is not None:
            run.waits.append(w)
    return outside


def _identify_backwards(runs: list[GraphRun], finals: dict[tuple[str, int], FinalSchedule]) -> None:
    """A backward run's compile id: of the forwards run before it in its step and not yet
    claimed by a backward, the latest whose recorded backward its collectives match (else the
    latest with a recorded backward, which is then reported as a mismatch)."""
    pending: dict[int, list[str]] = {}
    for r in runs:
        if r.compile_id is not None and r.position == 0:
            pending.setdefault(r.step, []).append(r.compile_id)
            continue
        if r.position != 1 or r.compile_id is not None:
            continue
        stack = pending.get(r.step, [])
        # a backward of a forward from an earlier window: any compile id with a backward
        candidates = list(reversed(stack)) + [cid for cid, pos in finals if pos == 1 and cid not in stack]
        with_final = [c for c in candidates if (c, 1) in finals]
        chosen = next((c for c in with_final if sequence_problem(r.issued, finals[(c, 1)]) is None), None)
        if chosen is None and not r.issued:
            chosen = next((c for c in reversed(stack) if (c, 1) not in finals), None)
        if chosen is None and with_final:
            chosen = with_final[0]
        if chosen is not None:
            r.compile_id = chosen
            if chosen in stack:
                stack.remove(chosen)


def _match_transfers(trace: RankTrace, by_order: bool = True) -> tuple[dict[int, Transfer], int]:
    """Issued collective (its index in ``trace.issued``) -> its transfer; and the transfers
    left over. GPU form: a kernel with the issue op's External id first; then (``by_order``) the
    k-th transfer by start time (starting no earlier than its issue) to the k-th issued collective."""
    issued = sorted(range(len(trace.issued)), key=lambda k: trace.issued[k].span.ts_us)
    transfers = sorted(trace.transfers, key=lambda t: t.span.ts_us)
    out: dict[int, Transfer] = {}
    used: set[int] = set()
    if trace.form == GPU_FORM:
        by_ext: dict[int, int] = {}
        for j, t in enumerate(transfers):
            if t.span.external_id is not None:
                by_ext.setdefault(t.span.external_id, j)
        for k in issued:
            ext = trace.issued[k].span.external_id
            hit = by_ext.get(ext) if ext is not None else None
            if hit is not None and hit not in used:
                out[k] = transfers[hit]
                used.add(hit)
    if not by_order:
        return out, len(transfers) - len(used)
    j = 0
    for k in issued:
        if k in out:
            continue
        i = trace.issued[k]
        kinds = TRANSFER_KINDS.get(i.kind, frozenset({i.kind}))
        while j < len(transfers) and (j in used or transfers[j].span.ts_us < i.span.ts_us - 1e-3):
            j += 1
        if j < len(transfers) and transfers[j].kind in kinds:
            out[k] = transfers[j]
            used.add(j)
            j += 1
    return out, len(transfers) - len(used)


def _pair_run(run: GraphRun, transfer_of: dict[int, Transfer], index_of: dict[int, int]) -> None:
    final = run.final
    assert final is not None
    problem = sequence_problem(run.issued, final)
    if problem:
        run.problem = problem
        return
    run.on_order_only = any(i.bytes is None for i in run.issued)
    open_: list[PairedCollective] = []
    for k, i in enumerate(run.issued):
        pc = PairedCollective(k, i, transfer_of.get(index_of[id(i)]))
        run.paired.append(pc)
    waits = sorted(run.waits, key=lambda s: s.ts_us)
    order = run.wait_order
    if order is not None and len(order) == len(waits) and all(0 <= k < len(run.paired) for k in order):
        for w, k in zip(waits, order, strict=True):
            run.paired[k].wait = w
        return
    run.wait_order = None
    for w in waits:
        open_ = [p for p in run.paired if p.wait is None and p.issued.span.ts_us <= w.ts_us]
        if open_:
            open_[0].wait = w


def merged_intervals(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of ``(start, end)`` intervals, as sorted intervals that do not touch."""
    merged: list[list[float]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def _uncovered(spans: list[tuple[float, float]], cover: list[Span]) -> float:
    """Time within the union of ``spans`` not covered by any of ``cover`` (sorted by start)."""
    total = 0.0
    for a, b in merged_intervals(spans):
        t = a
        for c in cover:
            if c.end_us <= t:
                continue
            if c.ts_us >= b:
                break
            if c.ts_us > t:
                total += c.ts_us - t
            t = max(t, c.end_us)
            if t >= b:
                break
        total += max(0.0, b - t)
    return total


def exposed_times(pairing: RankPairing) -> None:
    """Fill ``exposed_us`` of each paired collective and graph run (see the module docstring);
    None on the GPU form when the trace holds no compute kernel."""
    t = pairing.trace
    if t.form == GPU_FORM:
        if not t.compute:
            return
        compute = sorted(t.compute, key=lambda c: c.ts_us)
        for r in pairing.runs:
            spans = [(p.transfer.span.ts_us, p.transfer.span.end_us) for p in r.paired if p.transfer]
            for p in r.paired:
                if p.transfer is not None:
                    p.exposed_us = _uncovered([(p.transfer.span.ts_us, p.transfer.span.end_us)], compute)
            if r.paired and len(spans) == len(r.paired):
                r.exposed_us = _uncovered(spans, compute)
        return
    for r in pairing.runs:
        for p in r.paired:
            p.exposed_us = None if p.wait is None else p.wait.dur_us
        if r.paired:
            r.exposed_us = sum(w.dur_us for w in r.waits)


def pair_rank(
    rank: Rank | None,
    trace: RankTrace,
    wait_orders: dict[tuple[int | None, str, int], list[int]] | None = None,
) -> RankPairing:
    """Pair one rank's trace with its log (``rank`` None: no log for it, nothing is paired).
    ``wait_orders``: :func:`tracekit.read.output_code.wait_orders` of the rank's logs (None: the
    waits are derived)."""
    windows, has_steps = windows_of(trace)
    out = RankPairing(trace.rank, trace, windows, has_steps)
    if not has_steps:
        out.notes.append(
            "no ProfilerStep spans (the profiler ran without a schedule): the trace is one window"
        )
    runs = _graph_runs(trace, windows)
    outside = _assign(runs, trace)
    if outside:
        out.notes.append(
            f"{outside} collectives issued outside every compiled graph run (eager code): not paired"
        )
    finals = finals_of(rank) if rank is not None else {}
    _identify_backwards(runs, finals)
    # Kineto writes a trace thread by thread: one cut short lost the tail of one thread's events
    # and all of the threads after it, so its k-th transfer by start time need not be its k-th
    # issued collective's. Paired by order only when every issued collective has its transfer.
    by_order = trace.complete or len(trace.transfers) == len(trace.issued)
    transfer_of, left = _match_transfers(trace, by_order)
    out.unmatched_transfers = left if by_order else 0
    if not by_order:
        out.notes.append(
            f"the trace is cut short: {len(trace.transfers)} transfers read for {len(trace.issued)} issued "
            "collectives, so which transfer is whose is not known: transfer times not measured"
        )
    index_of = {id(i): k for k, i in enumerate(trace.issued)}
    for r in runs:
        if r.compile_id is not None and r.position is not None:
            r.final = finals.get((r.compile_id, r.position))
        if rank is None:
            r.problem = "no compile log for this rank"
        elif r.final is None:
            if r.issued:
                r.problem = (
                    f"{len(r.issued)} collectives issued; the log records no schedule for graph {r.label}"
                )
        else:
            if wait_orders is not None and r.compile_id is not None and r.position is not None:
                r.wait_order = wait_orders.get((rank.rank, r.compile_id, r.position))
            _pair_run(r, transfer_of, index_of)
            if r.problem and not trace.complete:
                r.problem = f"the trace is cut short: {r.problem}"
    out.runs = runs
    paired = [r for r in runs if r.paired]
    if paired and all(r.wait_order is not None for r in paired):
        out.waits = "output code"
    exposed_times(out)
    if trace.form == GPU_FORM and not trace.compute:
        out.notes.append("the trace holds no compute kernel: exposed time is not measured")
    if trace.transfers and not transfer_of and by_order:
        out.notes.append("no transfer matched an issued collective: measured times are unknown")
    return out


__all__ = [
    "GraphRun",
    "RunIndex",
    "PairedCollective",
    "RankPairing",
    "finals_of",
    "median_step",
    "merged_intervals",
    "pair_rank",
    "phase",
    "sequence_problem",
    "windows_of",
]
