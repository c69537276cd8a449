"""A replay's copy of a graph per cap is freed once its schedule is read: torch's
``overlap_scheduling.get_group_name`` caches by node, and kept every copy the scheduler ran on
(tracekit.replay.overlap_schedule.nodes_released). On overlap_cap_a's backward (87 nodes as
rebuilt from its log) at three distinct caps, and when the scheduler raises."""

from __future__ import annotations

import gc
import weakref

import pytest

from tests.conftest import FIXTURE_LOGS

pytest.importorskip("torch")


def _replayer():
    from tracekit.read.reader import graph_sources
    from tracekit.replay.replayer import GraphReplayer
    from tracekit.replay.results import ReplayOptions

    srcs = [s for s in graph_sources([FIXTURE_LOGS / "overlap_cap_a"]) if s.rank in (0, None)]
    return GraphReplayer(srcs[1].text, ReplayOptions())


def _recording_copies(monkeypatch) -> list:
    """Weak references to every graph module a copy is made into (a whole copy, or one made
    rewritten: bucketing.fx_nodes.graph_module)."""
    import bucketing.fx_nodes as fx_nodes

    made: list = []
    module = fx_nodes.graph_module

    def recorded(root, graph):
        out = module(root, graph)
        made.append(weakref.ref(out))
        return out

    monkeypatch.setattr(fx_nodes, "graph_module", recorded)
    return made


def test_each_cap_s_copy_is_freed_after_its_schedule(monkeypatch):
    from torch._inductor.fx_passes.overlap_scheduling import get_group_name

    rp = _replayer()
    made = _recording_copies(monkeypatch)
    got = [rp.scheduled(cap, None) for cap in (0.1, 3.0, 1024.0)]
    gc.collect()
    assert [len(s.final) for s in got] == [11, 4, 2]  # collectives after bucketing: distinct schedules
    assert len(made) == 3
    assert [r() for r in made] == [None, None, None]
    assert get_group_name.cache_info().currsize == 0
    assert len(rp.gm.graph.nodes) == 87  # the rebuilt graph itself is kept


def test_a_copy_is_freed_when_the_scheduler_raises(monkeypatch):
    import torch._inductor.fx_passes.overlap_scheduling as ovs

    rp = _replayer()
    made = _recording_copies(monkeypatch)

    class Refusing(ovs.OverlapScheduler):  # type: ignore[misc, valid-type]
        def run(self):
            for n in self.graph.nodes:
                if n.op == "call_function" and "all_gather" in str(n.target):
                    ovs.get_group_name(n)  # cached, as the scheduler's own run does
            raise RuntimeError("refused")

    monkeypatch.setattr(ovs, "OverlapScheduler", Refusing)
    with pytest.raises(RuntimeError, match="refused"):
        rp.scheduled(3.0, None)
    gc.collect()
    assert len(made) == 1 and made[0]() is None
    assert ovs.get_group_name.cache_info().currsize == 0


def test_a_cap_s_copy_is_collected_when_the_cap_ends(monkeypatch):
    """No collection by the caller: the cap collects what it dropped before it returns (the
    copy is in the collector's middle generation by then, which its thresholds seldom reach)."""
    rp = _replayer()
    made = _recording_copies(monkeypatch)
    rp.scheduled(0.1, None)
    assert len(made) == 1 and made[0]() is None
    rp.scheduled(3.0, None)
    assert len(made) == 2 and made[1]() is None
