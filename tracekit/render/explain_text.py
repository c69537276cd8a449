"""The text of ``tracekit explain`` (table and markdown) from its document
(:func:`tracekit.explain.buckets.explain_mixed`): per graph, the planner's reason for every
collective with its verified what-if, and the graphs torch never pre-bucketed."""

from __future__ import annotations

from typing import Any

from tracekit.model.nouns import graph_label
from tracekit.render.text import (
    UNITS_MB,
    UNITS_SIZES,
    exact_mb,
    fmt_mb,
    heading,
    table,
)

HEADERS = ["collective", "kind", "MB", "dtype", "bucket", "reason", "what-if"]


def _what_if_text(w: dict[str, Any] | None) -> str:
    if not w:
        return "-"
    if "cap_mb" in w:
        return f"cap {exact_mb(w['cap_mb'])} MB"
    if "fsdp_groups" in w:  # on a mesh: our pass given the groups it never saw
        return f"groups {', '.join(map(repr, w['fsdp_groups']))}: bucket {w['bucket']}"
    return f"bucket_mode={w['bucket_mode']}"


def _graph_title(g: dict[str, Any]) -> str:
    rank = "not logged" if g["rank"] is None else g["rank"]
    return (
        f"rank {rank}, graph {g['compile_id']}:{g['graph_index']} ({graph_label(g['graph_index'])}), "
        f"cap {'-' if g['cap_mb'] is None else exact_mb(g['cap_mb'])} MB"
    )  # the cap planned at


def _counted_groups(g: dict[str, Any]) -> str:
    """Which groups torch's recorded counts cover, when the graph also runs collectives on a
    group pre-bucketing never saw (a mesh's replicate or tp groups): `` (on FSDP group 3; not
    counted: AR 8 on group 1, a group pre-bucketing never sees)``; empty otherwise."""
    colls = [c for c in g.get("collectives") or [] if isinstance(c, dict)]
    other = [c for c in colls if c.get("reason") == "other_group"]
    if not other:
        return ""
    fsdp = sorted({str(c["group"]) for c in colls if c.get("reason") != "other_group" and c.get("group")})
    by: dict[tuple[str, str], int] = {}
    for c in other:
        key = (str(c.get("kind")), str(c.get("group")))
        by[key] = by.get(key, 0) + 1
    groups = {grp for _, grp in by}
    not_counted = ", ".join(f"{k} {n} on group {grp}" for (k, grp), n in by.items())
    on = f"on FSDP group{'s' if len(fsdp) != 1 else ''} {', '.join(fsdp)}; " if fsdp else ""
    never = "a group" if len(groups) == 1 else "groups"
    return f" ({on}not counted: {not_counted}, {never} pre-bucketing never sees)"


def _verdict(g: dict[str, Any]) -> str:
    counts = ", ".join(f"{k} {v}" for k, v in g["recorded"].items()) + _counted_groups(g)
    if g["error"]:
        return f"recorded {counts}; not explained: {g['error']}\n"
    checked = "bucket members" if g["buckets_checked"] == "members" else "counts"
    if g["reproduced"]:
        line = f"recorded {counts}; the planner reproduces it ({checked} checked), bucket mode {g['bucket_mode']}\n"
    else:
        line = f"recorded {counts}; NOT REPRODUCED, bucket mode {g['bucket_mode']}:\n" + "".join(
            f"  {m}\n" for m in g["mismatches"]
        )
    if g.get("note"):
        line += f"note: {g['note']}\n"
    return line


#: No line of explain's text is wider than this (tables excepted; their cells are short).
MAX_WIDTH = 200
#: A group of alike paragraphs names at most this many collectives (the JSON has each).
MAX_NAMES = 12


def wrap(text: str, bullet: str) -> str:
    """One paragraph as lines of at most :data:`MAX_WIDTH` columns, the later ones indented
    under the bullet (collective names are never broken)."""
    import textwrap

    return (
        textwrap.fill(
            text,
            width=MAX_WIDTH,
            initial_indent=bullet,
            subsequent_indent=bullet + "  ",
            break_long_words=False,
            break_on_hyphens=False,
        )
        + "\n"
    )


def _alike(why: list[dict[str, Any]], names: list[str], dtypes: list[str]) -> list[list[dict[str, Any]]]:
    """The lone collectives in groups whose paragraphs differ only in names, dtypes and numbers:
    the same reason, the same detail once those are masked, the same what-if. In order of each
    group's first member."""
    import re

    dtype_re = (
        re.compile(
            r"\b(?:" + "|".join(re.escape(d) for d in sorted(set(dtypes), key=len, reverse=True)) + r")\b"
        )
        if dtypes
        else None
    )

    by_length = sorted(set(names), key=len, reverse=True)
    name_re = re.compile("|".join(re.escape(n) for n in by_length)) if by_length else None

    def shape(c: dict[str, Any]) -> tuple[str, str, str]:
        detail = str(c["detail"])
        if name_re is not None:
            detail = re.sub(r"\x00(?:, \x00)*", "\x00", name_re.sub("\x00", detail))
        if dtype_re is not None:
            detail = dtype_re.sub("\x01", detail)
        detail = re.sub(r"\d+(?:\.\d+)?", "#", detail)
        return c["reason"], detail, (c["what_if"] or {}).get("text", "")

    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for c in why:
        groups.setdefault(shape(c), []).append(c)
    return list(groups.values())


def _why_text(group: list[dict[str, Any]]) -> str:
    """One paragraph for a group of alike lone collectives (see :func:`_alike`)."""
    first = group[0]
    what_if = first["what_if"]
    if len(group) == 1:
        extra = f" What if: {what_if['text']} (verified by planning again)." if what_if else ""
        return f"{first['name']}: {first['reason']}: {first['detail']}.{extra}"
    names = [c["name"] for c in group]
    shown = ", ".join(names[:MAX_NAMES]) + (
        f" (+{len(names) - MAX_NAMES} more)" if len(names) > MAX_NAMES else ""
    )
    extra = f" What if, for each: {what_if['text']} (verified by planning again)." if what_if else ""
    return (
        f"{len(group)} collectives, {first['reason']}: {shown}. For {first['name']}: {first['detail']}; "
        f"the others alike, with their own names and sizes (the JSON has each).{extra}"
    )


def render_text(doc: dict[str, Any], fmt: str) -> str:
    """The table / markdown view of a ``tracekit.explain/1`` document."""
    if not doc["graphs"]:  # nothing to explain: why
        from tracekit.render.nothing_text import nothing_text

        return nothing_text(doc, "explain", fmt)
    out: list[str] = []
    bullet = "- " if fmt == "markdown" else "  "
    for g in doc["graphs"]:
        if out:
            out.append("\n")
        if g.get("outcome"):
            out.append(not_prebucketed_graph_text(g, fmt))
            continue
        out.append(heading(_graph_title(g), fmt))
        out.append(_verdict(g))
        if g["error"]:
            continue
        out.append("\n")
        rows = [
            [
                c["name"],
                c["kind"],
                fmt_mb(c["size_mb"]),
                c["dtype"],
                "-" if c["bucket"] is None else f"{c['kind']} {c['bucket']}",
                c["reason"],
                _what_if_text(c["what_if"]),
            ]
            for c in g["collectives"]
        ]
        out.append(table(rows, HEADERS, fmt))
        why = [c for c in g["collectives"] if c["reason"] != "bucketed"]
        buckets = [(k, i, b) for k, bs in g["buckets"].items() for i, b in enumerate(bs)]
        if buckets or why:
            out.append("\n")
        for kind, i, members in buckets:
            out.append(wrap(f"{kind} bucket {i}: {', '.join(members)}", bullet))
        for group in _alike(
            why, [c["name"] for c in g["collectives"]], [str(c["dtype"]) for c in g["collectives"]]
        ):
            out.append(wrap(_why_text(group), bullet))
    if doc["graphs"]:
        out.append(f"\n{UNITS_MB}; {UNITS_SIZES}.\n")
    from tracekit.replay.torch_versions import torch_lines

    versions = torch_lines(doc.get("torch"))  # which torch wrote the logs, which one explains them
    if versions:
        out.append("\n" + "".join(f"{ln}\n" for ln in versions))
    for note in doc.get("notes", []):
        out.append(f"\nnote: {note}\n")
    return "".join(out)


def not_prebucketed_graph_text(g: dict[str, Any], fmt: str) -> str:
    """A graph torch never pre-bucketed (:mod:`tracekit.explain.not_prebucketed`): its reason, each
    collective's, and the forward-groups what-if."""
    rank = "-" if g["rank"] is None else g["rank"]
    out = [
        heading(
            f"rank {rank}, graph {g['compile_id']}:{g['graph_index']} ({graph_label(g['graph_index'])}), "
            f"{g['outcome']}",
            fmt,
        )
    ]
    runs = ", ".join(f"{k} {n}" for k, n in g["recorded"]["schedule"].items())
    if g["error"]:
        return (
            "".join(out) + f"recorded: {g['outcome']} ({runs} run one by one); not explained: {g['error']}\n"
        )
    if g["reproduced"]:
        out.append(
            wrap(
                f"recorded: {g['outcome']} ({runs} run one by one); the planner reproduces it: "
                f"{g['reason_text']}",
                "",
            )
        )
    elif g.get("not_compared"):
        out.append(
            f"recorded: {g['outcome']} ({runs}); "
            + "".join(f"{m}\n  " for m in g["mismatches"]).rstrip()
            + "\n"
        )
    else:
        out.append(
            f"recorded: {g['outcome']} ({runs}); NOT REPRODUCED:\n"
            + "".join(f"  {m}\n" for m in g["mismatches"])
        )
    for w in g["what_ifs"]:
        if w["name"] == "overlap_bucketing":
            check = "run through torch's overlap scheduler" if w["verified"] else "not run"
        else:
            check = "verified by running our pass" if w["verified"] else f"NOT verified: {w.get('applied')}"
        out.append(wrap(f"what-if {w['name']}: {w['text']} ({check})", ""))
    if g["note"]:
        out.append(f"note: {g['note']}\n")
    out.append("\n")
    rows = [
        [
            c["name"],
            c["kind"],
            fmt_mb(c["size_mb"]),
            c["dtype"],
            c["reason"],
            "-"
            if not c["what_if"]
            else ("-" if c["what_if"]["bucket"] is None else f"{c['kind']} {c['what_if']['bucket']}"),
        ]
        for c in g["collectives"]
    ]
    out.append(table(rows, ["collective", "kind", "MB", "dtype", "reason", "with forward groups"], fmt))
    bullet = "- " if fmt == "markdown" else "  "
    colls = g["collectives"]
    out.append("\n")
    for group in _alike(colls, [c["name"] for c in colls], [str(c["dtype"]) for c in colls]):
        out.append(wrap(_not_prebucketed_why(group), bullet))
    return "".join(out)


def _not_prebucketed_why(group: list[dict[str, Any]]) -> str:
    """One paragraph for a group of alike collectives of a graph never pre-bucketed (a
    sentence said 8 times is said once, with the count: :func:`_alike`)."""
    first = group[0]
    what_if = f" What if: {first['what_if']['text']}." if first["what_if"] else ""
    if len(group) == 1:
        return f"{first['name']}: {first['reason']}: {first['detail']}.{what_if}"
    names = [c["name"] for c in group]
    shown = ", ".join(names[:MAX_NAMES]) + (
        f" (+{len(names) - MAX_NAMES} more)" if len(names) > MAX_NAMES else ""
    )
    return (
        f"{len(group)} collectives, {first['reason']}: {shown}. For {first['name']}: {first['detail']}; "
        f"the others alike, with their own names and sizes (the JSON has each).{what_if}"
    )
