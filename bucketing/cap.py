"""The bucket cap of the FSDP pre-bucketing pass, and what decided it."""

from __future__ import annotations

from typing import NamedTuple

CAP_SOURCES = ("override", "saturation", "floor", "ceiling", "fallback")
# Cap torch uses when a graph has FSDP groups but no FSDP all-gather left to size them.
NO_GROUP_SIZE_CAP_MB = 500.0


class PreBucketCap(NamedTuple):
    """A bucket cap in MB and which rule gave it (one of :data:`CAP_SOURCES`)."""

    cap_mb: float
    source: str


def _dist_opts():
    import torch._inductor.config as inductor_config

    return inductor_config.aten_distributed_optimizations


def saturation_mb(group_size: int) -> float | None:
    """Bytes (in MB) that saturate a group's bandwidth per torch's comm model, or None.

    None when this torch has no ``compute_min_saturation_bytes`` (the model is missing).
    """
    try:
        from torch._inductor.comm_analysis import NCCL_COLL, compute_min_saturation_bytes
    except ImportError:
        return None
    min_bytes = compute_min_saturation_bytes(group_size, NCCL_COLL.ALL_GATHER, target_efficiency=0.9)
    return min_bytes / (1024 * 1024)


def compute_pre_bucket_cap_mb(
    group_size: int | None,
    override: float | None = None,
    *,
    calibration: float | None = None,
    floor_mb: float | None = None,
    ceiling_mb: float | None = None,
) -> PreBucketCap:
    """Return the pre-bucketing cap for a process group of ``group_size`` ranks.

    An ``override`` wins ("override"). Otherwise the bandwidth-saturation size of torch's comm
    model times ``calibration`` is clamped to ``[floor_mb, ceiling_mb]``: "saturation" when it
    fell inside, "floor" or "ceiling" when clamped, "fallback" (the floor) when the model is
    missing. Unset knobs come from ``torch._inductor.config.aten_distributed_optimizations``
    (defaults 1.0, 10 MB, 500 MB). With no group size (no FSDP all-gather left) the cap is
    torch's 500 MB, "fallback".
    """
    if override is not None:
        return PreBucketCap(float(override), "override")
    if group_size is None:
        return PreBucketCap(NO_GROUP_SIZE_CAP_MB, "fallback")
    opts = _dist_opts()
    if calibration is None:
        calibration = opts.pre_bucketing_fsdp_collectives_saturation_calibration_multiplier
    if floor_mb is None:
        floor_mb = opts.pre_bucketing_fsdp_collectives_min_bucket_cap_mb
    if ceiling_mb is None:
        ceiling_mb = opts.pre_bucketing_fsdp_collectives_max_bucket_cap_mb
    model_mb = saturation_mb(group_size)
    if model_mb is None:
        return PreBucketCap(float(max(floor_mb, min(ceiling_mb, floor_mb))), "fallback")
    raw = calibration * model_mb
    if raw > ceiling_mb:
        return PreBucketCap(
            float(max(floor_mb, ceiling_mb)), "ceiling" if ceiling_mb >= floor_mb else "floor"
        )
    if raw < floor_mb:
        return PreBucketCap(float(floor_mb), "floor")
    return PreBucketCap(float(raw), "saturation")
