"""``tracekit.measure(paths, profiles)``: the document ``tracekit measure --format json`` prints,
as a dict, on the profiled gloo fixtures; torch never imported; bad input raised as the command
refuses it."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

import tracekit
from conftest import ROOT
from tracekit.model.json_forms import final_to_dict

PROFILED = ROOT / "fixtures" / "profiled"
CAP_1MB = PROFILED / "gloo_cap_1mb"
CAP_12MB = PROFILED / "gloo_cap_12mb"


def cli(scenario, *args: str) -> dict:
    p = subprocess.run(
        [sys.executable, "-m", "tracekit", "measure", str(scenario / "logs"), "--profile", str(scenario / "traces"),
         "--format", "json", "--jobs", "1", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_the_document_is_the_commands():
    doc = tracekit.measure(str(CAP_1MB / "logs"), [str(CAP_1MB / "traces")], jobs=1)
    assert doc == cli(CAP_1MB)
    assert doc["schema"] == "tracekit.measure/1"
    assert [(r["rank"], r["paired"]) for r in doc["ranks"]] == [(0, 184), (1, 184)]


def test_one_rank_is_the_commands_rank_option():
    doc = tracekit.measure(CAP_12MB / "logs", CAP_12MB / "traces", ranks=[1], jobs=1)
    assert doc == cli(CAP_12MB, "--rank", "1")
    assert [r["rank"] for r in doc["ranks"]] == [1]
    with pytest.raises(ValueError, match="no trace of rank 5"):
        tracekit.measure(CAP_12MB / "logs", CAP_12MB / "traces", ranks=[5], jobs=1)


def test_estimates_as_a_parsed_document_fill_the_exposed_estimate():
    # a replay document's fields, as tracekit replay writes them, with the logs' own recorded
    # finals (tests/commands/test_measure_estimates.py makes the real one, with torch)
    run = tracekit.load(CAP_12MB / "logs")
    graphs = [
        {"compile_id": g.compile_id, "graph_index": g.graph_index, "ranks": "0-1",
         "recorded_final": final_to_dict(g.final, replay=True),
         "reproduction": {"cap_source": "recorded", "exposed_ms": [0.0875, 0.0546][g.graph_index]}}
        for g in run.ranks[0].graphs
    ]
    doc = tracekit.measure(CAP_12MB / "logs", CAP_12MB / "traces", jobs=1,
                           estimates={"schema": "tracekit.replay/3", "graphs": graphs})
    assert [g["exposed_est_ms"] for r in doc["ranks"] for g in r["graphs"]] == [0.0875, 0.0546, 0.0875, 0.0546]
    assert "; exposed 445x;" in doc["verdict"]
    with pytest.raises(ValueError, match="is no tracekit replay document"):
        tracekit.measure(CAP_12MB / "logs", CAP_12MB / "traces", jobs=1, estimates={"schema": "x"})


def test_bad_input_is_raised(tmp_path):
    with pytest.raises(FileNotFoundError):
        tracekit.measure(CAP_1MB / "logs", tmp_path / "missing")
    (tmp_path / "not_a_trace.json").write_text("[1, 2, 3]")
    with pytest.raises(ValueError, match="not_a_trace.json"):
        tracekit.measure(CAP_1MB / "logs", tmp_path / "not_a_trace.json", jobs=1)


def test_measure_never_imports_torch():
    code = (
        "import sys, tracekit; "
        f"d = tracekit.measure({str(CAP_1MB / 'logs')!r}, {str(CAP_1MB / 'traces')!r}, jobs=1); "
        "print(d['ranks'][0]['paired'], 'torch' in sys.modules)"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert (p.returncode, p.stdout) == (0, "184 False\n"), p.stderr


def test_the_python_api_pages_measure_example_prints_what_it_says():
    page = (ROOT / "docs" / "python-api.md").read_text()
    section = page[page.index("## Measured: the job's own profile"):]
    code, printed = re.findall(r"```(?:python)?\n(.*?)```", section, re.S)[:2]
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout == printed
