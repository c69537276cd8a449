"""The fake values our merge makes without fake dispatch (bucketing.merge: a bucket's buffer,
fill, collective and wait made directly; the clones of the members' outputs kept across
rewrites of copies of one graph) equal those fake dispatch makes: for every node the rewrite
makes, the same shape, stride, offset, dtype and device, the same storages shared between
nodes and the same objects (``copy_`` gives back its destination's). Replay's way (copies of
one rebuilt graph rewritten with its planner, at one cap then another, so the second reuses
what the first made) against the pass on a fresh copy with every fake value dispatched."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import FIXTURE_LOGS

pytest.importorskip("torch")

# (scenario, graph, first cap, second cap) -> (nodes after the second rewrite, of them made by
# the merge, its buckets' clones reused from the first rewrite)
CASES = {
    ("overlap_cap_a", 0, 3.0, 1024.0): (65, 32, 12),
    ("overlap_cap_a", 1, 1024.0, 3.0): (129, 64, 10),
    ("spmd_auto", 0, 0.1, 1024.0): (83, 40, 10),
    ("spmd_auto", 1, 1024.0, 0.1): (137, 41, 4),
}


def _replayer(scenario: str, index: int):
    from tracekit.read.reader import graph_sources
    from tracekit.replay.replayer import GraphReplayer
    from tracekit.replay.results import ReplayOptions

    srcs = [s for s in graph_sources([FIXTURE_LOGS / scenario]) if s.rank in (0, None)]
    rp = GraphReplayer(srcs[index].text, ReplayOptions())
    rp.register_groups()
    return rp


def _described(gm) -> tuple[dict[str, Any], dict[str, str], dict[str, str]]:
    """Per node name: each fake value's (shape, stride, offset, dtype, device); the first node
    (name, item) holding its storage; the first holding the same object."""
    import torch

    values: dict[str, Any] = {}
    storages: dict[str, str] = {}
    objects: dict[str, str] = {}
    first_storage: dict[int, str] = {}
    first_object: dict[int, str] = {}
    for n in gm.graph.nodes:
        v = n.meta.get("val")
        items = list(enumerate(v)) if isinstance(v, (list, tuple)) else [(None, v)]
        described = []
        for i, t in items:
            if not isinstance(t, torch.Tensor):
                described.append(repr(t))
                continue
            here = f"{n.name}[{i}]" if i is not None else n.name
            described.append((tuple(t.shape), t.stride(), t.storage_offset(), t.dtype, str(t.device)))
            storages[here] = first_storage.setdefault(t.untyped_storage()._cdata, here)
            objects[here] = first_object.setdefault(id(t), here)
        values[n.name] = described
    return values, storages, objects


@pytest.mark.parametrize(("scenario", "index", "first", "second"), list(CASES))
def test_fake_values_made_directly_equal_fake_dispatch(monkeypatch, scenario, index, first, second):
    import bucketing.merge as merge
    from bucketing import pre_bucket_fsdp_collectives
    from tracekit.replay.overlap_schedule import copy_graph

    rp = _replayer(scenario, index)
    before = {n.name for n in rp.gm.graph.nodes}
    pre_bucket_fsdp_collectives(copy_graph(rp.gm), bucket_cap_mb=first, recompile=False, planner=rp.planner)
    kept = {k: v[:2] for k, v in rp.planner.output_clones.items()}
    ours = copy_graph(rp.gm)
    pre_bucket_fsdp_collectives(ours, bucket_cap_mb=second, recompile=False, planner=rp.planner)

    dispatched = copy_graph(rp.gm)
    monkeypatch.setattr(merge, "_fast_meta", lambda *a, **k: None)  # every fake value by dispatch
    pre_bucket_fsdp_collectives(dispatched, bucket_cap_mb=second, recompile=False)

    assert ours.code == dispatched.code
    assert _described(ours) == _described(dispatched)
    made = [n for n in ours.graph.nodes if n.name not in before]
    reused = sum(1 for n in made for pair in kept.values() if any(n.meta.get("val") is v for v in pair))
    assert (len(ours.graph.nodes), len(made), reused) == CASES[(scenario, index, first, second)]


def test_the_bench_graph_s_buckets_equal_fake_dispatch_at_caps_in_turn(monkeypatch):
    """bench/graphs.py's 12-layer graph (group of 4): all-gathers whose parts are columns of
    ``[4, total]`` (cloned) and reduce-scatters, at 0.1, 0.5 then 2 MB; clones made at the first
    cap serve the next ones."""
    import bucketing.merge as merge
    from bench.graphs import make_fsdp_graph
    from bucketing import FsdpPlanner, pre_bucket_fsdp_collectives, register_fake_process_groups
    from tracekit.replay.overlap_schedule import copy_graph

    gm = make_fsdp_graph(12)
    register_fake_process_groups(["0"], 4)
    planner = FsdpPlanner(gm)
    got = []
    for cap in (0.1, 0.5, 2.0):
        ours = copy_graph(gm)
        pre_bucket_fsdp_collectives(ours, bucket_cap_mb=cap, recompile=False, planner=planner)
        got.append(ours)
    with monkeypatch.context() as m:
        m.setattr(merge, "_fast_meta", lambda *a, **k: None)
        for cap, ours in zip((0.1, 0.5, 2.0), got, strict=True):
            dispatched = copy_graph(gm)
            pre_bucket_fsdp_collectives(dispatched, bucket_cap_mb=cap, recompile=False)
            assert ours.code == dispatched.code
            assert _described(ours) == _described(dispatched)
    assert [len(g.graph.nodes) for g in got] == [173, 160, 160]
    assert len(planner.output_clones) == 12  # one clone (and its view) per all-gather, made once
    kept = {id(v) for pair in planner.output_clones.values() for v in pair[:2]}
    assert [sum(id(n.meta.get("val")) in kept for n in g.graph.nodes) for g in got] == [24, 24, 24]


def test_a_gpu_run_s_graph_is_merged_without_fake_dispatch(monkeypatch):
    """A real run's graph has its values on cuda (the fixtures run on CPU: here spmd_auto's
    backward with every device written as ``cuda:0``, as a GPU run's log writes it). Torch
    without CUDA kernels cannot view such a fake tensor without dispatch, so the merge once
    asked fake dispatch for every view of a bucket (2.0x the scheduler per cap on a 723-node
    graph, against 1.34x on CPU). Now no fake value of the replay's copies comes from dispatch,
    and each equals what dispatch gives."""
    import re

    import bucketing.merge as merge
    from bucketing import pre_bucket_fsdp_collectives
    from bucketing.prebucket import pre_bucketed_copy
    from tracekit.read.reader import graph_sources
    from tracekit.replay.overlap_schedule import copy_graph
    from tracekit.replay.replayer import GraphReplayer
    from tracekit.replay.results import ReplayOptions

    text = [s for s in graph_sources([FIXTURE_LOGS / "spmd_auto"]) if s.rank in (0, None)][1].text
    text = re.sub(r"\]cpu\b", "]cuda:0", text).replace("device(type='cpu')", "device(type='cuda', index=0)")
    rp = GraphReplayer(text, ReplayOptions())
    rp.register_groups()
    assert {
        str(n.meta["val"].device)
        for n in rp.gm.graph.nodes
        if "val" in n.meta and hasattr(n.meta["val"], "device")
    } == {"cuda:0"}

    fast = merge._fast_meta
    by_dispatch: list[str] = []

    def counted(target, *a, **k):
        val = fast(target, *a, **k)
        if val is None:
            by_dispatch.append(str(target))
        return val

    monkeypatch.setattr(merge, "_fast_meta", counted)
    ours = [pre_bucketed_copy(rp.gm, rp.planner, cap)[0] for cap in (0.1, 1024.0)]
    assert by_dispatch == []
    monkeypatch.setattr(merge, "_fast_meta", lambda *a, **k: None)  # every fake value by dispatch
    for cap, got in zip((0.1, 1024.0), ours, strict=True):
        dispatched = copy_graph(rp.gm)
        pre_bucket_fsdp_collectives(dispatched, bucket_cap_mb=cap, recompile=False)
        assert got.code == dispatched.code
        assert _described(got) == _described(dispatched)
    assert [len(g.graph.nodes) for g in ours] == [137, 141]
