"""The "majority" columns of the consensus tables, true to the tie rule.

A divergence item compares its ranks with the majority's, or, on a tie (a 2-2 split, two
ranks that differ), with the group of the lowest rank, which is no majority
(:func:`tracekit.analyze.schedule.reference`). A table whose rows are all ties names those
columns "other ranks" and "other value", never "majority"; a table that mixes both keeps
"majority" and marks each tie row.

For example, ranks split 0,2 against 1,3::

    before:  ranks  value  majority ranks          majority value
             1,3    10->1  0,2 (tie: no majority)  8->1
    after:   ranks  value  other ranks  other value
             1,3    10->1  0,2          8->1
"""

from __future__ import annotations

from typing import Any

from tracekit.render.text import ranks_cell


def _all_ties(items: list[dict[str, Any]]) -> bool:
    return bool(items) and not any(d.get("majority", True) for d in items)


def majority_headers(items: list[dict[str, Any]], value: str = "value") -> list[str]:
    """The two column headers for the ranks compared with and their ``value``."""
    who = "other" if _all_ties(items) else "majority"
    return [f"{who} ranks", f"{who} {value}"]


def majority_cell(d: dict[str, Any], items: list[dict[str, Any]], ranks: str | None = None) -> str:
    """The ranks ``d`` is compared with (``ranks``: already as text), marked ``(tie: no
    majority)`` when the table also holds rows with a majority."""
    cell = ranks_cell(d["majority_ranks"] if ranks is None else ranks)
    if d.get("majority", True) or _all_ties(items):
        return cell
    return cell + " (tie: no majority)"
