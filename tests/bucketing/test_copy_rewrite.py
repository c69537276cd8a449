"""A planned graph's copy made already rewritten (bucketing.pre_bucketed_copy, as replay makes one
per cap) is the graph the pass gives on a whole copy (pre_bucket_fsdp_collectives(copy_graph(gm),
planner=...)), node for node: the same names, ops, targets and arguments in the same order,
every node's users and inputs in the same order, the same meta (provenance pointing at its own
graph), the same fake values (shapes, strides, storages shared, objects) and the same report.
On seven rebuilt graphs of five fixture runs (FSDP, HSDP with all-reduces, FSDP x TP, saved params)
at three caps, the copy made without any of the nodes the rewrite erases."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import FIXTURE_LOGS

pytest.importorskip("torch")

from tests.replay.test_merge_fake_values import _described  # noqa: E402

# (scenario, graph) -> nodes of the rebuilt graph, and of the copy made at 0.1, 3 and 1,024 MB
GRAPHS = {
    ("overlap_cap_a", 0): (45, [45, 73, 65]),
    ("overlap_cap_a", 1): (87, [87, 129, 116]),
    ("spmd_auto", 0): (59, [85, 83, 83]),
    ("spmd_auto", 1): (110, [137, 141, 141]),
    ("hsdp", 1): (117, [144, 148, 148]),
    ("fsdp_tp", 1): (131, [164, 168, 168]),
    ("saved_params", 0): (62, [88, 86, 86]),
}
CAPS = (0.1, 3.0, 1024.0)


def _replayer(scenario: str, index: int):
    from tracekit.read.reader import graph_sources
    from tracekit.replay.engine import GraphReplayer, ReplayOptions

    srcs = [s for s in graph_sources([FIXTURE_LOGS / scenario]) if s.rank in (0, None)]
    rp = GraphReplayer(srcs[index].text, ReplayOptions())
    rp.register_groups()
    return rp


def _nodes(gm) -> list[tuple]:
    """Each node as the graph holds it, its neighbours by name, its provenance relative to its graph."""
    import torch.fx as fx

    def named(a: Any) -> Any:
        return fx.node.map_arg(a, lambda n: f"%{n.name}")

    out = []
    for n in gm.graph.nodes:
        sources = [
            (s.name, s.target, s.pass_name, s.graph_id == id(gm.graph), len(s.from_node))
            for s in n.meta.get("from_node", [])
        ]
        out.append(
            (
                n.name,
                n.op,
                str(n.target),
                repr(named(n.args)),
                repr(named(n.kwargs)),
                [u.name for u in n.users],
                [i.name for i in n._input_nodes],
                sorted(k for k in n.meta if k != "from_node"),
                [n.meta[k] is not None for k in ("nn_module_stack", "stack_trace") if k in n.meta],
                sources,
            )
        )
    return out


@pytest.mark.parametrize(("scenario", "index"), list(GRAPHS))
def test_the_copy_made_rewritten_is_the_pass_s_graph_on_a_whole_copy(scenario, index):
    from bucketing import pre_bucket_fsdp_collectives
    from bucketing.copy_rewrite import left_out
    from bucketing.prebucket import pre_bucketed_copy
    from tracekit.replay.overlap_schedule import copy_graph

    rp = _replayer(scenario, index)
    nodes, after = GRAPHS[(scenario, index)]
    assert len(rp.gm.graph.nodes) == nodes
    before = _nodes(rp.gm)
    sizes = []
    for cap in CAPS:
        plan = rp.planner.plan_at(rp.planner.cap_for(cap).cap_mb)
        assert left_out(plan.buckets, rp.planner.mode) is not None  # nothing merged in place
        whole = copy_graph(rp.gm)
        theirs = pre_bucket_fsdp_collectives(whole, bucket_cap_mb=cap, recompile=False, planner=rp.planner)
        ours, report = pre_bucketed_copy(rp.gm, rp.planner, cap)
        assert report.to_dict() == theirs.to_dict()
        assert _nodes(ours) == _nodes(whole)
        assert _described(ours) == _described(whole)
        assert ours.code == whole.code
        sizes.append(len(ours.graph.nodes))
    assert sizes == after
    assert _nodes(rp.gm) == before  # the planned graph is left as it was


def test_a_plan_torch_merges_is_rewritten_on_a_whole_copy():
    """custom_ops_multidtype buckets go through torch's merge functions, which need the members
    in the graph: the copy is whole, then rewritten, as the pass does."""
    from bucketing import FsdpPlanner, pre_bucket_fsdp_collectives
    from bucketing.copy_rewrite import left_out
    from bucketing.prebucket import pre_bucketed_copy
    from tracekit.replay.overlap_schedule import copy_graph

    rp = _replayer("overlap_cap_a", 1)
    planner = FsdpPlanner(rp.gm, "custom_ops_multidtype")
    plan = planner.plan_at(planner.cap_for(1024.0).cap_mb)
    assert left_out(plan.buckets, planner.mode) is None
    whole = copy_graph(rp.gm)
    theirs = pre_bucket_fsdp_collectives(whole, bucket_cap_mb=1024.0, recompile=False, planner=planner)
    ours, report = pre_bucketed_copy(rp.gm, planner, 1024.0)
    assert report.to_dict() == theirs.to_dict()
    assert ours.code == whole.code
    assert len(ours.graph.nodes) == len(whole.graph.nodes) == 107


def test_a_planner_of_another_graph_is_refused():
    from bucketing import BucketingError
    from bucketing.prebucket import pre_bucketed_copy

    rp, other = _replayer("overlap_cap_a", 1), _replayer("overlap_cap_a", 0)
    with pytest.raises(BucketingError, match="the planner was made on another graph"):
        pre_bucketed_copy(rp.gm, other.planner, 3.0)
