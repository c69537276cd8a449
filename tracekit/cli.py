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

import click

#: subcommand name -> "module:click command object"
COMMANDS: dict[str, str] = {
    "summarize": "tracekit.commands.summarize_cmd:summarize",
    "replay": "tracekit.commands.replay_cmd:replay",
    "diff": "tracekit.commands.diff_cmd:diff",
    "explain": "tracekit.commands.explain_cmd:explain",
}

SHORT_HELP: dict[str, str] = {
    "summarize": "Read every rank's compile log; aggregate bucketing outcomes; flag divergence.",
    "replay": "Rebuild the recorded graphs and re-run bucketing with other caps.",
    "diff": "Compare the bucketing outcomes of two runs.",
    "explain": "Why each collective is, or is not, in a bucket; what-ifs checked.",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        return getattr(importlib.import_module(module_name), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # `tracekit --help` lists the commands without importing any of them.
        with formatter.section("Commands"):
            formatter.write_dl([(name, SHORT_HELP[name]) for name in self.list_commands(ctx)])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tracekit")
def main() -> None:
    """What torch.compile's FSDP collective bucketing did on every rank, and what another
    bucket cap would have done, read from the structured compile logs (TORCH_TRACE)."""


def run() -> None:
    """The ``tracekit`` command: :func:`main`, then an exit without the interpreter's teardown.

    Freeing every module and object at exit costs ~15 ms, a tenth of a small ``summarize``; a
    command that has flushed its output has nothing left to do, so the process ends with
    ``os._exit`` and the status click chose. When torch was imported (``replay``), the exit is
    the ordinary one, so that torch's exit hooks run."""
    try:
        main()
        code: object = 0
    except SystemExit as e:
        code = e.code
    if "torch" in sys.modules:
        raise SystemExit(code)
    if code is None:
        code = 0
    elif not isinstance(code, int):  # what sys.exit("message") does
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away, a closed stream
            pass
    os._exit(code)
