"""The collectives that run (``Graph.final``) and the cross-rank checks on them
(:mod:`tracekit.analyze.schedule`), on the real fixture logs and on copies edited in tmp_path (MD5s kept
valid)."""

from __future__ import annotations

import hashlib
import json
import shutil

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIXTURE_LOGS
from tracekit.commands.diff_cmd import diff as diff_cmd
from tracekit.commands.summarize_cmd import summarize
from tracekit.model import FinalSchedule, ScheduledCollective
from tracekit.read.parsers import ArtifactError, ScheduleParser, collective_op, parse_estimation
from tracekit.read.reader import load
from tracekit.analyze.schedule import compile_divergence, first_difference, schedule_divergence
from tracekit.analyze.documents import run_from_document
from tracekit.render.summary_document import summary_document

AG, RS = "all_gather_into_tensor_out", "reduce_scatter_tensor"


def finals(run):
    """rank -> [(graph_index, position, counts, [(kind, op, group, size, bytes, ms)], sizes)]."""
    return {
        r.rank: [(g.graph_index, g.final.position, g.final.counts,
                  [(c.kind, c.op, c.group, c.group_size, c.bytes, c.est_ms) for c in g.final.collectives],
                  g.final.sizes) for g in r.graphs]
        for r in run.ranks
    }


def counts(ag: int, rs: int) -> dict[str, int]:
    return {"all_gather": ag, "reduce_scatter": rs, "all_reduce": 0, "other": 0}


def spmd_finals(fwd_ag: int, bwd_ag: int, bwd_rs: int) -> list:
    return [
        (0, 0, counts(1, 0), [("all_gather", AG, "0", 4, fwd_ag, 0.0116)], "matched"),
        (1, 1, counts(1, 1), [("all_gather", AG, "0", 4, bwd_ag, 0.0114),
                              ("reduce_scatter", RS, "0", 4, bwd_rs, 0.0116)], "matched"),
    ]


def test_final_counts_and_bytes_per_graph_spmd_auto():
    run = load(FIXTURE_LOGS / "spmd_auto", jobs=1)
    assert finals(run) == {r: spmd_finals(74536, 69928, 298144) for r in range(4)}
    assert {g.final.world_size for r in run.ranks for g in r.graphs} == {4}
    assert all(r.compile_ids == ["0/0"] and r.cache_events == [] and r.schedules_without_outcome == []
               for r in run.ranks)


def test_final_of_diverge_rank_rank_3_runs_bigger_buckets():
    got = finals(load(FIXTURE_LOGS / "diverge_rank", jobs=1))
    assert {r: got[r] for r in (0, 1, 2)} == {r: spmd_finals(74536, 69928, 298144) for r in (0, 1, 2)}
    assert got[3] == spmd_finals(75596, 70988, 302384)


def test_small_cap_schedule_matches_sizes_within_each_kind_in_run_order():
    run = load(FIXTURE_LOGS / "spmd_small_cap", jobs=1)
    bwd = run.ranks[0].graphs[1].final
    assert bwd.counts == counts(4, 5)
    assert [(c.kind[0:2], c.bytes) for c in bwd.collectives] == [
        ("al", 4132), ("al", 32768), ("al", 260), ("al", 32768), ("re", 17552),
        ("re", 131072), ("re", 1040), ("re", 131072), ("re", 17408)]


def test_schedule_divergence_names_rank_3_with_position_and_both_sizes():
    run = load(FIXTURE_LOGS / "diverge_rank", jobs=1)
    common = {"compile_id": "0/0", "ranks": "3", "majority_ranks": "0-2", "majority": True, "position": 0}
    assert schedule_divergence(run) == [
        common | {"graph_index": 0, "value": {"kind": "all_gather", "group": "0", "bytes": 75596, "dtype": "f32"},
                  "majority_value": {"kind": "all_gather", "group": "0", "bytes": 74536, "dtype": "f32"},
                  "length": 1, "majority_length": 1},
        common | {"graph_index": 1, "value": {"kind": "all_gather", "group": "0", "bytes": 70988, "dtype": "f32"},
                  "majority_value": {"kind": "all_gather", "group": "0", "bytes": 69928, "dtype": "f32"},
                  "length": 2, "majority_length": 2},
    ]
    assert compile_divergence(run) == []


def test_spmd_auto_agrees():
    run = load(FIXTURE_LOGS / "spmd_auto", jobs=1)
    assert schedule_divergence(run) == [] and compile_divergence(run) == []


def test_summary_json_has_final_and_divergences_and_reads_back():
    run = load(FIXTURE_LOGS / "diverge_rank", jobs=1)
    doc = json.loads(json.dumps(summary_document(run, per_rank=True)))
    g = doc["ranks"][3]["graphs"][1]
    assert g["final"]["counts"] == counts(1, 1)
    assert [(c["op"], c["bytes"], c["est_ms"]) for c in g["final"]["collectives"]] == [
        (AG, 70988, 0.0114), (RS, 302384, 0.0116)]
    assert doc["ranks"][3]["compile_ids"] == ["0/0"]
    assert [d["ranks"] for d in doc["schedule_divergence"]] == ["3", "3"]
    assert doc["compile_divergence"] == []
    assert {d["field"] for d in doc["divergence"] if d["field"] == "final"} == {"final"}
    back = run_from_document(doc)  # a saved summary gives the same checks
    assert schedule_divergence(back) == doc["schedule_divergence"]
    grouped = json.loads(json.dumps(summary_document(run)))  # the default: rank groups
    assert grouped["groups"][1]["ranks"] == "3" and grouped["groups"][1]["compile_ids"] == ["0/0"]
    assert grouped["groups"][1]["graphs"][1]["final"] == g["final"]
    assert schedule_divergence(run_from_document(grouped)) == doc["schedule_divergence"]
    assert back.ranks[3].graphs[1].final == run.ranks[3].graphs[1].final


def test_fail_on_divergence_exit_status():
    runner = CliRunner()
    bad = runner.invoke(summarize, [str(FIXTURE_LOGS / "diverge_rank"), "-j", "1", "--fail-on-divergence"])
    assert bad.exit_code == 1
    assert "the ranks diverge: 9 bucketing differences, 2 schedule differences" in bad.output
    assert "0/0           forward   3        #0    AG 75,596 B f32 (group 0)  0-2               AG 74,536 B f32 (group 0)" in bad.output
    assert runner.invoke(summarize, [str(FIXTURE_LOGS / "diverge_rank"), "-j", "1"]).exit_code == 0
    good = runner.invoke(summarize, [str(FIXTURE_LOGS / "spmd_auto"), "-j", "1", "--fail-on-divergence"])
    assert good.exit_code == 0, good.output
    assert "all 4 ranks run the same collectives (kind, group, bytes, dtype, in order) in all 2 graphs" in good.output
    assert "0/0           backward  0-3      1     1     0     0        368,072  0.0230    matched" in good.output


def test_diff_reports_the_final_change_of_rank_3():
    out = CliRunner().invoke(diff_cmd, [str(FIXTURE_LOGS / "spmd_auto"), str(FIXTURE_LOGS / "diverge_rank")]).output
    assert "rank 3\n" in out
    rows = [" ".join(ln.split()) for ln in out.splitlines()]
    assert "0/0 forward final AG 1: 74,536 B AG 1: 75,596 B" in rows
    assert "0/0 backward final: first diff #0 AG 69,928 B f32 (group 0) AG 70,988 B f32 (group 0)" in rows


# --- edited copies of a fixture ------------------------------------------------------------------


def copy_run(tmp_path, scenario="spmd_auto"):
    dst = tmp_path / scenario
    shutil.copytree(FIXTURE_LOGS / scenario, dst)
    return dst


def rank_file(d, rank):
    return next(d.glob(f"dedicated_log_torch_trace_rank_{rank}_*.log"))


def spans(lines, marker):
    """(first, end) line indexes of every entry whose envelope contains ``marker``."""
    out = []
    for i, ln in enumerate(lines):
        if marker in ln and not ln.startswith("\t"):
            j = i + 1
            while j < len(lines) and lines[j].startswith("\t"):
                j += 1
            out.append((i, j))
    return out


def entry(rank, body: dict, payload: str | None = None, frame=(0, 0)) -> list[str]:
    """A log entry as torch writes it (glog prefix, envelope, tab-indented payload with its MD5)."""
    env = body | {"rank": rank, "frame_id": frame[0], "frame_compile_id": frame[1], "attempt": 0}
    if payload is not None:
        env["has_payload"] = hashlib.md5(payload.encode()).hexdigest()
    head = "V1202 15:14:06.607000 12738 site-packages/torch/_dynamo/convert_frame.py:303] "
    return [head + json.dumps(env)] + ([] if payload is None else ["\t" + p for p in payload.split("\n")])


def edit(path, fn):
    lines = path.read_text(encoding="utf-8").split("\n")
    path.write_text("\n".join(fn(lines)), encoding="utf-8")


def test_compile_id_and_cache_divergence(tmp_path):
    d = copy_run(tmp_path)
    # rank 2 recompiles (0/1) after 0/0; rank 1's dynamo_start of 0/0 is lost; every rank then
    # compiles frame 1/0, which rank 3 loads from the FX graph cache (a hit) and the others miss
    for rank in range(4):
        def change(ls, rank=rank):
            if rank == 1:
                (a, b), = spans(ls, '{"dynamo_start": ')
                del ls[a:b]
            if rank == 2:
                ls += entry(2, {"dynamo_start": {"stack": []}}, frame=(0, 1))
            ls += entry(rank, {"dynamo_start": {"stack": []}}, frame=(1, 0))
            state = "hit" if rank == 3 else "miss"
            ls += entry(rank, {"artifact": {"name": f"fx_graph_cache_{state}", "encoding": "json"}},
                        json.dumps({"key": "fabc", "cache_state": state}), frame=(1, 0))
            return ls + [""]
        edit(rank_file(d, rank), change)
    run = load(d, jobs=1)
    assert run.diagnostics.counts == {}
    assert [r.compile_ids for r in run.ranks] == [["0/0", "1/0"], ["1/0"], ["0/0", "0/1", "1/0"], ["0/0", "1/0"]]
    assert run.ranks[3].cache_hits == 1
    assert compile_divergence(run) == [
        {"what": "compile_ids", "ranks": "1", "majority_ranks": "0,3", "majority": True, "position": 0,
         "value": "1/0", "majority_value": "0/0", "length": 1, "majority_length": 2},
        {"what": "compile_ids", "ranks": "2", "majority_ranks": "0,3", "majority": True, "position": 1,
         "value": "0/1", "majority_value": "1/0", "length": 3, "majority_length": 2},
        {"what": "cache", "ranks": "3", "majority_ranks": "0-2", "majority": True, "position": 0,
         "value": {"compile_id": "1/0", "state": "hit"},
         "majority_value": {"compile_id": "1/0", "state": "miss"}, "length": 1, "majority_length": 1},
    ]
    assert schedule_divergence(run) == []  # the cache hit is a graph of its own (1/0, position 0)
    res = CliRunner().invoke(summarize, [str(d), "-j", "1", "--fail-on-divergence"])
    assert res.exit_code == 1 and "3 compile id / cache differences" in res.output
    rows = [" ".join(ln.split()) for ln in res.output.splitlines()]
    assert "cache 3 #0 1/0 hit 0-2 1/0 miss" in rows
    assert "compile_ids 2 #1 0/1 0,3 1/0" in rows


def test_a_schedule_without_outcome_keeps_its_position(tmp_path):
    d = copy_run(tmp_path)

    def drop_forward_outcome(ls):
        first, = [s for s in spans(ls, '"name": "pre_bucketing_fsdp_collectives"')][:1]
        del ls[first[0]:first[1]]
        return ls
    edit(rank_file(d, 1), drop_forward_outcome)
    r1 = load(d, jobs=1).rank(1)
    # the backward's outcome is now the compile id's first outcome (graph_index 0), but its
    # schedule is still the second post-grad graph's; the forward's went to the outcome-less list
    (g,) = r1.graphs
    assert (g.graph_index, g.final.position, g.final.counts) == (0, 1, counts(1, 1))
    (f,) = r1.schedules_without_outcome
    assert (f.compile_id, f.position, [c.bytes for c in f.collectives]) == ("0/0", 0, [74536])
    assert schedule_divergence(load(d, jobs=1)) == []


def test_estimation_count_mismatch_keeps_counts_and_leaves_sizes_null(tmp_path):
    d = copy_run(tmp_path)

    def drop_rs_estimate(ls):
        a, b = spans(ls, '"name": "fx_collectives_analytical_estimation"')[1]
        payload = "\n".join(x[1:] for x in ls[a + 1:b] if "reduce_scatter" not in x)
        env = json.loads(ls[a].split("] ", 1)[1])
        env["has_payload"] = hashlib.md5(payload.encode()).hexdigest()
        ls[a:b] = [ls[a].split("] ", 1)[0] + "] " + json.dumps(env)] + ["\t" + p for p in payload.split("\n")]
        return ls
    edit(rank_file(d, 0), drop_rs_estimate)
    run = load(d, jobs=1)
    assert run.diagnostics.counts == {}
    bwd = run.ranks[0].graphs[1].final
    assert bwd.counts == counts(1, 1) and bwd.sizes == "partial"
    assert [(c.kind, c.group, c.bytes) for c in bwd.collectives] == [
        ("all_gather", "0", 69928), ("reduce_scatter", None, None)]
    assert schedule_divergence(run) == [
        {"compile_id": "0/0", "graph_index": 1, "ranks": "0", "majority_ranks": "1-3", "majority": True, "position": 1,
         "value": {"kind": "reduce_scatter", "group": None, "bytes": None, "dtype": "f32"},
         "majority_value": {"kind": "reduce_scatter", "group": "0", "bytes": 298144, "dtype": "f32"},
         "length": 2, "majority_length": 2}]


# --- the parsers ---------------------------------------------------------------------------------


def test_collective_op_names():
    assert collective_op("torch.ops._c10d_functional.all_gather_into_tensor_out.default") == ("all_gather", AG)
    assert collective_op("_c10d_functional.reduce_scatter_tensor.default") == ("reduce_scatter", RS)
    assert collective_op("torch.ops._c10d_functional.all_reduce_.default") == ("all_reduce", "all_reduce_")
    assert collective_op("torch.ops._c10d_functional.all_to_all_single.default") == (
        "all_to_all_single", "all_to_all_single")
    assert collective_op("torch.ops._c10d_functional.wait_tensor.default") is None
    assert collective_op(None) == ("unknown", "unknown")


def test_parse_estimation_with_benchmarks_and_unknown_sizes():
    text = ("# World size: 8\n"
            "Collective Key,Benchmarked(ms),NCCL Est(ms),Inductor Est(ms),NCCL Diff(ratio),Inductor Diff(ratio)\n"
            "_c10d_functional.all_gather_into_tensor.default group_size:8 group_name:1 input_bytes:None,0.5,0.0120,0.0130,0.02,0.03")
    est = parse_estimation(text)
    assert est.world_size == 8
    assert est.collectives == [ScheduledCollective("all_gather", "all_gather_into_tensor", "1", 8, None, 0.012)]


def test_first_difference_and_count_kinds():
    assert first_difference([1, 2], [1, 2]) is None
    assert first_difference([1, 2], [1, 3]) == 1
    assert first_difference([1], [1, 2]) == 1
    colls = [ScheduledCollective("all_gather", AG), ScheduledCollective("all_to_all_single", "all_to_all_single")]
    assert FinalSchedule.count_kinds(colls) == {"all_gather": 1, "reduce_scatter": 0, "all_reduce": 0, "other": 1}


def test_positions_continue_across_files_of_one_rank(tmp_path):
    d = copy_run(tmp_path)
    src = rank_file(d, 0)
    ls = src.read_text(encoding="utf-8").split("\n")
    cut = spans(ls, '"name": "before_post_grad_graph"')[1][0]  # the backward starts here
    src.write_text("\n".join(ls[:cut]) + "\n", encoding="utf-8")
    (d / "dedicated_log_torch_trace_rank_0_zz_second.log").write_text("\n".join(ls[cut:]), encoding="utf-8")
    run = load(d, jobs=1)
    assert len(run.rank(0).files) == 2
    assert [(g.graph_index, g.final.position) for g in run.rank(0).graphs] == [(0, 0), (1, 1)]
    assert schedule_divergence(run) == []


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(
    ["0", "7", ",", ":", "#", " ", "\n", "_", ".", "\u00b2", "\u0663", "None", "group_size:",
     "group_name:", "input_bytes:", "# World size: ", "_c10d_functional.all_gather_into_tensor.default",
     "Collective Key,NCCL Est(ms),Inductor Est(ms)\n", "9" * 5000, "nan", "1e999"]), max_size=30).map("".join))
def test_estimation_parser_never_raises_anything_but_artifact_error(text):
    for payload in (text, "Collective Key,NCCL Est(ms),Inductor Est(ms)\n" + text):
        try:
            est = parse_estimation(payload)
        except ArtifactError:
            continue
        assert all(c.bytes is None or 0 <= c.bytes < 10**19 for c in est.collectives)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=40),
                    lambda inner: st.lists(inner, max_size=4), max_leaves=10))
def test_schedule_parser_never_raises_anything_but_artifact_error(value):
    try:
        ops = ScheduleParser().parse(json.dumps(value), {})
    except ArtifactError:
        return
    assert all(isinstance(kind, str) and isinstance(op, str) for kind, op in ops)
