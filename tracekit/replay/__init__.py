"""``tracekit replay``: rebuild recorded graphs from their ``print_readable`` text and re-run
FSDP collective bucketing on them with other caps. Uses torch (only this package does), and
imports it only when a function below runs.

Modules, in the order data flows (:mod:`~tracekit.replay.run` drives them: from the logs to the
``tracekit.replay/3`` document, for ``tracekit replay`` and ``tracekit.replay_run`` alike):

- :mod:`~tracekit.replay.selection`: which recorded outcomes (with their graph texts and symbol
  hints, read in one pass by :func:`tracekit.read.reader.graph_sources`) to replay;
- :mod:`~tracekit.replay.graph_text` (with :mod:`~tracekit.replay.annotations` and
  :mod:`~tracekit.replay.symbols`): the safe parser of graph text into a ``GraphModule`` with
  fake ``meta["val"]``;
- :mod:`~tracekit.replay.engine`: reproduce the recorded cap, plan other caps, ``--apply``,
  each graph with a :class:`~tracekit.replay.replayer.GraphReplayer`; the results and the
  document are :mod:`~tracekit.replay.results`;
- :mod:`~tracekit.replay.overlap_schedule`: torch's own overlap scheduler on each cap's
  pre-bucketed graph (recorded compute estimates, NCCL model, roofline at ``gpu``): the final
  collectives, exposed communication, peak memory and a timeline per cap;
- :mod:`~tracekit.replay.recommend`: ``--recommend``'s cap grid, Pareto front and choice;
- :mod:`~tracekit.replay.comm_estimate`: torch's NCCL model, what-if hardware;
- :mod:`~tracekit.replay.not_prebucketed_graphs`: graphs torch never pre-bucketed, and the forward-groups what-if;
- :mod:`~tracekit.replay.notes`: the document's notes (nothing to replay and why, bad input,
  how far the hardware what-ifs reach);
- :mod:`~tracekit.render.plot`: ``--plot`` (matplotlib, optional).

Python API::

    import tracekit.replay
    run = tracekit.replay.replay("logs/job", cap_mb=[16, 64], auto=True)
    run.graphs[0].reproduced, run.graphs[0].replays[0].estimated_comm_ms
    run.graphs[0].final_reproduced, run.graphs[0].replays[0].schedule.exposed_ms
    run.to_dict()                                # the tracekit.replay/3 JSON document
    tracekit.replay.not_prebucketed("logs/job", cap_mb=[64])   # graphs torch never pre-bucketed
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any


def replay(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    *,
    cap_mb: Iterable[float] = (),
    auto: bool = False,
    interconnect: str | None = None,
    group_size: int | None = None,
    gpus_per_node: int | None = None,
    apply: bool = False,
    rank: int | None = None,
    all_ranks: bool = False,
    graphs: Iterable[str] = (),
    symbols: Mapping[str, int] | None = None,
    mode: str | None = None,
    bucket_mode: str | None = None,
    overlap: bool | None = None,
    gpu: str = "H100",
    scheduler_overrides: Mapping[str, Any] | None = None,
    jobs: int = 1,
) -> Any:
    """Replay the recorded outcomes of ``paths``: a :class:`results.ReplayRun`.

    Same meaning as the command's options (``graphs`` as ``"0/0"`` or ``"0/0:1"``; ``jobs``:
    processes for each graph's distinct caps, this one and ``jobs - 1`` forked workers,
    :mod:`~tracekit.replay.parallel_caps`). Without
    torch, or on a release that lacks what it calls (2.13 to 2.15 have it), raises
    :class:`bucketing.compat.UnsupportedTorch` (``pip install 'tracekit[replay]'``).
    """
    from bucketing.compat import check_torch

    check_torch()  # without a supported torch: UnsupportedTorch, before any work
    from tracekit.model import Diagnostics
    from tracekit.replay import comm_estimate as ce
    from tracekit.replay.engine import replay_sources
    from tracekit.replay.results import CapRequest, ReplayOptions, ReplayRun
    from tracekit.replay.selection import parse_graph_selector, replay_sources_for

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    caps = [CapRequest(float(c)) for c in cap_mb] + ([CapRequest(None)] if auto else [])
    options = ReplayOptions(
        caps=caps,
        hardware=ce.Hardware(
            interconnect=None if interconnect is None else ce.interconnect_name(interconnect),
            group_size=group_size,
            gpus_per_node=gpus_per_node,
        ),
        apply=apply,
        mode=mode,
        symbols=dict(symbols or {}),
        bucket_mode=bucket_mode,
        overlap=overlap,
        gpu=gpu,
        scheduler_overrides=dict(scheduler_overrides or {}),
        jobs=max(1, int(jobs)),
    )
    diag = Diagnostics()
    sources = replay_sources_for(
        [os.fspath(p) for p in paths],
        rank=rank,
        all_ranks=all_ranks,
        graphs=[parse_graph_selector(g) for g in graphs],
        diagnostics=diag,
    )
    from tracekit.replay.process_groups import table_for

    options.groups = table_for([os.fspath(p) for p in paths], sources)
    results = replay_sources(sources, options)
    if any(r.mesh_not_prebucketed for r in results):  # a mesh's what-ifs at the other caps too
        from tracekit.replay.mesh_what_ifs import add_at_caps
        from tracekit.replay.results import cap_labels

        add_at_caps(results, options, cap_labels(options)[1:])
    return ReplayRun(results, options, diag)


def not_prebucketed(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    *,
    cap_mb: Iterable[float] = (),
    auto: bool = False,
    forward_groups: bool = True,
    apply: bool = False,
    rank: int | None = None,
    all_ranks: bool = False,
    graphs: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """The graphs of ``paths`` torch never pre-bucketed, replayed (``replay``'s
    ``not_prebucketed`` entries, :func:`tracekit.replay.not_prebucketed_graphs.replay_not_prebucketed`): at each
    cap as torch runs them and, with ``forward_groups``, given the forward's FSDP groups."""
    from tracekit.model import Diagnostics
    from tracekit.read.pairing import NotPrebucketedSource
    from tracekit.read.reader import graph_and_not_prebucketed_sources
    from tracekit.replay.not_prebucketed_graphs import FORWARD_GROUPS, replay_not_prebucketed
    from tracekit.replay.results import CapRequest, ReplayOptions
    from tracekit.replay.selection import parse_graph_selector, replay_sources_for

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    options = ReplayOptions(
        caps=[CapRequest(float(c)) for c in cap_mb] + ([CapRequest(None)] if auto else []), apply=apply
    )
    mixed = replay_sources_for(
        [os.fspath(p) for p in paths],
        rank=rank,
        all_ranks=all_ranks,
        graphs=[parse_graph_selector(g) for g in graphs],
        diagnostics=Diagnostics(),
        reader=graph_and_not_prebucketed_sources,
    )
    sources = [s for s in mixed if isinstance(s, NotPrebucketedSource) and s.final.collectives]
    return replay_not_prebucketed(sources, options, (FORWARD_GROUPS,) if forward_groups else ())


__all__ = ["not_prebucketed", "replay"]
