"""Exit status 2 for bad usage, unreadable input and no readable log, for every command: one
line on stderr naming the problem, never a traceback, nothing on stdout."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from conftest import FIXTURE_LOGS, ROOT

CMD = [sys.executable, "-m", "tracekit"]


def tk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CMD, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def _torch(*values):
    """A case that runs replay or explain: it needs torch (``pytest -m "not torch"`` leaves it out)."""
    return pytest.param(*values, marks=pytest.mark.torch)


@pytest.mark.parametrize("args, message", [
    (["summarize", "/no/such/dir"], "Path '/no/such/dir' does not exist"),
    (["summarize", str(FIXTURE_LOGS / "spmd_auto"), "-o", "/no/such/dir/out.json"],
     "directory '/no/such/dir' does not exist"),
    _torch(["replay", str(FIXTURE_LOGS / "spmd_auto"), "--plot", "/no/such/dir/p.png"],
           "directory '/no/such/dir' does not exist"),
    (["diff", str(FIXTURE_LOGS / "spmd_auto"), str(FIXTURE_LOGS / "spmd_auto"), "-o", "/no/such/d/x"],
     "directory '/no/such/d' does not exist"),
    _torch(["replay", str(FIXTURE_LOGS / "spmd_auto"), "--rank", "7"],
           "tracekit replay: rank 7 has no recorded outcome in the logs (ranks there: 0-3)"),
    _torch(["replay", str(FIXTURE_LOGS / "spmd_auto"), "--graph", "9/9"],
           "tracekit replay: graph 9/9 is not in the logs (graphs there: 0/0:0, 0/0:1)"),
    _torch(["replay", str(FIXTURE_LOGS / "spmd_auto"), "--graph", "0/0:x"],
           "'0/0:x' is not a graph: COMPILE_ID[:INDEX], e.g. 0/0 or 0/0:1"),
])
def test_bad_usage_and_unreadable_input_exit_2_without_a_traceback(args, message):
    r = tk(*args)
    assert r.returncode == 2 and message in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


@pytest.mark.parametrize("cmd", ["summarize", _torch("replay"), _torch("explain")])
def test_no_readable_log_is_exit_2_for_every_command(tmp_path, cmd):
    (tmp_path / "notes.txt").write_text("not a log")  # a directory without logs
    r = tk(cmd, str(tmp_path))
    assert r.returncode == 2 and "no log could be read" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.torch  # replay
def test_ranks_are_named_even_when_file_names_carry_none(tmp_path):
    for f in sorted((FIXTURE_LOGS / "spmd_auto").glob("*.log"))[:2]:
        shutil.copy(f, tmp_path / f"host{f.name.split('_rank_')[1][0]}.log")
    r = tk("replay", str(tmp_path), "--rank", "7")
    assert r.returncode == 2
    assert r.stderr == "tracekit replay: rank 7 has no recorded outcome in the logs (ranks there: 0-1)\n"
