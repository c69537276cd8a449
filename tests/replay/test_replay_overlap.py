"""Replay through torch's overlap scheduler (tracekit.replay.overlap_schedule) on the
overlap_cap_a / overlap_cap_b fixtures: the same 6-layer model compiled at 1.5 MB and 64 MB,
compute timed from FLOPs at 10 TFLOP/s, collectives by torch's NCCL model. Expected values are
the logs' own (inductor_collective_schedule with its estimates) and torch's "Overlap scheduling
results" line, which generate.py kept in overlap_results.json (2 decimals)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FIXTURE_LOGS, log_text, rank_log

pytest.importorskip("torch")

A, B = FIXTURE_LOGS / "overlap_cap_a", FIXTURE_LOGS / "overlap_cap_b"


def _replay(path, caps=()):
    import tracekit.replay

    return tracekit.replay.replay(str(path), cap_mb=caps)


def _torch_results(path):
    return {g["graph_index"]: g for g in json.loads((path / "overlap_results.json").read_text())["graphs"]}


def _final(g):
    return [(c.kind, c.group, c.bytes) for c in g.recorded.final.collectives]


@pytest.mark.parametrize("path", [A, B])
def test_recorded_cap_reproduces_the_final_sequence_and_torchs_exposed_ms(path):
    run = _replay(path)
    want = _torch_results(path)
    assert len(run.graphs) == 2
    for g in run.graphs:
        assert g.overlap_scheduled and g.reproduced, g.mismatches
        assert g.final_reproduced is True, g.final_mismatches
        sc = g.reproduction.schedule
        assert [(c.kind, c.group, c.bytes) for c in sc.final] == _final(g)
        assert [c.est_ms for c in sc.final] == [c.est_ms for c in g.recorded.final.collectives]
        torch_ms = want[g.graph_index]["total_exposed_ms"]  # the INFO line: 2 decimals
        assert abs(sc.exposed_ms - torch_ms) <= max(0.02, 0.05 * torch_ms)
        # the same sums, unrounded, read off the compile's scheduler by generate.py (to 1e-6 ms:
        # the CSV gives compute estimates to 0.0001 us)
        assert sc.exposed_ms == pytest.approx(want[g.graph_index]["exact_total_exposed_ms"], abs=1e-6)
        assert sc.comm_ms == pytest.approx(want[g.graph_index]["exact_total_potential_exposed_ms"], abs=1e-6)
        assert sc.fallback == []  # every mm had a recorded estimate


def test_exact_figures_of_the_small_cap():
    run = _replay(A)
    fwd, bwd = (g.reproduction.schedule for g in run.graphs)
    assert fwd.counts() == {"all_gather": 6}
    assert bwd.counts() == {"all_gather": 5, "reduce_scatter": 6}
    assert [c.bytes for c in fwd.final] == [524288] * 6
    assert round(fwd.exposed_ms, 4) == 0.0234
    assert round(bwd.exposed_ms, 4) == 0.0198
    assert fwd.peak_memory_bytes == 7864320


def test_scenario_a_at_bs_cap_predicts_bs_recorded_sequence_and_exposed_ms():
    a = _replay(A, caps=[64.0])
    b = _replay(B)
    for ga, gb in zip(a.graphs, b.graphs):
        predicted = ga.replays[0].schedule
        assert [(c.kind, c.group, c.bytes) for c in predicted.final] == _final(gb)
        assert round(predicted.exposed_ms, 4) == round(gb.reproduction.schedule.exposed_ms, 4)
        torch_b = _torch_results(B)[gb.graph_index]
        assert abs(predicted.exposed_ms - torch_b["total_exposed_ms"]) <= max(0.02, 0.05 * torch_b["total_exposed_ms"])
        assert predicted.exposed_ms == pytest.approx(torch_b["exact_total_exposed_ms"], abs=1e-6)
    # the big cap leaves more communication exposed than the small one (the first bucket)
    step = a.to_dict()["totals"]["step"]
    assert [s["cap"] for s in step] == ["recorded", "64"]
    assert step[1]["exposed_ms"] > step[0]["exposed_ms"]
    assert step[0]["final"]["counts"] == {"all_gather": 11, "reduce_scatter": 6}
    assert step[1]["final"]["counts"] == {"all_gather": 2, "reduce_scatter": 1}


def test_document_is_replay_3_with_a_timeline():
    doc = _replay(A).to_dict()
    assert doc["schema"] == "tracekit.replay/3"
    rep = doc["graphs"][0]["reproduction"]
    for k in ("bucket_cap_mb", "final", "comm_ms", "exposed_ms", "compute_ms", "est_ms", "peak_memory_bytes"):
        assert rep[k] is not None, k
    assert rep["est_ms"] == pytest.approx(rep["compute_ms"] + rep["exposed_ms"], abs=2e-4)
    nodes = rep["timeline"]["nodes"]
    colls = [n for n in nodes if n["type"] == "collective"]
    assert len(colls) == 6 and all(n["bytes"] == 1572864 for n in colls)  # torch's size_bytes: in + out
    assert sum(n["exposed_us"] for n in colls) == pytest.approx(rep["exposed_ms"] * 1e3, abs=0.5)
    assert max(b for _, b in rep["timeline"]["memory"]) == rep["peak_memory_bytes"]
    starts = [n["start_us"] for n in nodes]
    assert starts == sorted(starts)


def test_existing_fixture_reproduces_through_the_scheduler():
    run = _replay(FIXTURE_LOGS / "spmd_auto")
    assert [g.final_reproduced for g in run.graphs] == [True, True]


def test_existing_fixtures_reproduce_through_the_scheduler():
    for scenario in ("diverge_rank", "tracekit_pass"):
        run = tracekit_replay(FIXTURE_LOGS / scenario, all_ranks=True)
        assert [g.final_reproduced for g in run.graphs] == [True] * len(run.graphs), scenario


def test_small_cap_fixture_reproduces_through_the_scheduler():
    # spmd_small_cap's collectives were timed by torch's NCCL model, whose figures the log holds
    # (fixtures/generate.py), so its split buckets' final order is reproduced on every rank
    run = tracekit_replay(FIXTURE_LOGS / "spmd_small_cap", all_ranks=True)
    assert [g.final_reproduced for g in run.graphs] == [True] * len(run.graphs) and len(run.graphs) == 2


def _with_backward_schedule_swapped(tmp_path):
    """spmd_small_cap's rank 0 log, its backward's inductor_collective_schedule with the first
    reduce-scatter and the all-gather before it swapped (the MD5 made valid again), as a run
    whose scheduler chose another order would have logged."""
    import hashlib
    import json

    src = next((FIXTURE_LOGS / "spmd_small_cap").glob("*rank_0_*.log"))
    lines = src.read_text().split("\n")
    at = [i for i, ln in enumerate(lines) if '"name": "inductor_collective_schedule"' in ln][1]
    end = at + 1
    while end < len(lines) and lines[end].startswith("\t"):
        end += 1
    names = json.loads("\n".join(ln[1:] for ln in lines[at + 1:end]))
    rs = next(i for i, n in enumerate(names) if "reduce_scatter" in n)
    ag = max(i for i, n in enumerate(names[:rs]) if "all_gather" in n)
    names[ag], names[rs] = names[rs], names[ag]
    payload = json.dumps(names, indent=0)
    envelope = lines[at]
    old_md5 = json.loads(envelope[envelope.index("{"):])["has_payload"]
    lines[at] = envelope.replace(old_md5, hashlib.md5(payload.encode()).hexdigest())
    lines[at + 1:end] = ["\t" + ln for ln in payload.split("\n")]
    dst = tmp_path / src.name
    dst.write_text("\n".join(lines))
    return dst


def test_a_final_sequence_that_differs_is_named_and_exits_1(tmp_path):
    from click.testing import CliRunner

    from tracekit.cli import main

    log = _with_backward_schedule_swapped(tmp_path)
    run = tracekit_replay(log)
    assert [g.final_reproduced for g in run.graphs] == [True, False]
    assert run.graphs[1].final_mismatches == [
        "final collective #4: recorded reduce_scatter, replayed all_gather (9 recorded, 9 replayed)",
        # the run's fx_graph_runnable names its hook: what it gave collectives is not logged
        "the log cannot tell: the run's scheduler asked a custom_runtime_estimation hook "
        "(__main__.fixed_runtime_estimation) first; the log records what it gave compute nodes "
        "(fx_compute_nodes_runtime_estimation), not what it gave collectives and other nodes, which the "
        "replay timed with torch's models",
    ]
    assert run.graphs[1].reproduced is True  # pre-bucketing itself reproduced
    res = CliRunner().invoke(main, ["replay", str(log)])
    assert res.exit_code == 1
    assert "ranks 0 graph 0/0:1: FINAL SEQUENCE NOT REPRODUCED: final collective #4" in res.output
    res = CliRunner().invoke(main, ["replay", str(log), "--no-overlap"])
    assert res.exit_code == 0


def tracekit_replay(path, **kw):
    import tracekit.replay

    return tracekit.replay.replay(str(path), **kw)


def _without_backward_compute_estimates(tmp_path):
    """overlap_cap_a's rank 0 log with the backward's two fx_compute_nodes_runtime_estimation
    entries (envelope and payload lines) dropped, as a log cut by a filter would be."""
    src = rank_log(A, 0)
    lines = log_text(src).split("\n")
    seen, out, skipping = 0, [], False
    for ln in lines:
        if ln.startswith("\t") and skipping:
            continue
        skipping = False
        if '"name": "fx_compute_nodes_runtime_estimation"' in ln:
            seen += 1
            if seen > 2:  # the backward's (the forward logs two first)
                skipping = True
                continue
        out.append(ln)
    assert seen == 4
    dst = tmp_path / src.name.removesuffix(".gz")
    dst.write_text("\n".join(out))
    return dst


def test_a_missing_estimate_falls_back_to_the_roofline_and_says_so(tmp_path):
    from click.testing import CliRunner

    from tracekit.cli import main

    log = _without_backward_compute_estimates(tmp_path)
    run = tracekit_replay(log)
    fwd, bwd = (g.reproduction.schedule for g in run.graphs)
    assert fwd.fallback == []
    assert len(bwd.fallback) == bwd.compute_nodes == 11  # every backward mm: torch's roofline
    assert round(fwd.exposed_ms, 4) == 0.0234  # the forward is unchanged
    assert run.graphs[1].final_reproduced is True  # the order does not depend on it here
    res = CliRunner().invoke(main, ["replay", str(log), "--gpu", "A100"])
    assert "11 of 17 compute nodes fell back to the roofline on A100" in res.output
    doc = run.to_dict()
    assert doc["graphs"][1]["reproduction"]["estimates"]["fallback_nodes"] == 11
    assert doc["totals"]["step"][0]["fallback_nodes"] == 11


def _recommend_doc(*args):
    from click.testing import CliRunner

    from tracekit.cli import main

    res = CliRunner().invoke(main, ["replay", str(B), "--recommend", "--format", "json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_recommend_picks_the_small_cap_over_the_recorded_64_mb():
    doc = _recommend_doc("--memory-budget-gb", "1")
    assert doc["caps"] == ["auto", "1", "2", "4", "8", "16", "32", "64", "128", "256", "512", "1024", "2048"]
    assert [s["cap"] for s in doc["totals"]["step"]][:2] == ["recorded", "auto"]
    rec = doc["recommendation"]
    assert rec["cap_mb"] == 1.0 and rec["est_ms"] == 0.2751 and rec["exposed_ms"] == 0.0431
    assert rec["peak_memory_bytes"] == 8912900 and rec["vs_recorded_ms"] == -0.046
    assert rec["config"] == ("torch._inductor.config.aten_distributed_optimizations."
                             "pre_bucketing_fsdp_collectives_bucket_cap_mb = 1")
    assert [s["cap"] for s in doc["pareto_front"]] == ["1"]
    # a budget nothing fits: no recommendation, said plainly in the table
    assert _recommend_doc("--memory-budget-gb", "0.001")["recommendation"] is None


def test_caps_with_the_same_buckets_reuse_one_schedule_equal_to_a_fresh_one():
    """GraphReplayer.scheduled runs torch's scheduler once per distinct partition: at 64 MB and
    at 2 GB the backward of overlap_cap_a has the same buckets, so the second cap reuses the
    first schedule, and what it returns equals a fresh replayer's schedule at 2 GB; another
    partition (1.5 MB) runs the scheduler again. The cached NCCL estimates equal torch's own
    ``_get_collective_estimations`` on every final collective."""
    from torch._inductor.fx_passes.node_runtime_estimation import _get_collective_estimations

    from tracekit.replay import overlap_schedule as osch
    from tracekit.replay.replayer import GraphReplayer
    from tracekit.replay.results import ReplayOptions
    from tracekit.replay.selection import replay_sources_for

    src = [s for s in replay_sources_for([str(A)]) if s.graph_index == 1][0]

    def fields(sc):
        return ([c.to_dict() for c in sc.final], [c.to_dict() for c in sc.before_overlap], sc.comm_ms,
                sc.exposed_ms, sc.compute_ms, sc.peak_memory_bytes, sc.timeline, sc.memory, sc.fallback)

    rp = GraphReplayer(src.text, ReplayOptions())
    big = rp.scheduled(64.0, src.compute_estimates_us)
    huge = rp.scheduled(2048.0, src.compute_estimates_us)
    assert rp.scheduler_runs == 1
    small = rp.scheduled(1.5, src.compute_estimates_us)
    assert rp.scheduler_runs == 2
    fresh = GraphReplayer(src.text, ReplayOptions()).scheduled(2048.0, src.compute_estimates_us)
    assert fields(huge) == fields(fresh) == fields(big)
    assert huge is not big
    assert fields(small) != fields(big) and small.counts() == {"all_gather": 5, "reduce_scatter": 6}
    assert big.counts() == {"all_gather": 1, "reduce_scatter": 1}
    # the estimates cache against torch's own call, on the scheduled graphs' collectives
    gm = osch.copy_graph(rp.gm)
    from bucketing import pre_bucket_fsdp_collectives

    pre_bucket_fsdp_collectives(gm, bucket_cap_mb=1.5, recompile=False)
    for c, n in zip(osch.final_collectives(gm, dict(rp._estimates)),
                    [n for n in gm.graph.nodes if osch._collective_start(n)]):
        assert c.est_ms == round(float(_get_collective_estimations(n)[0]), 4)
