"""``tracekit.analyze.measure`` on the profiled fixtures: real 2-rank gloo runs whose compile logs
and torch.profiler traces sit side by side (fixtures/profiled/<scenario>/{logs,traces}). Every
value asserted is read off those files; edited copies (made here, at test time) give the bad
inputs: a trace without ProfilerStep spans, one without record_shapes, one cut short."""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

import pytest

from conftest import ROOT
from tracekit import records
from tracekit.analyze.measure import SCHEMA, Measurement, measure, mismatch_reason
from tracekit.model import Run
from tracekit.model.profile import RankTrace
from tracekit.read.reader import load
from tracekit.read.traces import read_traces

PROFILED = ROOT / "fixtures" / "profiled"
CAP_1MB = PROFILED / "gloo_cap_1mb"

AG, RS = ("all_gather", 2_097_152), ("reduce_scatter", 4_194_304)
#: The backward's recorded final schedule at 1 MB (nothing merges: each weight's 4 MiB gather
#: is one rank's 2 MiB shard), as the log's estimate table sizes it.
BACKWARD_1MB = [AG, AG, RS, AG, RS, AG, AG, RS, AG, AG, RS, RS, RS, RS, RS]


@cache
def _run(scenario: Path) -> Run:
    return load([scenario / "logs"], jobs=1)


def _traces(path: Path) -> list[RankTrace]:
    return read_traces([path], jobs=1)


@cache
def _measured(scenario: Path) -> Measurement:
    return measure(_run(scenario), _traces(scenario / "traces"))


def _edited(tmp_path: Path, scenario: Path, edit) -> Path:
    """Copies of a scenario's traces, each event list passed through ``edit`` (plain JSON)."""
    out = tmp_path / "traces"
    out.mkdir()
    for f in sorted((scenario / "traces").iterdir()):
        with gzip.open(f, "rt", encoding="utf-8") as fh:
            doc = json.load(fh)
        edit(doc)
        (out / f.name.removesuffix(".gz")).write_text(json.dumps(doc), encoding="utf-8")
    return out


def test_every_collective_of_every_profiled_step_pairs_on_both_ranks():
    doc = _measured(CAP_1MB).document()
    assert doc["schema"] == SCHEMA == "tracekit.measure/1"
    assert [(r["rank"], r["paired"], r["unpaired"]) for r in doc["ranks"]] == [(0, 184, []), (1, 184, [])]
    assert [r["steps"]["count"] for r in doc["ranks"]] == [8, 8]  # schedule(wait=1, warmup=1, active=8)
    for r in doc["ranks"]:
        fwd, bwd = r["graphs"]
        assert [(g["label"], g["phase"], g["runs"], g["paired_runs"]) for g in (fwd, bwd)] == [
            ("0/0:0", "forward", 8, 8),
            ("0/0:1", "backward", 8, 8),
        ]
        assert [(c["kind"], c["bytes"]) for c in fwd["collectives"]] == [AG] * 8
        assert [(c["kind"], c["bytes"]) for c in bwd["collectives"]] == BACKWARD_1MB
        assert {c["est_ms"] for g in (fwd, bwd) for c in g["collectives"]} == {0.0249}
        assert (fwd["est_ms"], bwd["est_ms"]) == (0.1992, 0.3735)
        assert (fwd["exposed_est_ms"], bwd["exposed_est_ms"]) == (None, None)  # not in the log
    assert doc["ranks_without_trace"] == [] and doc["traces_without_log"] == [] and doc["notes"] == []


def test_measured_figures_are_the_traces_own():
    doc = _measured(CAP_1MB).document()
    r0, r1 = doc["ranks"]
    assert r0["steps"] == {"count": 8, "median_ms": 215.4269, "min_ms": 181.0454, "max_ms": 262.7058}
    assert r1["steps"] == {"count": 8, "median_ms": 213.0111, "min_ms": 182.6213, "max_ms": 262.6237}
    fwd, bwd = r0["graphs"]
    assert (fwd["median_ms"], fwd["collectives_measured_ms"], fwd["exposed_measured_ms"]) == (
        56.898,
        72.6217,
        12.7464,
    )
    assert (bwd["median_ms"], bwd["collectives_measured_ms"], bwd["exposed_measured_ms"]) == (
        156.9225,
        168.0713,
        17.3546,
    )
    first = fwd["collectives"][0]
    assert (first["measured"], first["ratio"]) == (
        {"count": 8, "median_ms": 3.0422, "min_ms": 2.5425, "max_ms": 7.3924},
        122.2,
    )


def test_the_verdict_line():
    assert _measured(CAP_1MB).document()["verdict"] == (
        "collectives 395x slower than estimated; exposed 27.8 ms a step (the log holds no exposed "
        "estimate); graph 0/0:1 (backward) takes 72% of the step; rank 1 arrives last at graph 0/0:1 (4.3 ms)"
    )


def test_skew_is_aligned_on_the_first_collectives_end():
    assert _measured(CAP_1MB).document()["skew"] == [
        {
            "graph": "0/0:0",
            "steps": 8,
            "skew": {"count": 8, "median_ms": 2.198, "min_ms": 0.1972, "max_ms": 4.5642},
            "last_rank": 0,
            "last_rank_steps": 6,
        },
        {
            "graph": "0/0:1",
            "steps": 8,
            "skew": {"count": 8, "median_ms": 4.3272, "min_ms": 0.1059, "max_ms": 11.8204},
            "last_rank": 1,
            "last_rank_steps": 5,
        },
    ]


def test_measured_records_are_flat_rows():
    m = _measured(CAP_1MB)
    rows = records.measured_collectives(m)
    assert len(rows) == 368  # 2 ranks x 8 steps x (8 + 15)
    assert list(rows[0]) == [
        "rank", "step", "compile_id", "graph_index", "graph", "position", "kind", "bytes", "est_ms",
        "measured_ms", "issue_ms", "exposed_ms", "ratio",
    ]  # fmt: skip
    assert {(r["kind"], r["bytes"]) for r in rows} == {AG, RS}
    graphs = records.measured_graphs(m)
    assert [(g["rank"], g["step"], g["graph"], g["collectives"], g["problem"]) for g in graphs[:2]] == [
        (0, 0, "forward", 8, None),
        (0, 0, "backward", 15, None),
    ]
    assert len(graphs) == 32


def test_without_profiler_steps_the_trace_is_one_window_and_said(tmp_path):
    def drop_steps(doc):
        doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")]

    m = measure(_run(CAP_1MB), _traces(_edited(tmp_path, CAP_1MB, drop_steps)))
    doc = m.document()
    assert [(r["profiler_steps"], r["steps"]["count"], r["paired"]) for r in doc["ranks"]] == [
        (False, 0, 184),
        (False, 0, 184),
    ]
    assert "rank 0: no ProfilerStep spans (the profiler ran without a schedule): the trace is one window" in doc["notes"]
    fwd = doc["ranks"][0]["graphs"][0]
    assert (fwd["run"]["count"], fwd["median_ms"]) == (8, 56.898)  # over the graph's runs


def test_without_record_shapes_pairs_on_kind_and_order_and_says_so(tmp_path):
    def drop_shapes(doc):
        doc.pop("record_shapes", None)
        for e in doc["traceEvents"]:
            for key in ("Input Dims", "Input type", "Input Strides", "Concrete Inputs"):
                (e.get("args") or {}).pop(key, None)

    doc = measure(_run(CAP_1MB), _traces(_edited(tmp_path, CAP_1MB, drop_shapes))).document()
    assert [(r["has_shapes"], r["paired"]) for r in doc["ranks"]] == [(False, 184), (False, 184)]
    assert all(g["on_order_only"] for r in doc["ranks"] for g in r["graphs"])
    bwd = doc["ranks"][0]["graphs"][1]
    assert [(c["kind"], c["bytes"]) for c in bwd["collectives"]] == BACKWARD_1MB  # the log's sizes


def test_a_trace_cut_short_keeps_what_was_read(tmp_path):
    src = sorted((CAP_1MB / "traces").iterdir())[1]
    cut = tmp_path / "cut.json"
    cut.write_bytes(gzip.decompress(src.read_bytes())[:150_000])
    m = measure(_run(CAP_1MB), _traces(cut))
    doc = m.document()
    (r,) = doc["ranks"]
    assert (r["rank"], r["complete"], r["events_read"], r["paired"]) == (1, False, 374, 0)
    assert doc["ranks_without_trace"] == [0]
    assert mismatch_reason(m) == f"nothing paired: 1 of 1 traces are cut short (374 events read of {cut})"


def test_one_ranks_trace_alone_measures_that_rank_and_names_the_other(tmp_path):
    one = sorted((CAP_1MB / "traces").iterdir())[0]
    doc = measure(_run(CAP_1MB), _traces(one)).document()
    assert [(r["rank"], r["paired"]) for r in doc["ranks"]] == [(0, 184)]
    assert doc["ranks_without_trace"] == [1]
    assert doc["notes"] == ["rank 1: a compile log but no trace: not measured"]
    assert doc["skew"] == []


@pytest.mark.parametrize("rank", [0, 1])
def test_rank_filter(rank):
    m = measure(_run(CAP_1MB), _traces(CAP_1MB / "traces"), ranks=[rank])
    assert [p.rank for p in m.pairings] == [rank]
    assert m.document()["ranks_without_trace"] == []


def test_traces_of_another_cap_pair_nothing_and_say_why():
    """The 1 MB run's traces against the 12 MB run's logs: every graph run's first collective
    differs in bytes (a 2 MiB shard issued, a 6 MiB bucket recorded); nothing is paired by guess."""
    cap_12mb = PROFILED / "gloo_cap_12mb"
    m = measure(_run(cap_12mb), _traces(CAP_1MB / "traces"))
    doc = m.document()
    assert [(r["rank"], r["paired"], len(r["unpaired"])) for r in doc["ranks"]] == [(0, 0, 16), (1, 0, 16)]
    assert doc["ranks"][0]["unpaired"][:2] == [
        {
            "step": 0,
            "graph": "0/0:0",
            "issued": 8,
            "reason": "collective 0: issued all_gather of 2,097,152 B, the log records 6,291,456 B",
        },
        {
            "step": 0,
            "graph": "0/0:1",
            "issued": 15,
            "reason": "collective 0: issued all_gather of 2,097,152 B, the log records 6,291,456 B",
        },
    ]
    assert doc["verdict"] == mismatch_reason(m) == (
        "nothing paired: the traces do not match the logs (another run or cap?): 32 graph runs differ, "
        "the first: collective 0: issued all_gather of 2,097,152 B, the log records 6,291,456 B"
    )


def test_the_12mb_run_pairs_its_buckets():
    doc = _measured(PROFILED / "gloo_cap_12mb").document()
    assert [(r["rank"], r["paired"], r["unpaired"]) for r in doc["ranks"]] == [(0, 72, []), (1, 72, [])]
    fwd, bwd = doc["ranks"][0]["graphs"]
    assert [(c["kind"], c["bytes"], c["est_ms"]) for c in fwd["collectives"]] == [
        ("all_gather", 6_291_456, 0.0511),
        ("all_gather", 6_291_456, 0.0511),
        ("all_gather", 4_194_304, 0.038),
    ]
    assert [(c["kind"], c["bytes"]) for c in bwd["collectives"]] == [
        ("all_gather", 6_291_456),
        ("all_gather", 6_291_456),
        ("all_gather", 2_097_152),
        ("reduce_scatter", 12_582_912),
        ("reduce_scatter", 12_582_912),
        ("reduce_scatter", 8_388_608),
    ]


def test_waits_come_from_the_output_code_when_given():
    """At 12 MB the backward waits AG0, RS3, AG1, RS4, AG2, RS5 (its output code): read so, each
    collective's exposed time is its own wait's; derived (oldest open first), the second wait
    would be given to AG1."""
    from tracekit.read.output_code import wait_orders

    cap_12mb = PROFILED / "gloo_cap_12mb"
    derived = _measured(cap_12mb)
    read = measure(_run(cap_12mb), _traces(cap_12mb / "traces"), None, wait_orders([str(cap_12mb / "logs")]))
    assert [p.waits for p in derived.pairings] == ["derived", "derived"]
    assert [p.waits for p in read.pairings] == ["output code", "output code"]
    bwd = next(r for r in read.pairings[0].runs if r.position == 1 and r.step == 0)
    waits = sorted(bwd.waits, key=lambda w: w.ts_us)
    assert [bwd.paired.index(next(p for p in bwd.paired if p.wait is w)) for w in waits] == [0, 3, 1, 4, 2, 5]
    d_bwd = derived.document()["ranks"][0]["graphs"][1]
    r_bwd = read.document()["ranks"][0]["graphs"][1]
    assert r_bwd["exposed_measured_ms"] == d_bwd["exposed_measured_ms"]  # the graph's waits are the same
    assert [c["exposed_ms"] for c in r_bwd["collectives"]] != [c["exposed_ms"] for c in d_bwd["collectives"]]


@pytest.mark.parametrize(
    ("scenario", "forward", "backward"),
    [
        ("gloo_cap_1mb", [AG] * 8, BACKWARD_1MB),
        ("gloo_cap_64mb", [("all_gather", 16_777_216)], [("all_gather", 14_680_064), ("reduce_scatter", 33_554_432)]),
    ],
)
def test_each_cap_pairs_every_step_of_both_ranks(scenario, forward, backward):
    doc = _measured(PROFILED / scenario).document()
    n = 8 * (len(forward) + len(backward))
    assert [(r["rank"], r["paired"], r["unpaired"]) for r in doc["ranks"]] == [(0, n, []), (1, n, [])]
    for r in doc["ranks"]:
        fwd, bwd = r["graphs"]
        assert [(c["kind"], c["bytes"]) for c in fwd["collectives"]] == forward
        assert [(c["kind"], c["bytes"]) for c in bwd["collectives"]] == backward


def test_a_trace_of_a_rank_without_a_log_is_listed_and_not_paired(tmp_path):
    def rank_5(doc):
        if doc["distributedInfo"]["rank"] == 1:
            doc["distributedInfo"]["rank"] = 5

    doc = measure(_run(CAP_1MB), _traces(_edited(tmp_path, CAP_1MB, rank_5))).document()
    assert [(r["rank"], r["paired"]) for r in doc["ranks"]] == [(0, 184), (5, 0)]
    assert (doc["traces_without_log"], doc["ranks_without_trace"]) == ([5], [1])
    assert doc["ranks"][1]["unpaired"][0]["reason"] == "no compile log for this rank"
    assert "rank 5: a trace (" in doc["notes"][0] and doc["notes"][0].endswith(") but no compile log: nothing paired")
