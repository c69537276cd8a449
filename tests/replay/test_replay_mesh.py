"""Replay on 2-D meshes (issue 37): every process group a graph uses is registered (name, size,
members, read from the logs) before torch's passes and overlap scheduler run, so every graph of
the hsdp, fsdp_tp and hsdp_diverge fixtures (replicate 2 x shard 2, shard 2 x tp 2, and HSDP
with rank 3 one layer more) is scheduled, the HSDP backward included, and its final collective
sequence is the recorded one. Those runs timed collectives at 1 ms per MB in the compile (a figure
the log does not record), so their figures here are the replays' own; hsdp_overlap and
fsdp_tp_overlap (FLOPs-timed compute, torch's NCCL model) keep torch's own exposed ms in
overlap_results.json, which replay gives on every graph. The what-ifs for the replicate
all-reduces pre-bucketing never handles, and explain's reasons, are checked on both."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURE_LOGS, rank_log

pytest.importorskip("torch")

HSDP, FSDP_TP, HSDP_DIVERGE = (FIXTURE_LOGS / s for s in ("hsdp", "fsdp_tp", "hsdp_diverge"))
HSDP_RANK1 = rank_log(HSDP, 1)


def _replay(path, **kw):
    import tracekit.replay

    return tracekit.replay.replay(str(path), **kw)


def _groups(g):
    return [(p["name"], p["role"], p["size"], p["size_from"], p["members"]) for p in g["process_groups"]]


@pytest.fixture(scope="module")
def hsdp_all():
    return _replay(HSDP, all_ranks=True).to_dict()


def test_the_hsdp_backward_is_scheduled_with_its_replicate_group_registered(hsdp_all):
    doc = hsdp_all
    assert [(g["ranks"], g["graph_index"], g["verdict"], g["final_reproduced"]) for g in doc["graphs"]] == [
        ("0-1", 0, "reproduced", True),
        ("0", 1, "reproduced", True),
        ("1", 1, "reproduced", True),
        ("2-3", 0, "reproduced", True),
        ("2", 1, "reproduced", True),
        ("3", 1, "reproduced", True),
    ]
    bwd = doc["graphs"][1]
    assert _groups(bwd) == [("3", "shard", 2, "graph", "0-1"), ("1", "replicate", 2, "members", "0,2")]
    assert _groups(doc["graphs"][2])[1] == ("2", "replicate", 2, "members", "1,3")
    rep = bwd["reproduction"]
    assert rep["final"]["counts"] == {"all_gather": 1, "reduce_scatter": 1, "all_reduce": 8}
    assert [c["bytes"] for c in rep["final"]["collectives"] if c["kind"] == "all_reduce"] == [
        68,
        8192,
        256,
        65536,
        516,
        65536,
        256,
        8192,
    ]
    assert (rep["comm_ms"], rep["exposed_ms"], rep["compute_ms"], rep["est_ms"]) == (
        0.0851,
        0.0851,
        0.0705,
        0.1557,
    )
    fwd = doc["graphs"][0]["reproduction"]
    assert (fwd["exposed_ms"], fwd["est_ms"]) == (0.0097, 0.0501)
    t = doc["totals"]
    assert (t["graphs"], t["reproduced"], t["partial"], t["final_reproduced"]) == (6, 6, 0, 6)


def test_the_whole_step_counts_the_backward(hsdp_all):
    (step,) = hsdp_all["totals"]["step"]
    assert (step["graphs"], step["graphs_scheduler_failed"], step["partial"]) == (2, 0, None)
    assert step["final"]["counts"] == {"all_gather": 2, "reduce_scatter": 1, "all_reduce": 8}
    assert (step["exposed_ms"], step["est_ms"]) == (0.0949, 0.2058)


def test_one_ranks_log_sizes_the_replicate_group_from_the_world():
    doc = _replay(HSDP_RANK1).to_dict()
    assert [g["verdict"] for g in doc["graphs"]] == ["reproduced", "reproduced"]
    # one log: members are that rank; the all-reduce group's size is '# World size' 4 / shard 2
    assert _groups(doc["graphs"][1]) == [("3", "shard", 2, "graph", "1"), ("2", "replicate", 2, "world", "1")]
    assert doc["graphs"][1]["reproduction"]["exposed_ms"] == 0.0851


@pytest.mark.parametrize(
    ("path", "graphs", "exposed"),
    [
        (FSDP_TP, 8, [0.0176] * 8),
        (HSDP_DIVERGE, 7, [0.0097, 0.0851, 0.0851, 0.0097, 0.0851, 0.0098, 0.1008]),
    ],
)
def test_every_graph_of_the_other_meshes_is_scheduled_and_reproduced(path, graphs, exposed):
    doc = _replay(path, all_ranks=True).to_dict()
    assert len(doc["graphs"]) == graphs
    assert all(g["verdict"] == "reproduced" and g["final_reproduced"] for g in doc["graphs"])
    assert [g["reproduction"]["exposed_ms"] for g in doc["graphs"]] == exposed


def test_fsdp_tp_registers_the_tp_group_of_its_activation_all_reduces():
    doc = _replay(FSDP_TP, rank=3).to_dict()
    assert [_groups(g) for g in doc["graphs"]] == [
        [("2", "shard", 2, "graph", "1,3"), ("4", "tp", 2, "members", "2-3")]
    ] * 2
    assert [g["reproduction"]["final"]["counts"] for g in doc["graphs"]] == [
        {"all_gather": 1, "all_reduce": 1},
        {"all_gather": 1, "all_reduce": 1, "reduce_scatter": 1},
    ]


def test_a_group_of_unknown_size_makes_the_graph_partial():
    """Without the run's groups (no table: the engine alone), the backward's all-reduce group
    has no size: it cannot be registered, the graph is partial and says why."""
    from tracekit.model import Diagnostics
    from tracekit.replay.engine import replay_sources
    from tracekit.replay.results import ReplayOptions
    from tracekit.replay.selection import replay_sources_for

    sources = replay_sources_for([str(HSDP)], rank=0, diagnostics=Diagnostics())
    results = replay_sources(sources, ReplayOptions(groups=None))
    assert [r.verdict for r in results] == ["reproduced", "partial"]
    assert results[1].incomplete()[0] == (
        "process group '1' (all_reduce): size unknown (the graph names none; read every rank's logs "
        "for its members)"
    )


def test_the_table_shows_the_groups_and_a_1d_run_shows_none():
    from tracekit.render.replay_text import render_text

    text = render_text(_replay(HSDP).to_dict(), "table")
    assert (
        "group    role       size    size from    members    collectives                 graphs\n"
        "-------  ---------  ------  -----------  ---------  --------------------------  ------------\n"
        "1        replicate  2       members      0,2        all_reduce                  0/0:1\n"
        "3        shard      2       graph        0-1        all_gather, reduce_scatter  0/0:0, 0/0:1\n"
    ) in text
    assert text.rstrip().endswith("2 graphs: 2 rebuilt, 2 reproduced, 0 not reproduced, 0 not rebuilt.")
    one_d = _replay(FIXTURE_LOGS / "spmd_auto").to_dict()
    assert all("process_groups" not in g for g in one_d["graphs"])
    assert "Process groups registered" not in render_text(one_d, "table")


# -- collectives pre-bucketing never handles on the mesh, and the what-ifs ---------------------------


@pytest.fixture(scope="module")
def hsdp_rank0():
    return _replay(HSDP).to_dict()


def test_the_replicate_all_reduces_are_found_with_count_bytes_ms_and_reason(hsdp_rank0):
    fwd, bwd = hsdp_rank0["graphs"]
    assert "not_prebucketed_on_mesh" not in fwd
    m = bwd["not_prebucketed_on_mesh"]
    assert m["collectives"] == [
        {
            "group": "1",
            "role": "replicate",
            "members": "0,2",
            "kind": "all_reduce",
            "count": 8,
            "bytes": 148552,
            "est_ms": 0.0658,
            "reason": "replicate group '1' (ranks 0,2) has no FSDP all-gather: torch's pre-bucketing buckets "
            "all-reduces only on the groups of its FSDP all-gathers ('3')",
        }
    ]
    assert m["as_run"] == {
        "bucket_cap_mb": 10.4,
        "left": 8,
        "left_est_ms": 0.0658,
        "comm_ms": 0.0851,
        "exposed_ms": 0.0851,
        "est_ms": 0.1557,
    }


def test_our_pass_given_the_replicate_group_buckets_the_all_reduces(hsdp_rank0):
    ours, _ = hsdp_rank0["graphs"][1]["not_prebucketed_on_mesh"]["what_ifs"]
    assert (ours["name"], ours["ok"], ours["fsdp_groups"]) == ("our_pass_with_groups", True, ["3", "1"])
    assert ours["counts"] == {"all_gather": 1, "reduce_scatter": 1, "all_reduce": 1}
    assert (ours["left"], ours["left_est_ms"], ours["comm_ms"], ours["exposed_ms"], ours["est_ms"]) == (
        1,
        0.0112,
        0.0305,
        0.0305,
        0.1011,
    )


def test_torchs_scheduler_with_collective_bucketing_buckets_them_but_not_its_exposed_figure(hsdp_rank0):
    """torch 2.13, 2.14.1 and 2.15.0 alike: the overlap-preserving bucketer merges the 8
    all-reduces into 1, after the scheduler computed its exposed figure (so that stays)."""
    _, theirs = hsdp_rank0["graphs"][1]["not_prebucketed_on_mesh"]["what_ifs"]
    assert (theirs["name"], theirs["ok"], theirs["collective_bucketing"]) == ("overlap_bucketing", True, True)
    assert theirs["counts"] == {"all_gather": 1, "reduce_scatter": 1, "all_reduce": 1}
    assert (
        theirs["left"],
        theirs["left_est_ms"],
        theirs["comm_ms"],
        theirs["exposed_ms"],
        theirs["est_ms"],
    ) == (
        1,
        0.0112,
        0.0305,
        0.0851,
        0.1557,
    )


def test_the_table_shows_the_finding_and_the_what_ifs(hsdp_rank0):
    from tracekit.render.replay_text import render_text

    text = render_text(hsdp_rank0, "table")
    assert "0        0/0:1    1        replicate  all_reduce  8        148,552  0.0658\n" in text
    assert (
        "0        0/0:1    as run                                      8                0.0658          0.0851     0.0851        0.1557\n"
        in text
    )
    assert (
        "0        0/0:1    our pass given '1' as well                  1                0.0112          0.0305     0.0305        0.1011\n"
        in text
    )
    assert (
        "0        0/0:1    torch's scheduler, collective_bucketing on  1                0.0112          0.0305     0.0851*       0.1557\n"
        in text
    )


def test_no_finding_for_a_tp_group_that_runs_one_all_reduce_per_graph():
    doc = _replay(FSDP_TP).to_dict()
    assert [g.get("not_prebucketed_on_mesh") for g in doc["graphs"]] == [None, None]


def test_explain_gives_each_replicate_all_reduce_its_reason_and_what_if():
    from tracekit.explain.run import explain

    doc = explain([str(HSDP)], graphs=["0/0:1"])
    (g,) = doc["graphs"]
    ars = [c for c in g["collectives"] if c["kind"] == "AR"]
    assert [c["name"] for c in ars] == ["all_reduce"] + [f"all_reduce_{i}" for i in range(1, 8)]
    assert {c["reason"] for c in ars} == {"other_group"}
    assert {c["detail"] for c in ars} == {
        "replicate group '1' (ranks 0,2) has no FSDP all-gather: torch's pre-bucketing buckets all-reduces only "
        "on the groups of its FSDP all-gathers ('3')"
    }
    assert [c["what_if"] for c in ars] == [
        {
            "fsdp_groups": ["3", "1"],
            "bucket": 0,
            "verified": True,
            "text": "our pass given group '1' as well buckets it (AR bucket 0, of 8)",
        }
    ] * 8
    assert g["reproduced"] is True
    # torch's recorded counts are those of its FSDP group only: the text says which groups
    # (it read "recorded AG 5->1, RS 8->1, AR 0->0" beside the 8 all-reduces; issue 50, item 10)
    from tracekit.render.explain_text import render_text

    assert (
        "recorded AG 5->1, RS 8->1, AR 0->0 (on FSDP group 3; not counted: AR 8 on group 1, a group "
        "pre-bucketing never sees); the planner reproduces it (bucket members checked), bucket mode default\n"
    ) in render_text(doc, "table")


# -- torch's own exposed ms: hsdp_overlap, fsdp_tp_overlap (FLOPs-timed compute, NCCL model) ---------

HSDP_OVERLAP, FSDP_TP_OVERLAP = FIXTURE_LOGS / "hsdp_overlap", FIXTURE_LOGS / "fsdp_tp_overlap"


def _torch_results(path):
    import json

    return {g["graph_index"]: g for g in json.loads((path / "overlap_results.json").read_text())["graphs"]}


@pytest.mark.parametrize(
    ("path", "distinct", "counts"),
    [
        (HSDP_OVERLAP, 6, [{"all_gather": 1}, {"all_gather": 1, "reduce_scatter": 1, "all_reduce": 6}]),
        (
            FSDP_TP_OVERLAP,
            8,
            [{"all_gather": 1, "all_reduce": 1}, {"all_gather": 1, "all_reduce": 1, "reduce_scatter": 1}],
        ),
    ],
)
def test_every_mesh_graph_gives_torchs_exposed_ms_and_final_sequence(path, distinct, counts):
    """At the recorded cap, on every graph (the HSDP backward with its 6 replicate all-reduces
    included), under torch 2.13.0, 2.14.1 and 2.15.0 alike: the recorded final sequence and
    torch's own exposed ms (its INFO line, 2 decimals: within 5% or 0.02 ms; the unrounded sums
    generate.py read off the compile's scheduler: to 1e-6 ms)."""
    run = _replay(path, all_ranks=True)
    want = _torch_results(path)
    # 4 ranks x (forward, backward), one replay for ranks whose graphs are the same (group names too)
    assert len(run.graphs) == distinct
    for g in run.graphs:
        assert g.verdict == "reproduced" and g.final_reproduced is True, (g.incomplete(), g.final_mismatches)
        sc = g.reproduction.schedule
        assert sc.counts() == counts[g.graph_index]
        torch_ms = want[g.graph_index]
        assert abs(sc.exposed_ms - torch_ms["total_exposed_ms"]) <= max(
            0.02, 0.05 * torch_ms["total_exposed_ms"]
        )
        assert sc.exposed_ms == pytest.approx(torch_ms["exact_total_exposed_ms"], abs=1e-6)
        assert sc.comm_ms == pytest.approx(torch_ms["exact_total_potential_exposed_ms"], abs=1e-6)
        assert sc.fallback == []


def test_hsdp_overlap_what_ifs_on_the_backward():
    doc = _replay(HSDP_OVERLAP).to_dict()
    m = doc["graphs"][1]["not_prebucketed_on_mesh"]
    ((found,),) = [m["collectives"]]
    assert (found["group"], found["kind"], found["count"], found["bytes"], found["est_ms"]) == (
        "1",
        "all_reduce",
        6,
        3145728,
        0.1176,
    )
    rows = [(m["as_run"]["left"], m["as_run"]["comm_ms"], m["as_run"]["exposed_ms"], m["as_run"]["est_ms"])]
    rows += [(w["left"], w["comm_ms"], w["exposed_ms"], w["est_ms"]) for w in m["what_ifs"]]
    assert rows == [
        (6, 0.1771, 0.1631, 0.3186),  # as run: torch's 0.16 ms exposed; comm the scheduler table's
        (1, 0.1011, 0.0871, 0.2426),  # our pass given replicate group '1' as well
        (1, 0.1011, 0.1631, 0.3186),  # torch's scheduler with collective_bucketing (its figure)
    ]
    (step,) = doc["totals"]["step"]
    assert (step["graphs"], step["partial"], step["exposed_ms"], step["est_ms"]) == (2, None, 0.1946, 0.4385)
    assert [
        (w["name"], w["exposed_ms"], w["est_ms"], w["est_ms_vs_recorded"])
        for w in doc["totals"]["step_mesh_what_ifs"]
    ] == [
        ("our_pass_with_groups", 0.1186, 0.3625, -0.076),
        ("overlap_bucketing", 0.1946, 0.4385, 0.0),
    ]


def test_recommend_covers_every_graph_of_the_mesh_step():
    """--recommend on hsdp_overlap: every cap's whole step holds both graphs (the backward was
    left out when its replicate group could not be resolved), and the exit status is 0."""
    import json

    from click.testing import CliRunner

    from tracekit.commands.replay_cmd import replay

    r = CliRunner().invoke(
        replay, ["--recommend", "--format", "json", str(HSDP_OVERLAP)], catch_exceptions=False
    )
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert {(s["graphs"], s["graphs_scheduler_failed"], s["partial"]) for s in doc["totals"]["step"]} == {
        (2, 0, None)
    }
    assert [(p["cap"], p["graphs"], p["exposed_ms"], p["est_ms"]) for p in doc["pareto_front"]] == [
        ("1", 2, 0.0744, 0.3064)
    ]
    rec = doc["recommendation"]
    assert (rec["cap"], rec["exposed_ms"], rec["est_ms"], rec["vs_recorded_ms"]) == (
        "1",
        0.0744,
        0.3064,
        -0.1321,
    )


def test_copies_of_one_ranks_log_beyond_the_world_do_not_size_a_group(tmp_path):
    """8 rank logs made from hsdp_overlap's rank 0 (bench/make_ranks.py, as the scale tests
    do) while each says '# World size: 4': the members read (8) are copies, not a group's
    ranks, so the replicate group's size is the world over the shard size (2), not 8."""
    from tests.conftest import bench_module

    bench_module("make_ranks").make_ranks(tmp_path / "run", 8, base="hsdp_overlap")
    doc = _replay(tmp_path / "run").to_dict()
    assert [(p["name"], p["size"], p["size_from"]) for p in doc["graphs"][1]["process_groups"]] == [
        ("3", 2, "graph"),
        ("1", 2, "world"),
    ]
    assert doc["graphs"][1]["reproduction"]["exposed_ms"] == 0.1631


def test_one_graph_one_comm_figure():
    """Issue 50, item 14: hsdp_overlap's backward has one comm figure at the recorded cap,
    torch's scheduler's 0.1771 ms, in the scheduler table, the note on the other groups' collectives
    and the what-ifs' "as run" row (they read 0.1771, 0.1772 and 0.1773: three sums, three roundings)."""
    from click.testing import CliRunner

    from tracekit.cli import main

    res = CliRunner().invoke(main, ["replay", str(FIXTURE_LOGS / "hsdp_overlap")])
    lines = res.stdout.splitlines()
    assert "  0 0/0:1: + 6 AR on group 1, 0.1176 ms: 0.1771 ms in all" in lines
    (table_row,) = [x.split() for x in lines if x.startswith("0        0/0:1 recorded")]
    assert table_row[5] == "0.1771"
    (as_run,) = [x.split() for x in lines if x.startswith("0        0/0:1    as run")]
    assert as_run[6] == "0.1771"
