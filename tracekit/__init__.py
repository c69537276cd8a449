"""tracekit: read torch.compile's structured logs (TORCH_TRACE) of every rank and tell what FSDP
collective bucketing did, what another cap would do, and what changed between two runs.

Importing tracekit never imports torch; only replay does, when it runs.
"""

from __future__ import annotations

from tracekit.model import CollectiveSize, Counts, Diagnostics, Graph, Rank, Run, Sizes

__all__ = ["Counts", "CollectiveSize", "Diagnostics", "Graph", "Rank", "Run", "Sizes", "load"]


def load(paths, *, jobs: int | None = None, strict: bool = False, progress=None) -> Run:
    """Read log files, ``.gz`` logs or directories of rank logs into a :class:`Run`.

    ``jobs``: worker processes (default: the cores); ``strict``: raise
    ``tracekit.read.reader.StrictError`` on any bad input; ``progress``: see ``tracekit.read.reader.load``.
    """
    from tracekit.read.reader import load as _load

    return _load(paths, jobs=jobs, strict=strict, progress=progress)
