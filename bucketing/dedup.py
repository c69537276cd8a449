"""Fuse reduce-scatters whose waited results are summed: ``RS(a) + RS(b) = RS(a + b)``."""

from __future__ import annotations

import torch
import torch.fx as fx

from bucketing.predicates import WAIT_TARGET, collective_arg, is_reduce_scatter

aten = torch.ops.aten
c10d = torch.ops._c10d_functional
LINEAR_REDUCE_OPS = ("sum", "avg")


def summed_reduce_scatter(wait: object) -> fx.Node | None:
    """The reduce-scatter behind ``wait`` if both are single-use and the op is linear."""
    if not isinstance(wait, fx.Node) or wait.target is not WAIT_TARGET or len(wait.users) != 1:
        return None
    rs = wait.args[0]
    if not isinstance(rs, fx.Node) or not is_reduce_scatter(rs) or len(rs.users) != 1:
        return None
    if collective_arg(rs, "reduce_op") not in LINEAR_REDUCE_OPS:
        return None
    return rs


def same_collective(a: fx.Node, b: fx.Node) -> bool:
    return all(
        collective_arg(a, k) == collective_arg(b, k) for k in ("reduce_op", "group_size", "group_name")
    ) and (a.args[0].meta["val"].dtype == b.args[0].meta["val"].dtype)


def _fake_call(target, args: tuple, fake_mode):
    import contextlib

    vals = fx.node.map_arg(args, lambda n: n.meta["val"])
    with fake_mode if fake_mode is not None else contextlib.nullcontext():
        return target(*vals)


def dedup_fsdp_reduce_scatter(gm: fx.GraphModule) -> int:
    """Rewrite summed reduce-scatters into one; returns how many pairs were fused.

    ::

        before:  w_a = wait_tensor(reduce_scatter_tensor(a, 'sum', 4, '0'))
                 w_b = wait_tensor(reduce_scatter_tensor(b, 'sum', 4, '0'))
                 out = add(w_a, w_b)
        after:   out = wait_tensor(reduce_scatter_tensor(add(a, b), 'sum', 4, '0'))

    Applies to "sum"/"avg" reductions with the same op, group and input dtype, whose waits and
    collectives have no other user. The new wait can pair again, so add trees fold to one
    reduce-scatter (a fixpoint, reached in one walk with a worklist).
    """
    from torch._guards import detect_fake_mode

    graph = gm.graph
    worklist = list(graph.find_nodes(op="call_function", target=aten.add.Tensor))
    fused = 0
    while worklist:
        add = worklist.pop()
        if add.graph is not graph or add.target is not aten.add.Tensor or len(add.args) != 2 or add.kwargs:
            continue
        rs_a, rs_b = summed_reduce_scatter(add.args[0]), summed_reduce_scatter(add.args[1])
        if rs_a is None or rs_b is None or rs_a is rs_b or not same_collective(rs_a, rs_b):
            continue
        wait_a, wait_b = add.args
        fake_mode = detect_fake_mode([add.meta.get("val"), rs_a.meta.get("val")])
        op, size, group = (collective_arg(rs_a, k) for k in ("reduce_op", "group_size", "group_name"))
        with graph.inserting_before(add):
            combined = graph.call_function(aten.add.Tensor, (rs_a.args[0], rs_b.args[0]))
            combined.meta["val"] = _fake_call(aten.add.Tensor, combined.args, fake_mode)
            rs = graph.call_function(c10d.reduce_scatter_tensor.default, (combined, op, size, group))
            rs.meta["val"] = _fake_call(c10d.reduce_scatter_tensor.default, rs.args, fake_mode)
            wait = graph.call_function(WAIT_TARGET, (rs,))
            wait.meta["val"] = _fake_call(WAIT_TARGET, wait.args, fake_mode)
        for node in (combined, rs, wait):
            for key in ("stack_trace", "nn_module_stack", "custom"):
                if key in add.meta:
                    node.meta[key] = add.meta[key]
        add.replace_all_uses_with(wait)
        for node in (add, wait_a, wait_b, rs_a, rs_b):
            graph.erase_node(node)
        fused += 1
        worklist.extend(u for u in wait.users if u.target is aten.add.Tensor)
    if fused:
        graph.lint()
        gm.recompile()
    return fused
