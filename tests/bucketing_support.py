"""Helpers of the bucketing tests (no tests here): graphs traced with make_fx under torch's fake
process group, a simulator that gives collectives determined values, and artifact capture.

Why a simulator: on the fake process group, collectives do not communicate, so their outputs
are uninitialized memory and cannot be compared. ``simulate`` runs a graph with an fx
Interpreter in which every collective computes what a real group would if rank ``r`` held
``tensor + r * rank_offset`` (rank 0 holds the tensor itself): all-gather concatenates those,
reduce-scatter / all-reduce sum (or average) them. A merged bucket then gives exactly the
values of its separate collectives iff the concatenation, layout, split and views are right.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager

import torch
import torch.distributed as dist
import torch.fx as fx
from torch.fx.experimental.proxy_tensor import make_fx

c10d = torch.ops._c10d_functional
WORLD = 4
MB_F32 = 1024 * 1024 // 4  # float32 elements in one MB


def ensure_fake_pg() -> tuple[str, str]:
    """Init torch's fake process group (4 ranks, rank 0) once; return (world name, pair name).

    The pair group holds ranks 0 and 1, for all-reduces on a group FSDP does not use.
    """
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if not dist.is_initialized():
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=WORLD)
    if not hasattr(ensure_fake_pg, "pair"):
        # c10d names a new group by its counter, and an earlier test may have registered a
        # logged graph's group under the name it comes to ("19": a mesh's): take the next one
        from bucketing.fake_groups import new_fake_group

        ensure_fake_pg.pair = new_fake_group(2).group_name  # type: ignore[attr-defined]
    return dist.group.WORLD.group_name, ensure_fake_pg.pair  # type: ignore[attr-defined]


def _ag(x, group):
    return c10d.wait_tensor(c10d.all_gather_into_tensor(x, WORLD, group))


def _rs(x, group, op="sum"):
    return c10d.wait_tensor(c10d.reduce_scatter_tensor(x, op, WORLD, group))


def _ar(x, group, op="sum"):
    return c10d.wait_tensor(c10d.all_reduce(x, op, group))


# Shard sizes (float32 elements) chosen so that gathered outputs are 0.25, 1, 4, 16, 0.25 and
# 12 MB: caps of 1, 25 and 500 MB give different buckets.
SHARDS = [MB_F32 // 16, MB_F32 // 4, MB_F32, 4 * MB_F32, MB_F32 // 16, 3 * MB_F32]


def _grads_rs(fulls, group, scale):
    return [_rs(full * scale, group) for full in fulls]


def graph_plain(world: str, pair: str):
    """Six FSDP all-gathers, then six FSDP reduce-scatters of the gathered params' grads."""

    def step(x, *shards):
        fulls = [_ag(s, world) for s in shards]
        loss = x.sum()
        for full in fulls:
            loss = loss + full.sum()
        return (loss, *_grads_rs(fulls, world, loss))

    inputs = [torch.randn(8)] + [torch.randn(n) for n in SHARDS]
    return step, inputs


def graph_padded(world: str, pair: str):
    """FSDP all-gathers of ``cat(shard, zeros)`` (padding): still one placeholder each."""

    def step(x, *shards):
        fulls = []
        for s in shards:
            padded = torch.cat([s, s.new_zeros(64)])
            full = _ag(padded, world).view(WORLD, -1)[:, : s.numel()].reshape(-1)
            fulls.append(full)
        loss = x.sum()
        for full in fulls:
            loss = loss + full.sum()
        return (loss, *_grads_rs(fulls, world, loss))

    inputs = [torch.randn(8)] + [torch.randn(n) for n in SHARDS[:4]]
    return step, inputs


def graph_mixed_alternating(world: str, pair: str):
    """bf16 and f32 all-gathers alternating: torch's adjacency rule buckets nothing."""

    def step(x, *shards):
        fulls = [_ag(s, world) for s in shards]
        loss = x.sum()
        for full in fulls:
            loss = loss + full.float().sum()
        return (loss,)

    dtypes = [torch.bfloat16, torch.float32] * 3
    inputs = [torch.randn(8)] + [torch.randn(n).to(d) for n, d in zip(SHARDS, dtypes)]
    return step, inputs


def graph_mixed_grouped(world: str, pair: str):
    """Three f32 params cast to bf16 before gathering (mixed precision), then three f32 ones."""

    def step(x, *shards):
        fulls = [_ag(s.to(torch.bfloat16), world) for s in shards[:3]]
        fulls += [_ag(s, world) for s in shards[3:]]
        loss = x.sum()
        for full in fulls:
            loss = loss + full.float().sum()
        grads = [_rs(full.float() * loss, world) for full in fulls]
        return (loss, *grads)

    inputs = [torch.randn(8)] + [torch.randn(n) for n in SHARDS]
    return step, inputs


def graph_summed_rs(world: str, pair: str):
    """Gradients of two micro-batches reduce-scattered separately and summed (dedup fodder)."""

    def step(x, *shards):
        fulls = [_ag(s, world) for s in shards]
        outs = []
        for full in fulls:
            g1, g2, g3 = full * x[0], full * x[1], full * x[2]
            outs.append(_rs(g1, world) + _rs(g2, world) + _rs(g3, world))
        return tuple(outs)

    inputs = [torch.randn(8)] + [torch.randn(n) for n in SHARDS[:3]]
    return step, inputs


def graph_all_reduce_and_activation(world: str, pair: str):
    """All-reduces on the FSDP group and on another group, and a non-FSDP all-gather of an
    activation (derived from the input and a parameter) on the FSDP group."""

    def step(x, *shards):
        fulls = [_ag(s, world) for s in shards]
        act = x * fulls[0][: x.numel()]
        gathered_act = _ag(act, world)
        loss = gathered_act.sum()
        for full in fulls:
            loss = loss + full.sum()
        stats = [_ar(full[: 1024 * (i + 1)] * loss, world) for i, full in enumerate(fulls)]
        stats += [_ar(full[:256] * loss, pair) for full in fulls[:2]]
        return (loss, *stats)

    inputs = [torch.randn(4096)] + [torch.randn(n) for n in SHARDS[:4]]
    return step, inputs


GRAPHS = {
    "plain": graph_plain,
    "padded": graph_padded,
    "mixed_alternating": graph_mixed_alternating,
    "mixed_grouped": graph_mixed_grouped,
    "summed_rs": graph_summed_rs,
    "all_reduce_and_activation": graph_all_reduce_and_activation,
}


def trace(name: str) -> tuple[fx.GraphModule, list[torch.Tensor]]:
    """A fresh fake-traced GraphModule of graph ``name`` and real inputs for it."""
    world, pair = ensure_fake_pg()
    step, inputs = GRAPHS[name](world, pair)
    torch.manual_seed(0)
    inputs = [torch.randn(t.shape).to(t.dtype) for t in inputs]
    gm = make_fx(step, tracing_mode="fake")(*inputs)
    return gm, inputs


class _Simulator(fx.Interpreter):
    def __init__(self, gm: fx.GraphModule, rank_offset: float):
        super().__init__(gm)
        self.rank_offset = rank_offset

    def _contributions(self, x: torch.Tensor, size: int) -> list[torch.Tensor]:
        return [x + r * self.rank_offset for r in range(size)]

    def call_function(self, target, args, kwargs):
        if target is c10d.wait_tensor.default:
            return args[0]
        if target is c10d.all_gather_into_tensor.default:
            return torch.cat(self._contributions(args[0], args[1]))
        if target is c10d.all_gather_into_tensor_out.default:
            out = kwargs["out"]
            out.copy_(torch.cat(self._contributions(args[0], args[1])))
            return out
        if target is c10d.reduce_scatter_tensor.default:
            x, op, size = args[0], args[1], args[2]
            total = sum(t.chunk(size)[0] for t in self._contributions(x, size))
            return total / size if op == "avg" else total
        if target is c10d.all_reduce.default:
            x, op, group = args
            size = dist.get_world_size(_group(group))
            total = sum(self._contributions(x, size))
            return total / size if op == "avg" else total
        return super().call_function(target, args, kwargs)


def _group(name: str):
    from torch.distributed.distributed_c10d import _resolve_process_group

    return _resolve_process_group(name)


def simulate(gm: fx.GraphModule, inputs: list[torch.Tensor], rank_offset: float = 1.0) -> list[torch.Tensor]:
    """Run ``gm`` with determined collectives (see the module docstring); flat outputs."""
    with torch.no_grad():
        out = _Simulator(gm, rank_offset).run(*[t.clone() for t in inputs])
    return list(out) if isinstance(out, (list, tuple)) else [out]


@contextmanager
def captured_artifacts():
    """Collect ``trace_structured`` artifacts as ``[(name, payload), ...]`` while active."""
    records: list[tuple[str, str]] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            meta = getattr(record, "metadata", {}) or {}
            if "artifact" in meta:
                records.append((meta["artifact"]["name"], getattr(record, "payload", None)))

    handler = _Collect(level=logging.DEBUG)
    trace_log = logging.getLogger("torch.__trace")
    trace_log.addHandler(handler)
    try:
        yield records
    finally:
        trace_log.removeHandler(handler)


def torch_bucket_names(records: list[tuple[str, str]]) -> dict[str, list[list[str]]]:
    """Torch's ``fx_bucketing_passes_*_buckets`` payloads (``str`` of node lists) as names."""
    import re

    out = {"AG": [], "RS": []}
    kinds = {"fx_bucketing_passes_all_gather_buckets": "AG", "fx_bucketing_passes_reduce_scatter_buckets": "RS"}
    for name, payload in records:
        if name in kinds:
            for bucket in re.findall(r"\[([^\[\]]*)\]", payload):
                out[kinds[name]].append([n.strip() for n in bucket.split(",") if n.strip()])
    return out


def graph_dependent(world: str, pair: str):
    """The second all-gather gathers a function of the first one's result (one placeholder
    still): torch drops it from the open bucket. Users of early waits sit before later
    all-gathers, so merging moves them."""

    def step(x, *shards):
        first = _ag(shards[0], world)
        early = first.sum() * x.sum()
        second = _ag(first[: shards[1].numel()] * 2, world)
        rest = [_ag(s, world) for s in shards[2:]]
        loss = early + second.sum()
        for full in rest:
            loss = loss + full.sum()
        return (loss, *_grads_rs([first, second, *rest], world, loss))

    inputs = [torch.randn(8)] + [torch.randn(n) for n in SHARDS[:5]]
    return step, inputs


GRAPHS["dependent"] = graph_dependent

