"""tracekit.analyze.diff on real fixture logs: exact changes between the fixture runs."""

from __future__ import annotations

from functools import lru_cache

import pytest
from conftest import FIXTURE_LOGS

import tracekit
from tracekit.analyze.diff import diff_runs, format_ranks
from tracekit.model import CollectiveSize


@lru_cache(maxsize=None)
def run(name: str) -> tracekit.Run:
    return tracekit.load([str(FIXTURE_LOGS / name)])


def fields(change) -> dict:
    return {f.field: (f.a, f.b) for f in change.fields}


def test_a_run_against_itself_is_identical():
    d = diff_runs(run("spmd_auto"), run("spmd_auto"))
    assert d.identical
    assert d.verdict == "identical"
    assert d.groups == ()
    assert d.graphs_compared == 8  # 4 ranks x (forward, backward)
    assert d.to_dict()["changes"] == []


def test_a_run_against_its_gzip_copy_is_identical():
    d = diff_runs(run("spmd_auto"), run("spmd_auto_gz"))
    assert d.identical
    assert d.graphs_compared == 8
    assert d.ranks_only_in_a == d.ranks_only_in_b == ()


def test_auto_cap_against_small_cap_reports_cap_and_counts():
    d = diff_runs(run("spmd_auto"), run("spmd_small_cap"))
    assert not d.identical
    assert d.verdict == "2 graphs changed on 4 ranks (0-3)"
    # every rank changed the same way: said once, for ranks 0-3
    assert len(d.groups) == 1
    (group,) = d.groups
    assert group.ranks == (0, 1, 2, 3)
    fwd, bwd = group.changes
    assert (fwd.compile_id, fwd.graph_index, fwd.kind) == ("0/0", 0, "changed")
    assert fields(fwd) == {
        "bucket_cap_mb": (27.4, 0.1),
        "all_gather": ({"before": 8, "after": 1}, {"before": 8, "after": 5}),
        # the all-gathers that run: one bucket of 74,536 input bytes, or five
        "final": ([["all_gather", "0", 74536, "f32"]],
                  [["all_gather", "0", n, "f32"] for n in (4352, 32768, 260, 32768, 4388)]),
    }
    assert (bwd.compile_id, bwd.graph_index) == ("0/0", 1)
    assert fields(bwd) == {
        "bucket_cap_mb": (27.4, 0.1),
        "all_gather": ({"before": 5, "after": 1}, {"before": 5, "after": 4}),
        "reduce_scatter": ({"before": 8, "after": 1}, {"before": 8, "after": 5}),
        "final": ([["all_gather", "0", 69928, "f32"], ["reduce_scatter", "0", 298144, "f32"]],
                  [["all_gather", "0", 4132, "f32"], ["all_gather", "0", 32768, "f32"],
                   ["all_gather", "0", 260, "f32"], ["all_gather", "0", 32768, "f32"],
                   ["reduce_scatter", "0", 17552, "f32"], ["reduce_scatter", "0", 131072, "f32"],
                   ["reduce_scatter", "0", 1040, "f32"], ["reduce_scatter", "0", 131072, "f32"],
                   ["reduce_scatter", "0", 17408, "f32"]]),
    }
    # the sizes before bucketing are the same; after, one bucket became five
    (fwd_sizes,) = fwd.sizes
    assert (fwd_sizes.which, fwd_sizes.length_a, fwd_sizes.length_b, fwd_sizes.index) == (
        "after", 1, 5, 0,
    )
    assert (fwd_sizes.a.type, fwd_sizes.a.size_mb) == ("AG", 0.284)
    assert (fwd_sizes.b.type, fwd_sizes.b.size_mb) == ("AG", 0.125)
    (bwd_sizes,) = bwd.sizes
    assert (bwd_sizes.which, bwd_sizes.length_a, bwd_sizes.length_b) == ("after", 2, 9)


def test_spmd_against_diverging_run_names_rank_3_and_its_graphs():
    d = diff_runs(run("spmd_auto"), run("diverge_rank"))
    assert d.verdict == "2 graphs changed on 1 rank (3)"
    assert d.changed_ranks == [3]
    assert d.changed_graphs == ["0/0:0", "0/0:1"]
    (group,) = d.groups
    fwd, bwd = group.changes
    assert fields(fwd) == {
        "all_gather": ({"before": 8, "after": 1}, {"before": 10, "after": 1}),
        # rank 3 runs the same one all-gather as in spmd_auto, of two layers more
        "final": ([["all_gather", "0", 74536, "f32"]], [["all_gather", "0", 75596, "f32"]]),
    }
    assert fields(bwd) == {
        "all_gather": ({"before": 5, "after": 1}, {"before": 7, "after": 1}),
        "reduce_scatter": ({"before": 8, "after": 1}, {"before": 10, "after": 1}),
        "final": ([["all_gather", "0", 69928, "f32"], ["reduce_scatter", "0", 298144, "f32"]],
                  [["all_gather", "0", 70988, "f32"], ["reduce_scatter", "0", 302384, "f32"]]),
    }
    before, after = fwd.sizes
    # rank 3's extra layer adds all-gathers after the 8 others: first difference at index 8
    assert (before.which, before.length_a, before.length_b, before.index) == ("before", 8, 10, 8)
    assert before.a is None
    assert (before.b.type, before.b.size_mb) == ("AG", 0.004)
    assert (after.a.size_mb, after.b.size_mb) == (0.284, 0.288)


def test_reversed_diff_swaps_a_and_b():
    d = diff_runs(run("spmd_small_cap"), run("spmd_auto"))
    fwd = d.groups[0].changes[0]
    assert fields(fwd)["bucket_cap_mb"] == (0.1, 27.4)


def test_ranks_and_graphs_only_in_one_run():
    full = run("spmd_auto")
    part = tracekit.Run(paths=["part"], ranks=[full.rank(0), full.rank(1)])
    d = diff_runs(full, part)
    assert d.ranks_only_in_a == (2, 3)
    assert d.verdict == "2 ranks (2-3) only in A"
    assert d.to_dict()["changes"] == [
        {"kind": "rank_only_in_a", "ranks": [2, 3], "ranks_text": "2-3"}
    ]
    # a rank that lost its backward graph: the graph is only in A
    r0 = full.rank(0)
    fwd_only = tracekit.Rank(rank=0, graphs=[r0.graphs[0]])
    d = diff_runs(
        tracekit.Run(paths=["a"], ranks=[r0]), tracekit.Run(paths=["b"], ranks=[fwd_only])
    )
    (change,) = d.groups[0].changes
    assert (change.kind, change.compile_id, change.graph_index) == ("only_in_a", "0/0", 1)
    assert change.to_dict()["outcome"]["collectives"]["reduce_scatter"] == {"before": 8, "after": 1}


@pytest.mark.parametrize(
    "ranks, text",
    [
        ([0, 1, 2, 3, 5], "0-3,5"),
        ([3], "3"),
        ([7, 0, 2, 1], "0-2,7"),
        ([], ""),
        ([1, None], "1,-"),
    ],
)
def test_format_ranks(ranks, text):
    assert format_ranks(ranks) == text


def test_size_names_are_not_compared():
    from tracekit.analyze.diff import diff_sizes

    a = [CollectiveSize("AG", 0.25, "all_gather_into_tensor_out")]
    b = [CollectiveSize("AG", 0.25, "all_gather_into_tensor_3")]
    assert diff_sizes("after", a, b) is None


def test_our_pass_against_torchs_differs_only_in_source():
    d = diff_runs(run("spmd_auto"), run("tracekit_pass"))
    (group,) = d.groups
    assert group.ranks == (0, 1, 2, 3)
    assert [fields(c) for c in group.changes] == [{"source": ("torch", "tracekit")}] * 2
    assert [c.sizes for c in group.changes] == [(), ()]


def test_ranks_that_changed_differently_form_separate_groups():
    d = diff_runs(run("spmd_small_cap"), run("diverge_rank"))
    assert d.verdict == "2 graphs changed on 4 ranks (0-3)"
    assert [g.ranks for g in d.groups] == [(0, 1, 2), (3,)]
    fwd_0_2, fwd_3 = (g.changes[0] for g in d.groups)
    assert fields(fwd_0_2)["all_gather"] == ({"before": 8, "after": 5}, {"before": 8, "after": 1})
    assert fields(fwd_3)["all_gather"] == ({"before": 8, "after": 5}, {"before": 10, "after": 1})
    assert fields(fwd_3)["bucket_cap_mb"] == (0.1, 27.4)


def test_sizes_logged_by_one_run_only_are_not_compared_but_noted():
    import copy

    small = run("spmd_small_cap")
    quiet = copy.deepcopy(small)
    for r in quiet.ranks:
        for g in r.graphs:
            g.sizes_mb = None  # as without pre_bucketing_fsdp_collectives_verbose
    d = diff_runs(run("spmd_auto"), quiet)
    assert all(c.sizes == () for g in d.groups for c in g.changes)
    assert d.notes == (
        "per-collective sizes logged by only one run on ranks 0-3: sizes not compared there",
    )
    assert diff_runs(small, quiet).identical


def test_many_ranks_changed_the_same_way_are_one_group_and_a_short_verdict():
    import copy

    def scaled(name: str, n: int) -> tracekit.Run:
        """The fixture's 4 ranks repeated as ranks 0..n-1 (same graphs as rank r % 4)."""
        src = run(name)
        return tracekit.Run(
            paths=[name],
            ranks=[
                tracekit.Rank(rank=r, graphs=copy.deepcopy(src.rank(r % 4).graphs))
                for r in range(n)
            ],
        )

    auto, small = scaled("spmd_auto", 512), scaled("spmd_small_cap", 512)
    for r in small.ranks:
        if r.rank % 3:  # two ranks in three keep spmd_auto's outcome
            r.graphs = copy.deepcopy(auto.rank(r.rank).graphs)
    d = diff_runs(auto, small)
    assert d.verdict == "2 graphs changed on 171 ranks"  # 0, 3, ..., 510: too long to list
    (group,) = d.groups
    assert group.ranks == tuple(range(0, 512, 3))
    assert d.graph_changes == 342


def test_a_backward_run_but_never_prebucketed_is_not_absent():
    """saved_params logs its backward's schedule (8 reduce-scatters) but no bucketing outcome:
    against spmd_auto, that backward ran in both, pre-bucketed in one only."""
    from tracekit.render.diff_text import render

    d = diff_runs(run("spmd_auto"), run("saved_params"))
    (group,) = d.groups
    assert group.ranks == (0, 1, 2, 3)
    (change,) = group.changes
    assert (change.label, change.kind) == ("0/0:1", "not_prebucketed_in_b")
    assert [c.kind for c in change.final.collectives] == ["reduce_scatter"] * 8
    assert sum(c.bytes for c in change.final.collectives) == 298_144
    assert d.notes == ()  # both logged the backward's schedule
    row = next(line for line in render(d, "table").splitlines() if line.startswith("0/0"))
    assert row.split("  ")[0:1] == ["0/0"]
    assert "never pre-bucketed in B" in row and row.endswith("ran, not pre-bucketed: RS 8: 298,144 B")
    assert "absent" not in render(d, "table")
    back = diff_runs(run("saved_params"), run("spmd_auto")).groups[0].changes[0]
    assert back.kind == "not_prebucketed_in_a"
    assert back.to_dict()["ran_not_prebucketed"]["position"] == 1


def test_two_caps_say_which_ran_faster_by_torchs_estimates():
    """spmd_auto (27.4 MB) against spmd_small_cap (0.1 MB): the final schedules' estimates,
    as summarize's "est ms" column prints them (forward 0.0116 | 0.0452, backward 0.0230 |
    0.0818), per graph and summed; exposed ms is not in a log."""
    from tracekit.render.diff_text import render

    d = diff_runs(run("spmd_auto"), run("spmd_small_cap"))
    assert [c.est_ms for c in d.groups[0].changes] == [(0.0116, 0.0452), (0.023, 0.0818)]
    assert (d.estimates.a, d.estimates.b, d.estimates.graphs, d.estimates.faster) == (0.0346, 0.127, 2, "A")
    assert d.to_dict()["est_ms"] == {"a": 0.0346, "b": 0.127, "graphs": 2, "faster": "A", "exposed_ms": None}
    assert d.to_dict()["changes"][1]["est_ms"] == {"a": 0.023, "b": 0.0818}
    text = render(d, "table").splitlines()
    assert text[5] == "est ms: A 0.0346, B 0.1270: A faster by 0.0924 ms (3.67x)"
    assert "exposed ms is not logged" in text[7]
    assert [line.split()[-2:] for line in text if "final: est ms" in line] == [
        ["0.0116", "0.0452"], ["0.0230", "0.0818"]]
    # overlap_cap_a (1.5 MB) against overlap_cap_b (64 MB): B's fewer buckets are faster
    ab = diff_runs(run("overlap_cap_a"), run("overlap_cap_b")).estimates
    assert (ab.a, ab.b, ab.faster) == (0.2567, 0.0912, "B")
    # torch's pass against ours: the same collectives, the same estimates, no line
    same = diff_runs(run("spmd_auto"), run("tracekit_pass"))
    assert (same.estimates.a, same.estimates.faster) == (0.0346, None)
    assert "est ms" not in render(same, "table")
