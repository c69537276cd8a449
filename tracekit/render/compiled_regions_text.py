"""The "Compiled regions" section of summarize's report: the frames dynamo compiled, when no
graph has a bucketing outcome (:func:`tracekit.analyze.compiled_regions.compiled_regions`)."""

from __future__ import annotations

from typing import Any

from tracekit.model.nouns import plural
from tracekit.render.text import heading, ranks_cell, table

#: A frame compile's status, as the table says it.
STATUS_TEXT = {"compiled": "compiled", "eager": "fell back to eager", "failed": "failed to compile"}
HEADERS = ["compile id", "frame", "status", "params (bytes)", "collectives", "graph break at", "why"]
#: A graph break's or failure's reason is cut at this many characters in the table (JSON has it whole).
MAX_REASON = 48
#: A graph break's place is cut (at its start) to this many characters.
MAX_AT = 64


def _frame_cell(f: dict[str, Any]) -> str:
    where = f.get("where") or ""
    tail = where.replace("\\", "/").rsplit("/", 1)[-1]  # file.py:line, not the whole path (JSON has it)
    return f"{f.get('name') or '-'} ({tail})" if tail else f.get("name") or "-"


def _at(where: str | None) -> str:
    if not where:
        return "-"
    return where if len(where) <= MAX_AT else "..." + where[-(MAX_AT - 3) :]


def _reason(f: dict[str, Any]) -> str:
    why = f.get("reason") or "-"
    return why if len(why) <= MAX_REASON else why[: MAX_REASON - 3] + "..."


def _bytes(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def render_compiled_regions(regions: dict[str, Any], fmt: str) -> str:
    """The section: a table per group of ranks, then one line of totals (the first group's)."""
    out = ["\n" + heading("Compiled regions (compilation_metrics, dynamo_output_graph, graph breaks)", fmt)]
    many = len(regions["groups"]) > 1
    for g in regions["groups"]:
        if many or fmt == "table":
            cell = ranks_cell(g["ranks"])
            out.append(f"{cell if cell == 'rank not logged' else 'ranks ' + cell}:\n")
        rows = [
            [
                f["compile_id"],
                _frame_cell(f),
                STATUS_TEXT.get(f["status"], f["status"]),
                f"{f['params']} ({_bytes(f['param_bytes'])})" if f["status"] == "compiled" else "-",
                f["collectives"] if f["status"] == "compiled" else "-",
                _at(f.get("break_at")),
                _reason(f),
            ]
            for f in g["frames"]
        ]
        out.append(table(rows, HEADERS, fmt))
    total = regions["param_bytes"]
    parts = [
        f"{plural(regions['compiled'], 'region')} compiled, taking in "
        + (f"{total:,} bytes of parameters" if total is not None else "parameters of symbolic size"),
        f"{plural(regions['eager'], 'frame')} fell back to eager",
        f"{regions['failed']} failed to compile",
        f"{plural(regions['collectives'], 'collective')} in compiled graphs",
    ]
    out.append("\n" + "; ".join(parts) + "; params (bytes): the graph's parameter inputs and their size\n")
    return "".join(out)
