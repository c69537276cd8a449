"""What a pre-bucketing rewrite did, in the shape replay's documents give it: the collectives
before and after by type, as summarize counts them, and the result of applying the rewrite to
a fresh rebuild (``--verify``)::

    collective_counts(report)  ->  {"all_gather": {"before": 12, "after": 3}, "reduce_scatter": ..., "all_reduce": ...}
    applied_result(report, gm, planned)  ->  {"ok": True, "lint": "ok", "rewritten": ..., "matches_plan": ...}
"""

from __future__ import annotations

from typing import Any

import torch.fx as fx

from tracekit.model import COLLECTIVE_TYPES, SHORT_NAMES


def collective_counts(report: Any) -> dict[str, dict[str, int]]:
    """A ``BucketingReport``'s counts by long type name: ``{"all_gather": {"before", "after"}}``."""
    return {
        t: {
            "before": report.counts_before.get(SHORT_NAMES[t], 0),
            "after": report.counts_after.get(SHORT_NAMES[t], 0),
        }
        for t in COLLECTIVE_TYPES
    }


def applied_result(report: Any, gm: fx.GraphModule, planned: dict[str, dict[str, int]]) -> dict[str, Any]:
    """The rewrite applied to ``gm`` (linted already): its counts and whether they are the plan's."""
    counts = collective_counts(report)
    return {
        "ok": True,
        "lint": "ok",
        "rewritten": report.rewritten,
        "collectives": counts,
        "matches_plan": counts == planned,
        "nodes_after": len(gm.graph.nodes),
    }


__all__ = ["applied_result", "collective_counts"]
