"""``tracekit diff RUN_A RUN_B``: what changed in FSDP collective bucketing between two runs.

A RUN is whatever ``tracekit summarize`` reads (a log file, a ``.gz`` log, a directory of rank
logs) or a JSON document that ``tracekit summarize --format json`` wrote (``tracekit.summary/2``, or /1),
told apart by content. The comparison itself is :func:`tracekit.analyze.diff.diff_runs`; this module
reads the inputs and renders the result. It never imports torch.

Exit status: 0 (or, with ``--exit-code``, 0 when identical and 1 when the runs differ, as
``git diff --exit-code`` does); 2 on an error (unreadable input, bad summary, no logs), with a
one-line message on stderr.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import click

from tracekit.analyze.diff import diff_runs
from tracekit.analyze.documents import InputError, load_json, run_from_summary, sniff_json
from tracekit.commands import options
from tracekit.commands.options import examples, format_option, has_log_entries, jobs_option, output_option
from tracekit.commands.output import output_sink
from tracekit.commands.progress import ProgressBar
from tracekit.model import Run
from tracekit.model.nouns import plural
from tracekit.render.diff_text import render
from tracekit.render.text import escape_controls

DIFF_FORMATS = ("table", "json", "markdown")


# --- reading the inputs --------------------------------------------------------------------------


def load_run(
    path: str, jobs: int | None = None, progress: Callable[[int, int], None] | None = None
) -> tuple[Run, str]:
    """Read one RUN argument: ``(run, "summary")`` for a JSON summary, ``(run, "logs")`` else."""
    if not os.path.exists(path):
        raise InputError(f"{path}: no such file or directory")
    if os.path.isfile(path):
        try:
            opener = sniff_json(path)
        except (OSError, EOFError) as e:
            raise InputError(f"{path}: cannot read: {e}") from None
        if opener is not None:
            return run_from_summary(load_json(path, opener), path), "summary"

    try:
        from tracekit.read.reader import load as read_logs  # says why a path holds no log itself

        run = read_logs([path], jobs=jobs, progress=progress)
    except InputError:
        raise
    except Exception as e:  # the reader's errors become one line, never a traceback
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InputError(f"{path}: {msg}") from None
    if not has_log_entries(run):
        why = run.diagnostics.examples[0]["detail"] if run.diagnostics.examples else ""
        bad = run.diagnostics.total
        if why and not run.ranks and run.diagnostics.examples[0]["kind"] == "no_entries":
            raise InputError(why)  # "no log entries in FILE (1 bad line)"
        if why and not run.ranks:
            extra = f" ({why})"
        else:
            extra = f" ({plural(bad, 'bad line')})" if bad else ""
        raise InputError(f"{path}: no torch.compile logs found{extra}")
    return run, "logs"


# --- the command ---------------------------------------------------------------------------------


@click.command("diff", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("run_a", metavar="RUN_A")
@click.argument("run_b", metavar="RUN_B")
@format_option(DIFF_FORMATS, help="Output format; json is the tracekit.diff/1 document.")
@output_option("Write to FILE, not stdout.")
@click.option(
    "--exit-code",
    is_flag=True,
    help="Exit 1 when the runs differ, 0 when identical (like git diff --exit-code).",
)
@jobs_option()
@examples(
    "tracekit diff run_a/ run_b/",
    "tracekit summarize good_run/ --format json > good.json; tracekit diff good.json new_run/ --exit-code",
    "tracekit diff run_a/ run_b/ --format json -o diff.json",
)
def diff(run_a: str, run_b: str, fmt: str, output: str | None, exit_code: bool, jobs: int | None) -> None:
    """Compare the bucketing outcomes of two runs.

    RUN_A and RUN_B are each a compile log, a .gz log, a directory of rank logs, or a JSON file
    written by `tracekit summarize --format json`. Graphs are matched by rank, compile id and
    position. Errors exit 2.
    """
    try:
        with ProgressBar(label="reading A") as bar:
            a, a_kind = load_run(run_a, jobs, bar.wanted)
        with ProgressBar(label="reading B") as bar:
            b, b_kind = load_run(run_b, jobs, bar.wanted)
    except InputError as e:
        options.fail("diff", f"error: {e}")
    result = diff_runs(a, b, a_label=run_a, b_label=run_b, a_kind=a_kind, b_kind=b_kind)
    text = render(result, fmt)
    if fmt != "json":  # a log's escape sequences never reach the terminal raw
        text = escape_controls(text, keep_newlines=True)
    with output_sink(output, command="diff", error_status=2) as write:
        write(text.encode("utf-8"))
    sys.exit(1 if exit_code and not result.identical else 0)
