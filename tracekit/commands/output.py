"""Where a command's output goes: ``--output FILE`` or stdout, the same way for every command.

A reader that goes away (``tracekit summarize logs/ | head``) is not an error: the rest of the
output is dropped quietly. A file that cannot be written is one line on stderr and the command's
error status, never a traceback.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import click

from tracekit.render.text import dumps_json, escape_controls


@contextlib.contextmanager
def output_sink(
    output: str | None, *, command: str, error_status: int
) -> Iterator[Callable[[bytes], object]]:
    """Yield a ``write(bytes)`` for FILE (``output``) or stdout; see the module docstring."""
    try:
        f = open(output, "wb") if output else None  # noqa: SIM115 - closed below
    except OSError as e:
        click.echo(f"tracekit {command}: cannot write {output}: {e.strerror or e}", err=True)
        sys.exit(error_status)
    sink = f if f is not None else sys.stdout.buffer
    try:
        yield sink.write
        sink.flush()
    except BrokenPipeError:
        # the pipe's reader left: point stdout at /dev/null so the interpreter's final flush is quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except OSError as e:
        click.echo(f"tracekit {command}: cannot write {output or 'stdout'}: {e.strerror or e}", err=True)
        if f is not None:  # its close flushes the same buffer once more: one line is enough
            with contextlib.suppress(OSError):
                f.close()
        sys.exit(error_status)
    finally:
        if f is not None and not f.closed:
            f.close()


def write_document(
    doc: dict[str, Any],
    fmt: str,
    render: Callable[[dict[str, Any], str], str],
    output: str | None,
    *,
    command: str,
    error_status: int,
) -> None:
    """Write a command's document to ``output`` (:func:`output_sink`): as JSON for ``json``,
    else as ``render(doc, fmt)`` with terminal control characters escaped."""
    with output_sink(output, command=command, error_status=error_status) as write:
        text = dumps_json(doc) if fmt == "json" else escape_controls(render(doc, fmt), keep_newlines=True)
        write(text.encode("utf-8"))


def write_files(doc: dict[str, Any], plot_path: str | None, trace_out: str | None, *, command: str) -> None:
    """A replay document's files beside its output: ``--plot FILE.png``
    (:func:`tracekit.render.plot.plot_replay`) and ``--trace-out DIR``, one trace-event file a cap
    (:func:`tracekit.render.perfetto.write_traces`); a line on stderr for each, or for a file
    that cannot be written the command fails (status 2)."""
    from tracekit.commands.options import BAD_INPUT, fail
    from tracekit.model.nouns import plural

    if plot_path:
        from tracekit.render.plot import PlotUnavailable, plot_replay

        try:
            plot_replay(doc, plot_path)
        except PlotUnavailable as e:
            fail(command, f"error: {e}", BAD_INPUT)
        click.echo(f"plot written to {plot_path}", err=True)
    if trace_out:
        from tracekit.render.perfetto import write_traces

        try:
            written = write_traces(doc, trace_out)
        except OSError as e:
            fail(command, f"cannot write traces to {trace_out}: {e.strerror or e}", BAD_INPUT)
        click.echo(f"{plural(len(written), 'trace file')} written to {trace_out}", err=True)
