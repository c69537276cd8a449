"""``tracekit measure``: the job's own profiler traces beside its compile logs, and every figure
tracekit otherwise estimates put next to what was measured.

:func:`measure` pairs each rank's :class:`tracekit.model.profile.RankTrace` with that rank's
recorded schedules (:mod:`tracekit.analyze.measure_pairing`) and makes the
``tracekit.measure/1`` document: per rank, its profiled steps and, per graph, the graph's run
time, torch's estimate of its collectives beside their measured transfer time, the time the
main thread waited on them (exposed), and per collective its measured time against torch's
estimate. Figures are medians over the profiled steps, with min and max.

What is measured (CPU form, gloo): a collective's time is its transfer's span on gloo's worker
thread; exposed is the main thread's time in ``_c10d_functional::wait_tensor``. GPU form (NCCL):
a collective's time is its kernel's span, exposed the part of it when no compute kernel runs
(:func:`tracekit.analyze.measure_pairing.exposed_times`). torch's exposed estimate is not in the compile log
(torch writes it to its INFO log only; ``tracekit replay`` computes it): ``exposed_est_ms`` is
None, and the verdict says so, unless a saved replay document of the same logs gives it
(``measure(..., exposed_est=)``, :mod:`tracekit.analyze.measure_estimates`).

Across ranks, clocks are never subtracted: a graph's first collective ends at the same moment on
every rank (both take part in it), so each rank's time from issuing it to its end says how late
that rank arrived; the rank with the shortest wait arrived last.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tracekit.analyze.measure_pairing import GraphRun, RankPairing, pair_rank, phase
from tracekit.model import Run
from tracekit.model.profile import RankTrace

SCHEMA = "tracekit.measure/1"


def _ms(us: float) -> float:
    return round(us / 1000.0, 4)


def spread(values: Iterable[float | None]) -> dict[str, Any]:
    """``{count, median_ms, min_ms, max_ms}`` of the known values (None when there are none)."""
    vs = [v for v in values if v is not None]
    if not vs:
        return {"count": 0, "median_ms": None, "min_ms": None, "max_ms": None}
    return {
        "count": len(vs),
        "median_ms": round(statistics.median(vs), 4),
        "min_ms": round(min(vs), 4),
        "max_ms": round(max(vs), 4),
    }


def _ratio(measured: float | None, est: float | None) -> float | None:
    if measured is None or not est:
        return None
    return round(measured / est, 1)


@dataclass
class Measurement:
    """The pairings and what they say; :meth:`document` is the ``tracekit.measure/1`` JSON."""

    pairings: list[RankPairing]
    log_only: list[int | None] = field(default_factory=list)  # ranks with a log, no trace
    notes: list[str] = field(default_factory=list)
    # torch's exposed estimate per (rank, compile id, position), from a replay document
    exposed_est: dict[tuple[int | None, str, int], float | None] = field(default_factory=dict)

    @property
    def paired(self) -> int:
        return sum(len(r.paired) for p in self.pairings for r in p.runs)

    def document(self) -> dict[str, Any]:
        ranks = [_rank_doc(p, self.exposed_est) for p in self.pairings]
        skew = _skew(self.pairings)
        return {
            "schema": SCHEMA,
            "ranks": ranks,
            "skew": skew,
            "ranks_without_trace": self.log_only,
            "traces_without_log": [p.rank for p in self.pairings if p.trace.rank is not None and _no_log(p)],
            "notes": self.notes
            + [f"rank {p.rank}: {n}" for p in self.pairings for n in [*p.trace.notes, *p.notes]],
            "verdict": (mismatch_reason(self) or verdict(ranks, skew)) + _missing(self),
            "basis": {
                "collective": "measured: its transfer's span (gloo worker event / NCCL kernel); est: torch's "
                "NCCL estimate from the log's fx_collectives_analytical_estimation",
                "exposed": "measured: the main thread's time in wait_tensor (CPU form), the compute "
                "stream idle during a collective's kernel (GPU form); "
                + (
                    "est: torch's overlap scheduler's exposed figure at the recorded cap, from a tracekit "
                    "replay document of the same logs"
                    if self.exposed_est
                    else "torch's exposed estimate is not in the compile log (measure --estimates REPLAY.json "
                    "reads it from a tracekit replay document)"
                ),
                "bytes": "one rank's input (an all-gather's shard), in the trace and in the log's estimate table",
                "waits": "which wait ends which collective: the log's output code (a rank's waits: "
                '"output code"), else the oldest collective of its graph run issued before the wait and not '
                'ended (a rank\'s waits: "derived")',
                "skew": "aligned on each graph's first collective's end, which every rank shares; no clocks "
                "subtracted across ranks",
            },
        }


def _missing(m: Measurement) -> str:
    """The verdict's tail: the ranks not measured, a log without a trace or the reverse."""
    from tracekit.model.rankset import format_ranks

    parts = []
    if m.log_only:
        parts.append(f"rank {format_ranks(m.log_only)}: a log but no trace, not measured")
    no_log = [p.rank for p in m.pairings if p.trace.rank is not None and _no_log(p)]
    if no_log:
        parts.append(f"rank {format_ranks(no_log)}: a trace but no log, not paired")
    return "".join(f"; {p}" for p in parts)


def _no_log(p: RankPairing) -> bool:
    return bool(p.runs) and all(r.problem == "no compile log for this rank" for r in p.runs if r.issued)


def _per_step(runs: list[GraphRun], n_steps: int | None, value: Any) -> list[float | None]:
    """One value a step: ``value(run)`` summed over the graph's runs in that step (None: not known)."""
    if n_steps is None:  # no profiled steps: one value a run
        return [value(r) for r in runs]
    out: list[float | None] = []
    for s in range(n_steps):
        vs = [value(r) for r in runs if r.step == s]
        out.append(None if not vs or None in vs else sum(vs))
    return out


def _graph_doc(
    key: tuple[str, int], runs: list[GraphRun], n_steps: int | None, exposed_est: float | None = None
) -> dict[str, Any]:
    cid, pos = key
    final = runs[0].final
    paired_runs = [r for r in runs if r.paired or (r.final is not None and not r.final.collectives)]
    colls: list[dict[str, Any]] = []
    if final is not None:
        for k, c in enumerate(final.collectives):
            measured = [
                _ms(p.transfer.span.dur_us) for r in paired_runs for p in r.paired[k : k + 1] if p.transfer
            ]
            waited = [
                _ms(p.exposed_us)
                for r in paired_runs
                for p in r.paired[k : k + 1]
                if p.exposed_us is not None
            ]
            issue = [_ms(p.issued.span.dur_us) for r in paired_runs for p in r.paired[k : k + 1]]
            m = spread(measured)
            colls.append(
                {
                    "position": k,
                    "kind": c.kind,
                    "op": c.op,
                    "bytes": c.bytes,
                    "est_ms": c.est_ms,
                    "measured_ms": m["median_ms"],
                    "measured": m,
                    "ratio": _ratio(m["median_ms"], c.est_ms),
                    "exposed_ms": spread(waited)["median_ms"],
                    "issue_ms": spread(issue)["median_ms"],
                }
            )
    ests = [c["est_ms"] for c in colls]
    est = None if not colls or None in ests else round(sum(ests), 4)
    run_ms = spread(_per_step(runs, n_steps, lambda r: _ms(r.span.dur_us)))
    comm = spread(
        _per_step(
            paired_runs,
            n_steps,
            lambda r: (
                None
                if any(p.transfer is None for p in r.paired)
                else sum(_ms(p.transfer.span.dur_us) for p in r.paired if p.transfer)
            ),
        )
    )
    exposed = spread(
        _per_step(paired_runs, n_steps, lambda r: None if r.exposed_us is None else _ms(r.exposed_us))
    )
    problems = sorted({r.problem for r in runs if r.problem})
    return {
        "compile_id": cid,
        "graph": pos,
        "phase": phase(pos),
        "label": f"{cid}:{pos}",
        "runs": len(runs),
        "median_ms": run_ms["median_ms"],
        "run": run_ms,
        "est_ms": est,
        "collectives_measured_ms": comm["median_ms"],
        "collectives_measured": comm,
        "ratio": _ratio(comm["median_ms"], est),
        "exposed_est_ms": exposed_est,
        "exposed_measured_ms": exposed["median_ms"],
        "exposed_measured": exposed,
        "paired_runs": len(paired_runs),
        "on_order_only": any(r.on_order_only for r in runs),
        "problems": problems,
        "collectives": colls,
    }


def _rank_doc(p: RankPairing, exposed_est: dict[tuple[int | None, str, int], float | None]) -> dict[str, Any]:
    t = p.trace
    n = len(p.windows)
    steps = spread([_ms(b - a) for a, b in p.windows] if p.profiler_steps else [])
    steps["count"] = n if p.profiler_steps else 0
    by_graph: dict[tuple[str, int], list[GraphRun]] = {}
    for r in p.runs:
        if r.compile_id is not None and r.position is not None and (r.final is not None or r.issued):
            by_graph.setdefault((r.compile_id, r.position), []).append(r)
    graphs = [
        _graph_doc(k, rs, n if p.profiler_steps else None, exposed_est.get((p.rank, *k)))
        for k, rs in by_graph.items()
    ]
    unpaired = [
        {"step": r.step, "graph": r.label, "issued": len(r.issued), "reason": r.problem}
        for r in p.runs
        if r.problem
    ]
    if p.unmatched_transfers:
        unpaired.append(
            {
                "step": None,
                "graph": None,
                "issued": 0,
                "reason": f"{p.unmatched_transfers} transfers matched no issued collective",
            }
        )
    return {
        "rank": p.rank,
        "trace": t.path,
        "form": t.form,
        "backend": t.backend,
        "complete": t.complete,
        "events_read": t.events_read,
        "problems": list(t.problems),
        "has_shapes": t.has_shapes,
        "waits": p.waits,
        "profiler_steps": p.profiler_steps,
        "steps": steps,
        "graphs": graphs,
        "paired": sum(len(r.paired) for r in p.runs),
        "unpaired": unpaired,
    }


def _skew(pairings: list[RankPairing]) -> list[dict[str, Any]]:
    """Per graph and step, each rank's time from issuing the graph's first collective to that
    collective's end (which all ranks share): the rank with the least arrived last, and the
    spread is how long the others waited for it."""
    first: dict[tuple[str, int, int, int], dict[int | None, float]] = {}
    for p in pairings:
        nth: dict[tuple[str, int, int], int] = {}  # the n-th run of a graph in its step
        for r in p.runs:
            if r.compile_id is None:
                continue
            k = (r.compile_id, r.position or 0, r.step)
            nth[k] = nth.get(k, -1) + 1
            if r.paired and r.paired[0].transfer is not None:
                pc = r.paired[0]
                assert pc.transfer is not None
                first.setdefault((*k, nth[k]), {})[p.rank] = pc.transfer.span.end_us - pc.issued.span.ts_us
    graphs: dict[tuple[str, int], list[tuple[float, int | None]]] = {}
    for (cid, pos, _step, _n), by_rank in first.items():
        if len(by_rank) < 2:
            continue
        last = min(by_rank, key=lambda k: by_rank[k])
        graphs.setdefault((cid, pos), []).append((max(by_rank.values()) - by_rank[last], last))
    out = []
    for (cid, pos), vs in graphs.items():
        lasts = [lr for _, lr in vs]
        most = max(set(lasts), key=lambda x: (lasts.count(x), -(x or 0)))
        out.append(
            {
                "graph": f"{cid}:{pos}",
                "steps": len(vs),
                "skew": spread([_ms(v) for v, _ in vs]),
                "last_rank": most,
                "last_rank_steps": lasts.count(most),
            }
        )
    return out


def verdict(ranks: list[dict[str, Any]], skew: list[dict[str, Any]]) -> str:
    """One line: how far measured collectives and exposed time are from torch's estimates, and
    which graph takes most of the step."""
    meas = [g["collectives_measured_ms"] for r in ranks for g in r["graphs"] if g["ratio"] is not None]
    est = [g["est_ms"] for r in ranks for g in r["graphs"] if g["ratio"] is not None]
    if not meas:
        paired = sum(r["paired"] for r in ranks)
        if paired:  # paired with the log, but no transfer time measured (a trace cut short)
            return (
                f"{paired:,} collective runs paired with the log, but no transfer time measured "
                "to put beside torch's estimates (see the notes)"
            )
        return "nothing paired: no measured collective to put beside torch's estimates"
    parts = [f"collectives {sum(meas) / sum(est):.0f}x slower than estimated"]
    exp = [
        g["exposed_measured_ms"] for r in ranks for g in r["graphs"] if g["exposed_measured_ms"] is not None
    ]
    both = [  # graphs whose exposed time is both measured and estimated (a replay document)
        (g["exposed_measured_ms"], g["exposed_est_ms"])
        for r in ranks
        for g in r["graphs"]
        if g["exposed_measured_ms"] is not None and g["exposed_est_ms"] is not None
    ]
    if both and sum(e for _, e in both) > 0:
        parts.append(f"exposed {sum(m for m, _ in both) / sum(e for _, e in both):.0f}x")
    elif exp:
        # over the ranks measured (a trace without a log measures nothing)
        n = len([r for r in ranks if any(g["exposed_measured_ms"] is not None for g in r["graphs"])]) or 1
        # per step when the trace marks steps; without ProfilerStep spans, per run of each graph
        per = "a step" if any(r["profiler_steps"] for r in ranks) else "over one run of each graph"
        parts.append(f"exposed {sum(exp) / n:.1f} ms {per} (the log holds no exposed estimate)")
    share = _dominant(ranks)
    if share:
        parts.append(share)
    steady = [s for s in skew if 2 * s["last_rank_steps"] > s["steps"]]  # the same rank most of the time
    if steady:
        worst = max(steady, key=lambda s: s["skew"]["median_ms"] or 0)
        if worst["skew"]["median_ms"]:
            parts.append(
                f"rank {worst['last_rank']} arrives last at graph {worst['graph']} "
                f"({worst['skew']['median_ms']:.1f} ms)"
            )
    return "; ".join(parts)


def _dominant(ranks: list[dict[str, Any]]) -> str:
    totals: dict[str, list[float]] = {}
    phases: dict[str, str] = {}
    steps: list[float] = []
    for r in ranks:
        if r["steps"]["median_ms"] is not None:
            steps.append(r["steps"]["median_ms"])
        for g in r["graphs"]:
            if g["median_ms"] is not None:
                totals.setdefault(g["label"], []).append(g["median_ms"])
                phases[g["label"]] = g["phase"]
    if not totals:
        return ""
    label = max(totals, key=lambda k: statistics.median(totals[k]))
    ms = statistics.median(totals[label])
    if steps:
        return f"graph {label} ({phases[label]}) takes {100 * ms / statistics.median(steps):.0f}% of the step"
    return f"graph {label} ({phases[label]}) takes the longest ({ms:.1f} ms)"


def measure(
    run: Run,
    traces: list[RankTrace],
    ranks: Iterable[int] | None = None,
    wait_orders: dict[tuple[int | None, str, int], list[int]] | None = None,
    exposed_est: dict[tuple[int | None, str, int], float | None] | None = None,
) -> Measurement:
    """Pair every trace with its rank's log. ``ranks``: only these (None: all).
    ``wait_orders``: which wait ends which collective, from the logs' output code
    (:func:`tracekit.read.output_code.wait_orders`; None: derived from the order of the waits).
    ``exposed_est``: torch's exposed estimate per (rank, compile id, position)
    (:func:`tracekit.analyze.measure_estimates.exposed_estimates`; None: not known)."""
    wanted = None if ranks is None else set(ranks)
    by_rank: dict[int | None, RankTrace] = {}
    out = Measurement([], exposed_est=dict(exposed_est or {}))
    for t in traces:
        if wanted is not None and t.rank not in wanted:
            continue
        if t.rank in by_rank:
            out.notes.append(
                f"two traces of rank {t.rank}: {by_rank[t.rank].path} and {t.path}; the first is used"
            )
            continue
        by_rank[t.rank] = t
    log_ranks = {r.rank for r in run.ranks if wanted is None or r.rank in wanted}
    for rk, t in sorted(by_rank.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        log = run.rank(rk)
        if log is None and rk is None and len(run.ranks) == 1:
            log = run.ranks[0]  # a one-rank job: trace and log both without a rank
        elif rk is None:
            out.notes.append(f"{t.path}: the trace names no rank: not paired with a log")
        out.pairings.append(pair_rank(log, t, wait_orders))
        if log is None:
            out.notes.append(f"rank {rk}: a trace ({t.path}) but no compile log: nothing paired")
    out.log_only = sorted((r for r in log_ranks if r not in by_rank), key=lambda r: (r is None, r or 0))
    for r in out.log_only:
        out.notes.append(f"rank {r}: a compile log but no trace: not measured")
    return out


def measure_logs(
    run: Run,
    traces: list[RankTrace],
    paths: list[str],
    ranks: Iterable[int] | None = None,
    estimates: dict[str, Any] | str | None = None,
) -> Measurement:
    """:func:`measure` of a run read from ``paths`` (which wait ends which collective read off
    their output code), with torch's exposed estimates from ``estimates`` (a saved replay
    document, parsed or its path): what ``tracekit measure`` and :func:`tracekit.measure` both
    do. Raises :class:`~tracekit.analyze.measure_estimates.EstimatesError` for an ``estimates``
    document that is not a replay of these logs, ValueError when ``ranks`` names no trace."""
    import os

    from tracekit.analyze.measure_estimates import exposed_estimates, read_estimates
    from tracekit.read.output_code import wait_orders

    exposed: dict[tuple[int | None, str, int], float | None] = {}
    notes: list[str] = []
    if isinstance(estimates, dict):
        exposed, notes = exposed_estimates(estimates, run)
    elif estimates is not None:
        exposed, notes = read_estimates(os.fspath(estimates), run)
    ranks = list(ranks) if ranks else None
    result = measure(run, traces, ranks, wait_orders(paths), exposed)
    if ranks and not result.pairings:
        raise ValueError(f"no trace of rank {', '.join(map(str, ranks))}")
    result.notes.extend(notes)
    return result


def mismatch_reason(m: Measurement) -> str | None:
    """Why nothing was paired, when nothing was (one line), else None."""
    if m.paired:
        return None
    problems = [r.problem for p in m.pairings for r in p.runs if r.problem]
    if not m.pairings:
        return "no trace of a rank the logs hold"
    cut = [p for p in m.pairings if not p.trace.complete]
    if cut:
        first_cut = cut[0].trace
        why = f"; the first graph run not paired: {problems[0]}" if problems else ""
        return (
            f"nothing paired: {len(cut)} of {len(m.pairings)} traces are cut short "
            f"({first_cut.events_read:,} events read of {first_cut.path}){why}"
        )
    if problems:
        first = problems[0]
        return (
            f"nothing paired: the traces do not match the logs (another run or cap?): "
            f"{len(problems)} graph runs differ, the first: {first}"
        )
    return "nothing paired: no compiled graph run with collectives in the traces"


__all__ = ["SCHEMA", "Measurement", "measure", "measure_logs", "mismatch_reason", "spread", "verdict"]
