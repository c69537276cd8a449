"""Our memory walk (tracekit.replay.overlap_schedule.memory_walk) builds torch's MemoryTracker on
the storage map the scheduler already made for the same nodes, instead of a second pass over
every node's fake values, with the same figures: overlap_cap_a's forward peaks at 7,864,320 B
(test_replay_overlap.test_exact_figures_of_the_small_cap), at the recorded 1.5 MB cap."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURE_LOGS

pytest.importorskip("torch")


def _count_alias_trackers(monkeypatch) -> list[int]:
    from torch._inductor.fx_passes import memory_estimator

    made = [0]
    init = memory_estimator.GraphAliasTracker.__init__

    def counting(self, nodes):
        made[0] += 1
        init(self, nodes)

    monkeypatch.setattr(memory_estimator.GraphAliasTracker, "__init__", counting)
    return made


def test_one_cap_builds_only_the_scheduler_s_storage_maps_and_the_same_peak(monkeypatch):
    from torch._inductor.fx_passes import memory_estimator

    import tracekit.replay

    made = _count_alias_trackers(monkeypatch)
    run = tracekit.replay.replay(str(FIXTURE_LOGS / "overlap_cap_a"), cap_mb=[])
    fwd = run.graphs[0].reproduction.schedule
    assert fwd.peak_memory_bytes == 7864320
    # two graphs, each scheduled once at the recorded cap: torch's scheduler builds two maps
    # (its tracker and its baseline's); ours, none more (three each before)
    assert made[0] == 4
    assert memory_estimator.GraphAliasTracker.__name__ == "GraphAliasTracker"  # put back


def test_without_the_scheduler_s_map_the_walk_makes_its_own_with_the_same_figures():
    from torch._inductor.fx_passes.memory_estimator import MemoryTracker

    from tracekit.read.reader import graph_sources
    from tracekit.replay.graph_text import parse_graph_text
    from tracekit.replay.overlap_schedule import memory_walk

    src = next(s for s in graph_sources([FIXTURE_LOGS / "overlap_cap_a"]) if s.rank in (0, None))
    gm = parse_graph_text(src.text)

    class Unscheduled:  # the scheduler made no tracker (memory limits off)
        memory_tracker = None

    ours = memory_walk(gm, Unscheduled())
    fresh = MemoryTracker(gm.graph, device_filter=lambda d: True)
    assert ours.alias_tracker is not fresh.alias_tracker
    assert ours.current_memory_bytes == fresh.current_memory_bytes
    assert ours.current_memory_bytes == 3670016  # the forward's inputs, before any node runs
    walked = []
    for n in gm.graph.nodes:  # the graph's own order: the same bytes at every step
        ours.schedule_node(n)
        fresh.schedule_node(n)
        walked.append((ours.current_memory_bytes, fresh.current_memory_bytes))
    assert all(a == b for a, b in walked)
    assert type(ours.scheduled) is set  # asked of every user of every storage: answered in C
    assert max(a for a, _ in walked) == 7340032  # in the graph's order (the scheduled: 7,864,320)
