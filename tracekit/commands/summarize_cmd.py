"""``tracekit summarize PATH...``: what FSDP collective pre-bucketing did on every rank.

Reads the logs (:func:`tracekit.read.reader.load`), builds the ``tracekit.summary/2`` document
(:func:`tracekit.render.summary_document.summary_document`) and renders it: as JSON
(:func:`tracekit.render.summary_json.write_summary_json`), or as text
(:func:`tracekit.render.summary_text.render_text`).

Exit status (the policy of :mod:`tracekit.commands.options`): 0; 1 when ``--strict`` and any bad
input was seen or a rank is missing, or ``--fail-on-divergence`` and the ranks diverge; 2 when a path does not exist
or no log could be read.
"""

from __future__ import annotations

import click

from tracekit.commands.options import (
    BAD_INPUT,
    FINDINGS,
    examples,
    fail,
    format_option,
    jobs_option,
    no_log_reason,
    output_option,
    paths_argument,
    strict_failure,
)
from tracekit.render.summary_text import render_text
from tracekit.render.text import FORMATS, escape_controls


def _load_on_dask(paths: list[str], address: str, jobs: int | None, strict: bool):
    """``--dask``: the Run read by the cluster's workers; a cluster that cannot be used exits 2."""
    from tracekit.commands.progress import ProgressBar

    if jobs is not None:
        raise click.UsageError("--jobs does not apply with --dask (the cluster's workers read)")
    from tracekit.read.dask_reader import DaskReadError, load_with_dask

    try:
        with ProgressBar() as bar:
            return load_with_dask(paths, address, progress=bar, validate_all=strict)
    except DaskReadError as e:
        fail("summarize", str(e), BAD_INPUT)


@click.command("summarize")
@paths_argument()
@format_option(FORMATS)
@output_option()
@click.option(
    "--per-rank",
    is_flag=True,
    help="One row per rank and graph (and per-rank JSON), instead of ranks grouped by outcome.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Check every line (slower) and exit with status 1 on any bad input, missing or duplicated rank.",
)
@click.option(
    "--fail-on-divergence",
    is_flag=True,
    help="Exit with status 1 if the ranks diverge: bucketing outcome, the collectives "
    "that run, compile ids or cache hits (for CI after a hang).",
)
@jobs_option()
@click.option(
    "--dask",
    "dask_address",
    metavar="ADDRESS",
    default=None,
    help="Read the files on the workers of the Dask scheduler at ADDRESS (tcp://HOST:PORT; "
    "the paths must be visible to the workers; needs the dask extra).",
)
@examples(
    "tracekit summarize logs/",
    "tracekit summarize logs/ --format json -o summary.json",
    "tracekit summarize run_a/ --per-rank --strict",
    "tracekit summarize logs/ --fail-on-divergence   # in CI, after a hang",
    "tracekit summarize /shared/job/ --dask tcp://scheduler:8786",
)
def summarize(
    paths: tuple[str, ...],
    fmt: str,
    output: str | None,
    per_rank: bool,
    strict: bool,
    fail_on_divergence: bool,
    jobs: int | None,
    dask_address: str | None,
) -> None:
    """Read every rank's compile log (files, .gz files, directories of rank logs) and show
    what FSDP collective pre-bucketing did: a verdict, the ranks found and missing, each graph's
    outcome with the ranks that share it, where ranks differ, and where it merged nothing."""
    from tracekit.analyze.verdict import any_divergence
    from tracekit.commands.output import output_sink
    from tracekit.commands.progress import ProgressBar
    from tracekit.read.reader import load
    from tracekit.render.summary_document import summary_document
    from tracekit.render.summary_json import write_summary_json

    if dask_address is not None:
        run = _load_on_dask(list(paths), dask_address, jobs, strict)
    else:
        with ProgressBar() as bar:
            run = load(list(paths), jobs=jobs, progress=bar.wanted, validate_all=strict)
    # JSON: the per-rank part is streamed graph by graph, so memory stays that of the Run
    doc = summary_document(run, per_rank=per_rank, with_ranks=fmt != "json")
    with output_sink(output, command="summarize", error_status=BAD_INPUT) as write:
        if fmt == "json":
            write_summary_json(run, write, per_rank=per_rank, head=doc)
        else:
            write(escape_controls(render_text(doc, fmt), keep_newlines=True).encode("utf-8"))
    why = no_log_reason(run)
    if why:
        fail("summarize", why, BAD_INPUT)
    # the document's diagnostics: the reader's, and a log the analysis finds ends early
    # (tracekit.analyze.cut_logs.with_logs_that_end_early), as the Diagnostics section shows them,
    # and the ranks the world misses (one rank read alone counts none as a diagnostic)
    why_strict = strict_failure(doc) if strict else None
    if why_strict:
        fail("summarize", why_strict, FINDINGS)
    found = any_divergence(doc) if fail_on_divergence else None
    if found:
        fail("summarize", f"the ranks diverge: {found} (--fail-on-divergence)", FINDINGS)
