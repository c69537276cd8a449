"""replay and explain say that torch is loading (seconds on a cold start, before anything else
is shown), on a terminal only: the line comes before the imports that load torch."""

from __future__ import annotations

import inspect
import io
import sys

from tracekit.commands import explain_cmd, replay_cmd
from tracekit.commands.progress import note_loading_torch


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_note_goes_to_a_terminal_while_torch_is_not_loaded(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    tty, pipe = _Terminal(), io.StringIO()
    note_loading_torch(tty)
    note_loading_torch(pipe)
    assert tty.getvalue() == "tracekit: loading torch…\n"
    assert pipe.getvalue() == ""


def test_no_note_once_torch_is_loaded(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", object())
    tty = _Terminal()
    note_loading_torch(tty)
    assert tty.getvalue() == ""


def test_the_commands_say_it_before_importing_torch():
    for cmd in (replay_cmd.replay, explain_cmd.explain):  # require_torch imports torch, then the stage
        src = inspect.getsource(cmd.callback)
        assert 0 <= src.index("note_loading_torch(bar=status)") < src.index("require_torch(") < src.index(
            "from tracekit.commands.stage_run")


def test_the_commands_note_is_cleared_by_what_comes_next(monkeypatch):
    """The note is the bar's status line: the next status replaces it, a close wipes it, and
    nothing of it is left at the end (no "loading torch" line above the output)."""
    from tracekit.commands.progress import ProgressBar

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    tty = _Terminal()
    bar = ProgressBar(tty, label="replaying", unit="caps", min_total=2)
    note_loading_torch(bar=bar)
    assert tty.getvalue() == "\rtracekit: loading torch…\r"
    bar.say("reading the logs ...")
    bar.close()
    blank = "\r" + " " * (bar.width + 50) + "\r"
    assert tty.getvalue() == f"\rtracekit: loading torch…\r{blank}\rreading the logs ...\r{blank}"
    assert "\n" not in tty.getvalue()
