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

pytest.importorskip("torch")

from tests.replay.test_merge_fake_values import _described, _replayer  # noqa: E402

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
        assert left_out(plan.buckets) is not None  # nothing merged in place
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
    from bucketing.merge import needs_torch_merge
    from bucketing.prebucket import pre_bucketed_copy
    from tracekit.replay.overlap_schedule import copy_graph

    rp = _replayer("overlap_cap_a", 1)
    planner = FsdpPlanner(rp.gm, "custom_ops_multidtype")
    plan = planner.plan_at(planner.cap_for(1024.0).cap_mb)
    assert {needs_torch_merge(kind, b, planner.mode) for kind, bs in plan.buckets.items() for b in bs} == {
        "bucket mode 'custom_ops_multidtype'"
    }
    whole = copy_graph(rp.gm)
    theirs = pre_bucket_fsdp_collectives(whole, bucket_cap_mb=1024.0, recompile=False, planner=planner)
    ours, report = pre_bucketed_copy(rp.gm, planner, 1024.0)
    assert report.to_dict() == theirs.to_dict()
    assert ours.code == whole.code
    assert len(ours.graph.nodes) == len(whole.graph.nodes) > len(rp.gm.graph.nodes)  # merged: torch's IR


def test_a_planner_of_another_graph_is_refused():
    from bucketing import BucketingError
    from bucketing.prebucket import pre_bucketed_copy

    rp, other = _replayer("overlap_cap_a", 1), _replayer("overlap_cap_a", 0)
    with pytest.raises(BucketingError, match="the planner was made on another graph"):
        pre_bucketed_copy(rp.gm, other.planner, 3.0)


def _orderings_graph():
    """A graph the fixtures have no case of (built with fx, fake values by fake dispatch):
    all-gathers issued two by two before their waits; ``both = add(w_1, w_2)`` uses the waits
    of two buckets, and ``mul(w_2, 2)`` comes after it; the reduce-scatters' last collective and
    a later bucket's last all-gather sit side by side, in one gap between kept nodes; and
    ``both`` and ``w_3``'s view were rewritten after later users of their waits were made, so
    ``w_2.users`` and ``w_3.users`` are not in graph order."""
    import torch
    import torch.fx as fx
    from torch._subclasses.fake_tensor import FakeTensorMode

    aten, c10d = torch.ops.aten, torch.ops._c10d_functional
    graph, mode = fx.Graph(), FakeTensorMode()

    def val(node, target, args):
        with mode:
            node.meta["val"] = target(*fx.node.map_arg(args, lambda n: n.meta["val"]))
        return node

    def call(target, *args):
        return val(graph.call_function(target, args), target, args)

    def placeholder(name, shape):
        node = graph.placeholder(name)
        with mode:
            node.meta["val"] = torch.empty(shape)
        return node

    x = placeholder("x", (8, 64))
    p = [placeholder(f"p_{i}", (1024,)) for i in range(6)]

    def gather(i):
        return call(c10d.all_gather_into_tensor.default, p[i], 4, "0")

    ag = [gather(0), gather(1)]
    w = [call(c10d.wait_tensor.default, a) for a in ag]
    ag += [gather(2), gather(3)]
    w += [call(c10d.wait_tensor.default, a) for a in ag[2:]]
    both = call(aten.add.Tensor, w[1], w[2])
    m_2 = call(aten.mul.Tensor, w[2], 2.0)
    h = x
    views = []
    for t in (w[0], both, m_2, w[3]):
        views.append(call(aten.view.default, t, [64, 64]))
        h = call(aten.mm.default, h, views[-1])
    neg = call(aten.neg.default, w[3])
    s = call(aten.sum.default, h)
    grads = [call(aten.view.default, call(aten.mul.Tensor, t, s), [-1]) for t in (w[0], w[3])]
    rs = [call(c10d.reduce_scatter_tensor.default, g, "sum", 4, "0") for g in grads]
    ag += [gather(4), gather(5)]  # rs[1] and ag[5]: last of their buckets, side by side
    waits = [call(c10d.wait_tensor.default, r) for r in rs] + [
        call(c10d.wait_tensor.default, a) for a in ag[4:]
    ]
    out = call(aten.add.Tensor, waits[2], waits[3])
    graph.output((h, out, neg, waits[0], waits[1]))
    both.args = both.args  # both moves after m_2 in w_2.users
    views[3].args = views[3].args  # and w_3's view after neg
    return fx.GraphModule(torch.nn.Module(), graph)


def test_orderings_the_fixtures_never_reach_are_the_pass_s_too():
    import bucketing
    from bucketing import pre_bucket_fsdp_collectives
    from bucketing.copy_rewrite import left_out
    from bucketing.fx_nodes import copy_graph_module
    from bucketing.prebucket import pre_bucketed_copy

    bucketing.register_fake_process_groups(["0"], 4)
    gm = _orderings_graph()
    w_2 = next(n for n in gm.graph.nodes if n.name == "wait_tensor_default_2")
    assert [u.name for u in w_2.users] == ["mul_tensor", "add_tensor"]  # not in graph order
    w_3 = next(n for n in gm.graph.nodes if n.name == "wait_tensor_default_3")
    assert [u.name for u in w_3.users] == ["neg_default", "mul_tensor_2", "view_default_3"]
    planner = bucketing.FsdpPlanner(gm)
    cap = 0.04  # two 16 KiB all-gathers a bucket
    plan = planner.plan_at(planner.cap_for(cap).cap_mb)
    ag = [f"all_gather_into_tensor_default{s}" for s in ("", "_1", "_2", "_3", "_4", "_5")]
    assert [[m.name for m in b] for b in plan.buckets["AG"]] == [ag[0:2], ag[2:4], ag[4:6]]
    rs = ["reduce_scatter_tensor_default", "reduce_scatter_tensor_default_1"]
    assert [[m.name for m in b] for b in plan.buckets["RS"]] == [rs]
    assert left_out(plan.buckets) is not None
    whole = copy_graph_module(gm)
    theirs = pre_bucket_fsdp_collectives(whole, bucket_cap_mb=cap, recompile=False, planner=planner)
    ours, report = pre_bucketed_copy(gm, planner, cap)
    assert report.to_dict() == theirs.to_dict()
    assert _nodes(ours) == _nodes(whole)
    assert _described(ours) == _described(whole)
    assert ours.code == whole.code
