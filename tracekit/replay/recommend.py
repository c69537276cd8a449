"""``--recommend``: the cap grid, the Pareto front of estimated step time against peak memory,
and the cap to use within a memory budget, from ``totals.step`` (torch's estimates, not
measurements)."""

from __future__ import annotations

from typing import Any

CONFIG_LINE = "torch._inductor.config.aten_distributed_optimizations.pre_bucketing_fsdp_collectives_bucket_cap_mb = {cap}"


def cap_grid(extra_mb: list[float]) -> list[float]:
    """Powers of two from 1 MB to 2 GB, and the caps given, once each, ascending."""
    return sorted({float(2**i) for i in range(12)} | {float(x) for x in extra_mb})


def pareto_front(step: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The step entries no other beats on both estimated time and peak memory."""
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
    return sorted(front, key=lambda s: s["peak_memory_bytes"])


def recommend(step: list[dict[str, Any]], memory_budget_gb: float | None) -> dict[str, Any] | None:
    """The fastest estimated step within the budget (ties: less memory, then the smaller cap)."""
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
    best = min(pts, key=lambda s: (s["est_ms"], s["peak_memory_bytes"], s["bucket_cap_mb"][0]))
    recorded = next((s for s in step if s["cap"] == "recorded"), None)
    cap = best["bucket_cap_mb"][0]
    return {
        "cap_mb": cap,
        "cap": best["cap"],
        "est_ms": best["est_ms"],
        "exposed_ms": best["exposed_ms"],
        "peak_memory_bytes": best["peak_memory_bytes"],
        "vs_recorded_ms": None
        if recorded is None or recorded["est_ms"] is None
        else round(best["est_ms"] - recorded["est_ms"], 4),
        "memory_budget_gb": memory_budget_gb,
        "config": CONFIG_LINE.format(cap=f"{cap:g}"),
        "basis": "torch 2.13's estimates (recorded compute estimates, NCCL model, roofline), not measurements",
    }


__all__ = ["CONFIG_LINE", "cap_grid", "pareto_front", "recommend"]
