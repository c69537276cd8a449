"""How a sweep's caps are shared with ``--jobs`` (issue 41, tracekit.replay.parallel_caps): the
smallest cap (the most buckets: the longest schedule) leaves for a worker first, this process
schedules the others meanwhile instead of waiting, each distinct plan is scheduled once; plans
are kept by cap, and a replay's copies emit no TORCH_TRACE artifact (torch's handler would
otherwise print the whole graph once a process). On overlap_cap_a's backward graph (110 nodes,
forked here with ``min_nodes=0``)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from tests.conftest import FIXTURE_LOGS

pytest.importorskip("torch")

A = FIXTURE_LOGS / "overlap_cap_a"


def _backward():
    from tracekit.read.reader import graph_sources

    return [s for s in graph_sources([str(A)]) if s.graph_index == 1][0]


def _held(job):
    """In the worker (the pool finds it by name): held until this process has made its two
    schedules (``_held.release`` exists; a minute at most), then the real one, with its pid."""
    import time

    for _ in range(6000):
        if _held.release.exists():
            break
        time.sleep(0.01)
    return ("worker", os.getpid(), job[0], _held.real(job))


def test_the_smallest_cap_leaves_first_and_this_process_schedules_the_rest(tmp_path, monkeypatch):
    from tracekit.replay import parallel_caps
    from tracekit.replay.replayer import GraphReplayer
    from tracekit.replay.results import ReplayOptions

    src = _backward()
    wanted = [(1.5, False), (64.0, True), (0.5, True), (0.01, True), (0.1, True), (4.0, True), (1.0, True)]
    here = GraphReplayer(src.text, ReplayOptions())
    keys: dict[tuple, float] = {}  # the distinct plans, smallest cap first: the order they go in
    for cap, what_if in sorted(wanted):
        keys.setdefault(here.schedule_key(cap, src.compute_estimates_us, what_if)[0], cap)
    assert list(keys.values()) == [0.01, 4.0, 64.0]

    release = tmp_path / "release"
    monkeypatch.setattr(_held, "release", release, raising=False)
    monkeypatch.setattr(_held, "real", parallel_caps._schedule_one, raising=False)
    monkeypatch.setattr(parallel_caps, "_schedule_one", _held)
    sweep = GraphReplayer(src.text, ReplayOptions(jobs=2))
    made: list[tuple] = []
    keep = sweep.keep_schedule

    def kept(key, scheduled):
        if isinstance(scheduled, tuple):  # a worker's
            made.append(scheduled[:3])
            scheduled = scheduled[3]
        else:
            made.append(("here", os.getpid(), keys[key]))
            if sum(m[0] == "here" for m in made) == 2:
                release.touch()
        keep(key, scheduled)

    sweep.keep_schedule = kept
    assert parallel_caps.schedule_in_workers(sweep, wanted, src.compute_estimates_us, 2, min_nodes=0) == 3
    workers = {m[1] for m in made if m[0] == "worker"}
    assert [(m[0], m[2]) for m in made] == [("here", 4.0), ("here", 64.0), ("worker", 0.01)]
    assert len(workers) == 1 and os.getpid() not in workers  # one worker forked for 2 jobs
    for cap, what_if in wanted:  # and every cap finds its schedule, the one made alone
        got = sweep.scheduled(cap, src.compute_estimates_us, what_if)
        want = here.scheduled(cap, src.compute_estimates_us, what_if)
        assert dataclasses.asdict(got) == dataclasses.asdict(want)
    assert sweep.scheduler_runs == here.scheduler_runs == 3


def test_plans_are_kept_by_cap():
    from tracekit.replay.replayer import GraphReplayer
    from tracekit.replay.results import ReplayOptions

    planner = GraphReplayer(_backward().text, ReplayOptions()).planner
    one = planner.plan_at(1.0)
    four = planner.plan_at(4.0)
    assert planner.plan_at(1.0) is one and planner.plan_at(4.0) is four
    assert [len(b) for b in one.buckets["RS"]] != [len(b) for b in four.buckets["RS"]]


def test_a_replays_copies_emit_no_artifact():
    from bucketing_support import captured_artifacts

    from bucketing import pre_bucket_fsdp_collectives
    from tracekit.replay import overlap_schedule as osch
    from tracekit.replay.replayer import GraphReplayer
    from tracekit.replay.results import ReplayOptions

    src = _backward()
    rp = GraphReplayer(src.text, ReplayOptions())
    with captured_artifacts() as records:
        rp.scheduled(1.0, src.compute_estimates_us)
    assert records == []
    with captured_artifacts() as records:  # the pass as inductor runs it: its artifacts
        pre_bucket_fsdp_collectives(osch.copy_graph(rp.gm), bucket_cap_mb=1.0, recompile=False)
    assert [name for name, _ in records] == [
        "tracekit_fsdp_input_graph",
        "tracekit_fsdp_buckets",
        "pre_bucketing_fsdp_collectives",
    ]


def test_progress_moves_while_caps_are_scheduled_side_by_side(monkeypatch):
    """With --jobs the caps' progress is told as their schedules are made, while the worker
    still runs (it is told again by the loop over the caps only if it goes up): per graph,
    steps go up to every cap, as with one job."""
    import multiprocessing

    from tracekit.replay import parallel_caps
    from tracekit.replay.engine import replay_sources
    from tracekit.replay.results import CapRequest, ReplayOptions
    from tracekit.replay.selection import replay_sources_for

    monkeypatch.setattr(parallel_caps, "MIN_NODES", 0)
    caps = [CapRequest(0.01), CapRequest(4.0), CapRequest(64.0), CapRequest(1.0)]
    sources = replay_sources_for([str(A)])
    seen: dict[int, list[tuple[int, int, bool]]] = {}

    def on_cap(graph, graphs, done, total):
        seen.setdefault(graph, []).append((done, total, bool(multiprocessing.active_children())))

    replay_sources(sources, ReplayOptions(caps=caps, jobs=2), on_cap=on_cap)
    one: dict[int, list[tuple[int, int]]] = {}
    replay_sources(
        sources,
        ReplayOptions(caps=caps, jobs=1),
        on_cap=lambda g, n, d, t: one.setdefault(g, []).append((d, t)),
    )
    assert one == {1: [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)], 2: [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]}
    assert sorted(seen) == [1, 2]
    for steps in seen.values():
        done = [d for d, _, _ in steps]
        assert done == sorted(set(done)) and done[-1] == 5 and {t for _, t, _ in steps} == {5}
        assert any(worker for _, _, worker in steps)  # told while the worker was scheduling


def _dies(job):
    """In the worker: it dies at its first cap (killed, out of memory)."""
    os._exit(3)


def test_a_worker_lost_leaves_its_cap_to_this_process(monkeypatch):
    """The worker dies at the smallest cap: this process still schedules the others, no process is
    left, and the caller's loop schedules the lost cap as one job would: the same schedules."""
    import multiprocessing

    from tracekit.replay import parallel_caps
    from tracekit.replay.replayer import GraphReplayer
    from tracekit.replay.results import ReplayOptions

    src = _backward()
    wanted = [(1.5, False), (64.0, True), (0.01, True), (4.0, True)]
    monkeypatch.setattr(parallel_caps, "_schedule_one", _dies)
    sweep = GraphReplayer(src.text, ReplayOptions(jobs=2))
    assert parallel_caps.schedule_in_workers(sweep, wanted, src.compute_estimates_us, 2, min_nodes=0) == 2
    assert multiprocessing.active_children() == []
    assert sweep.scheduler_runs == 2  # 4 and 64 MB here; 0.01 MB lost with the worker
    here = GraphReplayer(src.text, ReplayOptions())
    for cap, what_if in wanted:
        got = sweep.scheduled(cap, src.compute_estimates_us, what_if)
        want = here.scheduled(cap, src.compute_estimates_us, what_if)
        assert dataclasses.asdict(got) == dataclasses.asdict(want)
    assert sweep.scheduler_runs == here.scheduler_runs == 3


@pytest.mark.parametrize(("jobs", "forked"), [(2, 1), (3, 2), (8, 2)])
def test_no_more_workers_than_distinct_caps_to_share(jobs, forked, monkeypatch):
    """3 distinct schedules: at most 2 workers (this process takes one), whatever --jobs says."""
    from tracekit.replay import parallel_caps
    from tracekit.replay.replayer import GraphReplayer
    from tracekit.replay.results import ReplayOptions

    sizes = []
    real = parallel_caps.ProcessPoolExecutor

    def pool(max_workers, **kwargs):
        sizes.append(max_workers)
        return real(max_workers=max_workers, **kwargs)

    monkeypatch.setattr(parallel_caps, "ProcessPoolExecutor", pool)
    src = _backward()
    wanted = [(1.5, False), (64.0, True), (0.01, True), (4.0, True), (0.1, True)]
    sweep = GraphReplayer(src.text, ReplayOptions(jobs=jobs))
    assert parallel_caps.schedule_in_workers(sweep, wanted, src.compute_estimates_us, jobs, min_nodes=0) == 3
    assert sizes == [forked]
