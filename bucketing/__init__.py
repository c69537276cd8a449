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

from bucketing.compat import SUPPORTED_TORCH, TESTED_TORCH, UnsupportedTorch, check_torch, untested_note

check_torch()

from bucketing.cap import PreBucketCap, compute_pre_bucket_cap_mb  # noqa: E402
from bucketing.dedup import dedup_fsdp_reduce_scatter  # noqa: E402
from bucketing.fake_groups import register_fake_process_groups  # noqa: E402
from bucketing.groups import identify_fsdp_groups  # noqa: E402
from bucketing.install import FsdpPreBucketingPass, install, installed, uninstall  # noqa: E402
from bucketing.merge import BucketingError  # noqa: E402
from bucketing.plan import FsdpPlanner, plan_fsdp_buckets  # noqa: E402
from bucketing.prebucket import pre_bucket_fsdp_collectives  # noqa: E402
from bucketing.report import BucketingReport, BucketMember, Decision  # noqa: E402

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
