"""Synthetic FSDP graphs for benchmarks (bucketing's and replay's), built directly with fx.

``make_fsdp_graph(n_layers)`` returns a GraphModule shaped like a SimpleFSDP training step:
per layer, a parameter shard is all-gathered, waited on, viewed as a matrix and used in a
matmul chain (forward); then, in reverse, each layer's gradient is reduce-scattered and its
wait flows to the output (backward)::

    ag_i = all_gather_into_tensor(p_i, gs, '0'); w_i = wait_tensor(ag_i); v_i = view(w_i, [d, d])
    x = mm(x, v_i)                                   # for every layer
    s = sum(x); g_i = mul(v_i, s)                    # for every layer, reversed
    rs_i = reduce_scatter_tensor(view(g_i, [-1]), 'sum', gs, '0'); r_i = wait_tensor(rs_i)
    return (x, r_{n-1}, ..., r_0)

Every node has ``meta["val"]`` (fake tensors), so the passes can size and merge collectives.
Merging needs the group registered: ``bucketing.register_fake_process_groups(['0'], gs)``.
"""

from __future__ import annotations

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

aten = torch.ops.aten
c10d = torch.ops._c10d_functional


class _GraphBuilder:
    def __init__(self, device: str = "cpu") -> None:
        self.graph = fx.Graph()
        self.mode = FakeTensorMode()
        self.device = torch.device(device)

    def placeholder(self, name: str, shape: tuple[int, ...], dtype: torch.dtype) -> fx.Node:
        node = self.graph.placeholder(name)
        if self.device.type == "cpu":
            with self.mode:
                node.meta["val"] = torch.empty(shape, dtype=dtype)
        else:  # a fake tensor on a device this torch may lack kernels for, as a log's are rebuilt
            node.meta["val"] = FakeTensor(
                self.mode, torch.empty(shape, dtype=dtype, device="meta"), self.device
            )
        return node

    def call(self, target, *args) -> fx.Node:
        node = self.graph.call_function(target, args)
        vals = fx.node.map_arg(args, lambda n: n.meta["val"])
        with self.mode:
            node.meta["val"] = target(*vals)
        return node


def make_fsdp_graph(
    n_layers: int,
    dim: int = 64,
    group_size: int = 4,
    group_name: str = "0",
    dtype: torch.dtype = torch.float32,
    reduce_scatters: bool = True,
    device: str = "cpu",
) -> fx.GraphModule:
    """A SimpleFSDP-like graph with ``n_layers`` FSDP all-gathers (and as many reduce-scatters).

    Each all-gather's output is ``dim * dim`` elements of ``dtype`` (64 x 64 float32: 16 KiB).
    ``device``: where its values are (``"cuda:0"``: as a GPU run's log has them).
    """
    if (dim * dim) % group_size:
        raise ValueError(f"dim*dim={dim * dim} is not divisible by group_size={group_size}")
    b = _GraphBuilder(device)
    x = b.placeholder("x", (8, dim), dtype)
    params = [b.placeholder(f"p_{i}", (dim * dim // group_size,), dtype) for i in range(n_layers)]
    views = []
    for p in params:
        ag = b.call(c10d.all_gather_into_tensor.default, p, group_size, group_name)
        wait = b.call(c10d.wait_tensor.default, ag)
        view = b.call(aten.view.default, wait, [dim, dim])
        views.append(view)
        x = b.call(aten.mm.default, x, view)
    outputs = [x]
    if reduce_scatters:
        s = b.call(aten.sum.default, x)
        for view in reversed(views):
            grad = b.call(aten.mul.Tensor, view, s)
            flat = b.call(aten.view.default, grad, [-1])
            rs = b.call(c10d.reduce_scatter_tensor.default, flat, "sum", group_size, group_name)
            outputs.append(b.call(c10d.wait_tensor.default, rs))
    b.graph.output(tuple(outputs))
    return fx.GraphModule(torch.nn.Module(), b.graph)


__all__ = ["make_fsdp_graph"]
