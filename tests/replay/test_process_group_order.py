"""Replay's process groups do not depend on the order tests run in (issue 39's known limit).

torch's c10d keeps a weak reference to each group registered under a name. A module that puts
back a group of a fake world destroyed since (tests/bucketing/test_bucketing_fixture_parity.py
did, after replay tests had started a world) left the name '0' pointing at a dead group: it
resolved to nothing ("has already been destroyed"), and registering it again raised "A process
group is already registered under the name0", so explain's verified what-if on saved_params'
backward said ``ok: False`` and the golden replays failed. The registrar now clears such a name
and registers it again; what replay reports is the same (the golden replays pin it).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from conftest import FIXTURE_LOGS

torch = pytest.importorskip("torch")

import torch.distributed as dist  # noqa: E402
from torch._C._distributed_c10d import _register_process_group, _unregister_process_group  # noqa: E402
from torch.distributed.distributed_c10d import _resolve_process_group  # noqa: E402

from bucketing import register_fake_process_groups  # noqa: E402
from tracekit.read.reader import graph_and_not_prebucketed_sources  # noqa: E402
from tracekit.replay.not_prebucketed_graphs import rebuild  # noqa: E402


@pytest.fixture
def stale_world_name() -> Iterator[None]:
    """'0' left registered to the group of a fake world that was destroyed since, as the parity
    module's restore left it; the fake world is ended afterwards (the next test starts its own)."""
    register_fake_process_groups(["0"], 4)
    old_world = dist.group.WORLD
    dist.destroy_process_group()
    register_fake_process_groups(["0"], 4)  # a new world, registered as '0'
    _unregister_process_group("0")
    _register_process_group("0", old_world)
    del old_world
    gc.collect()
    with pytest.raises(RuntimeError, match="already been destroyed"):
        _resolve_process_group("0")
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


def test_a_name_left_by_a_destroyed_group_is_registered_again(stale_world_name) -> None:
    register_fake_process_groups(["0"], 4)
    assert _resolve_process_group("0").size() == 4
    register_fake_process_groups(["0"], 4)  # again: nothing changes
    assert _resolve_process_group("0") is dist.group.WORLD


def test_explains_what_if_on_saved_params_is_verified_after_a_stale_name(stale_world_name) -> None:
    """saved_params' backward (never pre-bucketed: 8 reduce-scatters, one by one): given the
    forward's FSDP group '0' of 4 ranks, our rewrite makes them one bucket, as planned."""
    (src,) = [
        s
        for s in graph_and_not_prebucketed_sources(str(FIXTURE_LOGS / "saved_params"))
        if s.text is not None and not hasattr(s, "recorded_buckets") and s.rank == 0
    ]
    rp, error = rebuild(src, {})
    assert error is None and rp is not None
    what_if = rp.with_groups(verify=True)
    assert what_if is not None and what_if.applied == {
        "ok": True,
        "lint": "ok",
        "rewritten": True,
        "collectives": {
            "all_gather": {"before": 0, "after": 0},
            "reduce_scatter": {"before": 8, "after": 1},
            "all_reduce": {"before": 0, "after": 0},
        },
        "matches_plan": True,
        "nodes_after": 101,
    }
