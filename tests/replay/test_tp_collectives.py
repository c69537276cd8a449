"""Tensor-parallel collectives on a mesh (issue 37): fsdp_tp_overlap (shard 2 x tp 2, a Megatron
MLP, torch 2.13, FLOPs-timed compute, torch's NCCL model) all-reduces one activation per graph on
tp group '3' (ranks 0-1). One collective of a kind on a group pre-bucketing never saw is no
finding (nothing to bucket it with), so no what-if runs; summarize, replay and explain say so,
with its count, bytes and estimate, and replay and explain with what it carries read off the
rebuilt graph. Exact values from the fixture's logs."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FIXTURE_LOGS

FSDP_TP_OVERLAP = FIXTURE_LOGS / "fsdp_tp_overlap"


def test_summarize_says_the_tp_all_reduces_run_once_with_bytes_and_ms():
    from click.testing import CliRunner

    from tracekit.commands.summarize_cmd import summarize

    r = CliRunner().invoke(summarize, [str(FSDP_TP_OVERLAP), "--format", "json"], catch_exceptions=False)
    doc = json.loads(r.stdout)
    assert r.exit_code == 0 and doc["verdict"]["text"] == "OK: all 4 ranks agree on all 2 graphs"
    assert doc["mesh_not_prebucketed"] == []  # no finding
    assert [
        (d["compile_id"], d["graph_index"], d["role"], d["groups"], d["kind"], d["count"], d["bytes"], d["est_ms"],
         d["ranks"]) for d in doc["mesh_run_once"]
    ] == [
        ("0/0", 0, "tp", ["3", "4"], "all_reduce", 1, 524288, 0.0196, "0-3"),
        ("0/0", 1, "tp", ["3", "4"], "all_reduce", 1, 524288, 0.0196, "0-3"),
    ]
    assert doc["mesh_run_once"][0]["reason"] == (
        "group 3 (tp: all-reduces of activations in the forward graph) runs one all_reduce in this graph: one "
        "alone has nothing to be bucketed with (no finding; replay and explain read what it carries off the graph)")
    text = CliRunner().invoke(summarize, [str(FSDP_TP_OVERLAP)], catch_exceptions=False).stdout
    assert ("0/0           forward   tp 3 | 4  all_reduce 1  524,288  0.0196    0-3\n"
            "0/0           backward  tp 3 | 4  all_reduce 1  524,288  0.0196    0-3\n") in text


def test_a_1d_and_an_hsdp_summary_have_no_run_once_key():
    from click.testing import CliRunner

    from tracekit.commands.summarize_cmd import summarize

    for name in ("spmd_auto", "hsdp_overlap"):
        r = CliRunner().invoke(summarize, [str(FIXTURE_LOGS / name), "--format", "json"], catch_exceptions=False)
        assert "mesh_run_once" not in json.loads(r.stdout), name


@pytest.fixture(scope="module")
def replayed():
    pytest.importorskip("torch")
    import tracekit.replay

    return tracekit.replay.replay(str(FSDP_TP_OVERLAP)).to_dict()


def test_replay_reads_off_the_graph_what_each_tp_all_reduce_carries(replayed):
    graphs = replayed["graphs"]
    assert [g.get("not_prebucketed_on_mesh") for g in graphs] == [None, None]  # no what-if: nothing to bucket
    rows = [
        [(c["group"], c["role"], c["members"], c["kind"], c["count"], c["collective"], c["bytes"], c["est_ms"])
         for c in g["run_once_on_mesh"]]
        for g in graphs
    ]
    # the same bytes and NCCL estimate as the log's (summarize above)
    assert rows == [
        [("3", "tp", "0-1", "all_reduce", 1, "all_reduce", 524288, 0.0196)],
        [("3", "tp", "0-1", "all_reduce", 1, "all_reduce_1", 524288, 0.0196)],
    ]
    fwd, bwd = (g["run_once_on_mesh"][0]["context"] for g in graphs)
    # forward: the row-parallel matmul's output, all-reduced, is what the graph returns
    assert (fwd["input"], fwd["input_op"], fwd["operands"], fwd["activation"], fwd["gathered_on"], fwd["used_by"]) == (
        "mm_7", "aten.mm", ["relu_6", "a parameter all-gathered on FSDP group '1'"], True, "1", ["output"])
    # backward: the input gradient of that matmul; the next compute (where_1) waits for it
    assert (bwd["input"], bwd["operands"], bwd["activation"], bwd["used_by"]) == (
        "mm_11", ["where", "a parameter all-gathered on FSDP group '1'"], True, ["where_1"])
    assert graphs[0]["run_once_on_mesh"][0]["reason"] == (
        "tp group '3' (ranks 0-1) runs one all_reduce in this graph: nothing to bucket it with (bucketing merges "
        "collectives of one kind on one group), so no what-if runs")


def test_replay_text_says_why_no_what_if_runs(replayed):
    from tracekit.render.replay_text import render_text

    text = render_text(replayed, "table")
    assert ("0        0/0:1    3        tp      all_reduce  1        524,288  0.0196    all_reduce_1\n") in text
    assert (
        "  0/0:1 all_reduce_1: tp group '3' (ranks 0-1) runs one all_reduce in this graph: nothing to bucket it\n"
        "      with (bucketing merges collectives of one kind on one group), so no what-if runs; read off the\n"
        "      graph: its input is mm_11 (aten.mm of where and a parameter all-gathered on FSDP group '1'): an\n"
        "      activation (compute on a gathered parameter), not a gradient; where_1 waits for its result\n"
    ) in text
    assert max(len(line) for line in text.splitlines()) <= 200


def test_a_1d_replay_has_no_run_once_section():
    pytest.importorskip("torch")
    import tracekit.replay

    doc = tracekit.replay.replay(str(FIXTURE_LOGS / "spmd_auto")).to_dict()
    assert not any("run_once_on_mesh" in g for g in doc["graphs"])


def test_explain_gives_each_tp_all_reduce_its_reason_and_no_what_if():
    pytest.importorskip("torch")
    from tracekit.explain.run import explain

    doc = explain([str(FSDP_TP_OVERLAP)])
    ars = [(g["graph_index"], c) for g in doc["graphs"] for c in g["collectives"] if c["kind"] == "AR"]
    assert [(i, c["name"], c["reason"], c.get("what_if")) for i, c in ars] == [
        (0, "all_reduce", "other_group", None), (1, "all_reduce_1", "other_group", None)]
    assert ars[0][1]["detail"] == (
        "tp group '3' (ranks 0-1) is no FSDP group ('1') and runs one all_reduce in this graph: nothing to bucket "
        "it with, no what-if; read off the graph: its input is mm_7 (aten.mm of relu_6 and a parameter all-gathered "
        "on FSDP group '1'): an activation (compute on a gathered parameter), not a gradient; the graph returns its "
        "result")


# -- a TP kind that runs more than once: fsdp_tp2_overlap (two Megatron MLPs in a row) ----------------

FSDP_TP2_OVERLAP = FIXTURE_LOGS / "fsdp_tp2_overlap"


def test_two_tp_all_reduces_a_graph_are_a_finding_in_summarize():
    from click.testing import CliRunner

    from tracekit.commands.summarize_cmd import summarize

    r = CliRunner().invoke(summarize, [str(FSDP_TP2_OVERLAP), "--format", "json"], catch_exceptions=False)
    doc = json.loads(r.stdout)
    assert r.exit_code == 0
    assert [(d["graph_index"], d["role"], d["groups"], d["kind"], d["count"], d["bytes"], d["est_ms"])
            for d in doc["mesh_not_prebucketed"]] == [
        (0, "tp", ["3", "4"], "all_reduce", 2, 1048576, 0.0392),
        (1, "tp", ["3", "4"], "all_reduce", 2, 1048576, 0.0392),
    ]
    assert "mesh_run_once" not in doc


def test_the_what_ifs_run_on_two_chained_tp_all_reduces_and_say_why_they_leave_them():
    pytest.importorskip("torch")
    import tracekit.replay
    from tracekit.render.replay_text import render_text

    doc = tracekit.replay.replay(str(FSDP_TP2_OVERLAP)).to_dict()
    for g, names in zip(doc["graphs"], (["all_reduce", "all_reduce_1"], ["all_reduce_2", "all_reduce_3"]),
                        strict=True):
        m = g["not_prebucketed_on_mesh"]
        ((found,),) = [m["collectives"]]
        assert (found["group"], found["role"], found["count"], found["bytes"], found["est_ms"]) == (
            "3", "tp", 2, 1048576, 0.0392)
        # the second MLP's all-reduce is computed from the first's result
        assert found["chained"] == [names]
        assert found["reason"].endswith(
            f"; read off the graph: {names[1]} needs {names[0]} (its input is computed from its result): a chain, "
            "no bucket can hold both")
        # both what-ifs ran (given group '3'; torch's collective bucketing) and left both, as run
        assert [(w["name"], w["ok"], w["left"]) for w in m["what_ifs"]] == [
            ("our_pass_with_groups", True, 2), ("overlap_bucketing", True, 2)]
        assert {w["exposed_ms"] for w in m["what_ifs"]} == {m["as_run"]["exposed_ms"]}
    assert [(g["not_prebucketed_on_mesh"]["as_run"]["exposed_ms"], g["not_prebucketed_on_mesh"]["as_run"]["est_ms"])
            for g in doc["graphs"]] == [(0.0714, 0.1592), (0.0996, 0.2577)]
    text = render_text(doc, "table")
    assert max(len(line) for line in text.splitlines()) <= 200
    assert "    input is computed from its result): a chain, no bucket can hold both\n" in text


def test_explain_says_our_pass_leaves_the_chained_tp_all_reduces_alone():
    pytest.importorskip("torch")
    from tracekit.explain.run import explain

    doc = explain([str(FSDP_TP2_OVERLAP)], graphs=["0/0:0"])
    (g,) = doc["graphs"]
    ars = [c for c in g["collectives"] if c["kind"] == "AR"]
    assert [(c["name"], c["reason"], c.get("what_if")) for c in ars] == [
        ("all_reduce", "other_group", None), ("all_reduce_1", "other_group", None)]
    assert {c["detail"] for c in ars} == {
        "tp group '3' (ranks 0-1) has no FSDP all-gather: torch's pre-bucketing buckets all-reduces only on the "
        "groups of its FSDP all-gathers ('1'); read off the graph: all_reduce_1 needs all_reduce (its input is "
        "computed from its result): a chain, no bucket can hold both, so our pass given the group leaves it alone"}
