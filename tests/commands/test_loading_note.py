"""replay and explain say that torch is loading (seconds on a cold start, before anything else
is shown), on a terminal only: the line comes before the imports that load torch."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from conftest import FIXTURE_LOGS, ROOT
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


#: Run in a fresh process (torch not loaded): records what the command's status line says and
#: the first import of torch, stopping the command there (torch itself is never loaded).
_WATCH = """
import sys
from tracekit.commands.progress import ProgressBar
events = []
class Stop(BaseException):
    pass
class Watch:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.split(".")[0] == "torch":
            events.append("import torch")
            raise Stop
say = ProgressBar.say
def recorded(self, text, *args, **kwargs):
    events.append(text)
    return say(self, text, *args, **kwargs)
ProgressBar.say = recorded
sys.meta_path.insert(0, Watch)
from tracekit.commands.{module} import {command} as command
try:
    command.main([{logs!r}], standalone_mode=False)
except Stop:
    pass
print(events[:2])
"""


@pytest.mark.parametrize(("module", "command"), [("replay_cmd", "replay"), ("explain_cmd", "explain")])
def test_the_commands_say_it_before_importing_torch(module, command):
    code = _WATCH.format(module=module, command=command, logs=str(FIXTURE_LOGS / "spmd_auto"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "['tracekit: loading torch…', 'import torch']\n"


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
