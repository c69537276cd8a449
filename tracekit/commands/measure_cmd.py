"""``tracekit measure LOGS --profile TRACES``: the job's torch.profiler traces beside its compile
logs; torch's estimates beside what was measured.

Wiring only: the logs are read by :func:`tracekit.read.reader.load`, the traces by
:func:`tracekit.read.traces.read_traces`, paired and measured by
:func:`tracekit.analyze.measure.measure`, and rendered by :mod:`tracekit.render.measure_text`
(``--trace-out``: :mod:`tracekit.render.measure_perfetto`). ``--dask ADDRESS``: both the logs
(:func:`tracekit.read.dask_reader.load_with_dask`) and the traces (``read_traces(dask=)``) are
read on the workers of a Dask cluster, as ``summarize --dask`` reads logs. Never imports torch.

Exit status (:mod:`tracekit.commands.options`): 0 when collectives were paired; 2 for a missing
path, no log, no trace that could be read, nothing paired (traces of another run or cap:
the output says which graph run differs first), or a Dask cluster that cannot be used, with one
line on stderr.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from tracekit.commands.options import (
    BAD_INPUT,
    examples,
    fail,
    file_in_existing_dir,
    format_option,
    jobs_option,
    no_log_reason,
    output_option,
    paths_argument,
)

if TYPE_CHECKING:
    from tracekit.model import Run
    from tracekit.model.profile import RankTrace

MEASURE_FORMATS = ("table", "json", "markdown")


def read_profiles(
    paths: tuple[str, ...],
    jobs: int | None = None,
    command: str = "measure",
    dask: str | None = None,
    host_ops: bool = False,
) -> list[RankTrace]:
    """Every rank trace under ``paths`` (files or directories), read here or, with ``dask`` (a
    scheduler's address), on the cluster's workers; exit 2, one line, when one cannot be read at
    all (:class:`tracekit.read.traces.TraceError`), none holds an event, or the cluster cannot be
    used (:class:`tracekit.read.dask_reader.DaskReadError`)."""
    from tracekit.read.dask_reader import DaskReadError
    from tracekit.read.traces import TraceError, read_traces, require_events

    try:
        return require_events(read_traces(list(paths), jobs=jobs, dask=dask, host_ops=host_ops))
    except (TraceError, DaskReadError) as e:
        fail(command, str(e))


def _load_on_dask(paths: list[str], address: str, jobs: int | None) -> Run:
    """``--dask``: the logs read by the cluster's workers; a cluster that cannot be used exits 2."""
    from tracekit.commands.progress import ProgressBar

    if jobs is not None:
        raise click.UsageError("--jobs does not apply with --dask (the cluster's workers read)")
    from tracekit.read.dask_reader import DaskReadError, load_with_dask

    try:
        with ProgressBar() as bar:
            return load_with_dask(paths, address, progress=bar)
    except DaskReadError as e:
        fail("measure", str(e), BAD_INPUT)


@click.command("measure", context_settings={"help_option_names": ["-h", "--help"]})
@paths_argument()
@click.option(
    "--profile",
    "profiles",
    multiple=True,
    required=True,
    type=click.Path(exists=True),
    metavar="TRACES",
    help="torch.profiler traces of the same run (files or directories; repeatable).",
)
@click.option(
    "--estimates",
    "estimates",
    type=click.Path(exists=True, dir_okay=False),
    metavar="REPLAY.json",
    default=None,
    help="A saved `tracekit replay LOGS --all-ranks --format json` document of the same logs: "
    "torch's exposed estimate of each graph (its overlap scheduler at the recorded cap).",
)
@format_option(MEASURE_FORMATS, help="Output format; json is the tracekit.measure/1 document.")
@output_option("Write to FILE, not stdout.")
@click.option(
    "--rank", "ranks", type=int, multiple=True, help="Only this rank (repeatable; default: every rank)."
)
@file_in_existing_dir(
    "--trace-out",
    "trace_out",
    "FILE",
    "Write a Perfetto trace-event file: one profiled step, measured and estimated side by side.",
)
@jobs_option()
@click.option(
    "--dask",
    "dask_address",
    metavar="ADDRESS",
    default=None,
    help="Read the logs and the traces on the workers of the Dask scheduler at ADDRESS "
    "(tcp://HOST:PORT; the paths must be visible to the workers; needs the dask extra).",
)
@examples(
    "tracekit measure logs/ --profile traces/",
    "tracekit measure logs/ --profile traces/ --format json -o measured.json",
    "tracekit measure logs/ --profile traces/ --rank 0 --trace-out step.json",
    "tracekit replay logs/ --all-ranks --format json -o replay.json   # torch's exposed estimates",
    "tracekit measure logs/ --profile traces/ --estimates replay.json",
    "tracekit measure /shared/job/logs --profile /shared/job/traces --dask tcp://scheduler:8786",
)
def measure(
    paths: tuple[str, ...],
    profiles: tuple[str, ...],
    estimates: str | None,
    fmt: str,
    output: str | None,
    ranks: tuple[int, ...],
    trace_out: str | None,
    jobs: int | None,
    dask_address: str | None,
) -> None:
    """Put the job's own torch.profiler traces beside its compile logs.

    Per profiled step and rank, each compiled graph run's collectives are paired with the
    rank's recorded schedule (kind and bytes must agree) and measured: transfer time against
    torch's estimate, time the main thread waited (exposed), step time, and the skew across
    ranks. Medians over steps, with min and max.
    """
    from tracekit.analyze.measure import measure_logs, mismatch_reason
    from tracekit.analyze.measure_estimates import EstimatesError
    from tracekit.commands.output import output_sink
    from tracekit.commands.progress import ProgressBar
    from tracekit.read.reader import load
    from tracekit.render.measure_text import render
    from tracekit.render.text import escape_controls

    if dask_address is not None:
        run = _load_on_dask(list(paths), dask_address, jobs)
    else:
        with ProgressBar() as bar:
            run = load(list(paths), jobs=jobs, progress=bar.wanted)
    why = no_log_reason(run)
    if why:
        fail("measure", why)
    traces = read_profiles(profiles, jobs, dask=dask_address)
    try:
        result = measure_logs(run, traces, list(paths), ranks, estimates)
    except EstimatesError as e:
        fail("measure", f"--estimates {e}")
    except ValueError as e:  # --rank names no trace
        fail("measure", str(e))
    doc = result.document()
    text = render(doc, fmt)
    if fmt != "json":  # a trace's or log's escape sequences never reach the terminal raw
        text = escape_controls(text, keep_newlines=True)
    with output_sink(output, command="measure", error_status=BAD_INPUT) as write:
        write(text.encode("utf-8"))
    if trace_out:
        from tracekit.render.measure_perfetto import write_trace

        write_trace(result, trace_out)
    nothing = mismatch_reason(result)
    if nothing:
        fail("measure", nothing)
    sys.exit(0)
