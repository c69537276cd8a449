"""Byte sizes of collectives, from the fake tensors in ``node.meta["val"]``."""

from __future__ import annotations

import torch
import torch.fx as fx

MB = 1024 * 1024


def _hint(value: object, fallback: int | None) -> int:
    if isinstance(value, int):
        return value
    from torch.fx.experimental.symbolic_shapes import optimization_hint

    hinted = optimization_hint(value, fallback=fallback)
    if hinted is None:
        raise ValueError(f"no size hint for symbolic size {value}")
    return int(hinted)


def tensor_bytes(val: torch.Tensor, fallback: int | None = None) -> int:
    """``numel * element_size`` of a (fake) tensor; symbolic sizes use their hint."""
    return _hint(val.numel(), fallback) * val.element_size()


def bucket_bytes(node: fx.Node) -> int:
    """What the bucket cap is compared against: max(output bytes, first input's bytes)."""
    out_val = node.meta.get("val")
    inputs = node.all_input_nodes
    if out_val is None or not inputs or inputs[0].meta.get("val") is None:
        raise ValueError(f"{node.name}: collective without meta['val'] on it and its input")
    return max(tensor_bytes(out_val), tensor_bytes(inputs[0].meta["val"]))


def reported_bytes(kind: str, node: fx.Node) -> int:
    """Size torch reports for a collective: AG its output, RS and AR their input."""
    val = node.meta["val"] if kind == "AG" else node.all_input_nodes[0].meta["val"]
    return tensor_bytes(val, fallback=0)


def round_mb(n_bytes: int) -> float:
    """Bytes to MB, rounded to 3 decimals as in torch's artifacts."""
    return round(n_bytes / MB, 3)


def shown_mb(n_bytes: int) -> float:
    """Bytes to MB as a size is shown: 3 decimals, or 3 significant digits when 3 decimals
    would read 0 for a size that is not (512 bytes: 0.000488, never 0.0)."""
    mb = round(n_bytes / MB, 3)
    return float(f"{n_bytes / MB:.3g}") if mb == 0 and n_bytes > 0 else mb
