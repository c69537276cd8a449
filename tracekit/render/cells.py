"""Cell texts of summary documents, shared by every renderer of them (the summarize and diff
tables, the schedule sections, the HTML report): they work on a document's values, never on
files.

    >>> groups_text(["0", "1"]), value_text("all_gather", {"before": 8, "after": 1})
    ('0, 1', '8->1')
    >>> where_text("rank_0.log", 49), where_text("notes.txt", 0), where_text("", 0)
    ('rank_0.log:49', 'notes.txt', '-')
"""

from __future__ import annotations

from typing import Any

from tracekit.model import COLLECTIVE_TYPES, SHORT_NAMES
from tracekit.model.nouns import plural
from tracekit.model.rankset import format_ranks
from tracekit.render.text import fmt_counts, fmt_mb


def total_mb(sizes: list[dict[str, Any]] | None) -> float | None:
    """The MB of a size list of a document (its entries' ``size_mb`` summed)."""
    return None if sizes is None else round(sum(s["size_mb"] for s in sizes), 3)


def where_text(file: Any, line: Any) -> str:
    """Where a diagnostic points: ``FILE:LINE``, or the file alone when it names no line (a
    whole file: not a log, no entries, another run; its ``line`` is 0 or missing), never
    ``FILE:0``; ``-`` when it names no file either (a missing rank)."""
    if not file:
        return "-"
    whole = not isinstance(line, int) or isinstance(line, bool) or line < 1
    return str(file) if whole else f"{file}:{line}"


def groups_text(groups: list[Any]) -> str:
    """FSDP group names as plain text, for a table cell: ``0, 1`` (torch's log line prints the
    Python list, ``['0', '1']``; a table has no reprs); ``-`` for none."""
    return ", ".join(str(g) for g in groups) or "-"


def bytes_text(n: int | None) -> str:
    """A byte count with thousands separators (``70,988``); ``?`` when unknown."""
    return "?" if n is None else f"{n:,}"


def entry_text(v: dict[str, Any] | None) -> str:
    """One scheduled collective: ``AG 70,988 B (group 0)``; ``end of list`` for None."""
    if v is None:
        return "end of list"
    group = "" if v.get("group") is None else f" (group {v['group']})"
    dtype = "" if v.get("dtype") is None else f" {v['dtype']}"
    return f"{SHORT_NAMES.get(v['kind'], v['kind'])} {bytes_text(v.get('bytes'))} B{dtype}{group}"


def sequence_text(seq: list[list[Any]] | None) -> str:
    """A compared ``final`` value (``[[kind, group, bytes], ...]``) in a few words:
    ``AG 1, RS 1: 373,372 B``; ``no schedule`` for None."""
    if seq is None:
        return "no schedule"
    if not seq:
        return "no collective"
    counts: dict[str, int] = {}
    for entry in seq:
        counts[entry[0]] = counts.get(entry[0], 0) + 1
    kinds = ", ".join(f"{SHORT_NAMES.get(k, k)} {n}" for k, n in counts.items())
    sizes = [entry[2] for entry in seq]
    return f"{kinds}: {'?' if None in sizes else bytes_text(sum(sizes))} B"


def value_text(field: str, v: Any) -> str:
    """A compared value of a graph (:func:`tracekit.model.fields.compared_values`) in a few words."""
    if v is None:
        return "-"
    if field in COLLECTIVE_TYPES:
        return fmt_counts(v)
    if field == "final":
        return sequence_text(v)
    if (
        field.startswith("sizes_mb")
        and isinstance(v, list)
        and all(isinstance(x, list) and len(x) > 1 for x in v)
    ):
        n = len(v)
        return f"{n} collective{'' if n == 1 else 's'}, {fmt_mb(sum(x[1] for x in v))} MB"
    if field == "fsdp_groups":
        return groups_text(v)
    if isinstance(v, list):
        return ",".join(map(str, v))
    if isinstance(v, float):
        return fmt_mb(v)
    return str(v)


def first_diff_text(d: dict[str, Any] | None) -> str:
    """A divergence item's first differing collective, its ranks' value first and the
    majority's second, as the columns beside it: ``#8 AG (before): 0.004 vs - MB``."""
    if not d:
        return "-"
    return (
        f"#{d['index']} {d['type']} ({d.get('list', 'before')}): "
        f"{fmt_mb(d['size_mb'])} vs {fmt_mb(d['majority_size_mb'])} MB"
    )


def ranks_as_ranges(ranks: Any) -> str:
    """A rank set of a document made in this run, as ranges: a range string as it is, a list
    (``tracekit.summary/1``) formatted. Nothing is parsed, so a set of 100k ranks costs nothing;
    a saved document, which may be foreign, goes through
    :func:`tracekit.render.html_parts.checked_ranks_text` instead."""
    return ranks if isinstance(ranks, str) else format_ranks(ranks)


def differences_line(items: list[dict[str, Any]], what: str = "difference") -> str:
    """``9 differences from the majority`` (``1 difference``), or, with ties, how many have no
    majority."""
    ties = sum(1 for d in items if not d.get("majority", True))
    if not ties:
        return f"{plural(len(items), what)} from the majority"
    if ties == len(items):
        return f"{plural(len(items), what)} where the ranks split with no majority (no rank is blamed)"
    return (
        f"{plural(len(items) - ties, what)} from the majority, {ties} where the ranks split with no "
        "majority (no rank is blamed)"
    )


def did_nothing_none_text(doc: dict[str, Any]) -> str:
    """The line for an empty *Bucketing did nothing* section, true to what was recorded:
    nothing recorded, nothing to merge (no graph with two collectives of a type), or every graph
    that had something to merge merged some."""
    graphs = [
        g
        for grp in doc.get("groups") or []
        if isinstance(grp, dict)
        for g in grp.get("graphs") or []
        if isinstance(g, dict)
    ]
    graphs += [
        g
        for r in doc.get("ranks") or []
        if isinstance(r, dict)
        for g in r.get("graphs") or []
        if isinstance(g, dict)
    ]
    if not graphs:
        return "no bucketing outcome recorded"
    mergeable = any(
        isinstance(c, dict) and isinstance(c.get("before"), int) and c["before"] > 1
        for g in graphs
        for c in (g.get("collectives") or {}).values()
    )
    if not mergeable:
        return "nothing to merge: no graph has more than one collective of a type"
    return "none: every graph with more than one collective of a type merged some"
