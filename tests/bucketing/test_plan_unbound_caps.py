"""Caps no bucket reaches share one plan (FsdpPlanner.plan_at): every cap of at least
``unbinding_bytes`` (each kind's candidates together fit in it) has the buckets and notes of the
others, and no cap below it has them; each plan is the one plan_nodes makes at its own cap.
(That plan_at plans them once is speed, shown by bench/bench_replay_floor.py, not tested here.) On the
rebuilt graphs of two fixture runs (overlap_cap_a: 4 MB and 6 MB of reduce-scatters; hsdp's
backward: 279,696 and 297,104 bytes of all-gathers and reduce-scatters, the all-reduces on the
replicate group)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from tests.replay.test_merge_fake_values import _replayer  # noqa: E402

MB = 1024 * 1024


@pytest.mark.parametrize(
    ("scenario", "index", "unbinding", "caps"),
    [
        ("overlap_cap_a", 1, 6291456, (0.5, 1.0, 2.5, 5.0, 5.99, 6.0, 6.5, 64.0, 2048.0)),
        ("hsdp", 1, 297104, (0.01, 0.05, 0.1, 0.2, 0.28, 297103 / MB, 297104 / MB, 0.3, 1.0, 1024.0)),
    ],
)
def test_every_cap_s_plan_is_its_own_and_the_unbound_ones_are_planned_once(scenario, index, unbinding, caps):
    planner = _replayer(scenario, index).planner
    assert planner.unbinding_bytes == unbinding
    plans = {cap: planner.plan_at(cap) for cap in caps}
    for cap, plan in plans.items():
        assert plan == planner.plan_nodes(lambda _index, cap=cap: cap)  # buckets, bytes, notes, cap
        assert plan.cap_bytes == int(cap * MB)
    unbound = [plans[c] for c in caps if int(c * MB) >= unbinding]
    bound = [plans[c] for c in caps if int(c * MB) < unbinding]
    assert len(unbound) == 4
    # every cap at or above the bound plans the same buckets and notes; none below it does
    assert all(p.buckets == unbound[0].buckets and p.notes == unbound[0].notes for p in unbound)
    assert not any(p.buckets == unbound[0].buckets for p in bound)
    # the largest cap below the bound plans otherwise than the caps above it (the bound is tight)
    assert bound[-1].buckets != unbound[0].buckets
