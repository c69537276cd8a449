"""Replay schedules with the estimates the run's scheduler used, as far as the log records them
(issue 50, item 25). A graph logs ``fx_compute_nodes_runtime_estimation`` twice: when torch's
scheduler gathers its estimates (the ``custom_runtime_estimation`` hook's, else the roofline)
and when it aligns them across ranks, which with ``compute_estimator="benchmark"`` (the
default) puts each compute node's benchmark in place (or a value cached by its op and shapes).
The second's rows whose "Benchmarked" column differs from their "Analytical" one are what the
scheduler used; rows where the two are equal ("analytical" mode) leave the first's.

The logs here are overlap_cap_a's rank 0 log with the backward's second CSV edited (and its
MD5 recomputed), as a run whose benchmarks or benchmark cache gave other figures writes it."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.conftest import FIXTURE_LOGS, log_text, rank_log

pytest.importorskip("torch")

A = FIXTURE_LOGS / "overlap_cap_a"


def _with_backward_aligned_csv(tmp_path, edit):
    """overlap_cap_a's rank 0 log with ``edit(cells)`` applied to every row of the backward's
    second fx_compute_nodes_runtime_estimation (the fourth of the log)."""
    src = rank_log(A, 0)
    lines = log_text(src).split("\n")
    at = [i for i, ln in enumerate(lines) if '"name": "fx_compute_nodes_runtime_estimation"' in ln][3]
    end = at + 1
    while end < len(lines) and lines[end].startswith("\t"):
        end += 1
    rows = [ln[1:] for ln in lines[at + 1 : end]]
    header = rows[0].split(",")
    out = [rows[0]]
    for row in rows[1:]:
        if not row:
            out.append(row)
            continue
        cells = row.rsplit(",", len(header) - 1)
        out.append(",".join(edit(cells)))
    payload = "\n".join(out)
    envelope = lines[at]
    old_md5 = json.loads(envelope[envelope.index("{") :])["has_payload"]
    lines[at] = envelope.replace(old_md5, hashlib.md5(payload.encode()).hexdigest())
    lines[at + 1 : end] = ["\t" + ln for ln in out]
    dst = tmp_path / src.name.removesuffix(".gz")
    dst.write_text("\n".join(lines))
    return dst


def _replay(path):
    import tracekit.replay

    return tracekit.replay.replay(str(path))


def _backward_compute_us(run):
    bwd = run.graphs[1].reproduction.schedule
    return {t["name"]: t["dur_us"] for t in bwd.timeline if t["type"] == "compute"}


def test_the_fixtures_two_csvs_agree_so_nothing_changes():
    """Every fixture's two CSVs have the same "Benchmarked" column (the hook's FLOPs figure):
    the backward's mm take 13.4218 us as before, and torch's exposed ms is met."""
    run = _replay(A)
    us = _backward_compute_us(run)
    assert us["mm_6"] == 13.422
    assert round(run.graphs[1].reproduction.schedule.exposed_ms, 4) == 0.0198


def test_benchmarks_in_the_second_csv_are_what_the_scheduler_used(tmp_path):
    """The backward's mm benchmarked at 30 us each (the hook said 13.4218): the replay times
    them at 30 us, as torch's scheduler did, and hides more of the collectives."""

    def benchmarked(cells):
        return [cells[0], "30.0000", *cells[2:]] if cells[0].startswith("mm") else cells

    run = _replay(_with_backward_aligned_csv(tmp_path, benchmarked))
    us = _backward_compute_us(run)
    mms = {k: v for k, v in us.items() if k.startswith("mm")}
    assert len(mms) == 11 and set(mms.values()) == {30.0}
    fwd, bwd = (g.reproduction.schedule for g in run.graphs)
    assert round(fwd.exposed_ms, 4) == 0.0234  # the forward's CSVs are untouched
    assert bwd.fallback == []
    assert round(bwd.exposed_ms, 4) == 0.0079  # was 0.0198 with the hook's 13.4218 us


def test_an_analytical_second_csv_leaves_the_first(tmp_path):
    """compute_estimator="analytical": the second CSV's "Benchmarked" column is the roofline,
    equal to its "Analytical" one, and the scheduler kept the first's (the hook's) figures."""

    def analytical(cells):
        return [cells[0], cells[2], *cells[2:]]

    run = _replay(_with_backward_aligned_csv(tmp_path, analytical))
    assert _backward_compute_us(run)["mm_6"] == 13.422
    assert round(run.graphs[1].reproduction.schedule.exposed_ms, 4) == 0.0198


def test_a_zero_benchmark_leaves_the_first(tmp_path):
    """A node torch could not benchmark is logged at 0 and keeps its gathered estimate."""

    def zero(cells):
        return [cells[0], "0.0000", *cells[2:]] if cells[0].startswith("mm_6 ") else cells

    run = _replay(_with_backward_aligned_csv(tmp_path, zero))
    assert _backward_compute_us(run)["mm_6"] == 13.422


def test_parse_keeps_the_analytical_column_and_then_folds():
    from tracekit.read.parsers import parse_compute_estimates

    first = parse_compute_estimates(
        "Node,Benchmarked Est(us),Analytical Est(us),Diff(ratio),Diff(us),Flops\n"
        "mm f32(8, 8) f32(8, 8),10.0000,0.0100,0.0010,-9.9900,1024\n"
        "mm_1 f32(8, 8) f32(8, 8),10.0000,0.0100,0.0010,-9.9900,1024\n"
        "mm_2 f32(8, 8) f32(8, 8),10.0000,0.0100,0.0010,-9.9900,1024\n"
    )
    second = parse_compute_estimates(
        "Node,Benchmarked Est(us),Analytical Est(us),Diff(ratio),Diff(us),Flops\n"
        "mm f32(8, 8) f32(8, 8),12.5000,0.0100,0.0008,-12.4900,1024\n"
        "mm_1 f32(8, 8) f32(8, 8),0.0100,0.0100,1.0000,0.0000,1024\n"
        "mm_2 f32(8, 8) f32(8, 8),0.0000,0.0100,0.0000,0.0100,1024\n"
    )
    assert first.analytical_us == {"mm": 0.01, "mm_1": 0.01, "mm_2": 0.01}
    assert first.then(second).benchmarked_us == {"mm": 12.5, "mm_1": 10.0, "mm_2": 10.0}

