"""``tracekit measure LOGS --profile TRACES`` (and ``report --profile``) on the profiled gloo
fixtures: output formats, the JSON contract, ``--rank``, ``--trace-out``, and the exit status of
bad input made at test time from copies (a trace of another cap, a trace cut short, one rank's
trace removed, a file that is no trace)."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

PROFILED = ROOT / "fixtures" / "profiled"
CAP_1MB = PROFILED / "gloo_cap_1mb"
CMD = [sys.executable, "-m", "tracekit"]

VERDICT_1MB = (
    "collectives 395x slower than estimated; exposed 27.8 ms a step (the log holds no exposed "
    "estimate); graph 0/0:1 (backward) takes 72% of the step; rank 1 arrives last at graph 0/0:1 (4.3 ms)"
)


def tk(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([*CMD, *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=120)


def measure(traces: str | Path, *args: str | Path, logs: Path = CAP_1MB / "logs") -> subprocess.CompletedProcess:
    return tk("measure", logs, "--profile", traces, "--jobs", "1", *args)


def test_table_starts_with_the_verdict_and_lists_every_rank():
    p = measure(CAP_1MB / "traces")
    assert (p.returncode, p.stderr) == (0, "")
    lines = p.stdout.splitlines()
    assert lines[:3] == [VERDICT_1MB, "", "rank 0"]
    assert [ln for ln in lines if ln.startswith("paired: ")] == [
        "paired: 184 collective runs; not paired: 0",
        "paired: 184 collective runs; not paired: 0",
    ]
    assert "8 profiled steps, step 215.427 (181.045-262.706) ms (median, min-max)" in lines


def test_json_is_the_measure_document():
    p = measure(CAP_1MB / "traces", "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["schema"] == "tracekit.measure/1"
    assert doc["verdict"] == VERDICT_1MB
    rank = doc["ranks"][0]
    assert {"rank", "steps", "graphs", "paired", "unpaired"} <= set(rank)
    assert set(rank["steps"]) == {"count", "median_ms", "min_ms", "max_ms"}
    graph = rank["graphs"][1]
    assert {"compile_id", "graph", "median_ms", "est_ms", "exposed_est_ms", "exposed_measured_ms", "collectives"} <= set(
        graph
    )
    assert (graph["compile_id"], graph["graph"]) == ("0/0", 1)
    coll = graph["collectives"][2]
    assert {"position", "kind", "bytes", "est_ms", "measured_ms"} <= set(coll)
    assert (coll["position"], coll["kind"], coll["bytes"], coll["est_ms"]) == (2, "reduce_scatter", 4_194_304, 0.0249)


def test_markdown_and_rank_filter(tmp_path):
    out = tmp_path / "m.md"
    p = measure(CAP_1MB / "traces", "--format", "markdown", "--rank", "1", "-o", out)
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    text = out.read_text()
    assert text.startswith("**collectives ")
    assert "## rank 1\n" in text and "## rank 0\n" not in text


def test_trace_out_draws_one_step_measured_and_estimated(tmp_path):
    out = tmp_path / "step.json"
    p = measure(CAP_1MB / "traces", "--trace-out", out)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    names = {(e["pid"], e["args"]["name"]) for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert names == {
        (pid, track)
        for pid in (1, 2)
        for track in ("graph runs", "measured: issue and wait", "measured: transfer", "estimated: transfer")
    }
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    by_track = {tid: sum(1 for e in slices if e["pid"] == 1 and e["tid"] == tid) for tid in (1, 2, 3, 4)}
    assert by_track == {1: 2, 2: 46, 3: 23, 4: 23}  # 2 graph runs; 23 collectives: issue + wait, transfer, estimate
    est = next(e for e in slices if e["pid"] == 1 and e["tid"] == 4)
    assert (est["name"], est["dur"]) == ("all_gather [0/0:0#0] 2,097,152 B", 24.9)


def _copy_traces(tmp_path: Path, scenario: Path = CAP_1MB) -> Path:
    out = tmp_path / "traces"
    shutil.copytree(scenario / "traces", out)
    return out


def test_one_ranks_trace_removed_measures_the_other_and_says_so(tmp_path):
    traces = _copy_traces(tmp_path)
    sorted(traces.iterdir())[1].unlink()
    p = measure(traces)
    assert p.returncode == 0, p.stderr
    assert "note: rank 1: a compile log but no trace: not measured" in p.stdout.splitlines()


def test_a_trace_cut_before_any_collective_exits_2(tmp_path):
    src = sorted((CAP_1MB / "traces").iterdir())[0]
    cut = tmp_path / "cut.json"
    cut.write_bytes(gzip.decompress(src.read_bytes())[:3000])
    p = measure(cut)
    assert p.returncode == 2
    assert p.stderr == f"tracekit measure: nothing paired: 1 of 1 traces are cut short (12 events read of {cut})\n"
    assert "trace cut short: 12 events read and used" in p.stdout


def test_a_file_that_is_no_trace_exits_2_in_one_line(tmp_path):
    bad = tmp_path / "notes.json"
    bad.write_text("[1, 2, 3]\n")
    p = measure(bad)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.startswith("tracekit measure: ") and len(p.stderr.splitlines()) == 1


def test_missing_profile_is_a_usage_error():
    p = tk("measure", CAP_1MB / "logs")
    assert p.returncode == 2
    assert "--profile" in p.stderr


def test_report_with_profile_has_a_measured_section(tmp_path):
    out = tmp_path / "r.html"
    p = tk("report", CAP_1MB / "logs", "--profile", CAP_1MB / "traces", "-o", out)
    assert (p.returncode, p.stderr) == (0, "")
    page = out.read_text()
    assert '<a href="#measured">Measured</a>' in page
    assert '<section id="measured"><h2>Measured</h2>' in page
    assert page.count('<rect class="bar meas"') == 23 and page.count('<rect class="bar est"') == 23


def test_traces_of_another_cap_exit_2_and_say_so():
    p = measure(CAP_1MB / "traces", logs=PROFILED / "gloo_cap_12mb" / "logs")
    assert p.returncode == 2
    why = (
        "nothing paired: the traces do not match the logs (another run or cap?): 32 graph runs differ, "
        "the first: collective 0: issued all_gather of 2,097,152 B, the log records 6,291,456 B"
    )
    assert p.stderr == f"tracekit measure: {why}\n"
    assert p.stdout.startswith(why + "\n")
    assert "paired:" in p.stdout and "collective runs; not paired: 16" in p.stdout


def test_no_line_is_wider_than_200_columns():
    for fmt in ("table", "markdown"):
        for scenario in (CAP_1MB, PROFILED / "gloo_cap_12mb"):
            lines = measure(scenario / "traces", "--format", fmt, logs=scenario / "logs").stdout.splitlines()
            assert lines and max(map(len, lines)) <= 200
