"""``tracekit explain PATH...``: why each collective is, or is not, in a bucket.

Reads one rank's recorded outcomes with their graph texts (the lowest rank, or ``--rank``),
rebuilds and replays each graph at its recorded cap, and shows the planner's reason for every
collective, with a what-if verified by planning again (:mod:`tracekit.explain.buckets`).

Exit status: 0 when every graph was rebuilt and its buckets equal the recorded outcome, or when
there was none to explain (a note says why); 1 when one did not (the output says how); 2 for a usage error (a ``--rank``
that is not in the logs, a ``--graph`` that is malformed or absent: the message lists what
exists).
"""

from __future__ import annotations

import sys
from typing import Any

import click

from tracekit.analyze.summarize import graph_label
from tracekit.commands.options import (
    BAD_INPUT,
    FINDINGS,
    OK,
    examples,
    fail,
    format_option,
    nothing_to_do,
    output_option,
    paths_argument,
    require_torch,
)
from tracekit.commands.output import output_sink
from tracekit.render.text import (
    UNITS_MB,
    UNITS_SIZES,
    dumps_json,
    escape_controls,
    exact_mb,
    fmt_mb,
    heading,
    table,
)

EXPLAIN_FORMATS = ("table", "json", "markdown")
HEADERS = ["collective", "kind", "MB", "dtype", "bucket", "reason", "what-if"]


def _what_if_text(w: dict[str, Any] | None) -> str:
    if not w:
        return "-"
    if "cap_mb" in w:
        return f"cap {exact_mb(w['cap_mb'])} MB"
    return f"bucket_mode={w['bucket_mode']}"


def _graph_title(g: dict[str, Any]) -> str:
    rank = "not logged" if g["rank"] is None else g["rank"]
    return (
        f"rank {rank}, graph {g['compile_id']}:{g['graph_index']} ({graph_label(g['graph_index'])}), "
        f"cap {'-' if g['cap_mb'] is None else exact_mb(g['cap_mb'])} MB"
    )  # the cap planned at


def _verdict(g: dict[str, Any]) -> str:
    counts = ", ".join(f"{k} {v}" for k, v in g["recorded"].items())
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
    out: list[str] = []
    bullet = "- " if fmt == "markdown" else "  "
    for g in doc["graphs"]:
        if out:
            out.append("\n")
        if g.get("outcome"):
            out.append(unbucketed_text(g, fmt))
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
    if not doc["graphs"] and not doc.get("notes"):
        out.append("no recorded pre_bucketing_fsdp_collectives outcome matched\n")
    if doc["graphs"]:
        out.append(f"\n{UNITS_MB}; {UNITS_SIZES}.\n")
    from tracekit.replay.torch_versions import torch_lines

    versions = torch_lines(doc.get("torch"))  # which torch wrote the logs, which one explains them
    if versions:
        out.append("\n" + "".join(f"{ln}\n" for ln in versions))
    for note in doc.get("notes", []):
        out.append(f"\nnote: {note}\n")
    return "".join(out)


def unbucketed_text(g: dict[str, Any], fmt: str) -> str:
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
            f"recorded: {g['outcome']} ({runs} run one by one); the planner reproduces it: "
            f"{g['reason_text']}\n"
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
        out.append(f"what-if {w['name']}: {w['text']} ({check})\n")
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
    out.append(
        "\n"
        + "".join(
            f"{bullet}{c['name']}: {c['reason']}: {c['detail']}."
            + (f" What if: {c['what_if']['text']}.\n" if c["what_if"] else "\n")
            for c in g["collectives"]
        )
    )
    return "".join(out)


@click.command("explain")
@paths_argument()
@click.option("--rank", "rank", type=int, default=None, help="Rank to explain (default: the lowest).")
@click.option(
    "--graph",
    "graphs",
    multiple=True,
    metavar="COMPILE_ID[:INDEX]",
    help="Only these graphs (e.g. 0/0 or 0/0:1); repeatable.",
)
@format_option(EXPLAIN_FORMATS)
@output_option()
@examples(
    "tracekit explain logs/",
    "tracekit explain logs/ --rank 3 --graph 0/0:1",
    "tracekit explain logs/ --graph 0/0 --format json -o why.json",
)
def explain(paths, rank, graphs, fmt, output):
    """Why each collective of PATH... (rank logs, .gz, directories) is, or is not, in a bucket:
    the planner's reason per collective, at the recorded cap, with a what-if checked by replay."""
    from tracekit.commands.progress import ProgressBar, note_loading_torch

    status = ProgressBar(label="explaining", unit="graphs", min_total=2)  # on a terminal only
    note_loading_torch(bar=status)  # before the imports that load torch; cleared by the next status
    require_torch("explain")
    from tracekit.explain.buckets import explain_mixed, unbucketed_of
    from tracekit.model import Diagnostics
    from tracekit.read.pairing import UnbucketedSource
    from tracekit.read.reader import graph_and_unbucketed_sources
    from tracekit.replay.selection import SelectionError, parse_graph_selector, replay_sources_for

    paths = list(paths)
    try:
        selectors = [parse_graph_selector(g) for g in graphs]
    except SelectionError as e:
        raise click.BadParameter(str(e), param_hint="--graph") from None
    diag = Diagnostics()
    status.say("reading the logs ...")
    reading = ProgressBar()  # large inputs: a bar of bytes read (on a terminal only)
    try:
        mixed = replay_sources_for(
            paths,
            rank=rank,
            graphs=selectors,
            diagnostics=diag,
            reader=graph_and_unbucketed_sources,
            progress=reading,
        )
    except SelectionError as e:
        reading.close()
        status.close()
        fail("explain", str(e), BAD_INPUT)
    reading.close()
    sources = [s for s in mixed if not isinstance(s, UnbucketedSource)]
    notes = []
    if not sources and not unbucketed_of(mixed):  # status 2 when no log, else the note (exit 0)
        notes.append(nothing_to_do("explain", paths, status))
    if diag.total:
        notes.append(
            f"{diag.total} bad input(s) while reading: "
            + ", ".join(f"{k}={v}" for k, v in sorted(diag.counts.items()))
        )
    # recorded outcomes and graphs torch never pre-bucketed, in their place in the logs
    with status:
        doc = explain_mixed(
            mixed, extra={"paths": paths, "notes": notes, "diagnostics": diag.to_dict()}, progress=status
        )
    import torch

    from tracekit.replay.torch_versions import torch_section

    doc["torch"] = torch_section(doc["graphs"], torch.__version__)
    with output_sink(output, command="explain", error_status=BAD_INPUT) as write:
        write(
            (
                dumps_json(doc)
                if fmt == "json"
                else escape_controls(render_text(doc, fmt), keep_newlines=True)
            ).encode("utf-8")
        )
    ok = all(g["error"] is None and g["reproduced"] for g in doc["graphs"])
    sys.exit(OK if ok else FINDINGS)
