"""What a pre-bucketing rewrite did, in the shape replay's documents give it: the collectives
before and after by type, as summarize counts them, and the result of applying the rewrite to
a fresh rebuild (``--verify``), a failure of which is reported, never raised::

    collective_counts(report)  ->  {"all_gather": {"before": 12, "after": 3}, "reduce_scatter": ..., "all_reduce": ...}
    applied_result(rewrite, planned)  ->  {"ok": True, "lint": "ok", "rewritten": ..., "matches_plan": ...}
                                      or  {"ok": False, "error": "BucketingError: ..."}
"""

from __future__ import annotations

from collections.abc import Callable
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


def applied_result(
    rewrite: Callable[[], tuple[Any, fx.GraphModule]], planned: dict[str, dict[str, int]]
) -> dict[str, Any]:
    """Run ``rewrite`` (a fresh rebuild, rewritten: its report and graph), lint its graph, and
    say what it did and whether its counts are the plan's; any failure is the result's error."""
    try:
        report, gm = rewrite()
        gm.graph.lint()
    except Exception as e:  # noqa: BLE001 - any failure of the rewrite is a reported result
        return {"ok": False, "error": f"{type(e).__name__}: {str(e)[:300]}"}
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
