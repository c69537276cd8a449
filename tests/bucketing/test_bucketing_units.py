"""Cap sources, groups, dedup, report, artifacts, fake groups, planner sweeps, install."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
import torch._inductor.config as inductor_config
from bucketing_support import captured_artifacts, ensure_fake_pg, simulate, trace
from torch._inductor.fx_passes import fsdp as torch_fsdp

import bucketing
from bucketing import artifacts

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from graphs import make_fsdp_graph  # noqa: E402


# -- cap -------------------------------------------------------------------------------------
def test_cap_sources() -> None:
    assert bucketing.compute_pre_bucket_cap_mb(4) == (27.379989624023438, "saturation")
    assert bucketing.compute_pre_bucket_cap_mb(64) == (86.1053466796875, "saturation")
    assert bucketing.compute_pre_bucket_cap_mb(4, 3.0) == (3.0, "override")
    assert bucketing.compute_pre_bucket_cap_mb(4, floor_mb=30.0) == (30.0, "floor")
    assert bucketing.compute_pre_bucket_cap_mb(4, ceiling_mb=20.0) == (20.0, "ceiling")
    assert bucketing.compute_pre_bucket_cap_mb(4, calibration=0.1) == (10.0, "floor")
    assert bucketing.compute_pre_bucket_cap_mb(None) == (500.0, "fallback")
    for size in (2, 4, 8, 16, 64):
        assert bucketing.compute_pre_bucket_cap_mb(size).cap_mb == torch_fsdp.compute_pre_bucket_cap_mb(size)


def test_cap_follows_torch_config() -> None:
    opts = inductor_config.aten_distributed_optimizations
    with inductor_config.patch({"aten_distributed_optimizations.pre_bucketing_fsdp_collectives_min_bucket_cap_mb": 40.0}):
        assert bucketing.compute_pre_bucket_cap_mb(4) == (40.0, "floor")
    assert opts.pre_bucketing_fsdp_collectives_min_bucket_cap_mb == 10.0


# -- groups, no-op graphs ----------------------------------------------------------------------
def test_identify_fsdp_groups() -> None:
    gm, _ = trace("all_reduce_and_activation")
    assert bucketing.identify_fsdp_groups(gm) == (["0"], 4)
    assert torch_fsdp.identify_fsdp_groups(gm) == (torch_fsdp.OrderedSet(["0"]), 4)


def test_graph_without_fsdp_collectives_is_left_alone() -> None:
    world, _ = ensure_fake_pg()
    c10d = torch.ops._c10d_functional

    def step(x, w):
        return c10d.wait_tensor(c10d.all_gather_into_tensor(x * w, 4, world))

    from torch.fx.experimental.proxy_tensor import make_fx

    gm = make_fx(step, tracing_mode="fake")(torch.randn(8), torch.randn(8))
    before = gm.print_readable(print_output=False)
    with captured_artifacts() as records:
        report = bucketing.pre_bucket_fsdp_collectives(gm)
    assert records == []
    assert report.skipped_reason == "no FSDP all-gather in the graph"
    assert report.fsdp_groups == [] and report.rewritten is False
    assert gm.print_readable(print_output=False) == before


# -- dedup -------------------------------------------------------------------------------------
def test_dedup_folds_add_trees_like_torch() -> None:
    gm, inputs = trace("summed_rs")
    expected = simulate(gm, inputs, rank_offset=0.0)
    assert bucketing.dedup_fsdp_reduce_scatter(gm) == 6  # 3 params x (3 reduce-scatters -> 1)
    gm.graph.lint()
    for got, want in zip(simulate(gm, inputs, rank_offset=0.0), expected):
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-4)
    theirs, _ = trace("summed_rs")
    torch_fsdp.dedup_fsdp_reduce_scatter(theirs)
    rs = torch.ops._c10d_functional.reduce_scatter_tensor.default
    assert len(gm.graph.find_nodes(op="call_function", target=rs)) == 3
    assert len(theirs.graph.find_nodes(op="call_function", target=rs)) == 3
    with captured_artifacts() as records:
        torch_fsdp.pre_bucket_fsdp_collectives(theirs, bucket_cap_mb=500)
    report = bucketing.pre_bucket_fsdp_collectives(gm, bucket_cap_mb=500)
    assert report.summary_line() == records[-1][1] == (
        "fsdp_groups=['0'], group_size=4, nNodes=1, bucket_cap_mb=500.0, "
        "all_gather 3->1, reduce_scatter 3->1, all_reduce 0->0"
    )


# -- report and artifacts ------------------------------------------------------------------------
def test_report_to_dict_and_buckets_payload() -> None:
    gm, _ = trace("plain")
    report = bucketing.pre_bucket_fsdp_collectives(gm, bucket_cap_mb=25)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["schema"] == "tracekit.bucketing_report/1"
    assert data["counts_before"] == {"AG": 6, "RS": 6, "AR": 0}
    assert data["counts_after"] == {"AG": 2, "RS": 2, "AR": 0}
    assert data["cap_source"] == "override" and data["rewritten"] is True
    assert data["sizes_before"][0] == {"type": "AG", "size_mb": 0.25, "name": "all_gather_into_tensor"}
    payload = report.buckets_payload()
    assert payload["schema"] == "tracekit.buckets/1"
    ag = payload["buckets"]["AG"]
    assert [m["name"] for m in ag[0]] == [f"all_gather_into_tensor{s}" for s in ("", "_1", "_2", "_3", "_4")]
    assert [m["size_mb"] for m in ag[0]] == [0.25, 1.0, 4.0, 16.0, 0.25]
    assert [m["bytes"] for m in ag[0]] == [262144, 1048576, 4194304, 16777216, 262144]


def test_artifacts_order_and_torch_payloads() -> None:
    patch = {"aten_distributed_optimizations.pre_bucketing_fsdp_collectives_verbose": True}
    with inductor_config.patch(patch):
        theirs, _ = trace("plain")
        with captured_artifacts() as torch_records:
            torch_fsdp.pre_bucket_fsdp_collectives(theirs, bucket_cap_mb=25)
        gm, _ = trace("plain")
        with captured_artifacts() as records:
            bucketing.pre_bucket_fsdp_collectives(gm, bucket_cap_mb=25)
    names = [n for n, _ in records]
    assert names == [
        artifacts.INPUT_GRAPH,
        artifacts.SIZES,
        artifacts.BUCKETS,
        artifacts.SIZES_AFTER,
        artifacts.SUMMARY,
    ]
    ours, torch_payloads = dict(records), dict(torch_records)
    assert ours[artifacts.SIZES] == torch_payloads[artifacts.SIZES]  # byte for byte
    assert ours[artifacts.SUMMARY] == torch_payloads[artifacts.SUMMARY]
    strip = lambda text: [(e["type"], e["size_mb"]) for e in json.loads(text)]  # noqa: E731
    assert strip(ours[artifacts.SIZES_AFTER]) == strip(torch_payloads[artifacts.SIZES_AFTER])
    assert ours[artifacts.INPUT_GRAPH].startswith("class ")
    assert "def forward(self, arg0_1: \"f32[8][1]cpu\"" in ours[artifacts.INPUT_GRAPH]
    assert 'all_gather_into_tensor: "f32[65536][1]cpu"' in ours[artifacts.INPUT_GRAPH]
    assert json.loads(ours[artifacts.BUCKETS])["cap_mb"] == 25

    gm, _ = trace("plain")
    with captured_artifacts() as quiet:
        bucketing.pre_bucket_fsdp_collectives(gm, bucket_cap_mb=25)
    assert [n for n, _ in quiet] == [artifacts.INPUT_GRAPH, artifacts.BUCKETS, artifacts.SUMMARY]


# -- modes and errors ------------------------------------------------------------------------------
def test_custom_ops_mode_matches_torch() -> None:
    # torch selects all-gather buckets by (group, dtype) even in a multidtype mode (its FSDP
    # pass does not pass the mode to the bucketer), so bf16 and f32 still bucket apart
    theirs, _ = trace("mixed_grouped")
    with captured_artifacts() as records:
        torch_fsdp.pre_bucket_fsdp_collectives(theirs, mode="custom_ops_multidtype", bucket_cap_mb=25)
    gm, _ = trace("mixed_grouped")
    report = bucketing.pre_bucket_fsdp_collectives(gm, mode="custom_ops_multidtype", bucket_cap_mb=25)
    assert report.summary_line() == records[-1][1]
    assert report.summary_line().endswith("all_gather 6->3, reduce_scatter 6->2, all_reduce 0->0")


def test_unregistered_group_raises_before_rewriting() -> None:
    ensure_fake_pg()
    gm = make_fsdp_graph(4, group_name="nowhere")
    before = [n.name for n in gm.graph.nodes]
    with pytest.raises(bucketing.BucketingError, match="'nowhere' is not registered"):
        bucketing.pre_bucket_fsdp_collectives(gm, bucket_cap_mb=100)
    assert [n.name for n in gm.graph.nodes] == before


def test_register_fake_process_groups() -> None:
    from torch.distributed.distributed_c10d import _resolve_process_group

    ensure_fake_pg()
    bucketing.register_fake_process_groups(["replay_a", "replay_b"], 4)
    assert _resolve_process_group("replay_a").size() == 4
    bucketing.register_fake_process_groups(["replay_pair"], 2)
    assert _resolve_process_group("replay_pair").size() == 2
    with pytest.raises(ValueError, match="fewer than group_size=8"):
        bucketing.register_fake_process_groups(["too_big"], 8)
    gm = make_fsdp_graph(6, group_name="replay_b")
    report = bucketing.pre_bucket_fsdp_collectives(gm, bucket_cap_mb=100)
    assert report.summary_line() == (
        "fsdp_groups=['replay_b'], group_size=4, nNodes=1, bucket_cap_mb=100.0, "
        "all_gather 6->1, reduce_scatter 6->1, all_reduce 0->0"
    )


def test_register_the_name_c10d_would_give_the_next_group() -> None:
    """A mesh's logged names are c10d's counter names ('1', '2', ...): registering the one the
    counter gives next must not collide with the fake group made for it (it did: 'A process
    group is already registered under the name')."""
    from torch.distributed.distributed_c10d import _resolve_process_group

    from bucketing.fake_groups import new_fake_group

    ensure_fake_pg()
    probe = new_fake_group(2)  # the counter's next free name (another test may hold the next one)
    following = str(int(probe.group_name) + 1)
    bucketing.register_fake_process_groups([following], 2)
    assert _resolve_process_group(following).size() == 2
    after = str(int(following) + 1)
    bucketing.register_fake_process_groups([after], 2)  # c10d's next name taken by us first
    bucketing.register_fake_process_groups(["replay_other_pair"], 2)
    assert _resolve_process_group(after).size() == _resolve_process_group("replay_other_pair").size() == 2


# -- planner sweeps ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("cap", "after"), [(0.001, 40), (0.02, 40), (0.05, 14), (0.1, 7), (1000.0, 1)]
)
def test_planner_sweep_equals_rewrite(cap: float, after: int) -> None:
    ensure_fake_pg()
    planner = bucketing.FsdpPlanner(make_fsdp_graph(40))
    plan = planner.plan(cap)
    report = bucketing.pre_bucket_fsdp_collectives(make_fsdp_graph(40), bucket_cap_mb=cap)
    assert plan.buckets == report.buckets
    assert plan.counts_after == report.counts_after == {"AG": after, "RS": after, "AR": 0}


# -- install ---------------------------------------------------------------------------------------
def test_install_uninstall_restore_settings() -> None:
    opts = inductor_config.aten_distributed_optimizations
    assert inductor_config.post_grad_custom_post_pass is None and opts.pre_bucketing_fsdp_collectives is True
    with bucketing.installed() as ours:
        assert inductor_config.post_grad_custom_post_pass is ours
        assert opts.pre_bucketing_fsdp_collectives is False
        assert isinstance(ours, torch._inductor.custom_graph_pass.CustomGraphPass)
        assert ours.uuid() == bucketing.FsdpPreBucketingPass().uuid()
        assert ours.uuid() != bucketing.FsdpPreBucketingPass(bucket_cap_mb=5).uuid()
    assert inductor_config.post_grad_custom_post_pass is None and opts.pre_bucketing_fsdp_collectives is True

    def other(graph):
        return None

    inductor_config.post_grad_custom_post_pass = other
    try:
        ours = bucketing.install(bucket_cap_mb=5)
        assert inductor_config.post_grad_custom_post_pass == [other, ours]
        bucketing.uninstall()
        assert inductor_config.post_grad_custom_post_pass is other
    finally:
        inductor_config.post_grad_custom_post_pass = None


def test_supported_torch() -> None:
    """The installed torch is one of the tested releases (the main install and .ci/run's venvs)."""
    import torch

    assert bucketing.check_torch() == torch.__version__.split("+")[0]
    assert bucketing.SUPPORTED_TORCH == "2.13"
    assert bucketing.TESTED_TORCH == ("2.13.0", "2.14.1", "2.15.0")
    assert bucketing.untested_note() is None


def test_symbolic_shapes_go_through_torch_merge() -> None:
    from bucketing_support import graph_plain
    from torch.fx.experimental.proxy_tensor import make_fx

    world, pair = ensure_fake_pg()
    step, inputs = graph_plain(world, pair)
    gm = make_fx(step, tracing_mode="symbolic")(*inputs)
    theirs = make_fx(step, tracing_mode="symbolic")(*inputs)
    assert not isinstance(next(iter(gm.graph.nodes)).meta["val"].shape[0], int)
    report = bucketing.pre_bucket_fsdp_collectives(gm, bucket_cap_mb=25)
    with captured_artifacts() as records:
        torch_fsdp.pre_bucket_fsdp_collectives(theirs, bucket_cap_mb=25)
    assert report.summary_line() == records[-1][1]
    assert report.summary_line().endswith("all_gather 6->2, reduce_scatter 6->2, all_reduce 0->0")
    gm.graph.lint()
