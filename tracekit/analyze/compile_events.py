"""Graph breaks and recompiles, with their reasons, as summarize reports them (tlparse shows
them too): each ``dynamo_graph_break_reason`` (where the graph broke and why) and each
``recompile_reasons`` (which guard failed) a rank logged (:class:`tracekit.model.CompileEvent`),
ranks that logged the same ones together.

- :func:`breaks_and_recompiles`: the document's section, ``[]`` when no rank logged one.
- its counts in words: :func:`tracekit.render.compile_events_text.counts_text`.
"""

from __future__ import annotations

from typing import Any

from tracekit.analyze.compiled_regions import short_path
from tracekit.model import GRAPH_BREAK, RECOMPILE, CompileEvent, Run
from tracekit.model.rankset import format_ranks


def event_to_dict(e: CompileEvent) -> dict[str, Any]:
    """One event as the document has it: ``at`` from ``torch/`` on for torch's files."""
    return {"compile_id": e.compile_id, "kind": e.kind, "at": short_path(e.at), "reason": e.reason}


def breaks_and_recompiles(run: Run) -> list[dict[str, Any]]:
    """The graph breaks and recompiles of ``run``: one item per set of ranks that logged the same
    ones, in order of their first rank, ``{ranks, graph_breaks, recompiles, events: [{compile_id,
    kind, at, reason}]}``; ranks that logged none are left out; ``[]`` when no rank logged one."""
    groups: dict[tuple[CompileEvent, ...], list[int | None]] = {}
    for r in run.ranks:
        if r.compile_events:
            groups.setdefault(r.compile_events, []).append(r.rank)
    return [
        {
            "ranks": format_ranks(ranks),
            "graph_breaks": sum(e.kind == GRAPH_BREAK for e in events),
            "recompiles": sum(e.kind == RECOMPILE for e in events),
            "events": [event_to_dict(e) for e in events],
        }
        for events, ranks in groups.items()
    ]
