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

import click

from tracekit.commands.options import (
    BAD_INPUT,
    FINDINGS,
    OK,
    examples,
    format_option,
    nothing_to_do,
    output_option,
    paths_argument,
    require_torch,
)
from tracekit.commands.output import write_document
from tracekit.render.explain_text import render_text

EXPLAIN_FORMATS = ("table", "json", "markdown")


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
    from tracekit.commands.graph_sources import bad_input_note, read_graph_sources
    from tracekit.explain.buckets import explain_mixed, not_prebucketed_of
    from tracekit.model import Diagnostics
    from tracekit.read.pairing import NotPrebucketedSource
    from tracekit.replay.selection import SelectionError, parse_graph_selector

    paths = list(paths)
    try:
        selectors = [parse_graph_selector(g) for g in graphs]
    except SelectionError as e:
        raise click.BadParameter(str(e), param_hint="--graph") from None
    diag = Diagnostics()
    mixed = read_graph_sources("explain", paths, status, rank=rank, graphs=selectors, diagnostics=diag)
    sources = [s for s in mixed if not isinstance(s, NotPrebucketedSource)]
    notes = []
    if not sources and not not_prebucketed_of(mixed):  # status 2 when no log, else the note (exit 0)
        notes.append(nothing_to_do("explain", paths, status))
    if diag.total:
        notes.append(bad_input_note(diag))
    # recorded outcomes and graphs torch never pre-bucketed, in their place in the logs
    from tracekit.replay.process_groups import table_for

    with status:
        doc = explain_mixed(
            mixed,
            extra={"paths": paths, "notes": notes, "diagnostics": diag.to_dict()},
            progress=status,
            groups=table_for(paths, mixed),  # a mesh: each group's role and members
        )
    import torch

    from tracekit.replay.torch_versions import torch_section

    doc["torch"] = torch_section(doc["graphs"], torch.__version__)
    write_document(doc, fmt, render_text, output, command="explain", error_status=BAD_INPUT)
    # a graph of a log where pre-bucketing never ran is not compared (reproduced None), never blamed
    ok = all(g["error"] is None and (g["reproduced"] or g.get("not_compared")) for g in doc["graphs"])
    sys.exit(OK if ok else FINDINGS)
