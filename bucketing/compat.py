"""Which torch releases the passes run on, and a clear error on the others.

The passes lean on private building blocks of ``torch._inductor`` (functional collective ops,
the NCCL comm model, the custom graph pass interface, the ``aten_distributed_optimizations``
config) that move between releases. Supported: the torch 2.13 line.
"""

from __future__ import annotations

import functools
import importlib

SUPPORTED_TORCH = "2.13"

#: What to run when torch is not installed: the extra that brings a supported torch.
INSTALL_HINT = "pip install 'tracekit[replay]'"

# (module, attribute) pairs the passes use; a release that lacks one is not supported.
_REQUIRED = (
    ("torch._inductor.custom_graph_pass", "CustomGraphPass"),
    ("torch._inductor.custom_graph_pass", "get_hash_for_files"),
    ("torch._inductor.comm_analysis", "NCCL_COLL"),
    ("torch._inductor.config", "aten_distributed_optimizations"),
    ("torch._inductor.config", "post_grad_custom_post_pass"),
    ("torch._logging", "trace_structured"),
    ("torch.fx.experimental.symbolic_shapes", "optimization_hint"),
    ("torch.fx.traceback", "NodeSource"),
)

_REQUIRED_OPS = (
    "all_gather_into_tensor",
    "all_gather_into_tensor_out",
    "reduce_scatter_tensor",
    "all_reduce",
    "wait_tensor",
)


class UnsupportedTorch(RuntimeError):
    """The installed torch lacks a building block the bucketing passes need."""


@functools.cache
def check_torch() -> str:
    """Return the torch version if supported, else raise :class:`UnsupportedTorch`."""
    try:
        import torch
    except ImportError as exc:  # torch is the `replay` extra, not a dependency of the base package
        raise UnsupportedTorch(
            f"torch is not installed (replay, explain and bucketing need torch {SUPPORTED_TORCH}.x): {INSTALL_HINT}"
        ) from exc
    version = torch.__version__.split("+")[0]
    if not version.startswith(SUPPORTED_TORCH + "."):
        raise UnsupportedTorch(
            f"bucketing supports torch {SUPPORTED_TORCH}.x, found torch {torch.__version__}"
        )
    missing = []
    for module_name, attr in _REQUIRED:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            missing.append(module_name)
            continue
        if not hasattr(module, attr):
            missing.append(f"{module_name}.{attr}")
    functional = getattr(torch.ops, "_c10d_functional", None)
    for op in _REQUIRED_OPS:
        if functional is None or not hasattr(functional, op):
            missing.append(f"torch.ops._c10d_functional.{op}")
    if missing:
        raise UnsupportedTorch(
            f"torch {torch.__version__} lacks building blocks bucketing needs "
            f"(supported: torch {SUPPORTED_TORCH}.x): {', '.join(missing)}"
        )
    return version
