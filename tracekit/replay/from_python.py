"""``tracekit.replay_run``: the replay of ``tracekit replay PATH... --format json``, called from
Python (a notebook), returning the same ``tracekit.replay`` document; with ``recommend`` the cap
grid, its Pareto front and the cap to use, as ``--recommend``. Imports torch when called."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def replay_run(
    paths: str | Iterable[str],
    caps: Iterable[float | None] = (),
    *,
    recommend: bool = False,
    memory_budget_gb: float | None = None,
    rank: int | None = None,
    overlap: bool | None = None,
    gpu: str = "H100",
    interconnect: str | None = None,
    group_size: int | None = None,
    gpus_per_node: int | None = None,
) -> dict[str, Any]:
    """Replay the graphs of ``paths`` (one rank: ``rank``, default the lowest) at the recorded
    cap, then at ``caps`` (MB; None is torch's automatic cap). ``recommend``: the cap grid
    (1 MB..2 GB and ``caps``) with torch's overlap scheduler, then ``pareto_front`` and
    ``recommendation`` (None when nothing fits ``memory_budget_gb``). Raises ValueError for a
    bad value and FileNotFoundError for a missing path, as the command refuses them."""
    import math
    import os

    from bucketing.compat import check_torch

    check_torch()  # without a supported torch: UnsupportedTorch, before any work
    from tracekit.model import Diagnostics
    from tracekit.read.pairing import NotPrebucketedSource
    from tracekit.read.reader import graph_and_not_prebucketed_sources
    from tracekit.replay import comm_estimate as ce
    from tracekit.replay.engine import replay_sources
    from tracekit.replay.not_prebucketed_graphs import replay_not_prebucketed
    from tracekit.replay.recommend import cap_grid
    from tracekit.replay.results import CapRequest, ReplayOptions, cap_labels, replay_document
    from tracekit.replay.selection import replay_sources_for
    from tracekit.replay.step_coverage import finish_document

    paths = [paths] if isinstance(paths, (str, os.PathLike)) else [os.fspath(p) for p in paths]
    for p in paths:
        if not os.path.exists(p):
            raise FileNotFoundError(f"no such file or directory: {p}")
    requests = [CapRequest(c) for c in caps]
    for c in requests:
        if c.mb is not None and not (math.isfinite(c.mb) and c.mb > 0):
            raise ValueError(f"cap {c.mb!r} MB: a cap is a finite number of MB above 0")
    if memory_budget_gb is not None and not (math.isfinite(memory_budget_gb) and memory_budget_gb > 0):
        raise ValueError(f"memory_budget_gb {memory_budget_gb!r}: a finite number of GB above 0")
    given = [c.mb for c in requests if c.mb is not None]
    if recommend:
        requests = [CapRequest(None)] + [CapRequest(mb) for mb in cap_grid(given)]
    options = ReplayOptions(
        caps=requests,
        overlap=True if recommend and overlap is None else overlap,
        gpu=gpu,
        hardware=ce.Hardware(
            interconnect=None if interconnect is None else ce.interconnect_name(interconnect),
            group_size=group_size,
            gpus_per_node=gpus_per_node,
        ),
    )
    diag = Diagnostics()
    mixed = replay_sources_for(paths, rank=rank, diagnostics=diag, reader=graph_and_not_prebucketed_sources)
    sources = [s for s in mixed if not isinstance(s, NotPrebucketedSource)]
    not_prebucketed = replay_not_prebucketed(
        [s for s in mixed if isinstance(s, NotPrebucketedSource) and s.final.collectives], options
    )
    from tracekit.replay.process_groups import table_for

    options.groups = table_for(paths, mixed)  # a mesh: every group's size and members, as the command
    results = replay_sources(sources, options)
    mesh = any(r.mesh_not_prebucketed for r in results)
    if mesh:  # a mesh's what-ifs at the other caps too (--recommend: the caps given, not its grid)
        from tracekit.replay.mesh_what_ifs import add_at_caps

        asked = (
            frozenset(c.label for c in requests if c.mb is not None and c.mb in given) if recommend else None
        )
        add_at_caps(results, options, cap_labels(options)[1:], asked)
    doc = replay_document(results, options, {"paths": paths, "notes": [], "diagnostics": diag.to_dict()})
    finish_document(doc, not_prebucketed, recommend, memory_budget_gb)  # the whole step, every graph
    if recommend and mesh:  # and at the cap it recommends
        from tracekit.replay.mesh_what_ifs import add_at_recommended_cap

        add_at_recommended_cap(results, options, cap_labels(options)[1:], doc)
    return doc


__all__ = ["replay_run"]
