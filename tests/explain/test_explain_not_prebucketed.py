"""``tracekit explain`` on the backward torch never pre-bucketed (fixture ``saved_params``):
rebuilt from its before_post_grad_graph, torch's reason per collective, and the forward-groups
what-if verified by running our pass. Exact values from the log: 8 reduce-scatters
(``reduce_scatter_tensor`` .. ``_7``) of 0.0 .. 0.125 MB on group '0', 0.0704 ms estimated."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from conftest import FIXTURE_LOGS, rank_log
from tracekit.cli import main
from tracekit.read.pairing import NotPrebucketedSource

LOGS = str(FIXTURE_LOGS / "saved_params")
RS_NAMES = ["reduce_scatter_tensor"] + [f"reduce_scatter_tensor_{i}" for i in range(1, 8)]
RS_MB = [0.000137, 0.016, 0.001, 0.125, 0.001, 0.125, 0.001, 0.016]


def _run(*args: str):
    return CliRunner().invoke(main, ["explain", *args])


@pytest.fixture(scope="module")
def backward() -> dict:
    result = _run(LOGS, "--graph", "0/0:1", "--format", "json")
    assert result.exit_code == 0, result.output
    (g,) = json.loads(result.output)["graphs"]
    return g


def test_the_backward_is_rebuilt_and_torchs_outcome_reproduced(backward):
    g = backward
    assert (g["rank"], g["compile_id"], g["graph_index"], g["outcome"]) == (0, "0/0", 1, "not pre-bucketed")
    assert g["recorded"] == {"outcome": "not pre-bucketed", "schedule": {"RS": 8}}
    assert (g["reproduced"], g["mismatches"], g["error"], g["cap_mb"]) == (True, [], None, None)
    assert g["reason"] == "no_fsdp_all_gather"
    assert g["reason_text"] == ("no FSDP all-gather in this graph, so no FSDP group was found (the forward of "
                                "0/0 has FSDP group '0'; torch looks for groups in each graph alone)")
    assert g["file"].endswith(".log.gz") and g["line"] > 0


def test_each_reduce_scatter_gets_torchs_reason(backward):
    cs = backward["collectives"]
    assert [(c["name"], c["kind"], c["size_mb"], c["group"], c["reason"]) for c in cs] == [
        (n, "RS", mb, "0", "no_fsdp_group") for n, mb in zip(RS_NAMES, RS_MB)]
    assert cs[0]["detail"] == ("reduce-scatter on group '0': no FSDP group identified in this graph (it has no "
                               "FSDP all-gather), so the pass leaves it")


def test_forward_groups_what_if_is_verified_by_running_our_pass(backward):
    w, _ = backward["what_ifs"]
    assert (w["name"], w["fsdp_groups"], w["group_size"], w["cap_source"]) == ("forward_groups", ["0"], 4, "auto")
    assert round(w["bucket_cap_mb"], 2) == 27.38
    assert w["collectives"]["reduce_scatter"] == {"before": 8, "after": 1}
    assert w["buckets"]["RS"] == [RS_NAMES]
    # the NCCL model on the graph's sizes gives the log's own estimate before (0.0704 ms)
    assert (w["comm_ms_before"], w["estimated_comm_ms"], w["comm_ms_saved"]) == (0.0704, 0.0116, 0.0588)
    assert w["verified"] is True
    assert w["applied"] == {"ok": True, "lint": "ok", "rewritten": True, "matches_plan": True,
                            "nodes_after": 101, "collectives": {
                                "all_gather": {"before": 0, "after": 0},
                                "reduce_scatter": {"before": 8, "after": 1},
                                "all_reduce": {"before": 0, "after": 0}}}
    assert all(c["what_if"]["reason"] == "bucketed" and c["what_if"]["bucket"] == 0 for c in backward["collectives"])


def test_text_output_names_the_reason_and_the_what_if():
    result = _run(LOGS)
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())  # lines wrapped at 200 columns
    assert "rank 0, graph 0/0:0 (forward), cap 27.4 MB" in out  # the forward is still explained
    assert "rank 0, graph 0/0:1 (backward), not pre-bucketed" in out
    assert ("recorded: not pre-bucketed (RS 8 run one by one); the planner reproduces it: no FSDP all-gather "
            "in this graph") in out
    assert ("what-if forward_groups: given the forward's FSDP group '0' (group size 4, cap 27.38 MB), the pass "
            "merges RS 8->1: 0.0704 -> 0.0116 ms estimated (verified by running our pass)") in out
    assert "8 collectives, no_fsdp_group: reduce_scatter_tensor, reduce_scatter_tensor_1," in out
    assert ("what-if overlap_bucketing: with aten_distributed_optimizations.collective_bucketing = True torch's "
            "overlap scheduler merges nothing (RS 8->8): comm 0.0704 -> 0.0704 ms, exposed 0.0002 -> 0.0002 ms, "
            "est 0.0702 -> 0.0702 ms (torch's estimates) (run through torch's overlap scheduler)") in out
    assert "note: None" not in out


def test_overlap_bucketing_what_if_runs_torchs_scheduler(backward):
    """torch 2.13's overlap scheduler, given collective_bucketing=True, does NOT bucket these 8
    reduce-scatters (almost all of their time is already hidden under compute): 8 -> 8."""
    _, o = backward["what_ifs"]
    assert (o["name"], o["ok"], o["error"], o["verified"]) == ("overlap_bucketing", True, None, True)
    want = {"counts": {"reduce_scatter": 8}, "comm_ms": 0.0704, "exposed_ms": 0.0002, "compute_ms": 0.07,
            "est_ms": 0.0702, "fallback": 0}
    assert o["as_run"] == {"collective_bucketing": False, **want}
    assert o["bucketed"] == {"collective_bucketing": True, **want}
    assert backward["note"] is None


def test_the_overlap_what_if_says_buckets_only_when_it_merges(backward):
    """'merges nothing (RS 8->8)' for saved_params' backward as torch ran it (it said 'buckets RS
    8->8'); 'buckets RS 8->1' for the same figures with the bucketed side's count lowered."""
    from tracekit.explain.not_prebucketed import overlap_text

    _, o = backward["what_ifs"]
    assert overlap_text(o).startswith(
        "with aten_distributed_optimizations.collective_bucketing = True torch's overlap scheduler merges nothing "
        "(RS 8->8): comm 0.0704 -> 0.0704 ms"
    )
    merged = {**o, "bucketed": {**o["bucketed"], "counts": {"reduce_scatter": 1}}}
    assert "torch's overlap scheduler buckets RS 8->1: comm 0.0704 -> 0.0704 ms" in overlap_text(merged)


def test_the_explain_command_of_summarize_selects_it():
    result = _run(LOGS, "--rank", "3", "--graph", "0/0:1", "--format", "json")
    assert result.exit_code == 0, result.output
    (g,) = json.loads(result.output)["graphs"]
    assert (g["rank"], g["outcome"], g["reproduced"]) == (3, "not pre-bucketed", True)
    missing = _run(LOGS, "--graph", "0/0:2")
    assert missing.exit_code == 2 and "graphs there: 0/0:0, 0/0:1" in missing.output


def test_a_graph_with_groups_found_in_it_is_not_reproduced_as_never_prebucketed():
    # the forward's text posing as an outcome-less graph: the planner finds group '0' there
    from tracekit.read.reader import graph_and_not_prebucketed_sources
    from tracekit.replay.not_prebucketed_graphs import NotPrebucketedReplayer

    found = list(graph_and_not_prebucketed_sources([rank_log("saved_params", 0)]))
    fwd = next(s for s in found if not isinstance(s, NotPrebucketedSource))
    bwd = next(s for s in found if isinstance(s, NotPrebucketedSource))
    bwd.text = fwd.text
    ok, mismatches = NotPrebucketedReplayer(bwd).reproduce()
    assert not ok
    assert mismatches == ["the rebuilt graph has FSDP groups ['0']: torch would have pre-bucketed it and "
                          "logged an outcome", "AG: the schedule runs 0, the rebuilt graph has 8",
                          "RS: the schedule runs 8, the rebuilt graph has 0"]


def test_python_api_includes_the_backward():
    from tracekit.explain.run import explain

    doc = explain([LOGS])
    assert [(g["graph_index"], g.get("outcome")) for g in doc["graphs"]] == [(0, None), (1, "not pre-bucketed")]
    assert doc["graphs"][1]["what_ifs"][0]["collectives"]["reduce_scatter"] == {"before": 8, "after": 1}


def test_overlap_bucketing_that_cannot_run_is_a_note_not_a_traceback():
    # a GPU the roofline table does not know: the what-if fails, and says so in one line
    from tracekit.explain.not_prebucketed import overlap_text
    from tracekit.read.reader import graph_and_not_prebucketed_sources
    from tracekit.replay.not_prebucketed_graphs import NotPrebucketedReplayer

    found = list(graph_and_not_prebucketed_sources([rank_log("saved_params", 0)]))
    bwd = next(s for s in found if isinstance(s, NotPrebucketedSource))
    o = NotPrebucketedReplayer(bwd).overlap_bucketing(gpu="V100")
    assert (o["ok"], o["error"]) == (False, "torch's overlap scheduler could not run on the rebuilt graph: KeyError: 'V100'")
    assert overlap_text(o) == o["error"]


def test_the_eight_alike_reasons_are_said_once_with_the_count():
    # the 8 reduce-scatters share one reason, one detail (but their names) and one what-if:
    # one paragraph, with the count, not 8 copies of the sentence
    result = _run(LOGS, "--graph", "0/0:1")
    assert result.exit_code == 0, result.output
    text = result.output
    assert text.count("no FSDP group identified in this graph") == 1
    para = text[text.index("  8 collectives, no_fsdp_group: ") :].split("\n\n")[0]
    assert " ".join(ln.strip() for ln in para.splitlines()) == (
        "8 collectives, no_fsdp_group: " + ", ".join(RS_NAMES) + ". For reduce_scatter_tensor: reduce-scatter "
        "on group '0': no FSDP group identified in this graph (it has no FSDP all-gather), so the pass leaves "
        "it; the others alike, with their own names and sizes (the JSON has each). What if: given the "
        "forward's FSDP group '0': bucketed: RS bucket 0: 8 collectives (reduce_scatter_tensor, "
        "reduce_scatter_tensor_1, reduce_scatter_tensor_2, reduce_scatter_tensor_3 and 4 more), 0.284 MB "
        "within the 27.38 MB cap."
    )
    assert max(map(len, text.splitlines())) <= 200  # the recorded and what-if lines wrapped too
