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
    "measure",
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


def measure(paths, profiles, *, ranks=None, estimates=None, jobs: int | None = None) -> dict:
    """The document of ``tracekit measure PATH... --profile TRACES --format json`` (the
    ``tracekit.measure/1`` JSON, as a dict), without torch: the compile logs ``paths`` and the
    torch.profiler traces ``profiles`` (files, ``.json.gz``, directories) of the same run, paired
    and measured (:func:`tracekit.analyze.measure.measure`). ``ranks``: only these ranks (None:
    all); ``estimates``: a saved ``tracekit replay --format json`` document of the same logs (its
    path, or the parsed dict) for torch's exposed estimates; ``jobs``: worker processes.

    ``FileNotFoundError`` for a path that does not exist; ``ValueError`` (in the words the
    command exits 2 with) for logs without a compile log, traces that cannot be read or hold no
    event, and an ``estimates`` document that is not a replay of these logs. A measurement that
    paired nothing (the traces of another run or cap) is returned, as the command prints it:
    its verdict says why."""
    import errno
    import os

    from tracekit.analyze.measure import measure_logs
    from tracekit.read.reader import checked_load, path_list
    from tracekit.read.traces import TraceError, read_traces, require_events

    paths, profiles = path_list(paths), path_list(profiles)
    for p in [*paths, *profiles]:
        if not os.path.lexists(p):
            raise FileNotFoundError(errno.ENOENT, "no such file or directory", p)
    run = checked_load(paths, jobs=jobs)
    try:
        traces = require_events(read_traces(profiles, jobs=jobs))
    except TraceError as e:
        raise ValueError(str(e)) from None
    return measure_logs(run, traces, paths, ranks, estimates).document()


def replay_run(
    paths,
    caps=(),
    *,
    recommend: bool = False,
    memory_budget_gb: float | None = None,
    rank: int | None = None,
    all_ranks: bool = False,
    graphs=(),
    what_ifs=(),
    overlap: bool | None = None,
    gpu: str = "H100",
    interconnect: str | None = None,
    group_size: int | None = None,
    gpus_per_node: int | None = None,
    profiles=(),
) -> dict:
    """The replay of ``tracekit replay PATH... --format json``, the same ``tracekit.replay``
    document (imports torch; :func:`tracekit.replay.run.run`, as the command). ``paths`` (one
    rank: ``rank``, default the lowest; or ``all_ranks``; ``graphs`` as ``"0/0"`` or ``"0/0:1"``)
    replayed at the recorded cap, then at ``caps`` (MB; None is torch's automatic cap).
    ``recommend``: the cap grid (1 MB..2 GB and ``caps``) with torch's overlap scheduler, then
    ``pareto_front`` and ``recommendation`` (None when nothing fits ``memory_budget_gb``).
    ``what_ifs``: ``"forward_groups"``, ``"overlap_bucketing"`` for graphs torch never
    pre-bucketed. ``profiles``: the job's torch.profiler traces (files, directories) of the
    recorded cap: adds ``prediction``, the step each cap would measure (docs/predict.md).
    Raises ValueError for a bad value, input that holds no compile log, or a profile that cannot
    predict, and FileNotFoundError for a missing path, as the command refuses them."""
    import os

    from bucketing.compat import check_torch

    check_torch()  # without a supported torch: UnsupportedTorch, before any work
    from tracekit.read.reader import path_list
    from tracekit.render.summary_words import said_notes
    from tracekit.replay.run import RunOptions, run
    from tracekit.replay.selection import Selection, parse_graph_selector

    paths, profiles = path_list(paths), path_list(profiles)
    for p in [*paths, *profiles]:
        if not os.path.exists(p):
            raise FileNotFoundError(f"no such file or directory: {p}")
    options = RunOptions(
        profiles=list(profiles),
        caps=list(caps),
        recommend=recommend,
        memory_budget_gb=memory_budget_gb,
        what_ifs=tuple(what_ifs),
        overlap=overlap,
        gpu=gpu,
        interconnect=interconnect,
        group_size=group_size,
        gpus_per_node=gpus_per_node,
    )
    selection = Selection(rank, all_ranks, [parse_graph_selector(g) for g in graphs])
    doc = run(paths, options, selection)
    doc["notes"] = said_notes(doc["notes"])  # why nothing was replayed, in words
    return doc


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
