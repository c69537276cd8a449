"""bucketing given FSDP groups found elsewhere: a backward that reduce-scatters only (no FSDP
all-gather, as when the forward's gathered parameters are saved). torch's pass and ours find no
group and leave it; given the forward's group, our pass merges the reduce-scatters and the
graph computes the same values."""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch._inductor.fx_passes import fsdp as torch_fsdp

import bucketing
from bucketing_support import WORLD, c10d, ensure_fake_pg, simulate


def _rs_only_backward():
    world, _ = ensure_fake_pg()

    def step(g1, g2, g3):
        return [c10d.wait_tensor(c10d.reduce_scatter_tensor(g * 2.0, "sum", WORLD, world)) for g in (g1, g2, g3)]

    torch.manual_seed(0)
    inputs = [torch.randn(64), torch.randn(256), torch.randn(32)]
    return make_fx(step, tracing_mode="fake")(*inputs), inputs, world


def test_torch_and_our_pass_find_no_group_and_leave_it():
    gm, _, _ = _rs_only_backward()
    before = gm.print_readable(print_output=False)
    torch_fsdp.pre_bucket_fsdp_collectives(gm)
    assert gm.print_readable(print_output=False) == before
    report = bucketing.pre_bucket_fsdp_collectives(gm)
    assert report.skipped_reason == "no FSDP all-gather in the graph" and not report.rewritten
    decisions = bucketing.FsdpPlanner(gm).plan(None, explain=True).decisions
    assert [(d.kind, d.reason) for d in decisions] == [("RS", "no_fsdp_group")] * 3
    assert decisions[0].detail.startswith("reduce-scatter on group ")
    assert decisions[0].detail.endswith(": no FSDP group identified in this graph (it has no FSDP all-gather), "
                                        "so the pass leaves it")


def test_given_the_forward_group_the_reduce_scatters_merge_with_the_same_values():
    gm, inputs, world = _rs_only_backward()
    want = simulate(gm, inputs)
    planned = bucketing.FsdpPlanner(gm, fsdp_groups=[world], group_size=WORLD).plan(None)
    assert planned.counts_before["RS"] == 3 and planned.counts_after["RS"] == 1
    report = bucketing.pre_bucket_fsdp_collectives(gm, fsdp_groups=[world], group_size=WORLD)
    gm.graph.lint()
    assert report.rewritten and report.counts_after["RS"] == 1 and report.fsdp_groups == [world]
    assert round(report.cap_mb, 2) == 27.38  # the automatic cap of the given group size
    got = simulate(gm, inputs)
    assert len(got) == 3 and all(torch.allclose(a, b) for a, b in zip(got, want))
