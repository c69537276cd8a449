"""Which torch releases the passes run on, and a clear error on the others.

The passes lean on private building blocks of ``torch._inductor`` (functional collective ops,
the NCCL comm model, the custom graph pass interface, the ``aten_distributed_optimizations``
config) that move between releases. What decides is whether those building blocks are there
(:func:`check_torch` looks for each symbol the passes call, and checks that each torch function
we call takes the arguments we pass: :class:`Call`, :func:`check_calls`), not the version
string: a release
that has them runs, and one that was never tested (:data:`TESTED_TORCH`) gets one line saying so
(:func:`untested_note`); a release that lacks one is refused with the list of what it lacks.
Nothing here imports dynamo or the inductor scheduler: the checks are a few small modules'
attributes, once per process.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from dataclasses import dataclass

#: The oldest torch line the passes support (the first with every building block below).
SUPPORTED_TORCH = "2.13"

#: The releases the whole suite ran on (.ci/run: 2.13.0 in the main install, 2.14.1 and 2.15.0
#: in venvs of their own). Others that have the building blocks run with a note.
TESTED_TORCH = ("2.13.0", "2.14.1", "2.15.0")

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


@dataclass(frozen=True)
class Call:
    """One call we make into torch: ``module.name`` with ``positional`` arguments, then
    ``keywords`` by name. :func:`call_mismatches` checks it against the installed function's
    ``inspect.signature``: a parameter renamed, removed or newly required is found before any
    work, not as a ``TypeError`` halfway through a replay."""

    module: str
    name: str
    positional: int
    keywords: tuple[str, ...] = ()

    def __str__(self) -> str:
        args = ["_"] * self.positional + [f"{k}=" for k in self.keywords]
        return f"{self.module}.{self.name}({', '.join(args)})"


#: The calls into torch's comm model the passes make (the cap: :mod:`bucketing.cap`).
BUCKETING_CALLS = (
    Call("torch._inductor.comm_analysis", "compute_min_saturation_bytes", 2, ("target_efficiency",)),
)

#: torch's own merge functions, the fallback for buckets we do not merge ourselves
#: (:func:`bucketing.merge.merge_with_torch`); checked when first used, as their module is
#: imported only then.
TORCH_MERGE_CALLS = (
    Call("torch._inductor.fx_passes.bucketing", "merge_all_gather_bucket", 3),
    Call("torch._inductor.fx_passes.bucketing", "merge_reduce_scatter_bucket", 3),
    Call("torch._inductor.fx_passes.bucketing", "merge_all_reduce_bucket", 2),
)

#: torch's step after each bucket it merges (:func:`bucketing.merge.sort_as_torch`).
TORCH_ORDER_CALLS = (Call("torch._inductor.fx_passes.bucketing", "_sort_bucket_region", 3),)


def _release(version: str) -> tuple[int, ...]:
    """``"2.15.0+cu132"`` -> ``(2, 15, 0)``; pre-release tails (``2.16.0a0``) keep their digits."""
    out = []
    for part in version.split("+")[0].split(".")[:3]:
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        out.append(int(digits or 0))
    return tuple(out)


def missing_building_blocks() -> list[str]:
    """The symbols the passes call that the installed torch lacks (empty: it has them all)."""
    import torch

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
    return missing


def call_mismatches(calls: tuple[Call, ...]) -> list[str]:
    """What in ``calls`` the installed torch would refuse: a module or function it lacks, or a
    signature that does not take the arguments (``"torch...f(_, x=): got an unexpected keyword
    argument 'x'"``). Empty when every call fits. Imports each call's module."""
    out = []
    for call in calls:
        try:
            module = sys.modules.get(call.module) or importlib.import_module(call.module)
        except ImportError:
            out.append(call.module)
            continue
        func = getattr(module, call.name, None)
        if func is None:
            out.append(f"{call.module}.{call.name}")
            continue
        try:
            signature = inspect.signature(func)
        except (TypeError, ValueError):  # a builtin without a signature: nothing to check
            continue
        try:
            signature.bind(*([None] * call.positional), **dict.fromkeys(call.keywords))
        except TypeError as exc:
            out.append(f"{call}: {exc}")
    return out


@functools.cache
def check_calls(calls: tuple[Call, ...]) -> None:
    """Raise :class:`UnsupportedTorch` when the installed torch would refuse one of ``calls``
    (:func:`call_mismatches`), naming each; once per tuple of calls and process."""
    mismatches = call_mismatches(calls)
    if mismatches:
        import torch

        raise UnsupportedTorch(
            f"torch {torch.__version__} does not take the calls bucketing makes "
            f"(tested: torch {', '.join(TESTED_TORCH)}): {'; '.join(mismatches)}"
        )


@functools.cache
def check_torch() -> str:
    """Return the torch version (``"2.15.0"``) if the passes can run on it, else raise
    :class:`UnsupportedTorch`: torch missing, older than :data:`SUPPORTED_TORCH`, lacking a
    building block (:func:`missing_building_blocks`) or not taking a call of
    :data:`BUCKETING_CALLS` (:func:`check_calls`)."""
    try:
        import torch
    except ImportError as exc:  # torch is the `replay` extra, not a dependency of the base package
        raise UnsupportedTorch(
            f"torch is not installed (replay, explain and bucketing need torch {SUPPORTED_TORCH} "
            f"or newer): {INSTALL_HINT}"
        ) from exc
    version = torch.__version__.split("+")[0]
    if _release(version)[:2] < _release(SUPPORTED_TORCH)[:2]:
        raise UnsupportedTorch(
            f"bucketing needs torch {SUPPORTED_TORCH} or newer, found torch {torch.__version__}"
        )
    missing = missing_building_blocks()
    if missing:
        raise UnsupportedTorch(
            f"torch {torch.__version__} lacks building blocks bucketing needs "
            f"(tested: torch {', '.join(TESTED_TORCH)}): {', '.join(missing)}"
        )
    check_calls(BUCKETING_CALLS)
    return version


def is_tested(version: str) -> bool:
    """Whether ``version`` (``"2.14.1"``, a local tag allowed) is one of :data:`TESTED_TORCH`."""
    return version.split("+")[0] in TESTED_TORCH


def untested_note() -> str | None:
    """One line when the installed torch runs but was never tested, else None."""
    version = check_torch()
    if is_tested(version):
        return None
    return (
        f"torch {version} is untested (tested: {', '.join(TESTED_TORCH)}); it has every building "
        "block bucketing calls, so it runs"
    )
