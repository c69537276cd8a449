"""``tracekit measure`` on the bad input of issue 51, one case at a time, through the command:
copies of the profiled 1 MB gloo fixture made at test time (cut, stripped, one rank removed),
each a clear statement and the right exit status, and nothing false."""

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
TRACES = sorted((CAP_1MB / "traces").iterdir())
LOGS = sorted((CAP_1MB / "logs").iterdir())


def measure(logs: Path, traces: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tracekit", "measure", str(logs), "--profile", str(traces), "--jobs", "1", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )


def _edited(tmp_path: Path, edit) -> Path:
    out = tmp_path / "traces"
    out.mkdir()
    for f in TRACES:
        doc = json.loads(gzip.decompress(f.read_bytes()))
        edit(doc)
        (out / f.name[: -len(".gz")]).write_text(json.dumps(doc, indent=1))
    return out


def test_another_caps_traces_pair_nothing_and_exit_2():
    p = measure(CAP_1MB / "logs", PROFILED / "gloo_cap_64mb" / "traces")
    assert p.returncode == 2
    assert p.stderr == (
        "tracekit measure: nothing paired: the traces do not match the logs (another run or cap?): 32 graph "
        "runs differ, the first: collective 0: issued all_gather of 16,777,216 B, the log records 2,097,152 B\n"
    )


def test_a_gz_cut_short_pairs_what_was_read_and_measures_no_transfer_it_cannot_place(tmp_path):
    # Kineto writes thread by thread: the cut keeps one gloo worker's transfers for every step
    # (90 of 184), the main thread's first step and 3 of the second step's 15 backward
    # collectives, and none of the other worker's; the k-th transfer by start time is no longer
    # the k-th collective's, so no transfer is paired (none by guess)
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / TRACES[0].name).write_bytes(TRACES[0].read_bytes()[:30000])
    p = measure(CAP_1MB / "logs", tmp_path / "cut", "--format", "json")
    assert (p.returncode, p.stderr) == (0, "")
    doc = json.loads(p.stdout)
    rank = doc["ranks"][0]
    assert (rank["complete"], rank["events_read"], rank["steps"]["count"], rank["paired"]) == (False, 1426, 2, 31)
    assert rank["unpaired"] == [{"step": 1, "graph": "0/0:1", "issued": 3,
                                 "reason": "the trace is cut short: 3 collectives issued, the log records 15"}]
    assert [(g["label"], g["collectives_measured_ms"], g["exposed_measured_ms"]) for g in rank["graphs"]] == [
        ("0/0:0", None, 8.315), ("0/0:1", None, 10.9741)]
    assert doc["verdict"] == (
        "31 collective runs paired with the log, but no transfer time measured to put beside torch's estimates "
        "(see the notes); rank 1: a log but no trace, not measured"
    )
    assert ("rank 0: the trace is cut short: 90 transfers read for 34 issued collectives, so which transfer "
            "is whose is not known: transfer times not measured") in doc["notes"]


def test_a_gz_cut_before_any_event_is_one_line_exit_2(tmp_path):
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / TRACES[0].name).write_bytes(TRACES[0].read_bytes()[:200])
    p = measure(CAP_1MB / "logs", tmp_path / "cut")  # the directory: the cut file is still a trace
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr.startswith(f"tracekit measure: no profiler trace could be read: {tmp_path / 'cut' / TRACES[0].name}: ")
    assert "gzip: Compressed file ended before the end-of-stream marker was reached" in p.stderr
    assert len(p.stderr.splitlines()) == 1


def test_without_profiler_steps_one_window_and_no_step_claimed(tmp_path):
    def drop_steps(doc):
        doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")]

    p = measure(CAP_1MB / "logs", _edited(tmp_path, drop_steps))
    assert (p.returncode, p.stderr) == (0, "")
    lines = p.stdout.splitlines()
    assert lines[0].startswith(
        "collectives 395x slower than estimated; exposed 27.8 ms over one run of each graph (the log holds "
        "no exposed estimate); graph 0/0:1 (backward) takes the longest (153.8 ms)"
    )
    assert lines.count("no ProfilerStep spans read: one window, no step time") == 2
    assert ("note: rank 0: no ProfilerStep spans (the profiler ran without a schedule): the trace is one window"
            in lines)


def test_sizes_missing_though_the_header_says_record_shapes_pairs_on_order_and_says_so(tmp_path):
    def drop_sizes(doc):  # the header keeps "record_shapes": true
        for e in doc["traceEvents"]:
            for key in ("Input Dims", "Input type", "Input Strides", "Concrete Inputs"):
                (e.get("args") or {}).pop(key, None)

    p = measure(CAP_1MB / "logs", _edited(tmp_path, drop_sizes), "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert [(r["has_shapes"], r["paired"]) for r in doc["ranks"]] == [(False, 184), (False, 184)]
    assert all(g["on_order_only"] for r in doc["ranks"] for g in r["graphs"])
    assert ("rank 0: record_shapes is on in the trace's header, but no issued collective has its sizes"
            in doc["notes"])
    table = measure(CAP_1MB / "logs", tmp_path / "traces").stdout.splitlines()
    assert table.count("recorded without record_shapes: sizes from the log alone, paired on kind and order only") == 2


def test_a_log_without_its_trace_is_named_in_the_verdict(tmp_path):
    (tmp_path / "one").mkdir()
    shutil.copy(TRACES[0], tmp_path / "one")
    p = measure(CAP_1MB / "logs", tmp_path / "one", "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert (doc["ranks_without_trace"], doc["traces_without_log"]) == ([1], [])
    assert doc["verdict"].endswith("; rank 1: a log but no trace, not measured")
    assert "rank 1: a compile log but no trace: not measured" in doc["notes"]


def test_a_trace_without_its_log_is_named_and_claims_nothing(tmp_path):
    (tmp_path / "logs").mkdir()
    shutil.copy(LOGS[0], tmp_path / "logs")
    p = measure(tmp_path / "logs", CAP_1MB / "traces", "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert (doc["ranks_without_trace"], doc["traces_without_log"]) == ([], [1])
    # the exposed time a step is rank 0's alone: rank 1 measured nothing to average in
    assert doc["verdict"] == (
        "collectives 420x slower than estimated; exposed 30.1 ms a step (the log holds no exposed estimate); "
        "graph 0/0:1 (backward) takes 73% of the step; rank 1: a trace but no log, not paired"
    )
    assert [(r["rank"], r["paired"]) for r in doc["ranks"]] == [(0, 184), (1, 0)]


def test_clocks_are_never_subtracted_across_ranks_and_it_is_said(tmp_path):
    # rank 1's clock moved by an hour: skew and the per-rank figures are the same, and the
    # output says what is aligned and how
    def shift(doc):
        if doc["distributedInfo"]["rank"] == 1:
            for e in doc["traceEvents"]:
                if isinstance(e.get("ts"), (int, float)):
                    e["ts"] += 3.6e9

    p = measure(CAP_1MB / "logs", _edited(tmp_path, shift), "--format", "json", "--trace-out", str(tmp_path / "s.json"))
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    plain = json.loads(measure(CAP_1MB / "logs", CAP_1MB / "traces", "--format", "json").stdout)
    assert doc["skew"] == plain["skew"]
    assert doc["basis"]["skew"] == (
        "aligned on each graph's first collective's end, which every rank shares; no clocks subtracted across ranks"
    )
    step = json.loads((tmp_path / "s.json").read_text())
    assert "ranks' clocks not aligned" in json.dumps(step)
