"""``replay --recommend`` on spmd_auto, where every cap of the grid gives torch's scheduler the
same estimates (the model is small: every bucket fits under 1 MB): no cap is faster, so the
recorded 27.4 MB is kept, never the smallest cap among equals; the Pareto front is one point."""

from __future__ import annotations

from report_docs import replay_doc

from tracekit.replay.recommend import pareto_front, recommend


def test_no_faster_cap_keeps_the_recorded_cap_and_the_front_has_one_point():
    doc = replay_doc("spmd_auto")
    step = doc["totals"]["step"]
    assert {(s["est_ms"], s["peak_memory_bytes"]) for s in step} == {(0.1454, 654448)}
    rec = doc["recommendation"]
    assert (rec["cap"], rec["cap_mb"], rec["keep_recorded"], rec["vs_recorded_ms"]) == ("recorded", 27.4, True, 0.0)
    assert rec["config"].endswith("bucket_cap_mb = 27.4")
    front = doc["pareto_front"]
    assert [(p["cap"], p["est_ms"], p["peak_memory_bytes"]) for p in front] == [("recorded", 0.1454, 654448)]
    assert front[0]["same_as"] == [s["cap"] for s in step[1:]]  # auto, 1 .. 2048, in the grid's order
    # a budget the recorded cap's peak exceeds: no recommendation (every cap has the same peak)
    assert recommend(step, 0.0006) is None
    # no recorded cap among the points: of equals, the largest cap (which merges most), never 1 MB
    others = [s for s in step if s["cap"] != "recorded"]
    assert recommend(others, None)["cap"] == "2048"
    assert [p["cap"] for p in pareto_front(others)] == ["2048"]


def test_the_table_says_the_recorded_cap_is_kept():
    import subprocess
    import sys

    from conftest import FIXTURE_LOGS, ROOT

    p = subprocess.run([sys.executable, "-m", "tracekit", "replay", str(FIXTURE_LOGS / "spmd_auto"), "--recommend"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    assert ("\nrecommended cap: 27.4 MB (est 0.1454 ms, exposed 0.0346 ms, peak 0.62 MiB, the recorded cap: "
            "no cap is faster); set\n") in p.stdout
