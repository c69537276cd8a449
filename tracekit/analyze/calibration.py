"""What a job's own profile says its pieces cost, for predicting the step another cap would
measure (``tracekit replay --profile``): :func:`calibrate` reads it off a
:class:`~tracekit.analyze.measure.Measurement` (the traces paired with the compile log).

Read off the profiled steps of every rank (medians, so a slow step or a late rank moves little):

- per graph (compile id, position): its run time; its **gap**, the main thread's time in the run
  outside matmuls, collective issue ops and waits (the generated kernels: element-wise work and,
  at a cap that merges, the copies into and out of buckets); and its matmuls' time **alone**;
- **sharing**: how much slower a matmul runs while a transfer of the same rank is in flight
  than alone (CPU form: compute and gloo's threads share the cores). Measured when at least a
  tenth of the matmuls ran wholly beside a transfer and a tenth wholly alone; else
  :data:`SHARING_PRIOR`, and ``sharing_measured`` is False;
- issuing a collective: a fixed part (the 10th percentile of every issue op) and, per kind,
  milliseconds per MiB of its input above it; a wait that finds its collective done: the median
  of the waits that began after their transfer ended (else :data:`WAIT_PRIOR`);
- copies: ``aten::copy_`` on any thread, milliseconds per MiB below :data:`FRESH_PAGES_BYTES`;
  above it the first touch of fresh pages adds its own rate (glibc maps a buffer that large anew
  at every allocation), measured from such copies when the profile has them, else
  :data:`FIRST_TOUCH_PRIOR`;
- the transfers, each collective's shortest span over the ranks (the rank that arrived last
  waited least for its peers), with the bytes it moved: the data the collective fit
  (:func:`tracekit.analyze.step_simulation.fit`) is made and judged on;
- the step: its median, its spread, and the time outside every graph run.

Plain functions over :mod:`tracekit.analyze.measure_pairing`'s pairing; nothing is read here.
"""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass, field
from typing import Any

from tracekit.analyze.measure_pairing import GraphRun, RankPairing, merged_intervals
from tracekit.model.profile import GPU_FORM, HostOp, Span

MIB = float(1 << 20)
#: A buffer this large or larger is fresh pages at every allocation (glibc's largest mmap
#: threshold), so its first write pays a page fault a page.
FRESH_PAGES_BYTES = 32 << 20
#: Milliseconds per MiB the first touch of fresh pages adds, when the profile has no copy that
#: large to measure it by (read off the fixtures' 64 MB run: 0.37 ms/MiB against 0.13 below).
FIRST_TOUCH_PRIOR = 0.24
#: Milliseconds a wait takes when its collective is already done, when no wait of the profile
#: began after its transfer ended (the fixtures' runs: 0.04-0.2 ms).
WAIT_PRIOR = 0.1
#: A matmul beside a transfer runs this much slower than alone (1 + SHARING_PRIOR times), when
#: the profile cannot tell (read off the fixtures' 1 MB and 12 MB runs: 0.08-0.53).
SHARING_PRIOR = 0.35


@dataclass
class GraphCost:
    """One graph's measured costs (medians over its runs on every rank and step)."""

    compile_id: str
    position: int
    runs: int  # graph runs measured (ranks x steps)
    span_ms: float
    gap_ms: float  # span minus matmuls, issue ops and waits
    matmul_alone_ms: float  # its matmuls' time with the sharing taken out
    matmuls: int  # matmuls a run
    wait_ms: float  # time in waits a run (measured exposed)

    @property
    def key(self) -> tuple[str, int]:
        return (self.compile_id, self.position)


@dataclass
class MeasuredTransfer:
    """One collective's transfer, its shortest span over the ranks."""

    compile_id: str
    position: int
    index: int  # its place in the graph's schedule
    kind: str
    moved_bytes: int  # the whole (unsharded) buffer: an all-gather's output, a reduce-scatter's input
    ms: float


@dataclass
class Calibration:
    """What :func:`calibrate` read off a profile; ``to_dict`` is the document's ``calibration``."""

    traces: list[str]
    ranks: list[int | None]
    steps: int  # profiled steps a rank
    outside_ms: float  # median time of a step outside its graph runs
    graphs: dict[tuple[str, int], GraphCost]
    sharing: float
    sharing_measured: bool
    issue_base_ms: float
    issue_ms_per_mib: dict[str, float]
    wait_ms: float
    copy_ms_per_mib: float
    first_touch_ms_per_mib: float
    first_touch_measured: bool
    transfers: list[MeasuredTransfer] = field(default_factory=list)
    step_samples: list[float] = field(default_factory=list)  # every rank's profiled steps, ms
    notes: list[str] = field(default_factory=list)

    @property
    def step_ms(self) -> float:
        """The median of every rank's profiled steps."""
        return statistics.median(self.step_samples) if self.step_samples else 0.0

    @property
    def step_min_ms(self) -> float:
        return min(self.step_samples, default=0.0)

    @property
    def step_max_ms(self) -> float:
        return max(self.step_samples, default=0.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "traces": self.traces,
            "ranks": self.ranks,
            "steps": self.steps,
            "step_ms": {"median": _r(self.step_ms), "min": _r(self.step_min_ms), "max": _r(self.step_max_ms)},
            "outside_graphs_ms": _r(self.outside_ms),
            "graphs": [
                {
                    "compile_id": g.compile_id,
                    "position": g.position,
                    "runs": g.runs,
                    "span_ms": _r(g.span_ms),
                    "gap_ms": _r(g.gap_ms),
                    "matmul_alone_ms": _r(g.matmul_alone_ms),
                    "matmuls": g.matmuls,
                    "wait_ms": _r(g.wait_ms),
                }
                for g in self.graphs.values()
            ],
            "sharing": {"slowdown": _r(self.sharing), "measured": self.sharing_measured},
            "issue": {
                "base_ms": _r(self.issue_base_ms),
                "ms_per_mib": {k: _r(v) for k, v in self.issue_ms_per_mib.items()},
            },
            "wait_ms": _r(self.wait_ms),
            "copy": {
                "ms_per_mib": _r(self.copy_ms_per_mib),
                "first_touch_ms_per_mib": _r(self.first_touch_ms_per_mib),
                "first_touch_measured": self.first_touch_measured,
            },
            "transfers_measured": len(self.transfers),
            "notes": self.notes,
        }


def _r(x: float) -> float:
    return round(x, 4)


class CalibrationError(ValueError):
    """The profile cannot calibrate a prediction (in words the command prints)."""


def _overlap(span: Span, busy: list[tuple[float, float]], ends: list[float]) -> float:
    """Fraction of ``span`` during which one of ``busy`` (sorted, merged; ``ends`` their ends)
    runs: from the first interval that ends after the span starts, by bisection."""
    if span.dur_us <= 0:
        return 0.0
    a, b = span.ts_us, span.end_us
    total = 0.0
    for x, y in busy[bisect.bisect_right(ends, a) :]:
        if x >= b:
            break
        total += min(b, y) - max(a, x)
    return min(1.0, total / span.dur_us)


def held_ops(run: GraphRun, ops: list[HostOp], starts: list[float]) -> list[HostOp]:
    """Those of ``ops`` (sorted by start, ``starts`` their starts) that ``run`` holds."""
    lo, hi = bisect.bisect_left(starts, run.span.ts_us), bisect.bisect_right(starts, run.span.end_us)
    return [o for o in ops[lo:hi] if o.span.end_us <= run.span.end_us + 1e-3]


def _moved(kind: str, input_bytes: int, group_size: int) -> int:
    return input_bytes * group_size if kind == "all_gather" else input_bytes


def _pct(values: list[float], q: float) -> float:
    vs = sorted(values)
    return vs[min(len(vs) - 1, int(q * len(vs)))]


def calibrate(pairings: list[RankPairing]) -> Calibration:
    """The :class:`Calibration` of the paired traces. Raises :class:`CalibrationError` when
    they hold nothing to calibrate on: the GPU form (not calibrated yet), no paired graph run,
    no matmul or no sizes (recorded without ``record_shapes``)."""
    usable = [p for p in pairings if any(r.paired for r in p.runs)]
    if not usable:
        raise CalibrationError("no graph run of the profile paired with the log: nothing to calibrate on")
    if any(p.trace.form == GPU_FORM for p in usable):
        raise CalibrationError(
            "the profile is of the GPU form (NCCL kernels): prediction is calibrated on CPU (gloo) traces only"
        )
    if not all(p.trace.has_shapes for p in usable):
        raise CalibrationError(
            "the profile was recorded without record_shapes: sizes are needed to calibrate"
        )
    matmuls: list[tuple[float, float]] = []  # (fraction beside a transfer, ms per GFLOP)
    per_run: list[tuple[GraphRun, list[tuple[float, float]], float]] = []  # run, matmuls (ms, frac), gap
    issues: list[tuple[str, float, float]] = []  # kind, MiB, ms
    waits: list[float] = []
    copies: list[tuple[float, float]] = []  # MiB, ms
    steps: list[float] = []
    outside: list[float] = []
    for p in usable:
        t = p.trace
        busy = merged_intervals([(x.span.ts_us, x.span.end_us) for x in t.transfers])
        ends = [y for _, y in busy]
        main_mm = [o for o in t.host_ops if o.kind == "matmul" and o.span.tid == t.main_tid]
        mm_starts = [o.span.ts_us for o in main_mm]
        by_step: dict[int, list[GraphRun]] = {}
        for r in p.runs:
            by_step.setdefault(r.step, []).append(r)
        copies += [(o.bytes / MIB, o.span.dur_us / 1e3) for o in t.host_ops if o.kind == "copy" and o.bytes]
        runs = [r for r in p.runs if r.paired and r.final is not None and not r.problem]
        for k, (a, b) in enumerate(p.windows):
            if not p.profiler_steps:
                break
            in_step = by_step.get(k, [])
            steps.append((b - a) / 1e3)
            outside.append((b - a - sum(r.span.dur_us for r in in_step)) / 1e3)
        for r in runs:
            mms = [
                (o.span.dur_us / 1e3, _overlap(o.span, busy, ends), o.flops)
                for o in held_ops(r, main_mm, mm_starts)
            ]
            for ms, frac, flops in mms:
                if flops:
                    matmuls.append((frac, ms / (flops / 1e9)))
            for i in r.issued:
                if i.bytes:
                    issues.append((i.kind, i.bytes / MIB, i.span.dur_us / 1e3))
            waits += [
                pc.wait.dur_us / 1e3
                for pc in r.paired
                if pc.wait is not None
                and pc.transfer is not None
                and pc.transfer.span.end_us <= pc.wait.ts_us
            ]
            gap = (
                r.span.dur_us / 1e3
                - sum(ms for ms, _, _ in mms)
                - sum(i.span.dur_us for i in r.issued) / 1e3
                - sum(w.dur_us for w in r.waits) / 1e3
            )
            per_run.append((r, [(ms, frac) for ms, frac, _ in mms], gap))
    if not matmuls:
        raise CalibrationError(
            "no matmul with its sizes in the profiled graph runs: nothing to time compute by"
        )
    alone = [v for f, v in matmuls if f < 0.05]
    beside = [v for f, v in matmuls if f > 0.95]
    notes: list[str] = []
    if len(alone) >= 0.1 * len(matmuls) and len(beside) >= 0.1 * len(matmuls):
        sharing, measured = max(0.0, statistics.median(beside) / statistics.median(alone) - 1.0), True
    else:
        sharing, measured = SHARING_PRIOR, False
        notes.append(
            f"too few matmuls ran wholly beside a transfer and wholly alone to measure how much a transfer "
            f"slows compute: taken as {SHARING_PRIOR} (the fixtures' CPU runs)"
        )
    graphs = _graph_costs(per_run, sharing)
    base = _pct([ms for _, _, ms in issues], 0.1) if issues else 0.0
    per_mib: dict[str, list[float]] = {}
    for kind, mib, ms in issues:
        per_mib.setdefault(kind, []).append(max(ms - base, 0.0) / mib)
    small = [ms / mib for mib, ms in copies if 1.0 <= mib < FRESH_PAGES_BYTES / MIB]
    big = [ms / mib for mib, ms in copies if mib >= FRESH_PAGES_BYTES / MIB]
    copy_rate = statistics.median(small) if small else 0.0
    if not small:
        notes.append("no copy of 1 MiB or more in the profile: bucket copies are not timed")
    first_touch = max(statistics.median(big) - copy_rate, 0.0) if big else FIRST_TOUCH_PRIOR
    if not steps:
        raise CalibrationError("the profile has no ProfilerStep spans: the step it measured is not known")
    return Calibration(
        traces=[p.trace.path for p in usable],
        ranks=[p.rank for p in usable],
        steps=max(len(p.windows) for p in usable),
        outside_ms=statistics.median(outside),
        graphs=graphs,
        sharing=sharing,
        sharing_measured=measured,
        issue_base_ms=base,
        issue_ms_per_mib={k: statistics.median(v) for k, v in sorted(per_mib.items())},
        wait_ms=statistics.median(waits) if waits else WAIT_PRIOR,
        copy_ms_per_mib=copy_rate,
        first_touch_ms_per_mib=first_touch,
        first_touch_measured=bool(big),
        transfers=_transfers(usable),
        step_samples=steps,
        notes=notes,
    )


def _graph_costs(
    per_run: list[tuple[GraphRun, list[tuple[float, float]], float]], sharing: float
) -> dict[tuple[str, int], GraphCost]:
    by_key: dict[tuple[str, int], list[tuple[GraphRun, list[tuple[float, float]], float]]] = {}
    for r, mms, gap in per_run:
        assert r.compile_id is not None and r.position is not None  # paired runs are identified
        by_key.setdefault((r.compile_id, r.position), []).append((r, mms, gap))
    out: dict[tuple[str, int], GraphCost] = {}
    for (cid, pos), rows in sorted(by_key.items()):
        out[(cid, pos)] = GraphCost(
            compile_id=cid,
            position=pos,
            runs=len(rows),
            span_ms=statistics.median(r.span.dur_us / 1e3 for r, _, _ in rows),
            gap_ms=statistics.median(max(g, 0.0) for _, _, g in rows),
            matmul_alone_ms=statistics.median(
                sum(ms / (1 + sharing * f) for ms, f in mms) for _, mms, _ in rows
            ),
            matmuls=round(statistics.median(len(mms) for _, mms, _ in rows)),
            wait_ms=statistics.median(sum(w.dur_us for w in r.waits) / 1e3 for r, _, _ in rows),
        )
    return out


def _transfers(pairings: list[RankPairing]) -> list[MeasuredTransfer]:
    """Each collective's transfer (by graph, step and place), its shortest span over the ranks."""
    best: dict[tuple[str, int, int, int], MeasuredTransfer] = {}
    for p in pairings:
        size = p.trace.world_size or 1
        for r in p.runs:
            if r.compile_id is None or r.position is None:
                continue
            for pc in r.paired:
                if pc.transfer is None or not pc.issued.bytes:
                    continue
                ms = pc.transfer.span.dur_us / 1e3
                key = (r.compile_id, r.position, r.step, pc.position)
                group = pc.issued.group_size or size
                if key not in best or ms < best[key].ms:
                    best[key] = MeasuredTransfer(
                        r.compile_id,
                        r.position,
                        pc.position,
                        pc.issued.kind,
                        _moved(pc.issued.kind, pc.issued.bytes, group),
                        ms,
                    )
    return [best[k] for k in sorted(best)]


__all__ = [
    "FIRST_TOUCH_PRIOR",
    "FRESH_PAGES_BYTES",
    "SHARING_PRIOR",
    "WAIT_PRIOR",
    "Calibration",
    "CalibrationError",
    "GraphCost",
    "MeasuredTransfer",
    "calibrate",
    "held_ops",
]
