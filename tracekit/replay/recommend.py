"""``--recommend``: the cap grid, the Pareto front of estimated step time against peak memory,
and the cap to use within a memory budget, from ``totals.step`` (torch's estimates, not
measurements)."""

from __future__ import annotations

import math
from typing import Any

CONFIG_LINE = "torch._inductor.config.aten_distributed_optimizations.pre_bucketing_fsdp_collectives_bucket_cap_mb = {cap}"


def cap_grid(extra_mb: list[float]) -> list[float]:
    """Powers of two from 1 MB to 2 GB, and the caps given, once each, ascending."""
    return sorted({float(2**i) for i in range(12)} | {float(x) for x in extra_mb})


def _point(s: dict[str, Any]) -> tuple[float, int]:
    return (s["est_ms"], s["peak_memory_bytes"])


def _recorded(step: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((s for s in step if s.get("cap") == "recorded"), None)


def _preference(recorded: dict[str, Any] | None) -> Any:
    """Among caps with the same estimates, the one to name: the recorded cap, then the cap
    nearest it (by ratio), then the larger; never the smallest by default, which merges least."""
    ref = None if recorded is None or len(recorded["bucket_cap_mb"]) != 1 else recorded["bucket_cap_mb"][0]

    def key(s: dict[str, Any]) -> tuple[int, float, float]:
        cap = s["bucket_cap_mb"][0] if len(s["bucket_cap_mb"]) == 1 else 0.0
        near = abs(math.log(cap / ref)) if ref and cap > 0 else 0.0
        return (0 if s.get("cap") == "recorded" else 1, near, -cap)

    return key


def pareto_front(step: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The step entries no other beats on both estimated time and peak memory, one per point:
    caps with the same estimated time and peak share it, named by :func:`_preference` (the
    recorded cap first), the others listed in its ``same_as`` (cap labels)."""
    pts = [s for s in step if s.get("est_ms") is not None and s.get("peak_memory_bytes") is not None]
    front = [
        s
        for s in pts
        if not any(
            (o["est_ms"] <= s["est_ms"] and o["peak_memory_bytes"] <= s["peak_memory_bytes"])
            and (o["est_ms"] < s["est_ms"] or o["peak_memory_bytes"] < s["peak_memory_bytes"])
            for o in pts
        )
    ]
    prefer = _preference(_recorded(step))
    by_point: dict[tuple[float, int], list[dict[str, Any]]] = {}
    for s in front:
        by_point.setdefault(_point(s), []).append(s)
    out = []
    for same in by_point.values():
        first = min(same, key=prefer)
        out.append({**first, "same_as": [o["cap"] for o in same if o is not first]})
    return sorted(out, key=lambda s: s["peak_memory_bytes"])


def recommend(step: list[dict[str, Any]], memory_budget_gb: float | None) -> dict[str, Any] | None:
    """The cap to use within the budget: the recorded cap when no cap is faster
    (``keep_recorded``), else the fastest estimated step (ties: less memory, then the cap
    nearest the recorded one, :func:`_preference`)."""
    pts = [
        s
        for s in step
        if s.get("est_ms") is not None
        and s.get("peak_memory_bytes") is not None
        and len(s["bucket_cap_mb"]) == 1
    ]
    if memory_budget_gb is not None:
        pts = [s for s in pts if s["peak_memory_bytes"] <= memory_budget_gb * 2**30]
    if not pts:
        return None
    recorded = _recorded(step)
    prefer = _preference(recorded)
    fastest = min(s["est_ms"] for s in pts)
    best = min(
        (s for s in pts if s["est_ms"] == fastest),
        key=lambda s: (s["peak_memory_bytes"], *prefer(s)),
    )
    keep = recorded is not None and any(s is recorded for s in pts) and recorded["est_ms"] <= fastest
    if keep and recorded is not None:  # (keep says so: for the type checker)
        best = recorded  # no cap is faster: changing the cap buys nothing
    cap = best["bucket_cap_mb"][0]
    return {
        "cap_mb": cap,
        "cap": best["cap"],
        "keep_recorded": keep,
        "est_ms": best["est_ms"],
        "exposed_ms": best["exposed_ms"],
        "peak_memory_bytes": best["peak_memory_bytes"],
        "vs_recorded_ms": None
        if recorded is None or recorded["est_ms"] is None
        else round(best["est_ms"] - recorded["est_ms"], 4),
        "memory_budget_gb": memory_budget_gb,
        "config": CONFIG_LINE.format(cap=f"{cap:g}"),
        "basis": f"torch {_torch_version()}'s estimates (recorded compute estimates, NCCL model, roofline), "
        "not measurements",
    }


def _torch_version() -> str:
    """The replaying torch's release (``2.15.0``): the estimates are its scheduler's."""
    import torch

    return torch.__version__.split("+")[0]


__all__ = ["CONFIG_LINE", "cap_grid", "pareto_front", "recommend"]
