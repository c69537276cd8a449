"""``tracekit report PATH... -o report.html``: one self-contained HTML file to attach to a bug.

Reads the logs (:func:`tracekit.read.reader.load`), builds the summary document
(:func:`tracekit.render.summary_document.summary_document`) and renders it (:func:`tracekit.render.html.render_html`).
PATH may also be one JSON file that ``tracekit summarize --format json`` wrote: the page is then
rendered from that document as it is. Never imports torch.

Exit status (:mod:`tracekit.commands.options`): 0; 2 for a missing PATH, an output that cannot
be written (``-o`` into a missing directory), a JSON file that is not a summary, or no log that
could be read (the page is still written and says so), with one line on stderr.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from tracekit.commands.options import (
    BAD_INPUT,
    fail,
    jobs_option,
    no_log_reason,
    paths_argument,
    writable_target_problem,
)

#: The replay document ``--replay`` reads (the one with per-cap step estimates).
REPLAY_SCHEMA = "tracekit.replay/3"


def saved_summary(path: str) -> dict[str, Any] | None:
    """The document of a saved JSON summary at ``path``; None when the file is not JSON (a log).
    A JSON file that is not a usable ``tracekit.summary`` document is an error (exit 2), judged
    as ``diff`` judges it (:func:`tracekit.analyze.documents.run_from_summary`): the same bad
    summary gets the same status and message from both."""
    from tracekit.analyze.documents import SUMMARY_PREFIX, InputError, load_json, run_from_summary, sniff_json

    if not os.path.isfile(path):
        return None
    try:
        opener = sniff_json(path)
        if opener is None:
            return None
        doc = load_json(path, opener)
    except (OSError, EOFError) as e:
        fail("report", f"{path}: cannot read: {e}")
    except InputError as e:
        fail("report", str(e))
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith(SUMMARY_PREFIX):
        fail("report", f'{path}: JSON that is not a tracekit summary (no "schema": "{SUMMARY_PREFIX}N")')
    try:
        run_from_summary(doc, path)
    except InputError as e:
        fail("report", str(e))
    return doc


def saved_replay(path: str) -> dict[str, Any]:
    """The ``tracekit.replay/3`` document at ``path`` (``tracekit replay --format json``); any
    other file is an error (exit 2, one line)."""
    import orjson

    try:
        with open(path, "rb") as f:
            doc = orjson.loads(f.read())
    except OSError as e:
        fail("report", f"--replay {path}: cannot read: {e.strerror or e}")
    except orjson.JSONDecodeError as e:
        fail("report", f"--replay {path}: bad JSON: {e}")
    if not isinstance(doc, dict) or doc.get("schema") != REPLAY_SCHEMA:
        fail(
            "report",
            f"--replay {path}: not a {REPLAY_SCHEMA} document "
            "(write one with tracekit replay PATH --recommend --format json)",
        )
    return doc


@click.command("report", context_settings={"help_option_names": ["-h", "--help"]})
@paths_argument()
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False),
    default=None,
    help="The HTML file to write (default: stdout, when it is not a terminal).",
)
@click.option(
    "--replay",
    "replay_path",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="REPLAY.json",
    help="Add a Cap sweep section from `tracekit replay --recommend --format json` output.",
)
@click.option(
    "--profile",
    "profiles",
    multiple=True,
    type=click.Path(exists=True),
    metavar="TRACES",
    help="Add a Measured section from the run's torch.profiler traces (as `tracekit measure`; repeatable); "
    "with --replay, a Predicted section too (as `tracekit replay --profile`).",
)
@jobs_option()
def report(
    paths: tuple[str, ...],
    output: str | None,
    jobs: int | None,
    replay_path: str | None,
    profiles: tuple[str, ...],
) -> None:
    """Write one self-contained HTML page to attach to a bug.

    The page shows the verdict, the world of ranks, rank groups, divergence, bucket sizes,
    graphs where bucketing did nothing and diagnostics, from the compile logs of every rank or
    from one JSON file written by `tracekit summarize --format json`, and with --replay the cap
    sweep of a saved replay. It fetches nothing.

    \b
    tracekit report logs/ -o report.html
    tracekit summarize logs/ --format json -o run.json && tracekit report run.json -o report.html
    tracekit replay logs/ --recommend --format json > replay.json && tracekit report logs/ --replay replay.json -o report.html
    """
    from tracekit.commands.output import output_sink
    from tracekit.render.html import render_html

    if output is None and sys.stdout.isatty():
        fail("report", "the page is HTML: give -o FILE (or redirect stdout)")
    if output is not None:  # checked before reading: one line, not click's usage block
        parent = os.path.dirname(os.path.abspath(output))
        if not os.path.isdir(parent):
            fail("report", f"cannot write {output}: no directory {parent}")
        problem = writable_target_problem(output)
        if problem:
            fail(
                "report",
                problem if problem.startswith("cannot write") else f"cannot write {output}: {problem}",
            )
    replay = saved_replay(replay_path) if replay_path else None
    docs = [d for d in (saved_summary(p) for p in paths) if d is not None]
    no_logs: str | None = None
    measured: dict[str, Any] | None = None
    if docs:
        if len(paths) > 1:
            fail("report", "a saved JSON summary must be the only PATH")
        if profiles:
            fail("report", "--profile needs the compile logs, not a saved summary")
        doc = docs[0]
    else:
        from tracekit.commands.progress import ProgressBar
        from tracekit.read.reader import load
        from tracekit.render.summary_document import summary_document

        with ProgressBar() as bar:
            run = load(list(paths), jobs=jobs, progress=bar.wanted)
        doc = summary_document(run)
        no_logs = no_log_reason(run)
        if profiles and not no_logs:
            from tracekit.analyze.measure import measure
            from tracekit.commands.measure_cmd import read_profiles
            from tracekit.read.output_code import wait_orders

            # with a saved replay, the traces are read and paired once for both sections (the
            # matmuls and copies kept: what the prediction calibrates on)
            traces = read_profiles(profiles, jobs, command="report", host_ops=replay is not None)
            pairing = measure(run, traces, None, wait_orders(paths))
            measured = pairing.document()
            if replay is not None and "prediction" not in replay:  # the Predicted section, no torch
                from tracekit.replay.predicted import ProfileError, add_prediction

                try:
                    add_prediction(
                        replay, list(paths), list(profiles), "recommendation" in replay, jobs, pairing
                    )
                except ProfileError as e:
                    click.echo(f"tracekit report: no Predicted section: {e}", err=True)
    try:
        page = render_html(doc, replay, measured).encode("utf-8")
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:  # a hand-edited summary
        fail("report", f"{paths[0]}: bad summary: {type(e).__name__}: {e}")
    with output_sink(output, command="report", error_status=BAD_INPUT) as write:
        write(page)
    if no_logs:
        fail("report", no_logs, BAD_INPUT)
