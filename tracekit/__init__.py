"""tracekit: read torch.compile's structured logs (TORCH_TRACE) of every rank and tell what FSDP
collective bucketing did, what another cap would do, and what changed between two runs.

Importing tracekit never imports torch; only replay does, when it runs.
"""

from __future__ import annotations

from tracekit.model import CollectiveSize, Counts, Diagnostics, Graph, Rank, Run, Sizes

#: The release, as pyproject.toml's [project] version says (tests/project/test_version.py).
__version__ = "0.1.0"

__all__ = [
    "__version__",
    "Counts",
    "CollectiveSize",
    "Diagnostics",
    "Graph",
    "Rank",
    "Run",
    "Sizes",
    "load",
    "records",
    "recommend",
    "replay_run",
]


def load(paths, *, jobs: int | None = None, strict: bool = False, progress=None) -> Run:
    """Read log files, ``.gz`` logs or directories of rank logs into a :class:`Run`.

    ``jobs``: worker processes (default: the cores); ``strict``: raise
    ``tracekit.read.reader.StrictError`` on any bad input; ``progress``: see ``tracekit.read.reader.load``.
    Raises ``FileNotFoundError`` when a path does not exist, or a directory holds no log file:
    it never returns an empty Run for a typo; ``ValueError`` when the files hold no compile log
    (an empty file, a foreign one), in the words ``tracekit summarize`` exits with.
    """
    from tracekit.read.reader import checked_load

    return checked_load(paths, jobs=jobs, strict=strict, progress=progress)


def replay_run(paths, caps=(), **options):
    """The replay of ``tracekit replay PATH... --format json`` as a ``tracekit.replay``
    document (imports torch): see :func:`tracekit.replay.from_python.replay_run`."""
    from tracekit.replay.from_python import replay_run as _replay_run

    return _replay_run(paths, caps, **options)


def recommend(doc, memory_budget_gb: float | None = None):
    """The cap to use from a replay document's step (``replay_run(..., recommend=True)`` or a
    saved ``--format json``): the recorded cap when no cap is faster, else the fastest within
    ``memory_budget_gb``; None when nothing fits. No torch: :func:`tracekit.replay.recommend.recommend`."""
    from tracekit.replay.recommend import recommend as _recommend

    return _recommend(doc["totals"]["step"], memory_budget_gb)


def __getattr__(name: str):
    if name == "records":  # tracekit.records, imported on first use (no torch, no pandas)
        import importlib

        return importlib.import_module("tracekit.records")
    raise AttributeError(f"module 'tracekit' has no attribute {name!r}")
