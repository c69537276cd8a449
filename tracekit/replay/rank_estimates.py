"""Compute estimates aligned across ranks, as torch's overlap scheduler aligns them.

All ranks must make the same scheduling decisions, so when torch's scheduler benchmarks its
compute nodes (``compute_estimator="benchmark"``, the default) it gathers every rank's figures
(``all_gather_object`` on the default group) and gives each node the median over the ranks
(``torch.median`` over dim 0: of an even count, the lower of the two middle values). Each rank's
``fx_compute_nodes_runtime_estimation`` holds its own figures, before that median. So a replay of
one rank's log times the compute nodes with that rank's benchmarks, and a replay that has every
rank's log can time them as torch did: :func:`align_across_ranks`.

Where the ranks' figures agree (a hook's, the roofline's, a cached value), the median is that
figure, and nothing changes. Never imports torch.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any


def lower_median(values: list[float]) -> float:
    """``torch.median``'s answer: the middle value, or the lower of the two middle ones."""
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2]


def align_across_ranks(sources: Iterable[Any]) -> int:
    """Give the graphs of several ranks (sources with ``rank``, ``compile_id``, ``graph_index``,
    ``compute_estimates_us``) each node's median over the ranks, where their figures differ;
    return how many graphs changed. Graphs whose ranks time different sets of nodes (the ranks
    compiled different graphs: torch's gather would not line them up) are left as they are."""
    by_graph: defaultdict[tuple[str, int], list[Any]] = defaultdict(list)
    for src in sources:
        if getattr(src, "compute_estimates_us", None) and src.rank is not None:
            by_graph[(src.compile_id, src.graph_index)].append(src)
    changed = 0
    for group in by_graph.values():
        if len({s.rank for s in group}) < 2:
            continue
        names = list(group[0].compute_estimates_us)
        if any(list(s.compute_estimates_us) != names for s in group):
            continue
        if all(s.compute_estimates_us == group[0].compute_estimates_us for s in group):
            continue
        aligned = {n: lower_median([s.compute_estimates_us[n] for s in group]) for n in names}
        for s in group:
            s.compute_estimates_us = dict(aligned)
        changed += 1
    return changed


__all__ = ["align_across_ranks", "lower_median"]
