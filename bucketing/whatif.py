"""What would have put a lone collective into a bucket, each answer checked by planning again.

- :meth:`WhatIf.cap_that_merges`: the smallest cap above the current one at which the planner
  buckets a collective that stayed alone for ``over_cap``. Greedy bucketing only changes where
  a cap crosses the size of some window of adjacent candidates, and whether the collective
  joins a bucket depends only on the windows that end at most one past it (a cap crossing an
  earlier window moves where the buckets before it start), so the candidates are the sizes of
  those windows, in ascending order; each is planned, and the first at which it is bucketed is
  the answer (None when none of the first ``max_plans`` does). Plans are kept per cap, so collectives that share a window size share
  the plan, and a graph gets at most ``budget`` plans in all.
- :meth:`WhatIf.bucket_mode_merges`: whether another ``bucket_mode`` (inductor's
  ``aten_distributed_optimizations.bucket_mode``, e.g. ``custom_ops_multidtype`` for a
  ``dtype_break``) buckets it at the same cap.

For example, at a 0.1 MB cap an all-gather of 0.125 MB between two of 0.001 MB stays alone;
the windows up to it and its next neighbour are 0.126, 0.127, ... MB, and planning at 0.126 MB
buckets it.
"""

from __future__ import annotations

import math

import torch.fx as fx

from bucketing.plan import FsdpPlanner, _adjacent_runs
from bucketing.sizes import MB


def cap_mb_for(n_bytes: int) -> float:
    """The smallest cap with 3 decimals (MB) that admits a bucket of ``n_bytes``."""
    cap = math.ceil(n_bytes * 1000 / MB) / 1000
    while int(cap * MB) < n_bytes:
        cap = round(cap + 0.001, 3)
    return cap


class WhatIf:
    """What-ifs on one planner's graph (see the module docstring)."""

    def __init__(self, planner: FsdpPlanner, *, budget: int = 64):
        self.planner = planner
        self.by_name = {n.name: n for n in planner.nodes}
        self.budget = budget
        self.exhausted = False  # True once a what-if went unanswered for lack of budget
        self._other_modes: dict[str, FsdpPlanner] = {}
        self._bucketed: dict[tuple[str, float], set[fx.Node]] = {}  # (bucket mode, cap) -> bucketed nodes
        self._runs: dict[int, tuple[list, int]] | None = None  # collective id -> (its run, position)

    def _bucketed_at(self, planner: FsdpPlanner, cap_mb: float) -> set[fx.Node] | None:
        """The nodes bucketed at ``cap_mb`` (planners of one graph share its nodes); None once
        the plan budget is spent."""
        key = (planner.bucket_mode, cap_mb)
        found = self._bucketed.get(key)
        if found is None:
            if len(self._bucketed) >= self.budget:
                self.exhausted = True
                return None
            plan = planner.plan_nodes(lambda _index: cap_mb)
            found = self._bucketed[key] = {n for buckets in plan.buckets.values() for b in buckets for n in b}
        return found

    def _run_of(self, cid: int) -> tuple[list, int] | None:
        if self._runs is None:
            self._runs = {}
            for cands in self.planner.candidates.values():
                for run in _adjacent_runs(cands, {}):
                    for i, c in enumerate(run):
                        self._runs[c.coll] = (run, i)
        return self._runs.get(cid)

    def cap_that_merges(
        self, name: str, cap_mb: float, *, max_plans: int = 16, max_width: int = 16
    ) -> float | None:
        """The smallest cap (MB, 3 decimals) above ``cap_mb`` at which ``name`` is bucketed."""
        node = self.by_name[name]
        found = self._run_of(self.planner.ids[node])
        if found is None:
            return None
        run, pos = found
        floor = int(cap_mb * MB)
        sizes = set()
        # every window of two or more that ends at most one past it: where a cap crosses the
        # size of one of those, the greedy fill changes the buckets up to (and so around) it
        for end in range(1, min(len(run), pos + 2)):
            total = run[end].n_bytes
            for start in range(end - 1, max(-1, end - max_width), -1):
                total += run[start].n_bytes
                if total > floor:
                    sizes.add(total)
        for n_bytes in sorted(sizes)[:max_plans]:
            cap = cap_mb_for(n_bytes)
            if cap <= cap_mb:
                continue
            bucketed = self._bucketed_at(self.planner, cap)
            if bucketed is None:
                return None
            if node in bucketed:
                return cap
        return None

    def bucket_mode_merges(self, name: str, cap_mb: float, bucket_mode: str) -> bool:
        """Whether planning with ``bucket_mode`` at ``cap_mb`` buckets ``name``."""
        other = self._other_modes.get(bucket_mode)
        if other is None:
            other = self._other_modes[bucket_mode] = FsdpPlanner(
                self.planner.gm, self.planner.mode, bucket_mode
            )
        bucketed = self._bucketed_at(other, cap_mb)
        return bucketed is not None and self.by_name[name] in bucketed
