"""``tracekit replay`` on the backward torch never pre-bucketed (fixture ``saved_params``):
rebuilt and reproduced as "not pre-bucketed" (our pass finds no group, merges nothing), at each
cap as torch runs it, and with the forward's FSDP groups (``--what-if forward-groups``), our
rewrite run with ``--apply``. Exact values from the log: 8 reduce-scatters, 0.0704 ms."""

from __future__ import annotations

import json

from click.testing import CliRunner

from conftest import FIXTURE_LOGS
from tracekit.cli import main

LOGS = str(FIXTURE_LOGS / "saved_params")
NONE = {"before": 0, "after": 0}


def _doc(*args: str) -> dict:
    res = CliRunner().invoke(main, ["replay", LOGS, *args, "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_replay_reproduces_not_pre_bucketed():
    doc = _doc()
    assert [(g["compile_id"], g["graph_index"]) for g in doc["graphs"]] == [("0/0", 0)]
    (e,) = doc["not_prebucketed"]
    assert (e["ranks"], e["compile_id"], e["graph_index"], e["outcome"]) == ("0", "0/0", 1, "not pre-bucketed")
    assert (e["reproduced"], e["mismatches"], e["error"], e["nodes"]) == (True, [], None, 88)
    assert e["recorded"]["schedule"] == {"RS": 8} and e["recorded"]["forward_groups"] == ["0"]
    assert e["recorded"]["estimated_comm_ms"] == 0.0704
    assert e["replays"] == []
    assert doc["totals"]["not_prebucketed"] == 1 and doc["totals"]["graphs"] == 1


def test_each_cap_as_torch_and_with_the_forward_groups():
    doc = _doc("--cap-mb", "0.1", "--cap", "auto", "--what-if", "forward-groups", "--apply", "--all-ranks")
    (e,) = doc["not_prebucketed"]
    assert e["ranks"] == "0-3"
    rows = [(r["cap_source"], r["what_if"], r["collectives"]["reduce_scatter"]["after"], r["estimated_comm_ms"],
             r["comm_ms_vs_recorded"]) for r in e["replays"]]
    assert rows == [("override", None, 8, 0.0704, 0.0), ("saturation", None, 8, 0.0704, 0.0),
                    ("override", "forward_groups", 5, 0.0452, -0.0252),
                    ("saturation", "forward_groups", 1, 0.0116, -0.0588)]
    for r in e["replays"]:
        assert r["collectives"]["all_gather"] == NONE and r["collectives"]["all_reduce"] == NONE
    for r in e["replays"][2:]:
        assert r["fsdp_groups"] == ["0"]
        a = r["applied"]
        assert (a["ok"], a["lint"], a["rewritten"], a["matches_plan"]) == (True, "ok", True, True)
        assert a["collectives"]["reduce_scatter"] == r["collectives"]["reduce_scatter"]


def test_forward_groups_alone_uses_the_forwards_cap():
    (e,) = _doc("--what-if", "forward-groups")["not_prebucketed"]
    (r,) = e["replays"]
    assert (r["cap_source"], round(r["bucket_cap_mb"], 2), r["collectives"]["reduce_scatter"]) == (
        "auto", 27.38, {"before": 8, "after": 1})
    assert r["applied"] is None


def test_text_output_has_the_section():
    res = CliRunner().invoke(main, ["replay", LOGS, "--cap-mb", "64", "--what-if", "forward-groups"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert "Graphs never pre-bucketed, rebuilt and reproduced" in lines
    row = next(x for x in lines if x.split()[:2] == ["0", "0/0:1"] and "not" in x)
    assert row.split() == ["0", "0/0:1", "88", "not", "pre-bucketed", "RS", "8", "0", "yes", "0.0704"]
    caps = [x.split() for x in lines if x.split()[:3] == ["0", "0/0:1", "64"]]
    assert caps == [["0", "0/0:1", "64", "override", "-", "(as", "torch)", "0->0", "8->8", "0->0", "0.0704", "+0.0000"],
                    ["0", "0/0:1", "64", "override", "forward_groups", "0->0", "8->1", "0->0", "0.0116", "-0.0588"]]
    assert lines[-1] == "1 graph: 1 rebuilt, 1 reproduced, 0 not reproduced, 0 not rebuilt; and 1 never pre-bucketed."


def test_selecting_only_the_backward_replays_it_alone():
    doc = _doc("--graph", "0/0:1")
    assert doc["graphs"] == [] and len(doc["not_prebucketed"]) == 1 and doc["notes"] == []


def test_text_of_the_backward_alone_has_no_empty_outcome_tables():
    res = CliRunner().invoke(main, ["replay", LOGS, "--graph", "0/0:1"])
    assert res.exit_code == 0, res.output
    assert "Recorded outcomes" not in res.output and "Other caps" not in res.output
    lines = res.output.splitlines()
    assert lines[0] == "Graphs never pre-bucketed, rebuilt and reproduced"
    assert lines[-1] == "1 graph never pre-bucketed: 1 reproduced."
    assert "what-if: --what-if forward-groups gives the pass the forward's FSDP groups." in lines


def test_python_api():
    import tracekit.replay

    (e,) = tracekit.replay.not_prebucketed(LOGS, cap_mb=[64], all_ranks=True)
    assert e["ranks"] == "0-3" and e["reproduced"] is True
    assert [(r["what_if"], r["collectives"]["reduce_scatter"]["after"]) for r in e["replays"]] == [
        (None, 8), ("forward_groups", 1)]


def test_what_if_overlap_bucketing_adds_torchs_scheduler_rows():
    """torch's overlap scheduler with collective_bucketing True and False on the rebuilt backward:
    it does not bucket the 8 reduce-scatters (RS 8->8 both ways), 0.0704 ms comm, 0.0002 exposed."""
    (e,) = _doc("--what-if", "overlap-bucketing")["not_prebucketed"]
    rows = [r for r in e["replays"] if r["what_if"] == "overlap_bucketing"]
    assert [r["cap_source"] for r in rows] == ["collective_bucketing=False (exposed 0.0002, est 0.0702 ms)",
                                               "collective_bucketing=True (exposed 0.0002, est 0.0702 ms)"]
    for r in rows:
        assert r["collectives"]["reduce_scatter"] == {"before": 8, "after": 8}
        assert (r["estimated_comm_ms"], r["exposed_ms"], r["est_ms"], r["compute_ms"]) == (0.0704, 0.0002, 0.0702, 0.07)
        assert r["comm_ms_vs_recorded"] == 0.0
    assert e["mismatches"] == []
