"""``tracekit summarize PATH...``: what FSDP collective pre-bucketing did on every rank.

Reads the logs (:func:`tracekit.reader.load`), builds the ``tracekit.summary/1`` document
(:func:`tracekit.summarize.summary_document`) and renders it: one row per rank and graph, totals,
rank consensus, graphs where bucketing did nothing, diagnostics. The text renderers below work
from the document alone, so they render a saved JSON summary the same way.

Exit status: 0; 1 when ``--strict`` and any bad input was seen, or when no log could be read.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from tracekit.model import COLLECTIVE_TYPES, SHORT_NAMES
from tracekit.render import FORMATS, fmt_counts, fmt_mb, heading, table
from tracekit.summarize import graph_label

GRAPH_HEADERS = ["rank", "compile id", "graph", "FSDP groups", "group size", "nodes", "cap MB",
                 "AG", "RS", "AR"]
SIZE_HEADERS = ["MB before", "MB after"]


def _mb(sizes: list[dict[str, Any]] | None) -> float | None:
    return None if sizes is None else round(sum(s["size_mb"] for s in sizes), 3)


def graph_rows(doc: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows of the per-rank, per-graph table (MB columns only when sizes exist)."""
    with_sizes = any(g.get("sizes_mb") for r in doc["ranks"] for g in r["graphs"])
    headers = GRAPH_HEADERS + (SIZE_HEADERS if with_sizes else [])
    rows = []
    for r in doc["ranks"]:
        for g in r["graphs"]:
            row = [
                "-" if r["rank"] is None else r["rank"],
                g["compile_id"],
                graph_label(g["graph_index"]),
                ",".join(g["fsdp_groups"]),
                g["group_size"],
                g["n_nodes"],
                fmt_mb(g["bucket_cap_mb"]),
                *(fmt_counts(g["collectives"].get(t)) for t in COLLECTIVE_TYPES),
            ]
            if with_sizes:
                s = g.get("sizes_mb")
                row += [fmt_mb(_mb(s["before"])) if s else "-",
                        fmt_mb(_mb(s.get("after"))) if s else "-"]
            rows.append(row)
    return headers, rows


def _total_row(doc: dict[str, Any], width: int) -> list[Any]:
    t = doc["totals"]
    row = ["total", f"{t['graphs']} graphs", "", "", "", "", "",
           *(fmt_counts(t["collectives"][c]) for c in COLLECTIVE_TYPES)]
    if width > len(row):
        row += [fmt_mb(t["mb_before"]), fmt_mb(t["mb_after"])]
    return row


def _value_text(field: str, v: Any) -> str:
    if v is None:
        return "-"
    if field in COLLECTIVE_TYPES:
        return fmt_counts(v)
    if field.startswith("sizes_mb"):
        n = len(v)
        return f"{n} collective{'' if n == 1 else 's'}, {fmt_mb(sum(x[1] for x in v))} MB"
    if isinstance(v, list):
        return ",".join(map(str, v))
    if isinstance(v, float):
        return fmt_mb(v)
    return str(v)


def _first_diff_text(d: dict[str, Any] | None) -> str:
    if not d:
        return "-"
    return (f"#{d['index']} {d['type']} ({d.get('list', 'before')}): "
            f"{fmt_mb(d['majority_size_mb'])} vs {fmt_mb(d['size_mb'])} MB")


def _ranks_text(ranks: list[Any]) -> str:
    return ",".join("-" if r is None else str(r) for r in ranks)


def render_text(doc: dict[str, Any], fmt: str) -> str:
    """The table/markdown report of a summary document; CSV is the graph table alone."""
    headers, rows = graph_rows(doc)
    if fmt == "csv":
        return table(rows, headers, "csv")
    out = [heading("Bucketing per rank and graph", fmt)]
    body = rows + ([_total_row(doc, len(headers))] if rows else [])
    out.append(table(body, headers, fmt))

    nranks = len(doc["ranks"])
    ngraphs = len({(g["compile_id"], g["graph_index"]) for r in doc["ranks"] for g in r["graphs"]})
    out.append("\n" + heading("Rank consensus", fmt))
    div = doc["divergence"]
    if not div:
        if nranks > 1:
            out.append(f"all {nranks} ranks agree on all {ngraphs} graphs\n")
        elif nranks == 1:
            out.append("one rank: nothing to compare\n")
        else:
            out.append("no rank read\n")
    else:
        ranks_hit = sorted({r for d in div for r in d["ranks"] if r is not None})
        out.append(f"{len(div)} difference(s) from the majority; differing rank(s): "
                   f"{_ranks_text(ranks_hit)}\n\n")
        out.append(table(
            [[d["compile_id"], graph_label(d["graph_index"]), d["field"], _ranks_text(d["ranks"]),
              _value_text(d["field"], d["value"]), _ranks_text(d["majority_ranks"]),
              _value_text(d["field"], d["majority_value"]), _first_diff_text(d["first_difference"])]
             for d in div],
            ["compile id", "graph", "field", "ranks", "value", "majority ranks",
             "majority value", "first difference"], fmt))

    out.append("\n" + heading("Bucketing did nothing", fmt))
    dn = doc["did_nothing"]
    if not dn:
        out.append("none: every graph with more than one collective of a type merged some\n")
    else:
        out.append(table(
            [[d["compile_id"], graph_label(d["graph_index"]),
              ", ".join(f"{SHORT_NAMES[t]} {n}->{n}" for t, n in d["counts"].items()),
              fmt_mb(d["bucket_cap_mb"]), _ranks_text(d["ranks"]), d.get("explain", "-")] for d in dn],
            ["compile id", "graph", "not merged", "cap MB", "ranks", "why"], fmt))

    diag = doc["diagnostics"]
    out.append("\n" + heading("Diagnostics", fmt))
    if not diag["counts"]:
        out.append("no bad input\n")
    else:
        out.append(table([[k, v] for k, v in diag["counts"].items()], ["kind", "count"], fmt))
        out.append("\n")
        out.append(table([[e["kind"], f"{e['file']}:{e['line']}", e.get("detail", "")]
                          for e in diag["examples"]], ["kind", "where", "detail"], fmt))
    if doc.get("notes"):
        out.append("\n" + heading("Notes", fmt))
        out.append("".join(f"- {n}\n" for n in doc["notes"]))
    return "".join(out)


@click.command("summarize")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
              help="Output format.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write to FILE instead of stdout.")
@click.option("--strict", is_flag=True, help="Exit with status 1 if any bad input was seen.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Worker processes reading files in parallel (default: the machine's cores).")
def summarize(paths: tuple[str, ...], fmt: str, output: str | None, strict: bool,
              jobs: int | None) -> None:
    """Read every rank's compile log (files, .gz files, directories of rank logs) and show
    what FSDP collective pre-bucketing did per rank and graph, whether the ranks agree, and
    where it merged nothing."""
    from tracekit.commands.output import output_sink
    from tracekit.progress import ProgressBar
    from tracekit.reader import load
    from tracekit.summarize import summary_document, write_summary_json

    with ProgressBar() as bar:
        run = load(list(paths), jobs=jobs, progress=bar)
    with output_sink(output, command="summarize", error_status=1) as write:
        if fmt == "json":
            # streamed graph by graph: memory stays that of the Run, whatever the log size
            write_summary_json(run, write)
        else:
            write(render_text(summary_document(run), fmt).encode("utf-8"))
    if not any(r.files for r in run.ranks):
        click.echo("tracekit summarize: no log could be read", err=True)
        sys.exit(1)
    if strict and run.diagnostics.total:
        click.echo(f"tracekit summarize: {run.diagnostics.total} bad input(s) (--strict)", err=True)
        sys.exit(1)
