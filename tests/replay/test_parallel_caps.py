"""A graph's distinct caps scheduled in forked workers (``--jobs``, tracekit.replay.parallel_caps)
give what one process gives: ``replay --recommend`` prints the same bytes with ``--jobs 2`` as
with ``--jobs 1`` in every format (the small graphs forked too), and the workers did make the schedules (on the
overlap_cap_a fixture's backward graph: 3 distinct schedules among the recorded cap and 6 others)."""

from __future__ import annotations

import dataclasses

import pytest
from click.testing import CliRunner

from tests.conftest import FIXTURE_LOGS, ROOT

pytest.importorskip("torch")

A = FIXTURE_LOGS / "overlap_cap_a"


@pytest.mark.parametrize("fmt", ["table", "json", "markdown"])
def test_two_jobs_print_what_one_prints(fmt, monkeypatch):
    from tracekit.commands.replay_cmd import replay

    from tracekit.replay import parallel_caps

    monkeypatch.setattr(parallel_caps, "MIN_NODES", 0)  # the fixture's small graphs forked too
    monkeypatch.chdir(ROOT)
    runner = CliRunner()
    args = ["--recommend", "--format", fmt, "fixtures/logs/overlap_cap_a"]
    one = runner.invoke(replay, [*args, "--jobs", "1"], catch_exceptions=False)
    two = runner.invoke(replay, [*args, "--jobs", "2"], catch_exceptions=False)
    assert one.exit_code == two.exit_code == 0
    assert two.stdout == one.stdout
    assert "exposed" in one.stdout  # the schedules are in what is compared


def test_workers_make_the_distinct_schedules_this_process_would():
    from tracekit.read.reader import graph_sources
    from tracekit.replay.replayer import GraphReplayer
    from tracekit.replay.results import ReplayOptions
    from tracekit.replay.parallel_caps import schedule_in_workers

    src = [s for s in graph_sources([str(A)]) if s.graph_index == 1][0]
    caps = [1.5, 0.01, 0.1, 0.5, 1.0, 4.0, 64.0]
    wanted = [(caps[0], False)] + [(c, True) for c in caps[1:]]
    forked = GraphReplayer(src.text, ReplayOptions(jobs=2))
    assert schedule_in_workers(forked, wanted, src.compute_estimates_us, jobs=2) == 0  # 110 nodes: here
    made = schedule_in_workers(forked, wanted, src.compute_estimates_us, jobs=2, min_nodes=0)
    here = GraphReplayer(src.text, ReplayOptions())
    for cap, what_if in wanted:
        want = here.scheduled(cap, src.compute_estimates_us, what_if)
        got = forked.scheduled(cap, src.compute_estimates_us, what_if)
        assert dataclasses.asdict(got) == dataclasses.asdict(want)
    assert made == here.scheduler_runs == 3
    assert forked.scheduler_runs == 3  # every one made by a worker: none run again here


def _children() -> set[int]:
    """This process's live child processes (Linux: /proc's children lists)."""
    import pathlib

    out: set[int] = set()
    for f in pathlib.Path("/proc/self/task").glob("*/children"):
        out |= {int(p) for p in f.read_text().split()}
    return out


def test_ctrl_c_while_workers_run_ends_every_worker():
    """Ctrl-C (or any error) in this process while workers schedule: it propagates, and the pool's
    workers are ended and waited for before it does (none left behind)."""
    import multiprocessing

    from tracekit.read.reader import graph_sources
    from tracekit.replay.replayer import GraphReplayer
    from tracekit.replay.results import ReplayOptions
    from tracekit.replay.parallel_caps import schedule_in_workers

    src = [s for s in graph_sources([str(A)]) if s.graph_index == 1][0]
    wanted = [(1.5, False), (0.01, True), (0.1, True), (64.0, True)]
    replayer = GraphReplayer(src.text, ReplayOptions(jobs=2))

    def interrupted(key, scheduled):
        raise KeyboardInterrupt

    replayer.keep_schedule = interrupted
    before = _children()
    with pytest.raises(KeyboardInterrupt):
        schedule_in_workers(replayer, wanted, src.compute_estimates_us, jobs=2, min_nodes=0)
    assert multiprocessing.active_children() == []
    assert _children() == before
    assert replayer.scheduler_runs == 0


def test_a_command_with_forked_workers_leaves_no_process(tmp_path):
    """``replay --jobs 2`` with the fixture's graphs forked (MIN_NODES 0), run as the command runs
    (tracekit.cli.run: os._exit after the exit hooks) in a session of its own: it exits 0 within
    the timeout, and once it has, no process of its session is left."""
    import os
    import signal
    import subprocess
    import sys

    code = (
        "import sys; import tracekit.replay.parallel_caps as p; p.MIN_NODES = 0; "
        "from tracekit.cli import run; "
        f"sys.argv = ['tracekit', 'replay', '--recommend', '--jobs', '2', {str(A)!r}]; run()"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=300)  # a worker holding the pipes open would hang here
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err.decode()
    assert b"recommend" in out.lower()
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)  # nothing of its session (a forked worker) outlives it


def test_end_children_ends_a_process_left_running():
    import multiprocessing
    import time

    from tracekit.cli import end_children

    child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,))
    child.start()
    end_children()
    assert not child.is_alive() and child.exitcode == -15
    assert multiprocessing.active_children() == []
