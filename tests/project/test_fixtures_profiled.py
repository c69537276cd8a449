"""The committed profiled runs (fixtures/profiled/, made by fixtures/generate.py --scenario
profiled) hold what the trace reader and the measured pairing rely on (exact values).

Logs are read with the generator's own checker, traces and steps.json with gzip and orjson:
no torch, no tracekit.
"""

from __future__ import annotations

import gzip
import importlib.util
import re
import statistics
import sys
from collections import Counter
from pathlib import Path

import orjson
import pytest

from conftest import ROOT

_spec = importlib.util.spec_from_file_location("fixtures_generate", ROOT / "fixtures" / "generate.py")
generate = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = generate  # dataclasses look their module up there
_spec.loader.exec_module(generate)

PROFILED = ROOT / "fixtures" / "profiled"
LINE = "fsdp_groups=['0'], group_size=2, nNodes=1, bucket_cap_mb={cap}, all_gather {ag}, reduce_scatter {rs}, all_reduce 0->0"
SHARD = 1024 * 1024 // 2  # elements of one weight's shard (dim 1024, 2 ranks)
AG = "_c10d_functional::all_gather_into_tensor"
AG_OUT = "_c10d_functional::all_gather_into_tensor_out"
RS = "_c10d_functional::reduce_scatter_tensor"
WAIT = "_c10d_functional::wait_tensor"

#: scenario -> (cap, forward line's counts, backward line's counts, issue ops of one step as
#: (name, Input Dims[0][0]) -> count, gloo:all_gather and gloo:all_reduce events a step)
CAPS = {
    "gloo_cap_1mb": (1.0, ("8->8", "0->0"), ("7->7", "8->8"),
                     {(AG, SHARD): 15, (RS, 2 * SHARD): 8}, 15, 8),
    "gloo_cap_12mb": (12.0, ("8->3", "0->0"), ("7->3", "8->3"),
                      {(AG, SHARD): 1, (AG_OUT, 2 * SHARD): 1, (AG_OUT, 3 * SHARD): 4,
                       (RS, 4 * SHARD): 1, (RS, 6 * SHARD): 2}, 6, 3),
    "gloo_cap_64mb": (64.0, ("8->1", "0->0"), ("7->1", "8->1"),
                      {(AG_OUT, 8 * SHARD): 1, (AG_OUT, 7 * SHARD): 1, (RS, 16 * SHARD): 1}, 2, 1),
}
STEPS = tuple(f"ProfilerStep#{i}" for i in range(2, 10))  # wait=1, warmup=1, active=8
#: tensorboard_trace_handler's file name: HOST_PID.TIMESTAMP.pt.trace.json.gz
TRACE_NAME = re.compile(r"^(?P<host>.+)_(?P<pid>\d+)\.(?P<ts>\d+)\.pt\.trace\.json\.gz$")


def _trace(path: Path) -> dict:
    with gzip.open(path, "rb") as f:
        return orjson.loads(f.read())


def _steps(name: str) -> dict:
    return orjson.loads((PROFILED / name / "steps.json").read_bytes())


def test_every_cap_is_there_and_nothing_else():
    assert sorted(p.name for p in PROFILED.iterdir()) == sorted(CAPS)
    for name in CAPS:
        assert sorted(p.name for p in (PROFILED / name).iterdir()) == ["logs", "steps.json", "traces"]


@pytest.mark.parametrize("name", sorted(CAPS))
def test_each_log_says_the_caps_bucket_counts(name):
    cap, (fwd_ag, fwd_rs), (bwd_ag, bwd_rs), *_ = CAPS[name]
    logs = PROFILED / name / "logs"
    lines = generate.check_logs(logs)  # also: every artifact twice, no cache hit, MD5s valid
    assert sorted(lines) == sorted(p.name for p in logs.iterdir())
    assert [n.split("_")[5] for n in sorted(lines)] == ["0", "1"]  # dedicated_log_torch_trace_rank_N_
    assert all(n.endswith(".log.gz") for n in lines)
    for texts in lines.values():
        assert texts == [LINE.format(cap=cap, ag=fwd_ag, rs=fwd_rs), LINE.format(cap=cap, ag=bwd_ag, rs=bwd_rs)]
    for log in logs.iterdir():  # torch's own collective estimates were used, once per graph
        names = [n for n, _ in generate._artifacts(log)]
        assert names.count("fx_collectives_analytical_estimation") == 2
        assert names.count("inductor_collective_schedule") == 2


@pytest.mark.parametrize("name", sorted(CAPS))
def test_each_trace_is_one_ranks_profiled_steps(name):
    *_, issue, gloo_ag, gloo_ar = CAPS[name]
    steps = _steps(name)
    traces = sorted((PROFILED / name / "traces").iterdir())
    assert len(traces) == 2
    ranks = set()
    for path in traces:
        m = TRACE_NAME.match(path.name)
        assert m, path.name
        doc = _trace(path)
        info = doc["distributedInfo"]
        ranks.add(info["rank"])
        assert (info["backend"], info["world_size"], info["pg_count"]) == ("gloo", 2, 1)
        assert info["pg_config"] == [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cpu:gloo,cuda:gloo",
                                      "pg_size": 2, "ranks": [0, 1]}]
        (rank_doc,) = [r for r in steps["ranks"] if r["rank"] == info["rank"]]
        assert (rank_doc["trace"], rank_doc["pid"]) == (path.name, int(m["pid"]))

        spans = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
        step_spans = [e for e in spans if e["name"].startswith("ProfilerStep#")]
        assert [e["name"] for e in step_spans] == list(STEPS)
        assert {e["cat"] for e in step_spans} == {"user_annotation"}
        main = {e["tid"] for e in step_spans}
        assert len(main) == 1
        names = Counter(e["name"] for e in spans)
        assert names["## Call CompiledFxGraph None ##"] == 2 * len(STEPS)  # forward and backward
        assert names["Torch-Compiled Region: 0/0"] == names["CompiledFunction"] == len(STEPS)
        assert names["CompiledFunctionBackward"] == len(STEPS)
        assert names["gloo:all_gather"] == gloo_ag * len(STEPS)
        assert names["gloo:all_reduce"] == gloo_ar * len(STEPS)
        assert names[WAIT] == sum(issue.values()) * len(STEPS)
        gloo_threads = {e["tid"] for e in spans if e["name"].startswith("gloo:")}
        assert len(gloo_threads) == 2 and not gloo_threads & main
        for step in step_spans:  # each step issues the cap's collectives, sized by Input Dims
            inside = [e for e in spans if step["ts"] <= e["ts"] <= step["ts"] + step["dur"]]
            issued = Counter((e["name"], e["args"]["Input Dims"][0][0]) for e in inside
                             if e["name"] in (AG, AG_OUT, RS))
            assert issued == Counter(issue)
            assert all(e["tid"] in main for e in inside if e["name"] in (AG, AG_OUT, RS, WAIT))
    assert ranks == {0, 1}


@pytest.mark.parametrize("name", sorted(CAPS))
def test_steps_json_has_the_settings_and_the_step_times(name):
    steps = _steps(name)
    assert sorted(steps) == sorted([
        "scenario", "torch", "backend", "world_size", "layers", "dim", "batch", "dtype", "bucket_cap_mb",
        "threads_per_rank", "warmup_steps", "timed_steps", "profiler_schedule", "step", "ranks"])
    assert {k: steps[k] for k in ("scenario", "torch", "backend", "world_size", "layers", "dim", "batch", "dtype",
                                  "bucket_cap_mb", "threads_per_rank", "warmup_steps", "timed_steps")} == {
        "scenario": name, "torch": "2.13.0+cpu", "backend": "gloo", "world_size": 2, "layers": 8, "dim": 1024,
        "batch": 128, "dtype": "float32", "bucket_cap_mb": CAPS[name][0], "threads_per_rank": 1,
        "warmup_steps": 3, "timed_steps": 10}
    assert steps["profiler_schedule"] == {"wait": 1, "warmup": 1, "active": 8, "repeat": 1}
    assert [r["rank"] for r in steps["ranks"]] == [0, 1]
    logs = {p.name for p in (PROFILED / name / "logs").iterdir()}
    for r in steps["ranks"]:
        assert sorted(r) == sorted(["rank", "pid", "steps_ms", "profiled_steps_ms", "trace", "log", "median_ms",
                                    "profiled_median_ms"])
        assert r["log"] in logs and r["log"].startswith(f"dedicated_log_torch_trace_rank_{r['rank']}_")
        assert len(r["steps_ms"]) == 10 and len(r["profiled_steps_ms"]) == 8
        assert all(t > 0 for t in r["steps_ms"] + r["profiled_steps_ms"])
        assert r["median_ms"] == pytest.approx(statistics.median(r["steps_ms"]), abs=1e-3)
        assert r["profiled_median_ms"] == pytest.approx(statistics.median(r["profiled_steps_ms"]), abs=1e-3)


def test_the_nccl_trace_is_there_with_its_license():
    here = ROOT / "fixtures" / "traces" / "nccl_2gpu"
    assert sorted(p.name for p in here.iterdir()) == ["LICENSE", "rank0.json.gz"]
    assert (here / "LICENSE").read_text().startswith("MIT License")
    doc = _trace(here / "rank0.json.gz")
    assert doc["distributedInfo"]["rank"] == 0
    assert sum(e.get("name", "").startswith("ProfilerStep#") for e in doc["traceEvents"]) == 3
