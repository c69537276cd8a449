"""One explain, from the logs to the ``tracekit.explain/1`` document: :func:`run`, what
``tracekit explain`` and :func:`explain` (the Python API) both call.

Reads the selected graphs (:func:`tracekit.replay.selection.read_selected`: one rank's, the
lowest or ``rank``), explains each recorded outcome and each graph torch never pre-bucketed in
its place in the logs (:func:`tracekit.explain.buckets.explain_mixed`, on a mesh with the run's
process groups), with the notes (nothing to explain and why, bad input) and the torch section.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tracekit.model.findings import Finding
from tracekit.replay.selection import Progress, Selection


def run(
    paths: list[str], selection: Selection | None = None, progress: Progress | None = None
) -> dict[str, Any]:
    """The ``tracekit.explain/1`` document of ``paths``, on the graphs of ``selection`` (default:
    the lowest rank's); ``progress.graphs(done, total)`` over the graphs. Raises
    :class:`~tracekit.replay.selection.SelectionError` when the logs cannot be read or the
    selection names nothing there, :class:`~tracekit.replay.notes.NoLog` when the input holds no
    compile log; a graph that cannot be explained is reported in the document."""
    import torch

    from tracekit.explain.buckets import explain_mixed, not_prebucketed_of
    from tracekit.model import Diagnostics
    from tracekit.read.pairing import NotPrebucketedSource
    from tracekit.replay.notes import bad_input_note, nothing_selected
    from tracekit.replay.process_groups import table_for
    from tracekit.replay.selection import read_selected
    from tracekit.replay.torch_versions import torch_section

    paths = list(paths)
    progress = progress or Progress()
    diag = Diagnostics()
    mixed = read_selected(paths, selection or Selection(), diag, progress)
    sources = [s for s in mixed if not isinstance(s, NotPrebucketedSource)]
    notes: list[str | Finding] = []  # a Finding: said by the caller (tracekit.render.summary_words)
    if not sources and not not_prebucketed_of(mixed):  # why there is nothing to explain (NoLog: no log)
        notes.append(nothing_selected(paths))
    if diag.total:
        notes.append(bad_input_note(diag))
    # recorded outcomes and graphs torch never pre-bucketed, in their place in the logs
    doc = explain_mixed(
        mixed,
        extra={"paths": paths, "notes": notes, "diagnostics": diag.to_dict()},
        progress=progress.graphs,
        groups=table_for(paths, mixed),  # a mesh: each group's role and members
    )
    doc["torch"] = torch_section(doc["graphs"], torch.__version__)
    return doc


def explain(paths: Iterable[str], *, rank: int | None = None, graphs: Iterable[str] = ()) -> dict[str, Any]:
    """Python API: the ``tracekit.explain/1`` document of the logs at ``paths`` (one rank:
    ``rank`` or the lowest; ``graphs`` as ``"0/0"`` or ``"0/0:1"``), graphs torch never
    pre-bucketed included (:mod:`tracekit.explain.not_prebucketed`): what ``tracekit explain
    --format json`` gives (:func:`run`). Without a supported torch, raises
    :class:`bucketing.compat.UnsupportedTorch` before any work."""
    from bucketing.compat import check_torch

    check_torch()
    from tracekit.replay.selection import parse_graph_selector

    return run(list(paths), Selection(rank, graphs=[parse_graph_selector(g) for g in graphs]))


def all_reproduced(doc: dict[str, Any]) -> bool:
    """Every graph of an explain document rebuilt, its buckets those recorded (one of a log where
    pre-bucketing never ran is not compared, never blamed): the command's exit status 0."""
    return all(g["error"] is None and (g["reproduced"] or g.get("not_compared")) for g in doc["graphs"])


__all__ = ["all_reproduced", "explain", "run"]
