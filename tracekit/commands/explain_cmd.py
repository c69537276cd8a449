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
    output_option,
    paths_argument,
    require_torch,
    selection_options,
)
from tracekit.commands.output import write_document
from tracekit.render.explain_text import render_text

EXPLAIN_FORMATS = ("table", "json", "markdown")


@click.command("explain")
@paths_argument()
@selection_options("explain")
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
    from tracekit.commands.stage_run import run_with_bars
    from tracekit.explain.run import all_reproduced, run
    from tracekit.render.summary_words import said_notes
    from tracekit.replay.selection import Selection

    doc = run_with_bars(
        "explain", status, lambda progress: run(list(paths), Selection(rank, graphs=graphs), progress)
    )
    doc["notes"] = said_notes(doc["notes"])
    write_document(doc, fmt, render_text, output, command="explain", error_status=BAD_INPUT)
    # a graph of a log where pre-bucketing never ran is not compared (reproduced None), never blamed
    sys.exit(OK if all_reproduced(doc) else FINDINGS)
