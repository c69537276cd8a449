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
    from tracekit.replay.engine import GraphReplayer, ReplayOptions
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
