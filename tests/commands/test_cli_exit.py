"""The ``tracekit`` command (``tracekit.cli.run``) ends with ``os._exit`` after flushing: the
output is whole, the exit status is click's, a reader that leaves early is no error, and a
process that imported torch runs its exit hooks first (atexit), then ends the same way."""

from __future__ import annotations

import atexit
import subprocess
import sys
from types import SimpleNamespace

import click
import pytest

import tracekit.cli as cli
from conftest import FIXTURE_LOGS, ROOT
from tracekit.read.reader import load
from tracekit.render.text import dumps_json
from tracekit.render.summary_document import summary_document

CMD = [sys.executable, "-m", "tracekit"]


def tk(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*CMD, *args], cwd=ROOT, capture_output=True, timeout=120, **kw)


def test_json_output_is_whole():
    p = tk("summarize", str(FIXTURE_LOGS / "diverge_rank"), "--format", "json", "--jobs", "2")
    assert p.returncode == 0 and p.stderr == b""
    assert p.stdout.decode() == dumps_json(summary_document(load(FIXTURE_LOGS / "diverge_rank")))


def test_exit_statuses_are_clicks(tmp_path):
    log = tmp_path / "dedicated_log_torch_trace_rank_0_x.log"
    good = next((FIXTURE_LOGS / "spmd_auto").glob("*rank_0_*.log")).read_bytes()
    log.write_bytes(b"not a glog line\n" + good)
    strict = tk("summarize", str(log), "--strict")
    assert strict.returncode == 1
    assert strict.stderr.decode().strip().splitlines()[-1] == "tracekit summarize: 1 bad input (--strict)"
    assert b"bad_prefix" in strict.stdout
    assert tk("summarize", str(log)).returncode == 0
    usage = tk("summarize", "--bogus")
    assert usage.returncode == 2 and b"No such option '--bogus'" in usage.stderr
    differ = tk("diff", str(FIXTURE_LOGS / "spmd_auto"), str(FIXTURE_LOGS / "diverge_rank"), "--exit-code")
    assert differ.returncode == 1 and differ.stdout.startswith(b"2 graphs changed on 1 rank (3)\n")


def test_a_reader_that_leaves_early_is_no_error(tmp_path):
    log = tmp_path / "dedicated_log_torch_trace_rank_0_x.log"
    log.write_bytes(next((FIXTURE_LOGS / "spmd_auto").glob("*rank_0_*.log")).read_bytes() * 30)
    full = tk("summarize", str(log), "--format", "json").stdout
    assert len(full) > 1 << 17  # more than a pipe holds: the writer meets the closed pipe
    p = subprocess.Popen([*CMD, "summarize", str(log), "--format", "json"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.read(1) == b"{"
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=120) == 0 and err == b""


@pytest.mark.parametrize("code, status, stderr", [(None, 0, ""), (3, 3, ""), ("boom", 1, "boom\n")])
def test_run_ends_with_clicks_status(monkeypatch, capsys, code, status, stderr):
    def fake_main(standalone_mode):
        raise SystemExit(code)

    exits: list[int] = []
    monkeypatch.setattr(cli, "main", SimpleNamespace(main=fake_main))
    monkeypatch.setattr(cli.os, "_exit", exits.append)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    cli.run()
    assert exits == [status] and capsys.readouterr().err == stderr


@pytest.mark.parametrize("exc, status, stderr", [
    (KeyboardInterrupt(), 130, "\ntracekit: interrupted\n"),
    (click.exceptions.Abort(), 130, "tracekit: interrupted\n"),  # after click's own newline
    (click.UsageError("bad --rank"), 2, "tracekit: bad --rank\n"),
    (ValueError("a bug\nsecond line"), 2,
     "tracekit: internal error: ValueError: a bug (TRACEKIT_DEBUG=1 shows the traceback; please report it)\n"),
])
def test_run_maps_interrupts_and_usage_errors_to_the_policy(monkeypatch, capsys, exc, status, stderr):
    def fake_main(standalone_mode):
        raise exc

    exits: list[int] = []
    monkeypatch.setattr(cli, "main", SimpleNamespace(main=fake_main))
    monkeypatch.setattr(cli.os, "_exit", exits.append)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    cli.run()
    assert exits == [status] and capsys.readouterr().err == stderr


def test_run_runs_the_exit_hooks_then_ends_once_torch_is_imported(monkeypatch):
    def fake_main(standalone_mode):
        raise SystemExit(4)

    calls: list[object] = []
    monkeypatch.setattr(cli, "main", SimpleNamespace(main=fake_main))
    monkeypatch.setattr(cli.os, "_exit", lambda n: calls.append(("_exit", n)))
    monkeypatch.setattr(atexit, "_run_exitfuncs", lambda: calls.append("exit hooks"))
    monkeypatch.setitem(sys.modules, "torch", sys)
    cli.run()
    assert calls == ["exit hooks", ("_exit", 4)]


def test_exit_hooks_registered_after_torch_run_in_a_real_process():
    code = (
        "import atexit, sys, torch\n"
        "atexit.register(lambda: print('hook ran', flush=True))\n"
        "sys.argv = ['tracekit', 'replay', '--help']\n"
        "from tracekit.cli import run\n"
        "run()\n"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, timeout=120)
    out = p.stdout.decode()
    assert p.returncode == 0
    assert out.startswith("Usage: tracekit replay")
    assert out.endswith("hook ran\n")


def test_ctrl_c_in_a_real_replay_is_one_line_after_the_interrupted_one():
    """SIGINT to a replay under way: exit 130, and on stderr the line ^C interrupted ended, then
    one line (click's Abort had added a blank line before ours: two newlines)."""
    import signal
    import time
    from pathlib import Path

    p = subprocess.Popen(
        [sys.executable, "-m", "tracekit", "replay", "fixtures/logs/hsdp_overlap", "--recommend", "--all-ranks"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a test run in the background ignores it
    )  # fmt: skip
    try:
        # once torch's library is mapped the command runs (run() holds Ctrl-C): before that, in
        # the interpreter's start and tracekit.cli's imports, Python's own traceback is all there is
        maps = Path(f"/proc/{p.pid}/maps")
        deadline = time.monotonic() + 120
        while p.poll() is None and time.monotonic() < deadline and "libtorch" not in maps.read_text():
            time.sleep(0.05)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert (p.returncode, out, err) == (130, b"", b"\ntracekit: interrupted\n")
