"""The "Graph breaks and recompiles" section of summarize's report: each graph break and
recompile the ranks logged, with where and why
(:func:`tracekit.analyze.compile_events.breaks_and_recompiles`)."""

from __future__ import annotations

from typing import Any

from tracekit.model.nouns import plural
from tracekit.render.compiled_regions_text import shortened
from tracekit.render.text import heading, ranks_cell, table

HEADERS = ["compile id", "what", "where", "why"]
KIND_TEXT = {"graph_break": "graph break", "recompile": "recompile"}
#: A reason is cut at this many characters in the table (JSON has it whole).
MAX_REASON = 100
#: A place is cut (at its start) to this many characters.
MAX_AT = 64


def render_breaks_and_recompiles(items: list[dict[str, Any]], fmt: str) -> str:
    """The section: a table per set of ranks that logged the same events, and their counts."""
    out = ["\n" + heading("Graph breaks and recompiles (dynamo_graph_break_reason, recompile_reasons)", fmt)]
    for item in items:
        cell = ranks_cell(item["ranks"])
        ranks = cell if cell == "rank not logged" else "ranks " + cell
        out.append(f"{ranks}: {counts_text(item)}\n")
        rows = [
            [
                e["compile_id"],
                KIND_TEXT.get(e["kind"], e["kind"]),
                shortened(e["at"], MAX_AT, from_start=True),
                shortened(e["reason"], MAX_REASON),
            ]
            for e in item["events"]
        ]
        out.append(table(rows, HEADERS, fmt))
    if any(item["recompiles"] for item in items):
        out.append("\nrecompile why: the compile id whose guard failed, then the guard\n")
    return "".join(out)


def counts_text(item: dict[str, Any]) -> str:
    """``1 graph break, 1 recompile`` (a kind with none left out)."""
    parts = []
    if item["graph_breaks"]:
        parts.append(plural(item["graph_breaks"], "graph break"))
    if item["recompiles"]:
        parts.append(plural(item["recompiles"], "recompile"))
    return ", ".join(parts)
