"""``tracekit explain PATH...``: why each collective is, or is not, in a bucket.

Reads one rank's recorded outcomes with their graph texts (the lowest rank, or ``--rank``),
rebuilds and replays each graph at its recorded cap, and shows the planner's reason for every
collective, with a what-if verified by planning again (:mod:`tracekit.explain`).

Exit status: 0 when every graph was rebuilt and its buckets equal the recorded outcome; 1 when
one did not (the output says how) or no outcome was found; 2 for a usage error (a ``--rank``
that is not in the logs, a ``--graph`` that is malformed or absent: the message lists what
exists).
"""

from __future__ import annotations

import sys
from typing import Any

import click

from tracekit.commands.options import (
    BAD_INPUT,
    FINDINGS,
    OK,
    examples,
    fail,
    format_option,
    output_option,
    paths_argument,
)
from tracekit.commands.output import output_sink
from tracekit.render import dumps_json, fmt_mb, heading, table
from tracekit.summarize import graph_label

EXPLAIN_FORMATS = ("table", "json", "markdown")
HEADERS = ["collective", "kind", "MB", "dtype", "bucket", "reason", "what-if"]


def _what_if_text(w: dict[str, Any] | None) -> str:
    if not w:
        return "-"
    if "cap_mb" in w:
        return f"cap {fmt_mb(w['cap_mb'])} MB"
    return f"bucket_mode={w['bucket_mode']}"


def _graph_title(g: dict[str, Any]) -> str:
    rank = "-" if g["rank"] is None else g["rank"]
    return (f"rank {rank}, graph {g['compile_id']}:{g['graph_index']} ({graph_label(g['graph_index'])}), "
            f"cap {fmt_mb(g['cap_mb'])} MB")


def _verdict(g: dict[str, Any]) -> str:
    counts = ", ".join(f"{k} {v}" for k, v in g["recorded"].items())
    if g["error"]:
        return f"recorded {counts}; not explained: {g['error']}\n"
    checked = "bucket members" if g["buckets_checked"] == "members" else "counts"
    if g["reproduced"]:
        line = f"recorded {counts}; the planner reproduces it ({checked} checked), bucket mode {g['bucket_mode']}\n"
    else:
        line = f"recorded {counts}; NOT REPRODUCED, bucket mode {g['bucket_mode']}:\n" + "".join(
            f"  {m}\n" for m in g["mismatches"])
    if g.get("note"):
        line += f"note: {g['note']}\n"
    return line


def render_text(doc: dict[str, Any], fmt: str) -> str:
    """The table / markdown view of a ``tracekit.explain/1`` document."""
    out: list[str] = []
    bullet = "- " if fmt == "markdown" else "  "
    for g in doc["graphs"]:
        if out:
            out.append("\n")
        out.append(heading(_graph_title(g), fmt))
        out.append(_verdict(g))
        if g["error"]:
            continue
        out.append("\n")
        rows = [[c["name"], c["kind"], fmt_mb(c["size_mb"]), c["dtype"],
                 "-" if c["bucket"] is None else f"{c['kind']} {c['bucket']}", c["reason"],
                 _what_if_text(c["what_if"])] for c in g["collectives"]]
        out.append(table(rows, HEADERS, fmt))
        why = [c for c in g["collectives"] if c["reason"] != "bucketed"]
        buckets = [(k, i, b) for k, bs in g["buckets"].items() for i, b in enumerate(bs)]
        if buckets or why:
            out.append("\n")
        for kind, i, members in buckets:
            out.append(f"{bullet}{kind} bucket {i}: {', '.join(members)}\n")
        for c in why:
            extra = f" What if: {c['what_if']['text']} (verified by planning again)." if c["what_if"] else ""
            out.append(f"{bullet}{c['name']}: {c['reason']}: {c['detail']}.{extra}\n")
    if not doc["graphs"]:
        out.append("no recorded pre_bucketing_fsdp_collectives outcome matched\n")
    for note in doc.get("notes", []):
        out.append(f"\nnote: {note}\n")
    return "".join(out)


@click.command("explain")
@paths_argument()
@click.option("--rank", "rank", type=int, default=None, help="Rank to explain (default: the lowest).")
@click.option("--graph", "graphs", multiple=True, metavar="COMPILE_ID[:INDEX]",
              help="Only these graphs (e.g. 0/0 or 0/0:1); repeatable.")
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
    from tracekit.progress import note_loading_torch

    note_loading_torch()  # before the imports that load torch
    from tracekit.explain import explain_document
    from tracekit.model import Diagnostics
    from tracekit.replay.pairing import SelectionError, parse_graph_selector, replay_sources_for

    paths = list(paths)
    try:
        selectors = [parse_graph_selector(g) for g in graphs]
    except SelectionError as e:
        raise click.BadParameter(str(e), param_hint="--graph") from None
    diag = Diagnostics()
    try:
        sources = replay_sources_for(paths, rank=rank, graphs=selectors, diagnostics=diag)
    except SelectionError as e:
        fail("explain", str(e), BAD_INPUT)
    if not sources:
        fail("explain", "no recorded pre_bucketing_fsdp_collectives outcome in the logs (a warm inductor "
                        "cache skips the post-grad passes; was the cache disabled?)", FINDINGS)
    notes = []
    if diag.total:
        notes.append(f"{diag.total} bad input(s) while reading: "
                     + ", ".join(f"{k}={v}" for k, v in sorted(diag.counts.items())))
    doc = explain_document(sources, extra={"paths": paths, "notes": notes, "diagnostics": diag.to_dict()})
    with output_sink(output, command="explain", error_status=BAD_INPUT) as write:
        write((dumps_json(doc) if fmt == "json" else render_text(doc, fmt)).encode("utf-8"))
    ok = all(g["error"] is None and g["reproduced"] for g in doc["graphs"])
    sys.exit(OK if ok else FINDINGS)
