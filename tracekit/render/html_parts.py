"""The small pieces of the report page (:mod:`tracekit.render.html`): escaped text and cells,
rank sets as ranges, tables cut at a fixed number of rows, and the cells of a divergence row.

Everything given them comes from an untrusted document: every string goes through
:func:`html.escape` (:func:`esc`), in text and in attributes, and a rank set naming more than
:data:`MAX_RANKS` ranks is shown as it is, never expanded.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from typing import Any

from tracekit.analyze.documents import rank_set
from tracekit.model import COLLECTIVE_TYPES, SHORT_NAMES
from tracekit.model.nouns import graph_label
from tracekit.model.rankset import MAX_RANK, format_ranks

#: Rows per table (divergence, did nothing, final schedule, diagnostics examples).
MAX_ROWS = 400
#: Rank sets naming more ranks are not expanded (a document is untrusted: "0-999999999").
MAX_RANKS = MAX_RANK
RANGE = re.compile(r"(\d+)(?:-(\d+))?")


def esc(value: Any) -> str:
    """Text or attribute value, escaped (quotes included)."""
    return html.escape(str(value), quote=True)


def cell(value: Any) -> str:
    """A value for a table cell, escaped; ``-`` for none."""
    return "-" if value is None else esc(value)


def rank_span(text: str) -> int:
    """How many ranks a range string names (``"0-3,5"``: 5), counted without expanding it."""
    return sum(int(b or a) - int(a) + 1 for a, b in RANGE.findall(text))


def checked_ranks_text(value: Any) -> str:
    """A rank set of a saved document, read and written again as ranges, whichever way the
    document spells it (a string naming more than :data:`MAX_RANKS` ranks, or none it can read,
    is shown as it is); :func:`tracekit.render.cells.ranks_as_ranges` trusts a fresh one."""
    if isinstance(value, str) and rank_span(value) > MAX_RANKS:
        return value
    members = rank_set(value)
    if isinstance(value, str) and value.strip() and not members:
        return value  # not readable as ranks (e.g. beyond tracekit.model.rankset.MAX_RANK): as written
    return format_ranks(members)


def rank_count(value: Any) -> int:
    """How many ranks a rank set names (:func:`tracekit.analyze.documents.rank_set`)."""
    return len(rank_set(value))


# --- small HTML pieces -----------------------------------------------------------------------------


def table(
    headers: Iterable[str],
    rows: Iterable[Iterable[str]],
    *,
    row_attrs: Iterable[str] | None = None,
    numeric: Iterable[int] = (),
) -> str:
    """A table; cells are HTML already (escape them before), headers are escaped here."""
    nums = set(numeric)
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    attrs = list(row_attrs) if row_attrs is not None else None
    body = []
    for i, row in enumerate(rows):
        cells = "".join(
            f'<td class="num">{c}</td>' if j in nums else f"<td>{c}</td>" for j, c in enumerate(row)
        )
        body.append(f"<tr{attrs[i] if attrs else ''}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def cut_rows(items: list[Any], limit: int = MAX_ROWS) -> tuple[list[Any], str]:
    """The first ``limit`` items, and the line that says how many of how many are shown (``""``
    when all are)."""
    if len(items) <= limit:
        return items, ""
    return items[:limit], f'<p class="muted">first {limit} of {len(items)} shown</p>'


def where_cells(graph: dict[str, Any]) -> tuple[str, str]:
    """The compile id and graph (``forward``, ``backward``, N) cells of a graph or an item."""
    gi = graph.get("graph_index")
    return esc(graph.get("compile_id", "?")), esc(graph_label(gi) if isinstance(gi, int) else gi)


def fmt_bytes(n: Any) -> str:
    """A byte count with thousands separators (``301,990 B``); anything else escaped, ``-`` for none."""
    return f"{n:,} B" if isinstance(n, int) else esc(n if n is not None else "-")


def collective_text(v: Any) -> str:
    """A scheduled collective ``{kind, group, bytes}`` (or any value) as short text."""
    if v is None:
        return "end of list"
    if isinstance(v, dict) and "state" in v:  # a cache event of compile_divergence
        return f"{v.get('compile_id', '-')} {v.get('state')}"
    if isinstance(v, dict):
        kind = SHORT_NAMES.get(str(v.get("kind")), v.get("kind", "?"))
        group = f" group {v['group']}" if v.get("group") is not None else ""
        size = f" {v['bytes']:,} B" if isinstance(v.get("bytes"), int) else ""
        rest = {k: x for k, x in v.items() if k not in ("kind", "group", "bytes")}
        extra = "".join(f", {k}={x}" for k, x in rest.items())
        return f"{kind}{group}{size}{extra}"
    if isinstance(v, list):
        return ",".join(map(str, v))
    return str(v)


def final_counts_text(final: Any) -> str:
    """A final schedule's counts by kind (``AG 1 RS 1 AR 0``); ``-`` without them."""
    if not isinstance(final, dict) or not isinstance(final.get("counts"), dict):
        return "-"
    c = final["counts"]
    return " ".join(f"{SHORT_NAMES[t]} {c[t]}" for t in COLLECTIVE_TYPES if t in c)


def majority_cell(d: dict[str, Any], items: list[dict[str, Any]]) -> str:
    """The ranks a divergence item is compared with; a tie marked as no majority in a table that
    also holds rows with one (a table of ties only says "other ranks" in its header:
    :mod:`tracekit.render.majority_columns`, as the text does)."""
    mixed = any(x.get("majority", True) for x in items)
    tie = "" if d.get("majority", True) or not mixed else ' <span class="muted">(tie: no majority)</span>'
    return ranks_cell(d.get("majority_ranks")) + tie


def compile_where(d: dict[str, Any]) -> tuple[str, str]:
    """Compile id and graph cells of a compile-divergence item (about a whole rank's compile
    ids or cache events, not one graph): where the sequences first differ."""
    if "compile_id" in d:
        return where_cells(d)
    v = d.get("value") if isinstance(d.get("value"), dict) else d.get("majority_value")
    cid = v.get("compile_id") if isinstance(v, dict) else (d.get("value") or d.get("majority_value"))
    return (esc(cid) if isinstance(cid, str) else "all", "all")


def ranks_cell(value: Any) -> str:
    """A rank set as ranges in a monospace cell (``-`` for none)."""
    text = checked_ranks_text(value)
    return f'<span class="mono">{esc(text) or "-"}</span>'


def row_ranks(items: list[dict[str, Any]], where: str) -> list[str]:
    """Each item's row attributes: its ranks (``data-ranks``, which the rank finder reads) and
    ``data-where``."""
    return [
        f' data-ranks="{esc(checked_ranks_text(d.get("ranks")))}" data-where="{esc(where)}"' for d in items
    ]
