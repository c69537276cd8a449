"""The planner's own decisions (``FsdpPlanner.plan(explain=True)``): one reason per collective,
on graphs traced with make_fx under torch's fake process group (``bucketing_support``)."""

from __future__ import annotations

import bucketing
from bucketing.whatif import WhatIf, cap_mb_for
from bucketing_support import ensure_fake_pg, trace


def _decisions(name: str, cap_mb: float = 25):
    gm, _ = trace(name)
    planner = bucketing.FsdpPlanner(gm)
    report = planner.plan(cap_mb, explain=True)
    return planner, report, {d.name: d for d in report.decisions}


def test_decisions_cover_every_collective_and_match_the_buckets() -> None:
    _, report, by_name = _decisions("plain")
    assert len(by_name) == 12
    for kind, buckets in report.buckets.items():
        for i, bucket in enumerate(buckets):
            for m in bucket:
                assert (by_name[m.name].reason, by_name[m.name].bucket, by_name[m.name].kind) == ("bucketed", i, kind)
    lone = by_name["all_gather_into_tensor_5"]
    assert (lone.reason, lone.bucket, lone.size_mb, lone.dtype, lone.needed_mb) == ("over_cap", None, 12.0, "f32", 33.5)
    assert lone.detail == (
        "the open bucket (all_gather_into_tensor, all_gather_into_tensor_1, all_gather_into_tensor_2, "
        "all_gather_into_tensor_3 and 1 more: 21.5 MB) plus this (12 MB) is 33.5 MB, over the 25 MB cap by 8.5 MB")


def test_not_fsdp_names_the_placeholders_and_other_group_the_group() -> None:
    _, _, by_name = _decisions("all_reduce_and_activation")
    act = by_name["all_gather_into_tensor_4"]
    assert (act.reason, act.size_mb) == ("not_fsdp", 0.062)
    assert act.detail == "derives from 2 placeholders (arg1_1, arg0_1), not exactly one: not a parameter shard"
    pair = by_name["all_reduce_4"]
    other = ensure_fake_pg()[1]  # torch names the pair group: '1' in 2.13, '4' in 2.14 and 2.15
    assert (pair.reason, pair.group, pair.detail) == ("other_group", other, f"on group '{other}', not an FSDP group ('0')")
    assert by_name["all_reduce_3"].reason == "bucketed"


def test_summed_reduce_scatters_are_left_to_dedup() -> None:
    _, report, by_name = _decisions("summed_rs")
    rs = [d for d in report.decisions if d.kind == "RS"]
    assert [d.reason for d in rs] == ["summed_rs"] * 9
    assert by_name["reduce_scatter_tensor_2"].detail == (
        "its result is summed with reduce_scatter_tensor, reduce_scatter_tensor_1 by add_1: left to "
        "dedup_fsdp_reduce_scatter, which folds the sum into one reduce-scatter")


def test_depends_on_bucket_names_the_member_it_derives_from() -> None:
    _, _, by_name = _decisions("dependent")
    d = by_name["all_gather_into_tensor_1"]
    assert (d.reason, d.bucket) == ("depends_on_bucket", None)
    assert d.detail == ("an input derives from all_gather_into_tensor, in the open AG bucket "
                        "(all_gather_into_tensor): torch leaves it out of bucketing")


def test_dtype_break_and_its_bucket_mode_what_if() -> None:
    planner, report, by_name = _decisions("mixed_alternating", cap_mb=100)
    assert [d.reason for d in report.decisions] == ["dtype_break"] * 6
    whatif = WhatIf(planner)
    assert whatif.bucket_mode_merges("all_gather_into_tensor_3", 100, "custom_ops_multidtype") is True
    assert whatif.bucket_mode_merges("all_gather_into_tensor_3", 100, "default") is False
    # planned with the multidtype bucket mode, the same graph has one bucket and no break
    multi = bucketing.FsdpPlanner(planner.gm, bucket_mode="custom_ops_multidtype").plan(100, explain=True)
    assert multi.counts_after["AG"] == 1 and {d.reason for d in multi.decisions} == {"bucketed"}


def test_cap_what_if_is_the_smallest_cap_that_merges() -> None:
    planner, _, by_name = _decisions("plain")
    whatif = WhatIf(planner)
    cap = whatif.cap_that_merges("all_gather_into_tensor_5", 25)
    # sizes 0.25, 1, 4, 16, 0.25, 12 MB: windows holding the last one are 12.25 (below the cap),
    # 28.25, 32.25, 33.25 and 33.5 MB; only at 33.5 does the greedy fill take it in
    assert cap == 33.5

    def bucketed(c):
        return "all_gather_into_tensor_5" in {m.name for b in planner.plan(c).buckets["AG"] for m in b}

    assert bucketed(33.5) and not bucketed(33.499) and not bucketed(28.25)
    assert cap_mb_for(1024 * 1024) == 1.0 and cap_mb_for(1024 * 1024 + 1) == 1.001


def test_only_one_candidate() -> None:
    import sys

    sys.path.insert(0, "bench")
    from graphs import make_fsdp_graph

    gm = make_fsdp_graph(1)
    report = bucketing.FsdpPlanner(gm).plan(10, explain=True)
    assert [(d.kind, d.reason) for d in report.decisions] == [("AG", "only_one"), ("RS", "only_one")]
    assert report.decisions[0].detail == "the only all-gather candidate of the graph: nothing to merge with"


def _breaks_graph(double_wait: bool):
    """All-gathers alternating between two groups, reduce-scatters alternating sum/avg, one
    reduce-scatter whose wait is added to an activation, and (``double_wait``) an all-gather
    waited twice."""
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    from bucketing_support import WORLD, _ag, _rs, c10d, ensure_fake_pg

    world, pair = ensure_fake_pg()

    def step(x, p0, p1, p2, p3):
        a, b, c = _ag(p0, world), _ag(p1, pair), _ag(p2, world)
        loss = x.sum() + a.sum() + b.sum() + c.sum()
        if double_wait:
            coll = c10d.all_gather_into_tensor(p3, WORLD, world)
            loss = loss + c10d.wait_tensor(coll).sum() + c10d.wait_tensor(coll).sum()
        grads = [_rs(a * loss, world, "sum"), _rs(c * loss, world, "avg"), _rs(a * 2 * loss, world, "sum")]
        return loss, *grads, _rs(c * 3, world) + x.sum()

    inputs = [torch.randn(8)] + [torch.randn(1024) for _ in range(4)]
    return make_fx(step, tracing_mode="fake")(*inputs)


def test_key_breaks_by_group_and_reduce_op_and_broken_chains() -> None:
    report = bucketing.FsdpPlanner(_breaks_graph(double_wait=True)).plan(100, explain=True)
    got = [(d.name, d.group, d.reason) for d in report.decisions]
    other = ensure_fake_pg()[1]  # torch names the pair group: '1' in 2.13, '4' in 2.14 and 2.15
    assert got == [
        ("all_gather_into_tensor", "0", "other_group"), ("all_gather_into_tensor_1", other, "other_group"),
        ("all_gather_into_tensor_2", "0", "other_group"), ("all_gather_into_tensor_3", "0", "no_single_wait"),
        ("reduce_scatter_tensor", "0", "reduce_op_break"), ("reduce_scatter_tensor_1", "0", "reduce_op_break"),
        ("reduce_scatter_tensor_2", "0", "reduce_op_break"), ("reduce_scatter_tensor_3", "0", "rs_not_to_output"),
    ]
    by_name = {d.name: d for d in report.decisions}
    assert by_name["all_gather_into_tensor_1"].detail.startswith(
        f"the previous candidate, all_gather_into_tensor, has group '0' (this: '{other}'); the next candidate, "
        f"all_gather_into_tensor_2, has group '0' (this: '{other}')")
    assert by_name["all_gather_into_tensor_3"].detail == "2 users (wait_tensor_3, wait_tensor_4), not one wait"
    assert by_name["reduce_scatter_tensor_1"].detail.startswith(
        "the previous candidate, reduce_scatter_tensor, has reduce op sum (this: avg)")
    assert by_name["reduce_scatter_tensor_3"].detail == (
        "add_5 (add.Tensor, 2 inputs) is on the path from its wait to the output, where only "
        "single-input nodes (views, casts) may stand")


def test_those_breaks_leave_torchs_pass_unmerged_too() -> None:
    from torch._inductor.fx_passes import fsdp as torch_fsdp

    from bucketing_support import captured_artifacts

    ours = bucketing.FsdpPlanner(_breaks_graph(double_wait=False)).plan(100)
    with captured_artifacts() as records:
        torch_fsdp.pre_bucket_fsdp_collectives(_breaks_graph(double_wait=False), bucket_cap_mb=100)
    line = dict(records)["pre_bucketing_fsdp_collectives"]
    assert line == ours.summary_line()
    assert line.endswith("all_gather 3->3, reduce_scatter 4->4, all_reduce 0->0")


def test_what_ifs_share_plans_and_stop_at_the_budget() -> None:
    import sys

    sys.path.insert(0, "bench")
    from graphs import make_fsdp_graph

    planner = bucketing.FsdpPlanner(make_fsdp_graph(50))  # 16 KiB collectives
    lone = [d.name for d in planner.plan(0.001, explain=True).decisions if d.reason == "over_cap"]
    assert len(lone) == 100
    whatif = WhatIf(planner)
    # two adjacent 16 KiB collectives fit 0.032 MB: one plan answers all 100
    assert {whatif.cap_that_merges(name, 0.001) for name in lone} == {0.032}
    assert len(whatif._bucketed) == 1 and whatif.exhausted is False
    starved = WhatIf(planner, budget=0)
    assert starved.cap_that_merges(lone[0], 0.001) is None and starved.exhausted is True
