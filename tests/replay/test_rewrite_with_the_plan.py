"""The pass given the planner of the graph it rewrites a copy of (bucketing.pre_bucket_fsdp_collectives
with ``planner=``, as replay does per cap): the copy is not planned again, and the rewrite, its
report and its graph are the pass's own on that copy. On overlap_cap_a's backward (87 nodes
rebuilt from its log: 5 all-gathers, 6 reduce-scatters) at 0.1, 3 and 1,024 MB."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURE_LOGS

pytest.importorskip("torch")


def _replayer(scenario: str, index: int):
    from tracekit.read.reader import graph_sources
    from tracekit.replay.replayer import GraphReplayer
    from tracekit.replay.results import ReplayOptions

    srcs = [s for s in graph_sources([FIXTURE_LOGS / scenario]) if s.rank in (0, None)]
    rp = GraphReplayer(srcs[index].text, ReplayOptions())
    rp.register_groups()
    return rp


@pytest.mark.parametrize(("cap", "after"), [(0.1, (5, 6)), (3.0, (2, 2)), (1024.0, (1, 1))])
def test_the_planner_s_plan_rewrites_the_copy_as_the_pass_planning_it(monkeypatch, cap, after):
    import bucketing.prebucket as prebucket
    from bucketing import pre_bucket_fsdp_collectives
    from tracekit.replay.overlap_schedule import copy_graph

    rp = _replayer("overlap_cap_a", 1)
    assert len(rp.gm.graph.nodes) == 87
    plain, planned = copy_graph(rp.gm), copy_graph(rp.gm)
    theirs = pre_bucket_fsdp_collectives(plain, bucket_cap_mb=cap, recompile=False)
    made = []
    monkeypatch.setattr(prebucket, "FsdpPlanner", lambda *a, **k: made.append(a))
    ours = pre_bucket_fsdp_collectives(planned, bucket_cap_mb=cap, recompile=False, planner=rp.planner)
    assert made == []  # the copy was not planned again
    assert (ours.counts_after["AG"], ours.counts_after["RS"]) == after
    assert ours.to_dict() == theirs.to_dict()
    assert planned.code == plain.code
    assert [n.name for n in rp.gm.graph.nodes][:3] == [n.name for n in plain.graph.nodes][:3]
    assert len(rp.gm.graph.nodes) == 87  # the planner's own graph is left as it was


def test_a_planner_of_another_graph_is_refused_before_any_rewrite():
    from bucketing import BucketingError, pre_bucket_fsdp_collectives
    from tracekit.replay.overlap_schedule import copy_graph

    other = _replayer("overlap_cap_a", 0)  # the forward: its all-gathers are not in the backward
    gm = copy_graph(_replayer("overlap_cap_a", 1).gm)
    before = gm.code
    with pytest.raises(BucketingError, match="planner given for another graph: "):
        pre_bucket_fsdp_collectives(gm, bucket_cap_mb=1024.0, recompile=False, planner=other.planner)
    assert gm.code == before


def test_input_views_made_at_one_cap_serve_the_next_with_the_same_fake_values():
    from bucketing import pre_bucket_fsdp_collectives
    from tracekit.replay.overlap_schedule import copy_graph

    rp = _replayer("overlap_cap_a", 1)
    first = copy_graph(rp.gm)
    pre_bucket_fsdp_collectives(first, bucket_cap_mb=3.0, recompile=False, planner=rp.planner)
    # one view per member input of the 2 + 2 buckets: all-gathers' ([-1]), reduce-scatters' ([2, -1])
    assert len(rp.planner.input_views) == 11
    kept = dict(rp.planner.input_views)
    planned, plain = copy_graph(rp.gm), copy_graph(rp.gm)
    pre_bucket_fsdp_collectives(planned, bucket_cap_mb=1024.0, recompile=False, planner=rp.planner)
    pre_bucket_fsdp_collectives(plain, bucket_cap_mb=1024.0, recompile=False)
    assert rp.planner.input_views == kept  # nothing new: every view was there
    assert planned.code == plain.code
    reused = 0
    for a, b in zip(planned.graph.nodes, plain.graph.nodes, strict=True):
        va, vb = a.meta.get("val"), b.meta.get("val")
        if not hasattr(va, "shape"):
            continue
        assert (va.shape, va.stride(), va.dtype, va.storage_offset()) == (
            vb.shape,
            vb.stride(),
            vb.dtype,
            vb.storage_offset(),
        )
        if any(va is v for _, v in kept.values()):
            reused += 1
            src = a.args[0].meta["val"]
            assert va.untyped_storage()._cdata == src.untyped_storage()._cdata  # a view of its input
    assert reused == 11
