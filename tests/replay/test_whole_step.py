"""The whole step is the whole step (issue 39): on ``saved_params`` the backward torch never
pre-bucketed (8 reduce-scatters run one by one) is part of the step, the Pareto front, the
recommendation and the timeline; a step that leaves it out says it is partial.

Exact values from the log: the forward's overlap schedule is 0.0519 ms (compute 0.0403, exposed
0.0116), the backward's 0.0702 ms (compute 0.07, exposed 0.0002, comm 0.0704: the same figures
as ``--what-if overlap-bucketing``'s as-run row), so the step is 0.1221 ms with 9 collectives."""

from __future__ import annotations

import json

from click.testing import CliRunner

from conftest import FIXTURE_LOGS, log_text, rank_log
from tracekit.cli import main

LOGS = FIXTURE_LOGS / "saved_params"


def _run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, ["replay", *args])
    return res.exit_code, res.stdout


def test_the_step_adds_the_backward_never_pre_bucketed():
    status, out = _run(str(LOGS), "--recommend", "--format", "json")
    assert status == 0, out
    doc = json.loads(out)
    fwd = doc["graphs"][0]["reproduction"]
    (bwd,) = doc["not_prebucketed"]
    assert (fwd["est_ms"], bwd["schedule"]["est_ms"]) == (0.0519, 0.0702)
    assert bwd["schedule"]["final"]["counts"] == {"reduce_scatter": 8}
    assert (fwd["peak_memory_bytes"], bwd["schedule"]["peak_memory_bytes"]) == (679_640, 322_616)
    assert (bwd["schedule"]["comm_ms"], bwd["schedule"]["exposed_ms"], bwd["schedule"]["compute_ms"]) == (
        0.0704, 0.0002, 0.07)
    for s in doc["totals"]["step"]:  # every cap: pre-bucketing merges nothing in the backward
        assert (s["graphs"], s["graphs_never_prebucketed"], s["partial"]) == (2, 1, None)
        assert s["final"] == {"counts": {"all_gather": 1, "reduce_scatter": 8}, "collectives": 9}
        assert (s["comm_ms"], s["exposed_ms"], s["compute_ms"], s["est_ms"]) == (0.082, 0.0118, 0.1103, 0.1221)
        assert s["peak_memory_bytes"] == 679_640  # the larger graph's: the forward's (backward 322,616)
        assert s["est_ms_vs_recorded"] == 0.0
    (point,) = doc["pareto_front"]
    assert (point["cap"], point["est_ms"]) == ("recorded", 0.1221)
    rec = doc["recommendation"]
    assert (rec["cap_mb"], rec["est_ms"], rec["exposed_ms"], rec["keep_recorded"]) == (27.4, 0.1221, 0.0118, True)
    assert "partial" not in rec


def test_the_text_says_the_step_includes_it():
    status, out = _run(str(LOGS), "--recommend")
    assert status == 0, out
    lines = out.splitlines()
    assert "The step includes 1 graph torch never pre-bucketed (the same at every cap: pre-bucketing merges nothing there)." in lines
    row = next(x for x in lines if x.startswith("recorded  27.4"))
    assert row.split() == ["recorded", "27.4", "9", "0.0820", "0.0118", "0.1103", "0.1221", "0.65", "0.284", "+0.0000"]
    assert any(x.startswith("recommended cap: 27.4 MB (est 0.1221 ms, exposed 0.0118 ms") for x in lines)


def test_the_timeline_has_the_backward(tmp_path):
    status, out = _run(str(LOGS), "--trace-out", str(tmp_path / "t"))
    assert status == 0, out
    trace = json.loads((tmp_path / "t" / "cap_27.4MB.json").read_text())
    tracks = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert tracks == {"0/0:0 compute", "0/0:0 communication group 0", "0/0:1 compute", "0/0:1 communication group 0"}
    rs = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "communication"
          and e["args"]["graph"] == "0/0:1"]
    assert [e["args"]["kind"] for e in rs] == ["reduce_scatter"] * 8
    fwd_end = max(e["ts"] + e["dur"] for e in trace["traceEvents"]
                  if e["ph"] == "X" and e["cat"] == "compute" and e["args"]["graph"] == "0/0:0")
    bwd_start = min(e["ts"] for e in trace["traceEvents"] if e["ph"] == "X" and e["args"]["graph"] == "0/0:1")
    assert bwd_start >= fwd_end  # one after the other, the backward after the forward


def _without_backward_compute_estimates(tmp_path):
    """saved_params' rank 0 log with the backward's two fx_compute_nodes_runtime_estimation
    entries dropped (envelope and payload lines), as a log cut by a filter would be: by default
    (no --overlap) the backward's log then shows no overlap scheduling and it is not scheduled."""
    src = rank_log(LOGS, 0)
    out, seen, skipping = [], 0, False
    for ln in log_text(src).split("\n"):
        if ln.startswith("\t") and skipping:
            continue
        skipping = False
        if '"name": "fx_compute_nodes_runtime_estimation"' in ln:
            seen += 1
            if seen > 2:  # the backward's (the forward logs two first)
                skipping = True
                continue
        out.append(ln)
    assert seen == 4
    dst = tmp_path / src.name.removesuffix(".gz")
    dst.write_text("\n".join(out))
    return dst


PARTIAL = "partial: 1 of 2 graphs (never pre-bucketed, left out: 0/0:1: not scheduled)"


def test_a_step_leaving_the_backward_out_says_it_is_partial(tmp_path):
    log = _without_backward_compute_estimates(tmp_path)
    status, out = _run(str(log), "--format", "json")
    assert status == 0, out
    doc = json.loads(out)
    (s,) = doc["totals"]["step"]
    assert (s["graphs"], s["graphs_never_prebucketed"], s["est_ms"], s["partial"]) == (1, 0, 0.0519, PARTIAL)
    assert "schedule" not in doc["not_prebucketed"][0]
    status, out = _run(str(log))
    assert f"recorded: {PARTIAL}" in out.splitlines()
    # --overlap schedules it anyway (its compute nodes on torch's roofline): the step is whole
    status, out = _run(str(log), "--overlap", "--format", "json")
    (s,) = json.loads(out)["totals"]["step"]
    assert (s["graphs"], s["partial"]) == (2, None)
    assert doc["not_prebucketed"][0]["compile_id"] == "0/0"


def test_a_recommendation_from_a_partial_step_says_so(tmp_path):
    import tracekit
    from tracekit.render.replay_text import render_text
    from tracekit.replay.recommend import pareto_front, recommend
    from tracekit.replay.step_coverage import mark_recommendation

    doc = tracekit.replay_run(str(_without_backward_compute_estimates(tmp_path)), [1.0])
    assert [s["partial"] for s in doc["totals"]["step"]] == [PARTIAL, PARTIAL]
    doc["pareto_front"] = pareto_front(doc["totals"]["step"])
    doc["recommendation"] = recommend(doc["totals"]["step"], None)
    mark_recommendation(doc)
    assert doc["recommendation"]["partial"] == PARTIAL
    assert f"The recommendation is drawn from a step that is {PARTIAL}." in render_text(doc, "table").splitlines()


def test_the_scheduler_table_has_the_backward_never_pre_bucketed():
    """Issue 50, item 20: the per-graph table shows the graph the step adds, not only the
    step's total: its figures are the backward's (0.0704 comm, 0.0002 exposed, 0.07 compute,
    0.0702 est, 322,616 bytes peak), cap "any"; the header counts its 7 compute nodes too."""
    status, out = _run(str(LOGS))
    assert status == 0, out
    lines = out.splitlines()
    row = next(x for x in lines if "never pre-bucketed  any" in x)
    assert row.split() == ["0", "0/0:1", "never", "pre-bucketed", "any", "0/8/0", "0.0704", "0.0002",
                           "0.0700", "0.0702", "0.31", "-", "-"]
    assert any("0 of 11 compute nodes fell back to the roofline on H100" in x for x in lines)
