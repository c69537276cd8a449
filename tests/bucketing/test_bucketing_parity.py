"""Our pre-bucketing pass against torch 2.13's on graphs traced under the fake process group.

For every graph of ``bucketing_support.GRAPHS`` and caps of 1, 25 and 500 MB: the same
summary line (counts) as torch, the same buckets (torch's ``fx_bucketing_passes_*_buckets``
artifacts), the same sizes after merging; our graph lints as it is (torch's sometimes only after
a topological sort) and computes the same values as the original and as torch's rewritten graph
(collectives simulated, see the support module); the plan equals the rewrite.
"""

from __future__ import annotations

import pytest
import torch
from bucketing_support import captured_artifacts, simulate, torch_bucket_names, trace
from torch._inductor.fx_passes.fsdp import pre_bucket_fsdp_collectives as torch_pre_bucket
from torch._inductor.pattern_matcher import stable_topological_sort

import bucketing
from bucketing.plan import collective_sizes

# Counts of torch 2.13's own pass on these graphs (the part of its line after the cap).
EXPECTED_COUNTS = {
    ("plain", 1): "all_gather 6->6, reduce_scatter 6->6, all_reduce 0->0",
    ("plain", 25): "all_gather 6->2, reduce_scatter 6->2, all_reduce 0->0",
    ("plain", 500): "all_gather 6->1, reduce_scatter 6->1, all_reduce 0->0",
    ("padded", 1): "all_gather 4->4, reduce_scatter 4->4, all_reduce 0->0",
    ("padded", 25): "all_gather 4->1, reduce_scatter 4->1, all_reduce 0->0",
    ("padded", 500): "all_gather 4->1, reduce_scatter 4->1, all_reduce 0->0",
    ("mixed_alternating", 1): "all_gather 6->6, reduce_scatter 0->0, all_reduce 0->0",
    ("mixed_alternating", 25): "all_gather 6->6, reduce_scatter 0->0, all_reduce 0->0",
    ("mixed_alternating", 500): "all_gather 6->6, reduce_scatter 0->0, all_reduce 0->0",
    ("mixed_grouped", 1): "all_gather 6->5, reduce_scatter 6->6, all_reduce 0->0",
    ("mixed_grouped", 25): "all_gather 6->3, reduce_scatter 6->2, all_reduce 0->0",
    ("mixed_grouped", 500): "all_gather 6->2, reduce_scatter 6->1, all_reduce 0->0",
    ("summed_rs", 1): "all_gather 3->3, reduce_scatter 9->9, all_reduce 0->0",
    ("summed_rs", 25): "all_gather 3->1, reduce_scatter 9->9, all_reduce 0->0",
    ("summed_rs", 500): "all_gather 3->1, reduce_scatter 9->9, all_reduce 0->0",
    ("all_reduce_and_activation", 1): "all_gather 5->5, reduce_scatter 0->0, all_reduce 4->1",
    ("all_reduce_and_activation", 25): "all_gather 5->2, reduce_scatter 0->0, all_reduce 4->1",
    ("all_reduce_and_activation", 500): "all_gather 5->2, reduce_scatter 0->0, all_reduce 4->1",
    ("dependent", 1): "all_gather 5->5, reduce_scatter 5->5, all_reduce 0->0",
    ("dependent", 25): "all_gather 5->2, reduce_scatter 5->1, all_reduce 0->0",
    ("dependent", 500): "all_gather 5->2, reduce_scatter 5->1, all_reduce 0->0",
}

# Bucket sizes (MB) we expect, per kind, where buckets form.
EXPECTED_BUCKET_MB = {
    ("plain", 25): {"AG": [21.5], "RS": [21.5], "AR": []},
    ("plain", 500): {"AG": [33.5], "RS": [33.5], "AR": []},
    ("padded", 25): {"AG": [21.254], "RS": [21.25], "AR": []},
    ("padded", 500): {"AG": [21.254], "RS": [21.25], "AR": []},
    ("mixed_grouped", 1): {"AG": [0.625], "RS": [], "AR": []},
    ("mixed_grouped", 25): {"AG": [2.625, 16.25], "RS": [21.5], "AR": []},
    ("mixed_grouped", 500): {"AG": [2.625, 28.25], "RS": [33.5], "AR": []},
    ("summed_rs", 25): {"AG": [5.25], "RS": [], "AR": []},
    ("summed_rs", 500): {"AG": [5.25], "RS": [], "AR": []},
    ("all_reduce_and_activation", 1): {"AG": [], "RS": [], "AR": [0.039]},
    ("all_reduce_and_activation", 25): {"AG": [21.25], "RS": [], "AR": [0.039]},
    ("all_reduce_and_activation", 500): {"AG": [21.25], "RS": [], "AR": [0.039]},
    ("dependent", 25): {"AG": [20.5], "RS": [21.5], "AR": []},
    ("dependent", 500): {"AG": [20.5], "RS": [21.5], "AR": []},
}

CASES = sorted(EXPECTED_COUNTS)
_ORIGINAL_VALUES: dict[str, list[torch.Tensor]] = {}


def _original_values(name: str, gm, inputs) -> list[torch.Tensor]:
    """Simulated outputs of the graph before bucketing (computed once per graph: it is the slow part)."""
    if name not in _ORIGINAL_VALUES:
        _ORIGINAL_VALUES[name] = simulate(gm, inputs)
    return _ORIGINAL_VALUES[name]


def _torch_run(name: str, cap: float):
    gm, _ = trace(name)
    with captured_artifacts() as records:
        torch_pre_bucket(gm, bucket_cap_mb=cap)
    line = next(p for n, p in records if n == "pre_bucketing_fsdp_collectives")
    return gm, line, torch_bucket_names(records)


def _lints(gm) -> bool:
    try:
        gm.graph.lint()
    except RuntimeError:
        return False
    return True


@pytest.mark.parametrize(("name", "cap"), CASES)
def test_same_outcome_as_torch(name: str, cap: float) -> None:
    torch_gm, torch_line, torch_buckets = _torch_run(name, cap)
    gm, inputs = trace(name)
    expected_values = _original_values(name, gm, inputs)

    with captured_artifacts() as records:
        report = bucketing.pre_bucket_fsdp_collectives(gm, bucket_cap_mb=cap)

    ours_line = next(p for n, p in records if n == "pre_bucketing_fsdp_collectives")
    assert ours_line == torch_line == report.summary_line()
    assert report.summary_line().endswith(EXPECTED_COUNTS[(name, cap)])
    assert report.cap_source == "override" and report.cap_mb == cap
    ours_buckets = {kind: [[m.name for m in b] for b in report.buckets[kind]] for kind in ("AG", "RS")}
    assert ours_buckets == torch_buckets
    assert report.bucket_sizes_mb() == EXPECTED_BUCKET_MB.get((name, cap), {"AG": [], "RS": [], "AR": []})
    groups = report.fsdp_groups
    torch_sizes = [(s["type"], s["size_mb"]) for s in collective_sizes(torch_gm.graph, groups)]
    assert [(s["type"], s["size_mb"]) for s in report.sizes_after] == torch_sizes

    gm.graph.lint()  # no sort needed
    values = simulate(gm, inputs)
    assert len(values) == len(expected_values)
    for got, want in zip(values, expected_values):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got, want)
    if cap == 25:  # torch's rewritten graph (sorted first when needed) gives the same values
        if not _lints(torch_gm):
            stable_topological_sort(torch_gm.graph)
        torch_gm.recompile()
        for got, theirs in zip(values, simulate(torch_gm, inputs)):
            assert torch.equal(got, theirs)


def test_torch_graph_needs_a_sort_ours_does_not() -> None:
    torch_gm, _, torch_buckets = _torch_run("dependent", 25)
    # torch drops all_gather_into_tensor_1 (it gathers a function of the first all-gather)
    assert torch_buckets["AG"] == [
        ["all_gather_into_tensor", "all_gather_into_tensor_2", "all_gather_into_tensor_3", "all_gather_into_tensor_4"]
    ]
    assert not _lints(torch_gm)
    gm, _ = trace("dependent")
    bucketing.pre_bucket_fsdp_collectives(gm, bucket_cap_mb=25)
    assert _lints(gm)


@pytest.mark.parametrize(("name", "cap"), CASES)
def test_plan_equals_rewrite(name: str, cap: float) -> None:
    gm, _ = trace(name)
    nodes_before = [n.name for n in gm.graph.nodes]
    plan = bucketing.plan_fsdp_buckets(gm, cap)
    assert [n.name for n in gm.graph.nodes] == nodes_before  # untouched
    assert plan.rewritten is False
    report = bucketing.pre_bucket_fsdp_collectives(gm, bucket_cap_mb=cap)
    assert plan.buckets == report.buckets
    assert plan.summary_line() == report.summary_line()
    assert plan.sizes_before == report.sizes_before
    assert [(s["type"], s["size_mb"]) for s in plan.sizes_after] == [
        (s["type"], s["size_mb"]) for s in report.sizes_after
    ]


def test_automatic_cap_is_the_saturation_size() -> None:
    torch_gm, torch_line, _ = _torch_run("plain", None)
    gm, _ = trace("plain")
    report = bucketing.pre_bucket_fsdp_collectives(gm)
    assert report.cap_source == "saturation"
    assert round(report.cap_mb, 3) == 27.38
    assert report.summary_line() == torch_line
    assert torch_line == (
        "fsdp_groups=['0'], group_size=4, nNodes=1, bucket_cap_mb=27.4, "
        "all_gather 6->2, reduce_scatter 6->2, all_reduce 0->0"
    )
