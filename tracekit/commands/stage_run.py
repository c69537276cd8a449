"""What replay and explain share around their stage's run: the bars of a run (a status line, the
bytes read on a terminal, the caps or graphs done), and its reading failures as the command's
end in its own words (exit 2): a selection that names nothing in the logs, or no log at all."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from tracekit.commands.options import BAD_INPUT, fail
from tracekit.commands.progress import ProgressBar

T = TypeVar("T")


def run_with_bars(command: str, status: ProgressBar, call: Callable[[Any], T]) -> T:
    """``call(progress)``, a :class:`tracekit.replay.selection.Progress` drawing on ``status``
    (and on a bar of bytes read while the logs are read), ``status`` closed after. A
    :class:`~tracekit.replay.selection.SelectionError` or :class:`~tracekit.replay.notes.NoLog`
    ends ``command`` (status 2) with its message."""
    from tracekit.render.text import escape_controls
    from tracekit.replay.notes import NoLog
    from tracekit.replay.selection import Progress, SelectionError

    reading = ProgressBar()  # large inputs: a bar of bytes read (on a terminal only)

    def per_cap(graph: int, graphs: int, done: int, total: int) -> None:
        status.label = f"replaying graph {graph}/{graphs}"
        status(done, total)

    try:
        with status:
            return call(Progress(status.say, reading, reading.close, caps=per_cap, graphs=status))
    except SelectionError as e:
        fail(command, str(e), BAD_INPUT)
    except NoLog as e:  # status 2, as summarize (nothing to work on in a log is a note, exit 0)
        fail(command, escape_controls(str(e)), BAD_INPUT)
