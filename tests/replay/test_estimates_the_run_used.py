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


def _with_backward_aligned_csv(tmp_path, edit, rank=0):
    """overlap_cap_a's rank ``rank`` log with ``edit(cells)`` applied to every row of the
    backward's second fx_compute_nodes_runtime_estimation (the fourth of the log)."""
    src = rank_log(A, rank)
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


def _mm_at(us):
    def edit(cells):
        return [cells[0], f"{us:.4f}", *cells[2:]] if cells[0].startswith("mm") else cells

    return edit


def test_every_ranks_benchmarks_give_torchs_median(tmp_path):
    """Rank 0 benchmarked the backward's mm at 30 us, rank 1 at 20 us: torch's scheduler used
    the median over the ranks (of two, the lower: 20 us) on both. With both logs the replay
    does so on both ranks; with rank 0's alone it has only rank 0's 30 us."""
    import tracekit.replay

    _with_backward_aligned_csv(tmp_path, _mm_at(30.0), rank=0)
    _with_backward_aligned_csv(tmp_path, _mm_at(20.0), rank=1)
    run = tracekit.replay.replay(str(tmp_path), all_ranks=True)
    bwd = [g for g in run.graphs if g.graph_index == 1]
    assert bwd
    for g in bwd:
        assert set(g.compute_estimates_us.values()) == {20.0}
    alone = tracekit.replay.replay(str(tmp_path), rank=0)
    assert set(alone.graphs[1].compute_estimates_us.values()) == {30.0}


def test_lower_median_is_torchs():
    from tracekit.replay.rank_estimates import lower_median

    assert lower_median([3.0, 1.0, 2.0]) == 2.0 and lower_median([30.0, 20.0]) == 20.0
    assert lower_median([4.0, 1.0, 3.0, 2.0]) == 2.0


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



# --- the run's settings (fx_graph_runnable) ----------------------------------------------------


def _with_settings(tmp_path, scenario, lines_to_add):
    """``scenario``'s rank 0 log with ``lines_to_add`` set in every fx_graph_runnable (after the
    run's own aten_distributed_optimizations lines, the MD5s made valid again), as a run with
    those settings writes it."""
    src = rank_log(scenario, 0)
    lines = log_text(src).split("\n")
    out, i = [], 0
    while i < len(lines):
        ln = lines[i]
        if '"name": "fx_graph_runnable"' not in ln:
            out.append(ln)
            i += 1
            continue
        end = i + 1
        while end < len(lines) and lines[end].startswith("\t"):
            end += 1
        body = [x[1:] for x in lines[i + 1 : end]]
        at = max(k for k, x in enumerate(body) if x.startswith("torch._inductor.config.aten_distributed_optimizations."))
        body[at + 1 : at + 1] = [
            f"torch._inductor.config.aten_distributed_optimizations.{k} = {v}" for k, v in lines_to_add.items()
        ]
        payload = "\n".join(body)
        old_md5 = json.loads(ln[ln.index("{") :])["has_payload"]
        out.append(ln.replace(old_md5, hashlib.md5(payload.encode()).hexdigest()))
        out += ["\t" + x for x in body]
        i = end
    dst = tmp_path / src.name.removesuffix(".gz")
    dst.write_text("\n".join(out))
    return dst


def test_the_log_names_the_runs_settings_and_hook():
    from tracekit.read.reader import graph_sources

    (fwd, bwd, *_) = graph_sources(str(rank_log(A, 0)))
    assert fwd.run_settings == bwd.run_settings
    assert fwd.run_settings["custom_runtime_estimation"] == "__main__.flops_runtime_estimation"
    assert fwd.run_settings["enable_overlap_scheduling"] == "True"


def test_the_replay_schedules_with_the_runs_settings(tmp_path):
    """A run with collective_bucketing on and max_in_flight_gb 0.5: the replay's scheduler gets
    both (the replaying process's config has neither); the estimation settings stay the replay's,
    and a name that is not a literal is never read."""
    log = _with_settings(
        tmp_path,
        "overlap_cap_b",
        {"collective_bucketing": "True", "max_in_flight_gb": "0.5", "compute_estimator": "'benchmark'",
         "max_coll_distance": "os.system('x')"},
    )
    run = _replay(log)
    for g in run.graphs:
        s = g.reproduction.schedule.settings
        assert s["collective_bucketing"] is True and s["max_in_flight_gb"] == 0.5
        assert s["compute_estimator"] == "analytical" and s["max_coll_distance"] == 200
    plain = _replay(B)
    assert plain.graphs[0].reproduction.schedule.settings["collective_bucketing"] is False


def test_profile_guided_and_benchmarked_collectives_are_said_when_the_sequence_differs(tmp_path):
    from tracekit.replay.run_settings import unrecorded_estimates

    assert unrecorded_estimates(None) == [] and unrecorded_estimates({"max_in_flight_gb": "2.0"}) == []
    assert unrecorded_estimates({"custom_runtime_estimation": "None"}) == []
    said = unrecorded_estimates(
        {"profile_guided_estimations_profile_path": "'/runs/prof.json'", "collective_estimator": "'benchmark'"}
    )
    assert said == [
        "the log cannot tell: the run's scheduler used profile-guided estimates (from '/runs/prof.json'), "
        "which the log does not record; the replay timed collectives and other nodes with torch's models",
        "the log cannot tell: the run's scheduler benchmarked its collectives (collective_estimator="
        "'benchmark') and the log has no fx_collectives_node_runtime_estimation; the replay timed them "
        "with torch's NCCL model",
    ]
    # the log has the benchmarks (by torch's key): nothing to say about them
    key = "_c10d_functional.all_gather_into_tensor.default: (2 group size, 1048576 bytes)"
    assert unrecorded_estimates({"collective_estimator": "'benchmark'"}, {key: 500.0}) == []


B = FIXTURE_LOGS / "overlap_cap_b"


def _with_backward_collective_benchmarks(tmp_path, rows):
    """overlap_cap_a's rank 0 log with a ``fx_collectives_node_runtime_estimation`` of ``rows``
    after the backward's analytical CSV, as a run with ``collective_estimator="benchmark"``
    logs the medians its scheduler used (the key is torch's cache key: op, group size, the
    first input's bytes)."""
    src = rank_log(A, 0)
    lines = log_text(src).split("\n")
    at = [i for i, ln in enumerate(lines) if '"name": "fx_collectives_analytical_estimation"' in ln][1]
    end = at + 1
    while end < len(lines) and lines[end].startswith("\t"):
        end += 1
    body = [
        "# World size: 2",
        "Collective Key,Benchmarked(ms),NCCL Est(ms),Inductor Est(ms),NCCL Diff(ratio),Inductor Diff(ratio)",
        *rows,
    ]
    payload = "\n".join(body)
    envelope = lines[at].replace("fx_collectives_analytical_estimation", "fx_collectives_node_runtime_estimation")
    old_md5 = json.loads(envelope[envelope.index("{") :])["has_payload"]
    envelope = envelope.replace(old_md5, hashlib.md5(payload.encode()).hexdigest())
    lines[end:end] = [envelope, *("\t" + x for x in body)]
    dst = tmp_path / src.name.removesuffix(".gz")
    dst.write_text("\n".join(lines))
    return dst


def test_benchmarked_collectives_are_what_the_scheduler_used(tmp_path):
    """The backward's all-gathers benchmarked at 0.04 ms and reduce-scatters at 0.03 ms (torch's
    NCCL model says 0.0151 ms): the replay's scheduler times them so; the forward, with no
    benchmarks logged, keeps the NCCL model."""
    log = _with_backward_collective_benchmarks(
        tmp_path,
        [
            "_c10d_functional.all_gather_into_tensor.default: (2 group size, 524288 bytes),0.0400,0.0151,0.0151,0.38,0.38",
            "_c10d_functional.reduce_scatter_tensor.default: (2 group size, 1048576 bytes),0.0300,0.0151,0.0151,0.50,0.50",
        ],
    )
    run = _replay(log)
    fwd, bwd = (g.reproduction.schedule for g in run.graphs)
    durations = {(t["kind"], t["dur_us"]) for t in bwd.timeline if t["type"] == "collective"}
    assert durations == {("all_gather", 40.0), ("reduce_scatter", 30.0)}
    assert round(bwd.comm_ms, 4) == round(5 * 0.04 + 6 * 0.03, 4)
    assert {t["dur_us"] for t in fwd.timeline if t["type"] == "collective"} == {15.077}  # NCCL model
    assert bwd.fallback == []  # the keys are no compute node's
