"""A graph's figures after torch's overlap scheduler, as replay's JSON gives them: the same
keys, in the same order, for a cap of a pre-bucketed graph (:mod:`tracekit.replay.results`) and
for a graph torch never pre-bucketed (:mod:`tracekit.replay.not_prebucketed_graphs`).

Torch-free: it reads the fields of an ``overlap_schedule.ScheduledGraph`` and rounds them."""

from __future__ import annotations

from typing import Any


def round_ms(x: float | None) -> float | None:
    """Milliseconds as replay's JSON gives them: 4 decimals (None stays None)."""
    return None if x is None else round(x, 4)


def shown_delta(a: float | None, b: float | None) -> float | None:
    """``a - b`` as the figures are shown (each rounded by :func:`round_ms` first): a "vs
    recorded" column is then the difference of the two numbers beside it, to the last digit
    (0.1042 against 0.1199 is -0.0157, where the unrounded difference rounds to -0.0156). None
    when either is."""
    return None if a is None or b is None else round_ms(round(a, 4) - round(b, 4))


def schedule_figures(sc: Any, error: str | None = None, **after_est: float | None) -> dict[str, Any]:
    """``final``, ``comm_ms``, ``exposed_ms``, ``compute_ms``, ``est_ms`` (then ``after_est``,
    e.g. ``est_ms_vs_recorded``), ``peak_memory_bytes``, ``estimates``, ``timeline`` and
    ``schedule_error`` of the scheduled graph ``sc``; without one (None), the figures are None
    and ``schedule_error`` says why (``error``)."""
    if sc is None:
        return {
            "final": None,
            "comm_ms": None,
            "exposed_ms": None,
            "compute_ms": None,
            "est_ms": None,
            "peak_memory_bytes": None,
            "schedule_error": error,
        }
    return {
        "final": {"counts": sc.counts(), "collectives": [c.to_dict() for c in sc.final]},
        "comm_ms": round_ms(sc.comm_ms),
        "exposed_ms": round_ms(sc.exposed_ms),
        "compute_ms": round_ms(sc.compute_ms),
        "est_ms": round_ms(sc.est_ms),
        **{k: round_ms(v) for k, v in after_est.items()},
        "peak_memory_bytes": sc.peak_memory_bytes,
        "estimates": {
            "compute_nodes": sc.compute_nodes,
            "fallback_nodes": len(sc.fallback),
            "fallback": list(sc.fallback),
        },
        "timeline": {"nodes": sc.timeline, "memory": sc.memory},
        "schedule_error": None,
    }


def with_versus_recorded(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``steps`` (the whole step at each cap, the recorded cap first), each given
    ``est_ms_vs_recorded``: its ``est_ms`` less the recorded cap's (None where either is)."""
    base = steps[0].get("est_ms") if steps else None
    for e in steps:
        e["est_ms_vs_recorded"] = (
            None if base is None or e.get("est_ms") is None else round_ms(e["est_ms"] - base)
        )
    return steps
