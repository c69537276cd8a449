"""``bucketing.gc_pause.young_collections``: only the youngest generation collected while a
block runs, the caller's collector state and thresholds put back after; and torch's overlap
scheduler runs inside it in a replay (its cyclic garbage collected as it is made)."""

from __future__ import annotations

import gc
import weakref

import pytest

from bucketing.gc_pause import gc_paused, young_collections


class Cycle:
    """An object in a reference cycle with itself: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def generations():
    """The generations the collector collects while the test runs, in order."""
    seen: list[int] = []

    def record(phase: str, info: dict) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(record)
    try:
        yield seen
    finally:
        gc.callbacks.remove(record)


def test_inside_the_block_only_the_youngest_generation_is_collected(generations):
    with gc_paused():
        with young_collections():
            made = [weakref.ref(Cycle()) for _ in range(20_000)]
            inside = list(generations)
    assert len(inside) >= 20  # 20,000 cycles: one collection every 700 allocations or so
    assert set(inside) == {0}
    alive = sum(r() is not None for r in made)
    assert alive < 2_000  # collected while the block ran, not left to the caller's collector


def test_what_the_caller_made_before_is_collected_on_entry(generations):
    with gc_paused():
        before = weakref.ref(Cycle())
        assert before() is not None  # paused: nothing collects it
        with young_collections():
            assert before() is None
            assert generations[:1] == [0]


def test_state_and_thresholds_are_put_back_when_the_block_ends_or_raises():
    threshold = gc.get_threshold()
    with gc_paused():
        with young_collections():
            assert gc.isenabled()
            assert gc.get_threshold()[0] == threshold[0] and gc.get_threshold()[1] > 10**9
        assert not gc.isenabled() and gc.get_threshold() == threshold
        with pytest.raises(ValueError), young_collections():
            raise ValueError("boom")
        assert not gc.isenabled() and gc.get_threshold() == threshold
    assert gc.isenabled()
    with young_collections():
        pass
    assert gc.isenabled() and gc.get_threshold() == threshold


def test_a_replay_runs_torch_s_scheduler_with_young_collections(monkeypatch, generations):
    pytest.importorskip("torch")
    import torch._inductor.fx_passes.overlap_scheduling as ovs

    from tests.conftest import FIXTURE_LOGS
    from tracekit.read.reader import graph_sources
    from tracekit.replay.replayer import GraphReplayer
    from tracekit.replay.results import ReplayOptions

    srcs = [s for s in graph_sources([FIXTURE_LOGS / "overlap_cap_a"]) if s.rank in (0, None)]
    rp = GraphReplayer(srcs[1].text, ReplayOptions())
    states: list[tuple[bool, int]] = []
    run = ovs.OverlapScheduler.run

    def observed(self):
        states.append((gc.isenabled(), gc.get_threshold()[1]))
        return run(self)

    monkeypatch.setattr(ovs.OverlapScheduler, "run", observed)
    threshold = gc.get_threshold()
    out = rp.scheduled(3.0, None)
    assert len(out.final) == 4
    assert states == [(True, 2**31 - 1)]  # the collector on, the older generations never
    assert gc.isenabled() and gc.get_threshold() == threshold
