"""What every command shares: the exit-status policy and the common options.

Exit status, the same for every command (docs/output.md, "Exit status"):

- ``0`` (:data:`OK`): done, nothing to report;
- ``1`` (:data:`FINDINGS`): findings the caller asked to fail on (``--strict`` with bad input
  or missing ranks, however many: :func:`strict_failure`,
  ``summarize --fail-on-divergence``, ``diff --exit-code`` with differences, a replay that did
  not reproduce the recorded outcome or whose step's rank log is cut);
- ``2`` (:data:`BAD_INPUT`): bad usage or unreadable input (a missing path, an unknown rank or
  graph, a directory that does not exist for ``--output``, no log that could be read), checked
  before any work where it can be, with one line on stderr and never a traceback;
- ``130`` (:data:`INTERRUPTED`): Ctrl-C.

The options ``--format``, ``--output`` and ``--jobs`` are declared here once
(:func:`format_option`, :func:`output_option`, :func:`jobs_option`).
"""

from __future__ import annotations

import gc
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import click

OK, FINDINGS, BAD_INPUT, INTERRUPTED = 0, 1, 2, 130


def fail(command: str, message: str, status: int = BAD_INPUT) -> NoReturn:
    """One line on stderr (``tracekit COMMAND: MESSAGE``), then exit with ``status``."""
    click.echo(f"tracekit {command}: {message}", err=True)
    sys.exit(status)


def require_torch(command: str, scheduler: bool = False) -> None:
    """``replay`` and ``explain`` rebuild graphs with torch: without torch, or on a release the
    passes do not support, one line (``pip install 'tracekit[replay]'``, or
    :class:`bucketing.compat.UnsupportedTorch`'s message) and exit 2, before any work. A release
    whose comm model (or, with ``scheduler``, overlap scheduler) does not take the arguments we
    pass is refused the same way. A release that runs but was never tested gets one note on
    stderr."""
    from bucketing.compat import Call, UnsupportedTorch, check_calls, check_torch, untested_note

    try:
        check_torch()
    except UnsupportedTorch as e:
        fail(command, str(e))
    import bucketing.prebucket  # noqa: F401 - the passes (and torch's modules) load before gc.freeze()
    from tracekit.replay.comm_estimate import COMM_MODEL_CALLS

    calls: tuple[Call, ...] = COMM_MODEL_CALLS
    if scheduler:
        from tracekit.replay.overlap_schedule import SCHEDULER_CALLS

        calls += SCHEDULER_CALLS
    try:
        check_calls(calls)
    except UnsupportedTorch as e:
        fail(command, str(e))

    note = untested_note()
    if note:  # a release with every building block but never tested: it runs, with one line
        click.echo(f"tracekit {command}: note: {note}", err=True)
    # torch's modules and objects live to the end: out of the collector's full passes, which
    # otherwise walk them again and again while graphs are rebuilt and scheduled.
    gc.freeze()


def has_log_entries(run: Any) -> bool:
    """False when nothing in the input looked like a compile log
    (:func:`tracekit.read.reader.holds_compile_log`). Every command then exits
    :data:`BAD_INPUT` ("no log could be read"), whatever else it prints."""
    from tracekit.read.reader import holds_compile_log

    return holds_compile_log(run)


def no_log_reason(run: Any) -> str | None:
    """None when ``run`` holds a compile log; else the one line every command fails with
    (:func:`tracekit.read.reader.no_log_reason`), its control characters escaped (the file
    name comes from the user, the detail from a log)."""
    from tracekit.read.reader import no_log_reason as why_no_log
    from tracekit.render.text import escape_controls

    why = why_no_log(run)
    return None if why is None else escape_controls(why)


def strict_failure(doc: dict[str, Any]) -> str | None:
    """Why ``--strict`` fails on a summary document (:data:`FINDINGS`), or None: its bad inputs
    (the diagnostics, missing and duplicated ranks included: ``2 bad inputs (--strict)``), else
    the ranks its world misses that no diagnostic counts (one rank read alone has no
    ``missing_rank`` diagnostic, yet its verdict is INCOMPLETE all the same: 3 of 4 ranks
    missing fail as 1 of 4 does, ``3 of 4 ranks missing (1-3) (--strict)``), unless a log
    read has no rank (it may be any of those)."""
    from tracekit.model.nouns import plural

    counts = (doc.get("diagnostics") or {}).get("counts") or {}
    bad = sum(counts.values())
    if bad:
        return f"{plural(bad, 'bad input')} (--strict)"
    world = doc.get("world") or {}
    missing = world.get("missing_count") or 0
    rankless = "-" in str(world.get("ranks") or "").split(",")  # it may be any rank it "misses"
    if missing and not rankless:
        return f"{missing} of {world.get('expected')} ranks missing ({world.get('missing')}) (--strict)"
    return None


def format_option(formats: Sequence[str], default: str = "table", help: str = "Output format.") -> Callable:
    return click.option(
        "--format", "fmt", type=click.Choice(list(formats)), default=default, show_default=True, help=help
    )


class FiniteFloatRange(click.FloatRange):
    """A :class:`click.FloatRange` that also refuses ``nan`` and ``inf`` (a usage error, status
    2): click's own range lets both through, ``nan`` because every comparison with it is false."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        import math

        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


def writable_target_problem(path: str, *, directory: bool = False) -> str | None:
    """None when ``path`` can be written (a file, or with ``directory`` a directory to write
    files into, made if missing); else why not, in a few words. Checked before any work, so an
    unwritable target fails in a second, not after a replay: a missing file is created and
    removed again, and a directory made and removed in the directory's first existing ancestor
    (the only probes that hold for root and read-only mounts alike)."""
    target = os.path.abspath(path)
    if directory:
        probe = target
        while not os.path.exists(probe):
            probe = os.path.dirname(probe)
        if not os.path.isdir(probe):
            return f"{probe} is not a directory"
        # os.access says yes to root everywhere (/proc too): make and remove a directory there
        import tempfile

        try:
            os.rmdir(tempfile.mkdtemp(prefix=".tracekit-probe-", dir=probe))
        except OSError as e:
            return f"cannot write {path}: {e.strerror or e}"
        return None
    parent = os.path.dirname(target)
    if not os.path.isdir(parent):
        return f"directory {os.path.dirname(path) or '.'!r} does not exist"
    if os.path.isdir(target):
        return f"{path} is a directory"
    existed = os.path.exists(target)
    try:
        with open(target, "ab"):
            pass
    except OSError as e:
        return f"cannot write {path}: {e.strerror or e}"
    if not existed:
        os.unlink(target)
    return None


def _check_output_dir(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value:
        problem = writable_target_problem(value)
        if problem:
            raise click.BadParameter(problem, ctx=ctx, param=param)
    return value


def check_output_tree(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--trace-out DIR``: DIR, or its first existing ancestor, is a writable directory."""
    if value:
        problem = writable_target_problem(value, directory=True)
        if problem:
            raise click.BadParameter(problem, ctx=ctx, param=param)
    return value


def output_option(help: str = "Write to FILE instead of stdout.") -> Callable:
    return click.option(
        "--output", "-o", type=click.Path(dir_okay=False), default=None, callback=_check_output_dir, help=help
    )


def file_in_existing_dir(flag: str, name: str, metavar: str, help: str) -> Callable:
    """An option naming a file to write (``--plot FILE.png``): its directory must exist."""
    return click.option(
        flag,
        name,
        type=click.Path(dir_okay=False),
        default=None,
        metavar=metavar,
        callback=_check_output_dir,
        help=help,
    )


def _check_plot(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--plot FILE.png``: its directory exists and matplotlib imports, both checked before any work."""
    value = _check_output_dir(ctx, param, value)
    if value:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise click.BadParameter(
                "needs matplotlib: pip install -e '.[plot]'", ctx=ctx, param=param
            ) from None
    return value


def plot_option(
    help: str = "Draw the step's est ms, exposed ms and peak memory, and each graph's collectives and comm "
    "time, against the cap; recorded and recommended caps marked (needs matplotlib).",
) -> Callable:
    return click.option(
        "--plot",
        "plot_path",
        type=click.Path(dir_okay=False),
        default=None,
        metavar="FILE.png",
        callback=_check_plot,
        help=help,
    )


#: The largest cap ``--cap-mb`` takes (MB): 1e9 MB is a petabyte, beyond any GPU's memory.
MAX_CAP_MB = 1e9


def parse_cap_mb(text: str) -> float | None:
    """One ``--cap-mb`` value: a number of MB, or None for ``auto``; a click usage error (one
    line, status 2) that says what is wrong with it otherwise."""
    import math

    if text.lower() == "auto":
        return None
    try:
        mb = float(text)
    except ValueError:
        mb = math.nan
    if math.isnan(mb):
        raise click.BadParameter(f"{text!r} is not a number of MB", param_hint="--cap-mb")
    if mb <= 0:
        raise click.BadParameter(f"{text!r} is not a cap: it must be more than 0 MB", param_hint="--cap-mb")
    if mb > MAX_CAP_MB:
        raise click.BadParameter(
            f"{text!r} is too large: a cap is at most {MAX_CAP_MB:,.0f} MB", param_hint="--cap-mb"
        )
    return mb


def parse_caps(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> tuple[float | None, ...]:
    """``--cap-mb`` values parsed once, while the command line is read (before any import or
    work): each cap in the order given, MB or None for ``auto``."""
    return tuple(parse_cap_mb(part.strip()) for v in values for part in v.split(",") if part.strip())


def parse_syms(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, int]:
    """``--sym NAME=VALUE`` values as {name: value}, checked while the command line is read."""
    from tracekit.replay.symbols import SizeExprError, parse_sym_assignments

    try:
        return parse_sym_assignments(list(values))
    except SizeExprError as e:
        raise click.BadParameter(str(e), ctx=ctx, param_hint="--sym") from None


def _parse_graphs(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list:
    """``--graph`` values as (compile id, index or None), checked while the command line is read."""
    from tracekit.replay.selection import SelectionError, parse_graph_selector

    try:
        return [parse_graph_selector(v) for v in values]
    except SelectionError as e:
        raise click.BadParameter(str(e), ctx=ctx, param_hint="--graph") from None


def selection_options(verb: str, all_ranks: bool = False) -> Callable[[Any], Any]:
    """``--rank`` (and with ``all_ranks``, ``--all-ranks``) and ``--graph``: the graphs replay
    and explain read (:class:`tracekit.replay.selection.Selection`)."""
    rank = click.option("--rank", type=int, help=f"Rank to {verb} (default: the lowest).")
    every = click.option("--all-ranks", is_flag=True, help=f"{verb.capitalize()} every rank's graphs.")
    graphs = click.option(
        "--graph",
        "graphs",
        multiple=True,
        metavar="COMPILE_ID[:INDEX]",
        callback=_parse_graphs,
        help="Only these graphs (e.g. 0/0 or 0/0:1); repeatable.",
    )

    def deco(f: Any) -> Any:
        return rank(every(graphs(f)) if all_ranks else graphs(f))

    return deco


def jobs_option() -> Callable:
    return click.option(
        "--jobs",
        "-j",
        type=click.IntRange(min=1),
        default=None,
        help="Worker processes reading files in parallel (default: the machine's cores).",
    )


def paths_argument() -> Callable:
    """``PATH...``: log files, .gz logs or directories; each must exist (else exit 2)."""
    return click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))


def examples(*lines: str) -> Callable[[Any], Any]:
    """Append an "Examples" block to a command's ``--help``."""

    def deco(f: Any) -> Any:
        block = "\n\n\b\nExamples:\n" + "\n".join(f"  {ln}" for ln in lines)
        f.__doc__ = inspect.cleandoc(f.__doc__ or "") + block
        return f

    return deco
