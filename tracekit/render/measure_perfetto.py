"""``tracekit measure --trace-out FILE``: one profiled step as a trace-event file (Perfetto,
``chrome://tracing``), measured and estimated side by side.

Per rank, one process with four tracks, on the step's own clock (microseconds from the start of
that rank's ``ProfilerStep``, or of its first graph run without steps; ranks' clocks are not
aligned with each other):

- "graph runs": each compiled graph run of the step, as measured;
- "measured: issue and wait": each collective's issue op and the wait that ended it (main thread);
- "measured: transfer": each collective's transfer (gloo worker event / NCCL kernel);
- "estimated: transfer": the same collective from its measured issue, lasting torch's estimate.

Slices are named as ``replay --trace-out`` names them (:func:`tracekit.render.perfetto.collective_slice_name`).
The step shown is the median step of the lowest rank (by step time), the same step index on
every rank.
"""

from __future__ import annotations

import json
from typing import Any

from tracekit.analyze.measure import Measurement
from tracekit.analyze.measure_pairing import median_step
from tracekit.render.perfetto import collective_slice_name

TRACKS = ("graph runs", "measured: issue and wait", "measured: transfer", "estimated: transfer")


def _slice(pid: int, tid: int, name: str, ts: float, dur: float, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "ph": "X",
        "pid": pid,
        "tid": tid,
        "name": name,
        "ts": round(ts, 3),
        "dur": round(max(dur, 0.0), 3),
        "args": args,
    }


def trace_of_step(m: Measurement, step: int | None = None) -> dict[str, Any]:
    """The trace-event document of one step (default: the lowest rank's median step)."""
    events: list[dict[str, Any]] = []
    if step is None:
        step = median_step(m.pairings[0]) if m.pairings else 0
    for pid, p in enumerate(m.pairings, start=1):
        events.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": f"rank {p.rank}"}})
        for tid, name in enumerate(TRACKS, start=1):
            events.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}})
        runs = [r for r in p.runs if r.step == step]
        if not runs:
            continue
        t0 = p.windows[step][0] if p.profiler_steps else min(r.span.ts_us for r in runs)
        for r in runs:
            events.append(_slice(pid, 1, f"{r.label}", r.span.ts_us - t0, r.span.dur_us, {"graph": r.label}))
            for pc in r.paired:
                assert r.final is not None
                c = r.final.collectives[pc.position]
                name = collective_slice_name(
                    {"kind": c.kind, "name": f"{r.label}#{pc.position}", "input_bytes": c.bytes}
                )
                i = pc.issued.span
                events.append(_slice(pid, 2, f"issue {name}", i.ts_us - t0, i.dur_us, {}))
                if pc.wait is not None:
                    w = pc.wait
                    events.append(_slice(pid, 2, f"wait {name}", w.ts_us - t0, w.dur_us, {}))
                if pc.transfer is not None:
                    t = pc.transfer.span
                    events.append(
                        _slice(
                            pid, 3, name, t.ts_us - t0, t.dur_us, {"measured_ms": round(t.dur_us / 1e3, 4)}
                        )
                    )
                if c.est_ms is not None:
                    events.append(_slice(pid, 4, name, i.ts_us - t0, c.est_ms * 1e3, {"est_ms": c.est_ms}))
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "metadata": {
            "source": "tracekit measure --trace-out",
            "step": step,
            "clock": "microseconds from the start of the step, per rank (ranks' clocks not aligned)",
            "basis": "measured: the profiler trace; estimated: torch's collective estimate from the "
            "compile log, drawn from the measured issue",
        },
    }


def write_trace(m: Measurement, path: str) -> None:
    """Write :func:`trace_of_step` to ``path``."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(trace_of_step(m), f, separators=(",", ":"))


__all__ = ["trace_of_step", "write_trace"]
