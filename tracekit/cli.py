"""The ``tracekit`` command line.

Each subcommand lives in its own module and is imported only when it runs, so that
``tracekit --help``, ``summarize`` and ``diff`` never pay for importing torch. :func:`run` is
the console script (and ``python -m tracekit``); :func:`main` is the click group, for tests and
for callers that want click's own exit.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

#: The commands, in one registry: name -> ("module:click command object", one-line help).
COMMANDS: dict[str, tuple[str, str]] = {
    "summarize": (
        "tracekit.commands.summarize_cmd:summarize",
        "Read every rank's compile log; aggregate bucketing outcomes; flag divergence.",
    ),
    "replay": (
        "tracekit.commands.replay_cmd:replay",
        "Rebuild the recorded graphs and re-run bucketing with other caps.",
    ),
    "diff": ("tracekit.commands.diff_cmd:diff", "Compare the bucketing outcomes of two runs."),
    "report": (
        "tracekit.commands.report_cmd:report",
        "Write one self-contained HTML page of the run, to attach to a bug.",
    ),
    "explain": (
        "tracekit.commands.explain_cmd:explain",
        "Why each collective is, or is not, in a bucket; what-ifs checked.",
    ),
    "measure": (
        "tracekit.commands.measure_cmd:measure",
        "Put the job's profiler traces beside its compile logs.",
    ),
}


class OneLineUsageError(click.ClickException):
    """A usage error shown as docs/output.md promises: one line, ``tracekit COMMAND: MESSAGE``, status 2
    (click's own form is a four-line usage block)."""

    exit_code = 2

    def __init__(self, error: click.UsageError) -> None:
        super().__init__(error.format_message())
        ctx = error.ctx
        self.command = ctx.command.name if ctx is not None and ctx.parent is not None else None

    def show(self, file: object = None) -> None:
        prefix = f"tracekit {self.command}" if self.command else "tracekit"
        click.echo(f"{prefix}: {self.format_message()}", err=True)


class LazyGroup(click.Group):
    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as e:
            raise OneLineUsageError(e) from None

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except click.UsageError as e:
            raise OneLineUsageError(e) from None

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        entry = COMMANDS.get(name)
        if entry is None:
            return None
        module_name, attr = entry[0].split(":")
        return getattr(importlib.import_module(module_name), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # `tracekit --help` lists the commands without importing any of them.
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][1]) for name in self.list_commands(ctx)])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tracekit")
def main() -> None:
    """What torch.compile's FSDP collective bucketing did on every rank, and what another
    bucket cap would have done, read from the structured compile logs (TORCH_TRACE)."""


def end_children() -> None:
    """End any worker process still running (multiprocessing's, as concurrent.futures' pools
    start them), waiting for each: ``os._exit`` skips the exit hooks that would otherwise join
    them, and a forked worker holds its pool's pipes open, so it would never see its parent
    go. Pools shut themselves down (:func:`tracekit.read.process_pools.end_pool`, the
    reader's); this only makes sure nothing outlives the command. Nothing to do (and nothing
    imported) when no process was started."""
    mp = sys.modules.get("multiprocessing")
    if mp is None:
        return
    for child in mp.active_children():
        child.terminate()
        child.join(5)


def run() -> None:
    """The ``tracekit`` command: :func:`main`, then an exit without the interpreter's teardown.

    Exit statuses follow one policy (:mod:`tracekit.commands.options`): click's usage errors
    exit 2, Ctrl-C exits 130 with one line; an unexpected error is one line and status 2,
    never a traceback (``TRACEKIT_DEBUG=1`` shows it).

    Freeing every module and object at exit costs ~15 ms, a tenth of a small ``summarize``; a
    command that has flushed its output has nothing left to do, so the process ends with
    ``os._exit`` and the status chosen. When torch was imported (``replay``, ``explain``), its
    exit hooks (``atexit``) run first."""
    try:
        code: object = main.main(standalone_mode=False)
        code = code if isinstance(code, int) else 0
    except SystemExit as e:
        code = e.code
    except click.exceptions.Abort:  # click's form of KeyboardInterrupt; click ended the line already
        click.echo("tracekit: interrupted", err=True)
        code = 130
    except KeyboardInterrupt:
        click.echo("\ntracekit: interrupted", err=True)
        code = 130
    except click.exceptions.NoArgsIsHelpError as e:
        e.show()
        code = e.exit_code
    except click.UsageError as e:
        OneLineUsageError(e).show()
        code = 2
    except click.ClickException as e:
        e.show()
        code = e.exit_code
    except BrokenPipeError:
        code = 0
    except Exception as e:  # noqa: BLE001 - a bug: one line, never a traceback (unless asked)
        if os.environ.get("TRACEKIT_DEBUG"):
            raise
        first = (str(e).splitlines() or [""])[0][:200]
        click.echo(
            f"tracekit: internal error: {type(e).__name__}: {first} "
            "(TRACEKIT_DEBUG=1 shows the traceback; please report it)",
            err=True,
        )
        code = 2
    if code is None:
        code = 0
    elif not isinstance(code, int):  # what sys.exit("message") does
        print(code, file=sys.stderr)
        code = 1
    end_children()
    if "torch" in sys.modules:
        # torch's exit hooks (and logging's) run; the teardown of its thousands of modules, a
        # second or more after a replay, does not.
        import atexit

        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away, a closed stream
            pass
    os._exit(code)
