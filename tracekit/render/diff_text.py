"""The text of ``tracekit diff`` (table and markdown; json: the ``tracekit.diff/1`` document) from
a :class:`tracekit.analyze.diff.Diff`: the verdict first, then one table per group of ranks that
changed the same way."""

from __future__ import annotations

import textwrap
from typing import Any

from tracekit.analyze.diff import Diff, Estimates, FieldChange, GraphChange, format_ranks
from tracekit.model import CollectiveSize, Graph
from tracekit.model.nouns import graph_label, plural
from tracekit.render.cells import sequence_text
from tracekit.render.schedule_text import final_change_rows
from tracekit.render.text import (
    UNITS_MB,
    UNITS_SIZES,
    dumps_json,
    fmt_mb,
    heading,
    table,
)

#: Longer rank lists are not put in a section title.
MAX_HEADING_RANKS = 40


def render(diff: Diff, fmt: str) -> str:
    """The diff as text: ``json`` is the ``tracekit.diff/1`` document; ``table`` and ``markdown``
    give the verdict first, then one table per group of ranks that changed the same way."""
    if fmt == "json":
        return dumps_json(diff.to_dict())
    md = fmt == "markdown"
    out = [f"**{diff.verdict}**\n\n" if md else f"{diff.verdict}\n\n"]
    for side, info in (("A", diff.a), ("B", diff.b)):
        diag = sum(info.diagnostics.values())
        ranks = f"rank{'s' if len(info.ranks) != 1 else ''} {format_ranks(info.ranks) or '-'}"
        extra = f", {plural(diag, 'diagnostic')}" if diag else ""
        graphs = plural(info.graphs, "graph")
        line = f"{side}: {info.label} ({info.kind}, {ranks}, {graphs}{extra})"
        out.append(f"- {line}\n" if md else f"{line}\n")
    out.append(f"{'- ' if md else ''}graphs compared: {diff.graphs_compared}\n")
    est = diff.estimates
    if est is not None and est.faster is not None:  # the same estimates: nothing to choose
        out.append(f"{'- ' if md else ''}{estimates_text(est)}\n")
    out.append("\n")
    for group in diff.groups:
        n, listed = len(group.ranks), format_ranks(group.ranks)
        if len(listed) <= MAX_HEADING_RANKS:
            out.append(heading(f"rank{'s' if n != 1 else ''} {listed}", fmt))
        else:  # a long list goes under a short title, wrapped
            out.append(heading(f"{n} ranks", fmt))
            out.append("ranks " + "\n      ".join(textwrap.wrap(listed.replace(",", ", "), 94)))
            out.append("\n\n")
        rows = [[cell(v, md) for v in row] for c in group.changes for row in change_rows(c)]
        out.append(table(rows, ["compile id", "graph", "what", "A", "B"], fmt))
        out.append("\n")
    if diff.groups:
        out.append(f"{UNITS_MB}; {UNITS_SIZES}.\n\n")
    for side, only in (("A", diff.ranks_only_in_a), ("B", diff.ranks_only_in_b)):
        if only:
            out.append(f"{'- ' if md else ''}ranks only in {side}: {format_ranks(only)}\n")
    if diff.notes:
        if diff.ranks_only_in_a or diff.ranks_only_in_b:
            out.append("\n")
        for note in diff.notes:
            out.append(f"{'- ' if md else ''}note: {note}\n")
    return "".join(out).rstrip("\n") + "\n"


def cell(text: str, markdown: bool) -> str:
    """A table cell that cannot break the table: names come from untrusted logs."""
    text = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)
    return text.replace("|", "\\|") if markdown else text


def change_rows(c: GraphChange) -> list[list[str]]:
    """Table rows ``[compile id, graph, what, A, B]`` for one graph change."""
    where = [c.compile_id, graph_label(c.graph_index)]
    if c.kind == "only_in_a":
        return [where + ["graph only in A", outcome_text(c.graph), "absent"]]
    if c.kind == "only_in_b":
        return [where + ["graph only in B", "absent", outcome_text(c.graph)]]
    if c.kind == "not_prebucketed_in_b":
        return [where + ["never pre-bucketed in B", outcome_text(c.graph), ran_text(c)]]
    if c.kind == "not_prebucketed_in_a":
        return [where + ["never pre-bucketed in A", ran_text(c), outcome_text(c.graph)]]
    rows = [
        where + row
        for f in c.fields
        for row in (
            final_change_rows(f.a, f.b)
            if f.field == "final"
            else [[f.field, value_text(f, f.a), value_text(f, f.b)]]
        )
    ]
    if c.est_ms is not None:
        rows.append(where + ["final: est ms", *("-" if v is None else f"{v:.4f}" for v in c.est_ms)])
    for s in c.sizes:
        if s.length_a != s.length_b:
            rows.append(where + [f"sizes {s.which}: count", str(s.length_a), str(s.length_b)])
        rows.append(where + [f"sizes {s.which}: first diff #{s.index}", size_text(s.a), size_text(s.b)])
    return rows


def value_text(f: FieldChange, v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, dict) and set(v) == {"before", "after"}:
        return f"{v['before']}->{v['after']}"
    if f.field == "bucket_cap_mb":
        return f"{fmt_mb(v)} MB"
    if isinstance(v, list):
        return ",".join(map(str, v))
    return str(v)


def size_text(c: CollectiveSize | None) -> str:
    return "end of list" if c is None else f"{c.type} {fmt_mb(c.size_mb)} MB ({c.name})"


def estimates_text(est: Estimates) -> str:
    """``est ms: A 0.0346, B 0.1270: A faster by 0.0924 ms (3.67x)`` and what the figures are
    (two more lines): which run torch estimated faster, and that exposed ms is not logged."""
    slow, fast = max(est.a, est.b), min(est.a, est.b)
    ratio = f" ({slow / fast:.2f}x)" if fast > 0 else ""
    graphs = plural(est.graphs, "graph")
    return (
        f"est ms: A {est.a:.4f}, B {est.b:.4f}: {est.faster} faster by {slow - fast:.4f} ms{ratio}\n"
        f"  (torch's estimates of the collectives that run, summed over {graphs} of the slowest rank;\n"
        "  exposed ms is not logged: `tracekit replay` gives it)"
    )


def ran_text(c: GraphChange) -> str:
    """What a run ran of a graph it never pre-bucketed: ``ran, not pre-bucketed: RS 8: 12,345 B``."""
    return f"ran, not pre-bucketed: {sequence_text(None if c.final is None else c.final.sequence())}"


def outcome_text(g: Graph | None) -> str:
    if g is None:
        return "-"
    counts = ", ".join(f"{t} {c.before}->{c.after}" for t, c in g.collectives.items() if c.before or c.after)
    return f"cap {fmt_mb(g.bucket_cap_mb)} MB" + (f", {counts}" if counts else "")
