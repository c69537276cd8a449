"""bucketing: FSDP collective pre-bucketing passes for torch.fx graphs (torch 2.13, 2.14, 2.15).

Our own implementation of torch's ``torch._inductor.fx_passes.fsdp`` pre-bucketing,
with the same outcomes, a graph that lints on its own, near-linear cost, a report of what
it did, and extra log artifacts for replay. Public API::

    identify_fsdp_groups(gm) -> (group names, group size)
    compute_pre_bucket_cap_mb(group_size, override=None) -> PreBucketCap(cap_mb, source)
    dedup_fsdp_reduce_scatter(gm) -> pairs fused
    plan_fsdp_buckets(gm, bucket_cap_mb=None, mode=None) -> BucketingReport   (no rewrite)
    FsdpPlanner(gm).plan(bucket_cap_mb) -> BucketingReport   (prepare once, plan many caps)
    FsdpPlanner(gm).plan(bucket_cap_mb, explain=True).decisions -> [Decision]   (why, per collective)
    pre_bucket_fsdp_collectives(gm, mode=None, bucket_cap_mb=None) -> BucketingReport
    install() / uninstall() / installed()   (make torch.compile use the pass)
    register_fake_process_groups(group_names, group_size)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from bucketing.compat import SUPPORTED_TORCH, TESTED_TORCH, UnsupportedTorch, check_torch, untested_note

if TYPE_CHECKING:  # what the names below resolve to, for the type checker (no import at run time)
    from bucketing.cap import PreBucketCap, compute_pre_bucket_cap_mb
    from bucketing.dedup import dedup_fsdp_reduce_scatter
    from bucketing.fake_groups import register_fake_process_groups
    from bucketing.groups import identify_fsdp_groups
    from bucketing.install import FsdpPreBucketingPass, install, installed, uninstall
    from bucketing.merge import BucketingError
    from bucketing.plan import FsdpPlanner, plan_fsdp_buckets
    from bucketing.prebucket import pre_bucket_fsdp_collectives
    from bucketing.report import BucketingReport, BucketMember, Decision

#: Each public name of the passes and the module that holds it. They import torch, so they load
#: on first use (PEP 562), after :func:`check_torch`: ``from bucketing import plan_fsdp_buckets``
#: without a supported torch raises :class:`UnsupportedTorch`, while the torch-free modules
#: (``bucketing.compat``, ``bucketing.gc_pause``) import without torch.
_API = {
    "PreBucketCap": "bucketing.cap",
    "compute_pre_bucket_cap_mb": "bucketing.cap",
    "dedup_fsdp_reduce_scatter": "bucketing.dedup",
    "register_fake_process_groups": "bucketing.fake_groups",
    "identify_fsdp_groups": "bucketing.groups",
    "FsdpPreBucketingPass": "bucketing.install",
    "install": "bucketing.install",
    "installed": "bucketing.install",
    "uninstall": "bucketing.install",
    "BucketingError": "bucketing.merge",
    "FsdpPlanner": "bucketing.plan",
    "plan_fsdp_buckets": "bucketing.plan",
    "pre_bucket_fsdp_collectives": "bucketing.prebucket",
    "BucketingReport": "bucketing.report",
    "BucketMember": "bucketing.report",
    "Decision": "bucketing.report",
}


def __getattr__(name: str) -> Any:
    """The first public name asked for checks torch and loads every pass, as an eager import
    would (the function ``install`` then stands where Python put the submodule ``install``)."""
    if name not in _API:
        raise AttributeError(f"module 'bucketing' has no attribute {name!r}")
    check_torch()
    for api_name, module in _API.items():
        globals()[api_name] = getattr(importlib.import_module(module), api_name)
    return globals()[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})


__all__ = [
    "SUPPORTED_TORCH",
    "TESTED_TORCH",
    "BucketMember",
    "BucketingError",
    "BucketingReport",
    "Decision",
    "FsdpPlanner",
    "FsdpPreBucketingPass",
    "PreBucketCap",
    "UnsupportedTorch",
    "check_torch",
    "untested_note",
    "compute_pre_bucket_cap_mb",
    "dedup_fsdp_reduce_scatter",
    "identify_fsdp_groups",
    "install",
    "installed",
    "plan_fsdp_buckets",
    "pre_bucket_fsdp_collectives",
    "register_fake_process_groups",
    "uninstall",
]
