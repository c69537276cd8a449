"""The committed fixture logs hold what the rest of the project relies on (exact values).

Read with the generator's own small checker (``fixtures/generate.py: check_logs``, which does not
import torch) so that the fixtures are checked independently of ``tracekit``'s reader.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import sys

import pytest

from conftest import FIXTURE_LOGS, ROOT

_spec = importlib.util.spec_from_file_location("fixtures_generate", ROOT / "fixtures" / "generate.py")
generate = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = generate  # dataclasses look their module up there
_spec.loader.exec_module(generate)

LINE = "fsdp_groups=['0'], group_size=4, nNodes=1, bucket_cap_mb={cap}, all_gather {ag}, reduce_scatter {rs}, all_reduce 0->0"
AUTO = [LINE.format(cap=27.4, ag="8->1", rs="0->0"), LINE.format(cap=27.4, ag="5->1", rs="8->1")]
SMALL = [LINE.format(cap=0.1, ag="8->5", rs="0->0"), LINE.format(cap=0.1, ag="5->4", rs="8->5")]
EXTRA = [LINE.format(cap=27.4, ag="10->1", rs="0->0"), LINE.format(cap=27.4, ag="7->1", rs="10->1")]

#: scenario -> the (forward, backward) pre_bucketing_fsdp_collectives lines of ranks 0..3
EXPECTED = {
    "spmd_auto": [AUTO] * 4,
    "spmd_small_cap": [SMALL] * 4,
    "diverge_rank": [AUTO, AUTO, AUTO, EXTRA],
    "tracekit_pass": [AUTO] * 4,
    "spmd_auto_gz": [AUTO] * 4,
    "saved_params": [AUTO[:1]] * 4,  # the backward is never pre-bucketed: no line
    # 2 ranks, 6 layers (tests/replay/test_replay_overlap.py)
    "overlap_cap_a": [[f"fsdp_groups=['0'], group_size=2, nNodes=1, bucket_cap_mb=1.5, {c}" for c in (
        "all_gather 6->6, reduce_scatter 0->0, all_reduce 0->0",
        "all_gather 5->5, reduce_scatter 6->6, all_reduce 0->0")]] * 2,
    "overlap_cap_b": [[f"fsdp_groups=['0'], group_size=2, nNodes=1, bucket_cap_mb=64.0, {c}" for c in (
        "all_gather 6->1, reduce_scatter 0->0, all_reduce 0->0",
        "all_gather 5->1, reduce_scatter 6->1, all_reduce 0->0")]] * 2,
    # FSDP2: its collectives run in eager code, no graph is pre-bucketed (check_logs: no pre_bucketing_*
    # artifact at all, and a dynamo_graph_break_reason)
    "fsdp2": [[]] * 2,
    # FSDP2, each block compiled on its own: no graph break, the guards name FSDPBlock
    "fsdp2_per_block": [[]] * 2,
    # a forward only, no all-gather: never pre-bucketed (check_logs: one before_post_grad_graph)
    "nested_waits": [[]] * 4,
    "nested_waits_torch2.15": [[]] * 4,
}
#: 2-D meshes (issue 37): each rank's FSDP group is its shard group, of 2 ranks.
MESH = "fsdp_groups=['{g}'], group_size=2, nNodes=1, bucket_cap_mb=10.4, all_gather {ag}, reduce_scatter {rs}, all_reduce 0->0"


def _mesh(groups, fwd_ag, bwd_ag, rs):
    return [[MESH.format(g=g, ag=fwd_ag, rs="0->0"), MESH.format(g=g, ag=bwd_ag, rs=rs)] for g in groups]


EXPECTED.update({f"overlap_cap_a_torch{r}": EXPECTED["overlap_cap_a"] for r in ("2.14", "2.15")})  # issue 38
EXPECTED.update(
    hsdp=_mesh("3344", "8->1", "5->1", "8->1"),
    fsdp_tp=_mesh("1212", "10->1", "7->1", "10->1"),  # 8 + the TP MLP's two weights
    hsdp_diverge=_mesh("334", "8->1", "5->1", "8->1") + _mesh("4", "10->1", "7->1", "10->1"),
    hsdp_overlap=_mesh("3344", "6->1", "5->1", "6->1"),  # OVERLAP_LAYERS: 6 layers
    hsdp_stock=_mesh("3344", "6->1", "5->1", "6->1"),  # hsdp_overlap timed by torch alone
    fsdp_tp_overlap=_mesh("1212", "8->1", "7->1", "8->1"),  # 6 + the TP MLP's two weights
    fsdp_tp2_overlap=_mesh("1212", "10->1", "9->1", "10->1"),  # 6 + two TP MLPs' two weights each
)
_RANK_RE = re.compile(r"dedicated_log_torch_trace_rank_(\d+)_")


def test_every_scenario_has_a_directory():
    assert sorted(p.name for p in FIXTURE_LOGS.iterdir() if p.is_dir()) == sorted(generate.SCENARIOS)


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_pre_bucketing_lines_per_rank_and_graph(scenario):
    # check_logs also fails on a missing before_post_grad_graph / pre_bucketing_* artifact (fewer
    # than two: forward and backward), an fx_graph_cache_hit, or a payload MD5 mismatch.
    made = generate.SCENARIOS[scenario]
    lines = generate.check_logs(FIXTURE_LOGS / scenario, made.prebucketed_graphs, made.graphs)
    by_rank = {int(_RANK_RE.match(name).group(1)): texts for name, texts in lines.items()}
    assert [by_rank[r] for r in sorted(by_rank)] == EXPECTED[scenario]


def test_small_cap_splits_and_auto_merges():
    def counts(text, kind):
        before, after = re.search(kind + r" (\d+)->(\d+)", text).groups()
        return int(before), int(after)

    fwd, bwd = EXPECTED["spmd_auto"][0]
    assert counts(fwd, "all_gather") == (8, 1) and counts(bwd, "reduce_scatter") == (8, 1)
    fwd, bwd = EXPECTED["spmd_small_cap"][0]
    assert all(counts(t, k)[1] > 1 for t, k in [(fwd, "all_gather"), (bwd, "all_gather"), (bwd, "reduce_scatter")])


def test_gz_scenario_is_spmd_auto_gzipped():
    plain = sorted((FIXTURE_LOGS / "spmd_auto").glob("*.log"))
    gz = sorted((FIXTURE_LOGS / "spmd_auto_gz").glob("*.log.gz"))
    assert [p.name + ".gz" for p in plain] == [p.name for p in gz]
    for p, g in zip(plain, gz):
        assert gzip.decompress(g.read_bytes()) == p.read_bytes()


def test_tracekit_pass_logs_our_own_artifact():
    for log in sorted((FIXTURE_LOGS / "tracekit_pass").glob("*.log")):
        names = [n for n, _ in generate._artifacts(log)]
        assert names.count("tracekit_fsdp_buckets") == 2, log
    for log in sorted((FIXTURE_LOGS / "spmd_auto").glob("*.log")):
        assert "tracekit_fsdp_buckets" not in [n for n, _ in generate._artifacts(log)]


def test_before_sizes_of_spmd_auto_rank0_forward():
    log = sorted((FIXTURE_LOGS / "spmd_auto").glob("*rank_0_*.log"))[0]
    sizes = [t for n, t in generate._artifacts(log) if n == "pre_bucketing_collective_sizes"][0]
    assert [s["size_mb"] for s in json.loads(sizes)] == [0.016, 0.001, 0.125, 0.001, 0.125, 0.001, 0.016, 0.0]


def test_generator_help_lists_every_scenario():
    import subprocess

    out = subprocess.run([sys.executable, str(ROOT / "fixtures" / "generate.py"), "--help"],
                         check=True, capture_output=True, text=True).stdout
    assert "--scenario NAME" in out and "--out OUT" in out
    assert all(name in out for name in generate.SCENARIOS)


def test_saved_params_backward_reduce_scatters_and_is_never_pre_bucketed():
    for log in sorted((FIXTURE_LOGS / "saved_params").glob("*.log.gz")):
        arts = generate._artifacts(log)
        names = [n for n, _ in arts]
        assert names.count("before_post_grad_graph") == 2 and names.count("pre_bucketing_fsdp_collectives") == 1
        # the backward's graph text follows the forward's only outcome: no pre_bucketing_* after it
        backward_at = [i for i, n in enumerate(names) if n == "before_post_grad_graph"][1]
        assert not any(n.startswith("pre_bucketing") for n in names[backward_at:])
        schedules = [json.loads(t) for n, t in arts if n == "inductor_collective_schedule"]
        assert [len(s) for s in schedules] == [2, 16]
        assert schedules[1].count("torch.ops._c10d_functional.reduce_scatter_tensor.default") == 8
        estimation = [t for n, t in arts if n == "fx_collectives_analytical_estimation"][1].splitlines()[2:]
        assert [int(line.split("input_bytes:")[1].split(",")[0]) for line in estimation] == [
            144, 16384, 1024, 131072, 1040, 131072, 1024, 16384]
        assert round(sum(float(line.split(",")[1]) for line in estimation), 4) == 0.0704


def test_the_gzipped_scenarios_hold_gzipped_logs_and_fixtures_stay_under_21_mb():
    """The scenarios of generate.GZIPPED hold ``.log.gz`` logs only, the others plain ``.log``
    logs only (spmd_auto_gz: its gzip copy); fixtures/ stays under 21 MB (20 MB until the
    torchtitan run, fixtures/torchtitan_hsdp, was added)."""
    for d in sorted(p for p in FIXTURE_LOGS.iterdir() if p.is_dir()):
        names = [p.name for p in d.iterdir() if p.name.startswith("dedicated_log_torch_trace")]
        gzipped = d.name in generate.GZIPPED or d.name == "spmd_auto_gz"
        assert names and all(n.endswith(".log.gz" if gzipped else ".log") for n in names), d.name
    assert sum(p.stat().st_size for p in (ROOT / "fixtures").rglob("*") if p.is_file()) < 21_000_000
