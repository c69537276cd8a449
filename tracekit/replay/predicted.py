"""``tracekit replay LOGS --profile TRACES``: the step each cap would measure, predicted from the
job's own profile, beside torch's estimate.

:func:`add_prediction` pairs the traces with the logs (:func:`tracekit.analyze.measure.measure`),
reads the costs off them (:func:`tracekit.analyze.calibration.calibrate`), fits them to the
recorded cap's replayed schedule (:func:`tracekit.analyze.step_simulation.fit`), and runs each
cap's replayed schedule with them (:func:`~tracekit.analyze.step_simulation.predict_step`). It adds
the document's ``prediction``:

- ``caps``: per cap (the ``totals.step`` labels), ``predicted_step_ms`` and its exposed, comm and
  compute ms, torch's estimate of the step (``est_ms``), and the measured step where the profile
  measured that cap (the recorded one);
- ``calibration``: the traces, ranks and steps it read, and every fitted figure, with the
  transfer fit's residuals;
- ``self_check``: the recorded cap predicted against its own measured median; past
  :data:`SELF_CHECK_PCT` the calibration is flagged (``flagged``) and the headline says so;
- ``error_pct``: the calibration's error, the larger of the self-check's and the measured steps'
  own spread (half their interquartile range, in % of the median): a cap must beat the recorded
  one by more than this to be called better;
- with ``--recommend``: ``recommendation``, the caps ranked by predicted step, the best one's
  margin over the recorded cap in ms and %, and whether it is measurably better;
- ``not_modelled``: what the prediction leaves out;
- per cap, ``timeline``: the predicted step as ``[track, name, start ms, ms]`` slices, and
  ``measured_timeline``: the lowest rank's median profiled step the same way, which
  ``--trace-out`` draws beside each other (:mod:`tracekit.render.perfetto`).
"""

from __future__ import annotations

import statistics
from typing import Any

#: A calibration that predicts its own recorded cap further off than this (in %) is flagged.
SELF_CHECK_PCT = 5.0

NOT_MODELLED = [
    "contention between compute and communication for memory bandwidth or cores beyond the sharing "
    "measured on the profile's matmuls",
    "stragglers and ranks drifting apart: one rank is simulated, with the median costs of all",
    "a GPU's behaviour: the calibration reads CPU (gloo) traces",
]


class ProfileError(ValueError):
    """The profile cannot predict (in the words the command exits 2 with)."""


def _schedules(doc: dict[str, Any]) -> dict[str, dict[tuple[str, int], list[dict[str, Any]]]]:
    """Cap label (as ``totals.step`` names it) -> graph key -> that cap's scheduled nodes."""
    caps = ["recorded", *doc.get("caps", [])]
    out: dict[str, dict[tuple[str, int], list[dict[str, Any]]]] = {c: {} for c in caps}
    for g in doc.get("graphs", []):
        key = (g.get("compile_id"), g.get("graph_index"))
        entries = [g.get("reproduction"), *(g.get("replays") or [])]
        for label, entry in zip(caps, entries, strict=False):
            nodes = ((entry or {}).get("timeline") or {}).get("nodes")
            if nodes:
                out[label][key] = nodes
    return out


def _measured(paths: list[str], profiles: list[str], jobs: int | None) -> Any:
    """The profiles (paths :class:`RunOptions` checked) read with their matmuls and copies and
    paired with the logs."""
    from tracekit.analyze.measure import measure
    from tracekit.read.output_code import wait_orders
    from tracekit.read.reader import checked_load
    from tracekit.read.traces import TraceError, read_traces, require_events

    try:
        traces = require_events(read_traces(profiles, jobs=jobs, host_ops=True))
    except TraceError as e:
        raise ProfileError(str(e)) from None
    return measure(checked_load(paths, jobs=jobs), traces, None, wait_orders(paths))


def add_prediction(
    doc: dict[str, Any],
    paths: list[str],
    profiles: list[str],
    recommend: bool,
    jobs: int | None = None,
    measurement: Any = None,
) -> None:
    """Add ``prediction`` to a replay document (see the module docstring); no torch needed, so
    ``report`` adds it to a saved replay too. ``measurement``: the profiles (read with
    ``host_ops``) already paired with the logs, :func:`tracekit.analyze.measure.measure`'s; else
    they are read and paired here. Raises :class:`ProfileError` when the profile cannot be read, does not pair
    with the logs, holds nothing to calibrate on, or the replay has no schedule at the recorded
    cap."""
    from tracekit.analyze.calibration import CalibrationError, calibrate
    from tracekit.analyze.measure import mismatch_reason
    from tracekit.analyze.step_simulation import fit, predict_step

    m = _measured(paths, profiles, jobs) if measurement is None else measurement
    if not m.paired:
        raise ProfileError(
            f"the profile does not pair with these logs: {mismatch_reason(m) or 'nothing paired'}"
        )
    try:
        cal = calibrate(m.pairings)
    except CalibrationError as e:
        raise ProfileError(str(e)) from None
    schedules = _schedules(doc)
    recorded = {k: v for k, v in schedules.get("recorded", {}).items() if k in cal.graphs}
    if not recorded:
        raise ProfileError(
            "the replay has no schedule at the recorded cap for the graphs the profile measured "
            "(torch's overlap scheduler did not run: try --overlap)"
        )
    model = fit(cal, recorded)
    est = {s["cap"]: s.get("est_ms") for s in (doc.get("totals") or {}).get("step") or []}
    caps: list[dict[str, Any]] = []
    for label, by_graph in schedules.items():
        if not all(k in by_graph for k in model.graphs):
            continue  # a cap whose schedule is missing for a measured graph: not predicted
        slices: list[list[Any]] = []
        p = predict_step(model, by_graph, slices)
        row: dict[str, Any] = {"cap": label, **p, "est_ms": est.get(label)}
        row["measured_step_ms"] = round(cal.step_ms, 3) if label == "recorded" else None
        row["timeline"] = slices
        caps.append(row)
    own = next(c for c in caps if c["cap"] == "recorded")
    error = (own["predicted_step_ms"] - cal.step_ms) / cal.step_ms * 100
    steps = sorted(cal.step_samples)
    q1, q3 = statistics.quantiles(steps, n=4)[0::2] if len(steps) >= 2 else (cal.step_ms, cal.step_ms)
    spread = (q3 - q1) / 2 / cal.step_ms * 100
    out: dict[str, Any] = {
        "caps": caps,
        "calibration": {
            **cal.to_dict(),
            "transfer_fit": model.transfer.to_dict(),
            "graphs_predicted": len(model.graphs),
        },
        "self_check": {
            "predicted_step_ms": own["predicted_step_ms"],
            "measured_step_ms": round(cal.step_ms, 3),
            "error_pct": round(error, 1),
            "flagged": abs(error) > SELF_CHECK_PCT,
        },
        "error_pct": round(max(abs(error), spread), 1),
        "step_spread_pct": round(spread, 1),
        "not_modelled": NOT_MODELLED,
        "measured_timeline": measured_timeline(m.pairings),
    }
    if recommend:
        out["recommendation"] = recommendation(caps, out["error_pct"])
    doc["prediction"] = out


def measured_timeline(pairings: list[Any]) -> dict[str, Any]:
    """The lowest paired rank's median profiled step as ``[track, name, start ms, ms]`` slices
    from the step's start: per graph run, its main thread's matmuls, issue ops and waits
    (``0/0:1 main``) and its collectives' transfers (``0/0:1 transfers``)."""
    from tracekit.analyze.calibration import held_ops
    from tracekit.analyze.measure_pairing import median_step

    p = next(p for p in pairings if any(r.paired for r in p.runs))
    k = median_step(p)  # the step measure --trace-out draws
    t0 = p.windows[k][0]
    slices: list[list[Any]] = []

    def add(track: str, name: str, ts: float, dur: float) -> None:
        slices.append([track, name, round((ts - t0) / 1e3, 4), round(dur / 1e3, 4)])

    mm = [o for o in p.trace.host_ops if o.kind == "matmul" and o.span.tid == p.trace.main_tid]
    starts = [o.span.ts_us for o in mm]
    for r in (r for r in p.runs if r.step == k and r.compile_id is not None):
        g = f"{r.compile_id}:{r.position}"
        for o in held_ops(r, mm, starts):
            add(f"{g} main", o.span.name, o.span.ts_us, o.span.dur_us)
        for i in r.issued:
            add(f"{g} main", f"issue {i.op}", i.span.ts_us, i.span.dur_us)
        for w in r.waits:
            add(f"{g} main", "wait", w.ts_us, w.dur_us)
        for pc in r.paired:
            if pc.transfer is not None:
                add(
                    f"{g} transfers",
                    f"{pc.issued.kind} {pc.issued.bytes or '?'} B",
                    pc.transfer.span.ts_us,
                    pc.transfer.span.dur_us,
                )
    slices.sort(key=lambda s: (s[0], s[2]))
    names = [st.name for st in sorted(p.trace.steps, key=lambda st: st.ts_us)]
    name = names[k] if k < len(names) else f"step {k}"
    return {"rank": p.rank, "step": name, "step_ms": round((p.windows[k][1] - t0) / 1e3, 4), "slices": slices}


def recommendation(caps: list[dict[str, Any]], error_pct: float) -> dict[str, Any]:
    """The caps ranked by predicted step; the best one's margin over the recorded cap; a cap is
    recommended only when that margin is more than the calibration's error."""
    ranked = sorted(caps, key=lambda c: (c["predicted_step_ms"], c["cap"] != "recorded"))
    own = next(c for c in caps if c["cap"] == "recorded")
    best = ranked[0]
    margin = own["predicted_step_ms"] - best["predicted_step_ms"]
    pct = margin / own["predicted_step_ms"] * 100 if own["predicted_step_ms"] else 0.0
    better = best["cap"] != "recorded" and pct > error_pct
    return {
        "ranked": [c["cap"] for c in ranked],
        "best": best["cap"],
        "margin_ms": round(margin, 3),
        "margin_pct": round(pct, 1),
        "cap": best["cap"] if better else None,
        "text": _recommendation_text(best["cap"], margin, pct, error_pct, better),
    }


def _recommendation_text(best: str, margin: float, pct: float, error_pct: float, better: bool) -> str:
    if better:
        return (
            f"{_cap_words(best)}: {margin:.1f} ms ({pct:.1f}% of the step) faster than the recorded cap, "
            f"beyond the calibration's error ({error_pct:.1f}%)"
        )
    if best == "recorded":
        return "no cap is measurably better: the recorded cap is predicted the fastest"
    return (
        f"no cap is measurably better: the best, {_cap_words(best)}, is {margin:.1f} ms ({pct:.1f}% of "
        f"the step) faster than the recorded cap, within the calibration's error ({error_pct:.1f}%)"
    )


def _cap_words(label: str) -> str:
    return (
        "the recorded cap"
        if label == "recorded"
        else f"cap {label} MB"
        if label != "auto"
        else "the automatic cap"
    )


__all__ = [
    "NOT_MODELLED",
    "SELF_CHECK_PCT",
    "ProfileError",
    "add_prediction",
    "measured_timeline",
    "recommendation",
]
