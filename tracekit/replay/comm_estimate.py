"""Estimated communication time of a graph's FSDP collectives, from torch's NCCL model.

Uses ``torch._inductor.comm_analysis``: each collective (or merged bucket) is costed with
``estimate_nccl_collective_runtime_impl(bytes, group_size, coll)``, where ``bytes`` is torch's
fx convention (``estimate_fx_collective_size``: input plus output bytes; a bucket moves the
sum of its members). The automatic cap is the bucketing package's
``compute_pre_bucket_cap_mb``, which uses the model's saturation size.

What-if hardware (:class:`Hardware`): torch detects the GPU generation, NVLink and GPUs per
node from the machine it runs on. For a replay we answer for the hardware the user names, by
steering exactly those detection functions of ``comm_analysis`` while a model call runs
(:func:`hardware_model`). The collective sizes stay those of the recorded graph: a larger
``group_size`` changes the ring, not the shards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import torch
import torch.fx as fx
from torch._inductor import comm_analysis as ca

from bucketing.compat import Call

_CA = "torch._inductor.comm_analysis"

#: The comm model's functions replay and explain call, with the arguments they pass
#: (checked before any work: :func:`bucketing.compat.check_calls`).
COMM_MODEL_CALLS = (
    Call(_CA, "estimate_nccl_collective_runtime_impl", 3),
    Call(_CA, "estimate_nccl_collective_runtime_from_fx_node", 2, ("use_nccl_estimator",)),
    Call(_CA, "estimate_fx_collective_size", 1),
    Call(_CA, "detect_interconnect", 1),
)

#: Interconnect profiles torch's model knows, by the names accepted on the command line.
INTERCONNECTS: tuple[str, ...] = tuple(t.name for t in ca.InterconnectType)

# The GPU generation each interconnect implies for the bandwidth and channel tables.
_GENERATION = {
    "NVLINK_V100": ca.NVIDIA_GPU_TYPE.VOLTA,
    "NVLINK_A100": ca.NVIDIA_GPU_TYPE.AMPERE,
    "NVLINK_H100": ca.NVIDIA_GPU_TYPE.HOPPER,
    "NVLINK_B200": ca.NVIDIA_GPU_TYPE.BLACKWELL,
    "IB_HDR": ca.NVIDIA_GPU_TYPE.AMPERE,
    "IB_NDR": ca.NVIDIA_GPU_TYPE.HOPPER,
    "PCIE": ca.NVIDIA_GPU_TYPE.AMPERE,
}
_KIND_COLL = {
    "AG": ca.NCCL_COLL.ALL_GATHER,
    "RS": ca.NCCL_COLL.REDUCE_SCATTER,
    "AR": ca.NCCL_COLL.ALL_REDUCE,
}


def interconnect_name(text: str) -> str:
    """``nvlink-h100`` / ``NVLINK_H100`` / ``ib_ndr`` -> the torch profile name (ValueError if unknown)."""
    name = text.strip().upper().replace("-", "_").replace(" ", "_")
    if name not in INTERCONNECTS:
        raise ValueError(f"unknown interconnect {text!r}; one of {', '.join(INTERCONNECTS)}")
    return name


@dataclass(frozen=True)
class Hardware:
    """The hardware a replay answers for; None fields mean "as torch detects here"."""

    interconnect: str | None = None  # an :data:`INTERCONNECTS` name
    group_size: int | None = None  # None: the recorded group size
    gpus_per_node: int | None = None  # None: torch's default (visible GPUs, else 8)

    @property
    def is_default(self) -> bool:
        return self.interconnect is None and self.gpus_per_node is None


@contextlib.contextmanager
def hardware_model(hw: Hardware) -> Iterator[None]:
    """Make ``comm_analysis`` model ``hw`` instead of this machine, for the duration of the block.

    Replaced while inside: ``get_gpu_type``, ``_has_nvlink``, ``detect_interconnect`` (when an
    interconnect is named) and ``torch.cuda.is_available`` / ``device_count``, which the model
    reads for GPUs per node (when ``gpus_per_node`` is named). Restored on exit, always.
    """
    if hw.is_default:
        yield
        return
    saved_ca = {k: getattr(ca, k) for k in ("get_gpu_type", "_has_nvlink", "detect_interconnect")}
    saved_cuda = (torch.cuda.is_available, torch.cuda.device_count)
    try:
        if hw.interconnect is not None:
            chosen = ca.InterconnectType[hw.interconnect]
            generation = _GENERATION[hw.interconnect]
            ca.get_gpu_type = lambda: generation
            ca._has_nvlink = lambda: chosen != ca.InterconnectType.PCIE
            ca.detect_interconnect = lambda group_size: chosen
        if hw.gpus_per_node is not None:
            per_node = int(hw.gpus_per_node)
            torch.cuda.is_available = lambda: True
            torch.cuda.device_count = lambda: per_node
        yield
    finally:
        for k, v in saved_ca.items():
            setattr(ca, k, v)
        torch.cuda.is_available, torch.cuda.device_count = saved_cuda


@contextlib.contextmanager
def scheduler_model(hw: Hardware, fsdp_groups: Iterable[str] = ()) -> Iterator[None]:
    """:func:`hardware_model` for torch's overlap scheduler, and the what-if group size: while
    inside, torch's NCCL model (``estimate_nccl_collective_runtime_from_fx_node``, which the
    scheduler calls for every collective) reads ``hw.group_size`` for the process groups named
    in ``fsdp_groups`` (``distributed_c10d._get_group_size_by_name``, looked up at each call);
    other groups (a mesh's replicate groups) keep their size. Restored on exit, always."""
    import torch.distributed.distributed_c10d as c10d

    groups = {str(g) for g in fsdp_groups}
    saved = c10d._get_group_size_by_name
    try:
        if hw.group_size is not None and groups:
            size = int(hw.group_size)
            c10d._get_group_size_by_name = lambda name: size if str(name) in groups else saved(name)
        with hardware_model(hw):
            yield
    finally:
        c10d._get_group_size_by_name = saved


def auto_cap(group_size: int | None, hw: Hardware):
    """The automatic cap (``bucketing.compute_pre_bucket_cap_mb``) on ``hw``: a PreBucketCap."""
    from bucketing.cap import compute_pre_bucket_cap_mb

    with hardware_model(hw):
        return compute_pre_bucket_cap_mb(hw.group_size or group_size)


def collective_bytes(node: fx.Node) -> int:
    """torch's fx size of one collective: its input plus output bytes."""
    return int(ca.estimate_fx_collective_size(node))


def comm_ms(units: Iterable[tuple[str, int]], group_size: int, hw: Hardware) -> float:
    """Sum of the NCCL model's time (ms) for collectives given as ``(kind, bytes)``."""
    total = 0.0
    seen: dict[tuple[str, int], float] = {}  # graphs repeat sizes: one model call per size
    with hardware_model(hw):
        for kind, n_bytes in units:
            ms = seen.get((kind, n_bytes))
            if ms is None:
                ms = seen[(kind, n_bytes)] = ca.estimate_nccl_collective_runtime_impl(
                    n_bytes, group_size, _KIND_COLL[kind]
                )
            total += ms
    return total


def describe(hw: Hardware, recorded_group_size: int | None) -> dict:
    """What the model assumes for ``hw``: interconnect (resolved), group size and nNodes."""
    group_size = hw.group_size or recorded_group_size
    with hardware_model(hw):
        interconnect = ca.detect_interconnect(group_size or 1).name
    return {"interconnect": interconnect, "group_size": group_size, "n_nodes": n_nodes(group_size, hw)}


def n_nodes(group_size: int | None, hw: Hardware) -> int:
    """Hosts the group spans on ``hw`` (torch's nNodes)."""
    if group_size is None:
        return 1
    per_node = hw.gpus_per_node or (torch.cuda.device_count() if torch.cuda.is_available() else 8)
    return -(-group_size // per_node)
