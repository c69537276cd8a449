"""Totals over every rank's pre-bucketing outcomes: graphs, collectives and MB before and
after, the compile counters (:func:`totals`)."""

from __future__ import annotations

from typing import Any

from tracekit.analyze.not_prebucketed import unmerged_kinds
from tracekit.model import COLLECTIVE_TYPES, Graph, Run


def _sum_sizes(graphs: list[Graph], after: bool) -> float | None:
    total, any_ = 0.0, False
    for g in graphs:
        if g.sizes_mb is None:
            continue
        lst = g.sizes_mb.after if after else g.sizes_mb.before
        if lst is None:
            continue
        any_ = True
        total += sum(s.size_mb for s in lst)
    return round(total, 3) if any_ else None


def totals(run: Run) -> dict[str, Any]:
    """Counts over every rank's pre-bucketing outcomes: graphs, collectives before/after, MB
    before/after, counters (the document's ``totals`` add the graphs never pre-bucketed:
    :func:`tracekit.analyze.not_prebucketed.table_totals`)."""
    graphs = [g for r in run.ranks for g in r.graphs]
    return {
        "ranks": len(run.ranks),
        "graphs": len(graphs),
        "compiles": sum(r.compiles for r in run.ranks),
        "compiled_graphs": sum(r.compiled_graphs for r in run.ranks),
        "cache_hits": sum(r.cache_hits for r in run.ranks),
        "collectives": {
            t: {
                "before": sum(g.collectives[t].before for g in graphs if t in g.collectives),
                "after": sum(g.collectives[t].after for g in graphs if t in g.collectives),
            }
            for t in COLLECTIVE_TYPES
        },
        "mb_before": _sum_sizes(graphs, after=False),
        "mb_after": _sum_sizes(graphs, after=True),
        "did_nothing": sum(1 for g in graphs if g.did_nothing()),
        # graphs torch never pre-bucketed (tracekit.analyze.not_prebucketed), one per rank and graph
        "not_prebucketed": sum(
            1 for r in run.ranks for f in r.schedules_without_outcome if unmerged_kinds(f)
        ),
    }
