"""Make torch.compile use our pass instead of torch's own FSDP pre-bucketing.

``install()`` sets inductor's ``post_grad_custom_post_pass`` to a :class:`FsdpPreBucketingPass`
(kept alongside a custom pass already there) and turns off
``aten_distributed_optimizations.pre_bucketing_fsdp_collectives``, so pre-bucketing runs once,
in post-grad, right before inductor's topological sort and its overlap scheduler.
``uninstall()`` restores what was there; ``installed()`` does both around a block.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import torch.fx as fx
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files

if TYPE_CHECKING:
    from bucketing.report import BucketingReport

_SOURCES = tuple(sorted(str(p) for p in Path(__file__).resolve().parent.glob("*.py")))


class FsdpPreBucketingPass(CustomGraphPass):
    """Inductor custom post-grad pass running :func:`bucketing.pre_bucket_fsdp_collectives`.

    ``bucket_cap_mb`` / ``mode`` None mean: read torch's
    ``aten_distributed_optimizations.pre_bucketing_fsdp_collectives_bucket_cap_mb`` and
    ``bucket_mode`` at compile time (as torch's pass does), else the automatic cap and "default".
    The cache uuid hashes this package's sources and the two settings.
    """

    def __init__(self, bucket_cap_mb: float | None = None, mode: str | None = None):
        self.bucket_cap_mb = bucket_cap_mb
        self.mode = mode
        self.last_report: BucketingReport | None = None

    def __call__(self, graph: fx.Graph) -> None:
        import torch._inductor.config as inductor_config

        from bucketing.prebucket import pre_bucket_fsdp_collectives

        opts = inductor_config.aten_distributed_optimizations
        cap = self.bucket_cap_mb
        if cap is None:
            cap = opts.pre_bucketing_fsdp_collectives_bucket_cap_mb
        mode = self.mode if self.mode is not None else opts.bucket_mode
        gm = graph.owning_module
        if gm is None:
            return
        self.last_report = pre_bucket_fsdp_collectives(gm, mode=mode, bucket_cap_mb=cap, recompile=False)

    def uuid(self) -> bytes:
        return get_hash_for_files(_SOURCES, extra=f"cap={self.bucket_cap_mb};mode={self.mode}")


_saved: list[tuple[object, bool, FsdpPreBucketingPass]] = []


def _config():
    import torch._inductor.config as inductor_config

    return inductor_config


def install(bucket_cap_mb: float | None = None, mode: str | None = None) -> FsdpPreBucketingPass:
    """Register our pass with inductor and switch torch's pre-bucketing off; returns the pass."""
    config = _config()
    previous_pass = config.post_grad_custom_post_pass
    previous_flag = config.aten_distributed_optimizations.pre_bucketing_fsdp_collectives
    ours = FsdpPreBucketingPass(bucket_cap_mb, mode)
    if previous_pass is None:
        config.post_grad_custom_post_pass = ours
    elif isinstance(previous_pass, (list, tuple)):
        config.post_grad_custom_post_pass = [*previous_pass, ours]
    else:
        config.post_grad_custom_post_pass = [previous_pass, ours]
    config.aten_distributed_optimizations.pre_bucketing_fsdp_collectives = False
    _saved.append((previous_pass, previous_flag, ours))
    return ours


def uninstall() -> None:
    """Undo the latest :func:`install` (no-op when nothing is installed)."""
    if not _saved:
        return
    previous_pass, previous_flag, _ours = _saved.pop()
    config = _config()
    config.post_grad_custom_post_pass = previous_pass
    config.aten_distributed_optimizations.pre_bucketing_fsdp_collectives = previous_flag


@contextlib.contextmanager
def installed(bucket_cap_mb: float | None = None, mode: str | None = None) -> Iterator[FsdpPreBucketingPass]:
    """``with bucketing.installed(): torch.compile(...)(...)`` — install, run, uninstall."""
    ours = install(bucket_cap_mb, mode)
    try:
        yield ours
    finally:
        uninstall()
