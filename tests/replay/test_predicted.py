"""``tracekit replay --profile``: the step each cap would measure, predicted from the job's own
profile, proven on the profiled fixtures (real 2-rank gloo runs at caps 1, 12 and 64 MB, and a
repeat of the same three runs; see fixtures/README.md).

For every ordered pair of runs (calibrate on A's logs and traces, predict B's cap from A's logs),
B's predicted step against B's measured median: the table docs/predict.md shows, made by
``python bench/predict_proof.py``. Nothing is timed here: the measured steps are the traces'."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from conftest import ROOT
from tracekit.replay.run import OptionError, RunOptions, run

PROFILED = ROOT / "fixtures" / "profiled"
REPEAT = ROOT / "fixtures" / "profiled_repeat"
_spec = importlib.util.spec_from_file_location("predict_proof", ROOT / "bench" / "predict_proof.py")
assert _spec is not None and _spec.loader is not None
proof = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(proof)

# (calibrated on, predicted) -> error %, as bench/predict_proof.py prints them (docs/predict.md)
ERRORS = {
    PROFILED: {
        ("1mb", "1mb"): 0.9, ("1mb", "12mb"): -4.0, ("1mb", "64mb"): 0.6,
        ("12mb", "1mb"): 1.5, ("12mb", "12mb"): -1.8, ("12mb", "64mb"): 8.2,
        ("64mb", "1mb"): -2.2, ("64mb", "12mb"): -9.0, ("64mb", "64mb"): 2.7,
    },
    REPEAT: {
        ("1mb", "1mb"): -1.5, ("1mb", "12mb"): 7.5, ("1mb", "64mb"): 1.2,
        ("12mb", "1mb"): -0.6, ("12mb", "12mb"): -0.1, ("12mb", "64mb"): 14.2,
        ("64mb", "1mb"): -13.3, ("64mb", "12mb"): -7.6, ("64mb", "64mb"): -1.4,
    },
}  # fmt: skip


@pytest.mark.parametrize("runs", [PROFILED, REPEAT], ids=["profiled", "repeat"])
def test_every_ordered_pair_of_runs_predicts_the_measured_step(runs):
    rows = proof.pair_errors(runs)
    got = {
        (r["calibrated_on"].removeprefix("gloo_cap_"), r["predicted"].removeprefix("gloo_cap_")): r[
            "error_pct"
        ]
        for r in rows
    }
    assert got == ERRORS[runs]
    if runs == PROFILED:  # the goal: within 10% on every pair, within 5% at the recorded cap
        assert max(abs(e) for e in got.values()) <= 10.0
        assert max(abs(e) for (a, b), e in got.items() if a == b) <= 5.0
    # the measured steps are the runs' own medians (fixtures' steps.json says the same per rank)
    measured = {r["predicted"]: r["measured_ms"] for r in rows}
    for name, ms in measured.items():
        ranks = json.loads((runs / name / "steps.json").read_text())["ranks"]
        lo, hi = sorted(r["profiled_median_ms"] for r in ranks)
        assert lo - 5 <= ms <= hi + 5  # the medians of perf_counter steps and of ProfilerStep spans


@pytest.fixture(scope="module")
def recommended() -> dict:
    return run(
        [str(PROFILED / "gloo_cap_12mb" / "logs")],
        RunOptions(recommend=True, profiles=[str(PROFILED / "gloo_cap_12mb" / "traces")]),
    )


def test_the_prediction_document(recommended):
    p = recommended["prediction"]
    assert p["self_check"] == {
        "predicted_step_ms": 243.984,
        "measured_step_ms": 248.502,
        "error_pct": -1.8,
        "flagged": False,
    }
    assert (p["error_pct"], p["step_spread_pct"]) == (7.9, 7.9)
    fit = p["calibration"]["transfer_fit"]
    assert (fit["latency_ms"], fit["ms_per_mib"], fit["latency"], fit["transfers"]) == (
        1.4965,
        1.5133,
        "fitted",
        72,
    )
    assert (fit["residual_median_pct"], fit["residual_max_pct"]) == (35.6, 170.9)
    caps = {c["cap"]: c for c in p["caps"]}
    # every cap of the sweep, with torch's estimate beside it; measured only where the profile was
    assert list(caps)[:3] == ["recorded", "auto", "1"] and len(caps) == 14
    assert caps["recorded"]["est_ms"] == 0.8333 and caps["recorded"]["measured_step_ms"] == 248.502
    assert caps["64"]["measured_step_ms"] is None
    # 23 matmuls a step (8 forward, 15 backward), each timed by the measured ones
    assert caps["recorded"]["nodes"] == {
        "matmul_measured": 23, "matmul_scaled_estimate": 0, "gap_share": 74, "not_in_recorded": 0,
    }  # fmt: skip
    assert (caps["1"]["predicted_step_ms"], caps["64"]["predicted_step_ms"]) == (216.196, 315.679)
    # one bucket a kind: the step loses its overlap (the main thread waits on the whole transfer)
    assert caps["64"]["exposed_ms"] > 2 * caps["recorded"]["exposed_ms"]
    assert p["not_modelled"] and all(isinstance(n, str) for n in p["not_modelled"])


def test_recommend_ranks_the_caps_by_predicted_step_and_says_the_margin(recommended):
    rec = recommended["prediction"]["recommendation"]
    # 1 MB measured 213.0 ms, 12 MB (recorded) 248.5: the prediction finds the faster cap
    assert (rec["best"], rec["cap"], rec["margin_ms"], rec["margin_pct"]) == ("1", "1", 27.788, 11.4)
    assert rec["ranked"][-1] == "2048" and rec["ranked"].index("recorded") == 5
    assert (
        rec["text"]
        == "cap 1 MB: 27.8 ms (11.4% of the step) faster than the recorded cap, beyond the calibration's error (7.9%)"
    )


def test_no_cap_is_measurably_better_within_the_calibrations_error():
    doc = run(
        [str(PROFILED / "gloo_cap_1mb" / "logs")],
        RunOptions(recommend=True, profiles=[str(PROFILED / "gloo_cap_1mb" / "traces")]),
    )
    rec = doc["prediction"]["recommendation"]
    assert rec["cap"] is None and rec["best"] == "recorded"
    assert rec["text"] == "no cap is measurably better: the recorded cap is predicted the fastest"


def test_another_caps_traces_are_refused_with_the_first_difference():
    with pytest.raises(
        OptionError,
        match="does not pair with these logs: .* the first: collective 0: issued all_gather of 16,777,216 B, the log records 6,291,456 B",
    ):
        run(
            [str(PROFILED / "gloo_cap_12mb" / "logs")],
            RunOptions(profiles=[str(PROFILED / "gloo_cap_64mb" / "traces")]),
        )


def _replay(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tracekit", "replay", *args, "--jobs", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_replay_profile_on_the_command_line(tmp_path):
    logs, traces = str(PROFILED / "gloo_cap_12mb" / "logs"), str(PROFILED / "gloo_cap_12mb" / "traces")
    r = _replay(logs, "--profile", traces, "--cap-mb", "1,64")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    i = lines.index("Predicted from the profile (the step each cap would measure)")
    assert lines[i + 4 : i + 7] == [
        "recorded  244.0                59.4          173.5      182.7         0.8333          248.5",
        "1 MB      216.2                37.4          204.0      177.0         0.6649          -",
        "64 MB     315.7                143.1         153.2      170.7         1.0038          -",
    ]
    assert "  self-check: the recorded cap predicted 244.0 ms against 248.5 ms measured (-1.8%)" in lines
    for bad, message in [
        (str(tmp_path / "nothing"), "no such file or directory"),
        (str(PROFILED / "gloo_cap_12mb" / "steps.json"), "not a Chrome trace (no traceEvents list)"),
        (str(PROFILED / "gloo_cap_64mb" / "traces"), "the profile does not pair with these logs"),
    ]:
        r = _replay(logs, "--profile", bad)
        assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_the_reports_predicted_section(recommended, tmp_path):
    import re

    from tracekit.render.predicted_sweep import section_predicted

    html = section_predicted(recommended)
    assert html.startswith('<section id="predicted"><h2>Predicted</h2>')
    # one point a cap size (auto is 10.39 MB here), the measured step a square at the recorded cap
    assert len(re.findall(r'<circle class="pt"', html)) == 14
    assert re.findall(r'<rect class="measured" data-cap="([^"]+)"', html) == ["12"]
    assert "<title>measured at cap 12 MB: 248.5 ms</title>" in html
    assert re.findall(r'<line class="mark (\w+)" data-cap="([^"]+)"', html) == [("recorded", "12"), ("best", "1")]
    assert '<tr data-cap="12"><td class="num">12</td><td>recorded</td><td class="num">244.0</td>' in html
    assert "cap 1 MB: 27.8 ms (11.4% of the step) faster than the recorded cap" in html
    assert section_predicted({"totals": {}}) == ""  # a replay without --profile: no section
    from tracekit.read.reader import load
    from tracekit.render.html import render_html
    from tracekit.render.summary_document import summary_document

    alone = render_html(summary_document(load([PROFILED / "gloo_cap_12mb" / "logs"], jobs=1)), recommended)
    nav = re.search(r"<nav>(.*?)</nav>", alone).group(1)  # no Measured section: the link still there
    assert re.findall(r'href="#(\w+)"', nav)[5:7] == ["sweep", "predicted"]
    # the page: its own nav entry, after the cap sweep, before the measured section
    replay_json = tmp_path / "replay.json"
    replay_json.write_text(json.dumps(recommended))
    run12 = PROFILED / "gloo_cap_12mb"
    r = subprocess.run(
        [sys.executable, "-m", "tracekit", "report", str(run12 / "logs"), "--replay", str(replay_json),
         "--profile", str(run12 / "traces"), "-o", str(tmp_path / "r.html")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    page = (tmp_path / "r.html").read_text()
    nav = re.search(r"<nav>(.*?)</nav>", page).group(1)
    assert re.findall(r'href="#(\w+)"', nav)[5:8] == ["sweep", "predicted", "measured"]


def test_trace_out_draws_the_predicted_step_beside_the_measured_one(recommended):
    from tracekit.render.perfetto import trace_for_cap

    step = recommended["totals"]["step"]
    recorded = trace_for_cap(recommended, 0)
    names = [e["args"]["name"] for e in recorded["traceEvents"] if e["name"] == "process_name"]
    measured = recommended["prediction"]["measured_timeline"]
    assert names == ["ranks 0", "predicted from the profile", "measured: rank 0, ProfilerStep#4"]
    # rank 0's 8 profiled steps: 232.2, 233.1, 237.1, 246.9, 250.7, 254.8, 279.4, 294.8 ms; the
    # lower median, as measure --trace-out draws it
    assert (measured["rank"], measured["step"], measured["step_ms"]) == (0, "ProfilerStep#4", 246.9037)
    other = trace_for_cap(recommended, next(i for i, s in enumerate(step) if s["cap"] == "64"))
    assert [e["args"]["name"] for e in other["traceEvents"] if e["name"] == "process_name"] == [
        "ranks 0",
        "predicted from the profile",  # 64 MB was not measured: no measured process
    ]
    # the predicted process's main tracks end where the predicted graphs end
    row = next(c for c in recommended["prediction"]["caps"] if c["cap"] == "64")
    ends = [a + d for track, _, a, d in row["timeline"] if track.endswith("main")]
    outside = recommended["prediction"]["calibration"]["outside_graphs_ms"]
    assert max(ends) + outside == pytest.approx(row["predicted_step_ms"], abs=0.01)
    tracks = {t for t, *_ in row["timeline"]}
    assert tracks == {"0/0:0 main", "0/0:0 transfers", "0/0:1 main", "0/0:1 transfers"}


def test_a_calibration_off_its_own_step_is_flagged_first(recommended):
    import copy

    from tracekit.render.predicted_text import predicted_section

    doc = copy.deepcopy(recommended)
    assert "FLAGGED" not in predicted_section(doc, "table")
    doc["prediction"]["self_check"].update(error_pct=7.2, flagged=True)
    lines = predicted_section(doc, "table").splitlines()
    assert lines[3] == (
        "CALIBRATION FLAGGED: the recorded cap is predicted +7.2% off the step the profile measured "
        "(beyond 5%); the predictions below carry at least that error"
    )


def test_report_profile_predicts_from_a_saved_replay_without_torch(recommended, tmp_path):
    import re

    saved = {k: v for k, v in recommended.items() if k != "prediction"}  # a replay run without --profile
    replay_json = tmp_path / "replay.json"
    replay_json.write_text(json.dumps(saved))
    run12 = PROFILED / "gloo_cap_12mb"
    probe = (
        "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_module('tracekit', run_name='__main__')"
    )
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", probe, "tracekit", "report", str(run12 / "logs"),
         "--replay", str(replay_json), "--profile", str(run12 / "traces"), "-o", str(tmp_path / "r.html")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert not re.search(r"\| torch$", r.stderr, re.M)  # report never imports torch
    page = (tmp_path / "r.html").read_text()
    assert '<section id="predicted">' in page
    assert "cap 1 MB: 27.8 ms (11.4% of the step) faster than the recorded cap" in page  # as replay --profile says
