"""``tracekit.analyze.calibration`` on the profiled fixtures (real 2-rank gloo runs; see
fixtures/README.md): the costs a prediction is made of, read off the traces paired with their
logs. The step figures are checked against the trace files' own ``ProfilerStep`` spans, read
here as plain JSON; edited copies (made at test time) give the inputs that cannot calibrate."""

from __future__ import annotations

import gzip
import json
import statistics
from functools import cache
from pathlib import Path

import pytest

from conftest import ROOT
from tracekit.analyze.calibration import SHARING_PRIOR, Calibration, CalibrationError, calibrate
from tracekit.analyze.measure import measure
from tracekit.read.output_code import wait_orders
from tracekit.read.reader import load
from tracekit.read.traces import read_traces

PROFILED = ROOT / "fixtures" / "profiled"


def _pairings(run: Path, traces: Path | None = None):
    logs = run / "logs"
    return measure(
        load([logs], jobs=1), read_traces([traces or run / "traces"], jobs=1, host_ops=True), None, wait_orders([logs])
    ).pairings


@cache
def _cal(scenario: str) -> Calibration:
    return calibrate(_pairings(PROFILED / scenario))


def _raw_events(run: Path) -> list[list[dict]]:
    out = []
    for f in sorted((run / "traces").iterdir()):
        with gzip.open(f, "rt", encoding="utf-8") as fh:
            out.append([e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"])
    return out


def test_the_reader_keeps_matmuls_and_copies_only_when_asked():
    run = PROFILED / "gloo_cap_12mb"
    plain, kept = read_traces([run / "traces"], jobs=1)[0], read_traces([run / "traces"], jobs=1, host_ops=True)[0]
    assert plain.host_ops == [] and len(plain.issued) == len(kept.issued) == 72
    events = _raw_events(run)[0]
    mm = [e for e in events if e["name"] == "aten::mm"]
    copies = [e for e in events if e["name"] == "aten::copy_"]
    assert [o.kind for o in kept.host_ops].count("matmul") == len(mm) == 184  # 23 a step, 8 steps
    assert [o.kind for o in kept.host_ops].count("copy") == len(copies)
    first = min(mm, key=lambda e: e["ts"])
    op = next(o for o in kept.host_ops if o.kind == "matmul")
    m, k = first["args"]["Input Dims"][0]
    n = first["args"]["Input Dims"][1][1]
    assert (op.span.ts_us, op.flops) == (first["ts"], 2.0 * m * k * n)
    assert {o.bytes for o in kept.host_ops if o.kind == "copy"} >= {4 << 20}


@pytest.mark.parametrize("scenario", ["gloo_cap_1mb", "gloo_cap_12mb", "gloo_cap_64mb"])
def test_the_step_is_the_median_of_every_ranks_profiled_steps(scenario):
    cal = _cal(scenario)
    steps = [
        e["dur"] / 1e3
        for events in _raw_events(PROFILED / scenario)
        for e in events
        if e["name"].startswith("ProfilerStep#")
    ]
    assert len(steps) == 16 and cal.steps == 8 and cal.ranks == [0, 1]
    assert cal.step_ms == pytest.approx(statistics.median(steps))
    assert (cal.step_min_ms, cal.step_max_ms) == pytest.approx((min(steps), max(steps)))


def test_figures_of_the_12mb_run():
    d = _cal("gloo_cap_12mb").to_dict()
    assert d["step_ms"] == {"median": 248.5021, "min": 231.8993, "max": 294.8244}
    assert d["outside_graphs_ms"] == 1.8242
    assert [(g["compile_id"], g["position"], g["runs"], g["matmuls"]) for g in d["graphs"]] == [
        ("0/0", 0, 16, 8),  # 8 layers forward
        ("0/0", 1, 16, 15),  # backward: 8 weight grads, 7 input grads (not the first layer's)
    ]
    fwd, bwd = d["graphs"]
    assert (fwd["span_ms"], fwd["gap_ms"], fwd["matmul_alone_ms"]) == (68.3782, 11.4744, 36.7407)
    assert (bwd["span_ms"], bwd["gap_ms"], bwd["matmul_alone_ms"]) == (173.7819, 34.3572, 68.5664)
    assert d["sharing"] == {"slowdown": 0.2229, "measured": True}
    assert d["issue"] == {"base_ms": 0.1778, "ms_per_mib": {"all_gather": 0.0725, "reduce_scatter": 0.1944}}
    assert d["copy"] == {"ms_per_mib": 0.1447, "first_touch_ms_per_mib": 0.24, "first_touch_measured": False}
    assert d["transfers_measured"] == 72 and d["notes"] == []


def test_each_transfer_is_counted_once_over_the_ranks_with_the_bytes_it_moved():
    cal = _cal("gloo_cap_12mb")
    gloo, first_step = [], []
    for events in _raw_events(PROFILED / "gloo_cap_12mb"):
        step = min((e for e in events if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"])
        mine = sorted((e for e in events if e["name"].startswith("gloo:")), key=lambda e: e["ts"])
        gloo.append(mine)
        first_step.append(next(e for e in mine if e["ts"] >= step["ts"]))
    # 9 collectives a step (forward 3 gathers; backward 3 gathers, 3 reduce-scatters), 8 steps
    assert len(cal.transfers) == 72 == len(gloo[0]) == len(gloo[1])
    first = cal.transfers[0]
    assert (first.kind, first.moved_bytes) == ("all_gather", 12 << 20)  # 3 weights: 3 x 4 MiB gathered
    assert first.ms == pytest.approx(min(e["dur"] for e in first_step) / 1e3)  # the shorter rank's span
    assert {t.moved_bytes for t in cal.transfers if t.kind == "reduce_scatter"} == {8 << 20, 12 << 20}


def test_a_run_with_no_compute_beside_a_transfer_takes_the_sharing_it_cannot_measure():
    cal = _cal("gloo_cap_64mb")  # one bucket a kind: every transfer runs while the main thread waits
    assert (cal.sharing, cal.sharing_measured) == (SHARING_PRIOR, False)
    assert cal.notes == [
        "too few matmuls ran wholly beside a transfer and wholly alone to measure how much a transfer "
        "slows compute: taken as 0.35 (the fixtures' CPU runs)"
    ]
    # its 32 MiB copies (gloo's flat buffer for a reduce-scatter) measure the first touch
    assert cal.first_touch_measured and round(cal.first_touch_ms_per_mib, 4) == 0.5212
    assert _cal("gloo_cap_1mb").sharing_measured and round(_cal("gloo_cap_1mb").sharing, 4) == 0.3449


def _edited(tmp_path: Path, edit) -> Path:
    run = PROFILED / "gloo_cap_12mb"
    out = tmp_path / "traces"
    out.mkdir()
    for f in sorted((run / "traces").iterdir()):
        with gzip.open(f, "rt", encoding="utf-8") as fh:
            doc = json.load(fh)
        edit(doc)
        (out / f.name.removesuffix(".gz")).write_text(json.dumps(doc), encoding="utf-8")
    return out


def test_no_record_shapes_cannot_calibrate(tmp_path):
    def drop(doc):
        doc.pop("record_shapes", None)
        for e in doc["traceEvents"]:
            for key in ("Input Dims", "Input type", "Input Strides", "Concrete Inputs"):
                (e.get("args") or {}).pop(key, None)

    with pytest.raises(CalibrationError, match="recorded without record_shapes"):
        calibrate(_pairings(PROFILED / "gloo_cap_12mb", _edited(tmp_path, drop)))


def test_no_profiler_steps_cannot_calibrate(tmp_path):
    def drop(doc):
        doc["traceEvents"] = [
            e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")
        ]

    with pytest.raises(CalibrationError, match="no ProfilerStep spans"):
        calibrate(_pairings(PROFILED / "gloo_cap_12mb", _edited(tmp_path, drop)))


def test_another_caps_traces_pair_nothing_and_cannot_calibrate():
    with pytest.raises(CalibrationError, match="no graph run of the profile paired"):
        calibrate(_pairings(PROFILED / "gloo_cap_12mb", PROFILED / "gloo_cap_64mb" / "traces"))


def test_the_gpu_form_is_not_calibrated():
    nccl = ROOT / "fixtures" / "traces" / "nccl_2gpu"
    assert nccl.is_dir()
    from tracekit.analyze.measure_pairing import RankPairing

    t = read_traces([nccl], jobs=1)[0]
    p = RankPairing(t.rank, t, [(0.0, 1.0)], True)
    p.runs = _pairings(PROFILED / "gloo_cap_12mb")[0].runs  # paired runs, on a GPU-form trace
    with pytest.raises(CalibrationError, match="GPU form"):
        calibrate([p])
