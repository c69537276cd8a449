"""Replay on the real fixture logs: every recorded outcome is rebuilt and reproduced at its
recorded cap, other caps give what torch's own pass gives on the same graph, and a log with a
hostile graph text is refused for that graph (nothing run) while the others still replay."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import FIXTURE_LOGS
from tracekit.cli import main
from tracekit.read.reader import graph_sources
from tracekit.replay import comm_estimate as ce
from tracekit.replay.engine import replay_source
from tracekit.replay.results import CapRequest, ReplayOptions
from tracekit.replay.graph_text import parse_graph_text

#: (scenario, rank) -> {graph label: (recorded cap, AG before->after, RS before->after)}
EXPECTED = {
    ("spmd_auto", 0): {"0/0:0": (27.4, (8, 1), (0, 0)), "0/0:1": (27.4, (5, 1), (8, 1))},
    ("spmd_auto_gz", 2): {"0/0:0": (27.4, (8, 1), (0, 0)), "0/0:1": (27.4, (5, 1), (8, 1))},
    ("spmd_small_cap", 0): {"0/0:0": (0.1, (8, 5), (0, 0)), "0/0:1": (0.1, (5, 4), (8, 5))},
    ("diverge_rank", 3): {"0/0:0": (27.4, (10, 1), (0, 0)), "0/0:1": (27.4, (7, 1), (10, 1))},
    ("tracekit_pass", 1): {"0/0:0": (27.4, (8, 1), (0, 0)), "0/0:1": (27.4, (5, 1), (8, 1))},
}


def _sources(scenario: str, rank: int | None = None):
    return [s for s in graph_sources([FIXTURE_LOGS / scenario]) if rank is None or s.rank == rank]


def _counts(c: dict, t: str) -> tuple[int, int]:
    return c[t]["before"], c[t]["after"]


@pytest.mark.parametrize("scenario,rank", sorted(EXPECTED))
def test_fixture_graphs_are_rebuilt_and_reproduced(scenario, rank):
    sources = _sources(scenario, rank)
    got = {}
    for src in sources:
        r = replay_source(src, ReplayOptions())
        assert r.error is None and r.reproduced, (r.error, r.mismatches)
        rec = r.reproduction
        got[r.label] = (
            rec.bucket_cap_mb,
            _counts(rec.collectives, "all_gather"),
            _counts(rec.collectives, "reduce_scatter"),
        )
        artifact = "tracekit_fsdp_input_graph" if scenario == "tracekit_pass" else "before_post_grad_graph"
        assert r.text_artifact == artifact
    assert got == EXPECTED[(scenario, rank)]


def test_every_rank_of_every_scenario_reproduces():
    n = 0
    for scenario in ("spmd_auto", "spmd_small_cap", "diverge_rank", "tracekit_pass"):
        for src in _sources(scenario):
            r = replay_source(src, ReplayOptions())
            assert r.reproduced, (scenario, src.rank, r.label, r.error, r.mismatches)
            n += 1
    assert n == 32  # 4 scenarios x 4 ranks x (forward, backward)


def test_alternate_caps_match_torch_pass_on_the_same_graph():
    from torch._inductor.fx_passes import fsdp as torch_fsdp

    from bucketing import register_fake_process_groups
    from bucketing.plan import collective_sizes, count_kinds

    torch_fsdp.logger.setLevel(logging.WARNING)
    register_fake_process_groups(["0"], 4)
    caps = [0.005, 0.02, 0.05, 0.1, 0.3]
    src = _sources("spmd_auto", 0)[1]  # the backward: AG and RS
    r = replay_source(src, ReplayOptions(caps=[CapRequest(c) for c in caps]))
    ours = [{k: v["after"] for k, v in rp.collectives.items()} for rp in r.replays]
    theirs = []
    for cap in caps:
        gm = parse_graph_text(src.text)
        torch_fsdp.pre_bucket_fsdp_collectives(gm, bucket_cap_mb=cap)
        after = count_kinds(collective_sizes(gm.graph, ["0"]))
        theirs.append({"all_gather": after["AG"], "reduce_scatter": after["RS"], "all_reduce": after["AR"]})
    assert ours == theirs
    assert [o["all_gather"] for o in ours] == [5, 4, 4, 4, 1]
    assert [o["reduce_scatter"] for o in ours] == [8, 5, 5, 5, 1]


def test_apply_rewrites_and_lints_with_plan_counts():
    src = _sources("spmd_small_cap", 0)[0]
    r = replay_source(src, ReplayOptions(caps=[CapRequest(0.05), CapRequest(1.0)], apply=True))
    assert [rp.applied["ok"] for rp in r.replays] == [True, True]
    assert [rp.applied["matches_plan"] for rp in r.replays] == [True, True]
    assert [rp.applied["collectives"]["all_gather"]["after"] for rp in r.replays] == [5, 1]
    assert r.replays[1].bucket_sizes_mb["AG"] == [0.284]
    assert r.replays[1].largest_bucket_mb == 0.284


def test_auto_cap_on_what_if_hardware():
    # torch's saturation model: NVLink H100, 8 ranks -> 0.9/0.1 * (10 + 7*40) us * 36 GB/s bytes.
    cap = ce.auto_cap(8, ce.Hardware(interconnect="NVLINK_H100"))
    assert cap.source == "saturation" and cap.cap_mb == pytest.approx(9 * 290e-6 * 36e9 / 2**20)
    # IB NDR floors saturation at 100 MB.
    cap = ce.auto_cap(16, ce.Hardware(interconnect="IB_NDR", gpus_per_node=8))
    assert (cap.cap_mb, cap.source) == (100.0, "saturation")
    # The machine's own detection is restored afterwards (CPU: NVLink A100 profile, 27.38 MB).
    assert round(ce.auto_cap(4, ce.Hardware()).cap_mb, 2) == 27.38
    import torch

    assert not torch.cuda.is_available()
    assert ce.interconnect_name("ib-ndr") == "IB_NDR"
    with pytest.raises(ValueError):
        ce.interconnect_name("token-ring")


def test_comm_estimate_falls_with_fewer_larger_buckets():
    src = _sources("spmd_small_cap", 0)[1]
    r = replay_source(src, ReplayOptions(caps=[CapRequest(0.005), CapRequest(1.0)]))
    small, large = r.replays
    assert large.estimated_comm_ms < r.recorded_comm_ms < small.estimated_comm_ms
    assert large.comm_ms_vs_recorded == pytest.approx(large.estimated_comm_ms - r.recorded_comm_ms)
    far = replay_source(src, ReplayOptions(caps=[CapRequest(1.0)], hardware=ce.Hardware(
        interconnect="IB_HDR", group_size=512, gpus_per_node=8)))
    assert far.replays[0].estimated_comm_ms > 10 * large.estimated_comm_ms


# --- the command -----------------------------------------------------------------------------


def _run(*args: str):
    return CliRunner().invoke(main, ["replay", *args], catch_exceptions=False)


def test_cli_json_document():
    res = _run(str(FIXTURE_LOGS / "spmd_auto"), "--cap-mb", "0.01,0.05", "--cap-mb", "64", "--cap", "auto",
               "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["schema"] == "tracekit.replay/3"
    assert doc["caps"] == ["0.01", "0.05", "64", "auto"]
    assert [(g["rank"], g["ranks"], g["compile_id"], g["graph_index"]) for g in doc["graphs"]] == [
        (0, "0", "0/0", 0), (0, "0", "0/0", 1)]
    g = doc["graphs"][1]
    assert g["reproduced"] is True
    assert g["recorded"]["bucket_cap_mb"] == 27.4
    assert g["recorded"]["collectives"]["reduce_scatter"] == {"before": 8, "after": 1}
    reps = g["replays"]
    assert [r["cap_source"] for r in reps] == ["override", "override", "override", "saturation"]
    assert [r["collectives"]["all_gather"]["after"] for r in reps] == [5, 4, 1, 1]
    assert reps[3]["bucket_cap_mb"] == pytest.approx(27.38, abs=0.005)
    assert set(reps[0]) >= {"bucket_cap_mb", "cap_source", "collectives", "bucket_sizes_mb", "estimated_comm_ms"}
    assert {k: doc["totals"][k] for k in ("graphs", "outcomes", "rebuilt", "reproduced", "not_reproduced",
                                          "failed")} == {"graphs": 2, "outcomes": 2, "rebuilt": 2, "reproduced": 2,
                                                         "not_reproduced": 0, "failed": 0}


def test_cli_rank_and_graph_selection():
    res = _run(str(FIXTURE_LOGS / "diverge_rank"), "--rank", "3", "--graph", "0/0:1", "--format", "json")
    doc = json.loads(res.output)
    assert [(g["rank"], g["graph_index"]) for g in doc["graphs"]] == [(3, 1)]
    assert doc["graphs"][0]["recorded"]["collectives"]["all_gather"] == {"before": 7, "after": 1}
    res = _run(str(FIXTURE_LOGS / "spmd_small_cap"), "--all-ranks", "--graph", "0/0:0", "--format", "json")
    # the four ranks logged the same graph and outcome: one replay stands for them all
    assert [(g["rank"], g["ranks"]) for g in json.loads(res.output)["graphs"]] == [(0, "0-3")]
    res = _run(str(FIXTURE_LOGS / "spmd_auto"), "--rank", "1", "--all-ranks")
    assert res.exit_code == 2


def test_cli_table_and_plot(tmp_path):
    import importlib.util

    png = tmp_path / "replay.png"
    res = _run(str(FIXTURE_LOGS / "spmd_small_cap"), "--cap-mb", "0.01,1", "--plot", str(png))
    assert "Other caps" in res.output and "2 graphs: 2 rebuilt, 2 reproduced" in res.output
    md = _run(str(FIXTURE_LOGS / "spmd_small_cap"), "--cap-mb", "0.01", "--format", "markdown").output
    assert md.startswith("## Recorded outcomes") and "## Other caps" in md
    assert "| 0       | 0/0:0   | 0.01     | override   | 8->8 |" in md
    if importlib.util.find_spec("matplotlib") is None:  # the optional extra is missing
        assert res.exit_code == 2 and "pip install 'tracekit[plot]'" in res.output
        return
    assert res.exit_code == 0, res.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _replace_graph_text(log: Path, out: Path, n: int, text: str) -> None:
    """Copy ``log`` with the ``n``-th before_post_grad_graph payload replaced (MD5 fixed)."""
    lines = log.read_text(encoding="utf-8").split("\n")
    seen, i, result = 0, 0, []
    while i < len(lines):
        line = lines[i]
        if '"name": "before_post_grad_graph"' in line:
            if seen == n:
                md5 = hashlib.md5(text.encode()).hexdigest()
                result.append(re.sub(r'"has_payload": "[0-9a-f]+"', f'"has_payload": "{md5}"', line))
                result += ["\t" + t for t in text.split("\n")]
                i += 1
                while i < len(lines) and lines[i].startswith("\t"):
                    i += 1
                seen += 1
                continue
            seen += 1
        result.append(line)
        i += 1
    out.write_text("\n".join(result), encoding="utf-8")


def test_hostile_graph_in_a_log_is_refused_and_others_replay(tmp_path):
    marker = tmp_path / "pwned"
    log = next((FIXTURE_LOGS / "spmd_auto").glob("*rank_0_*.log"))
    original = _sources("spmd_auto", 0)[0].text
    hostile = original.replace(
        "        return (",
        f"        x = __import__('os').system('touch {marker}')\n        return (",
    )
    bad_dir = tmp_path / "run"
    bad_dir.mkdir()
    _replace_graph_text(log, bad_dir / log.name, 0, hostile)
    res = _run(str(bad_dir), "--cap-mb", "1", "--format", "json")
    assert res.exit_code == 1
    doc = json.loads(res.output)
    fwd, bwd = doc["graphs"]
    assert fwd["reproduced"] is None and "__import__" in fwd["error"]
    line = original.split("\n").index(next(ln for ln in original.split("\n") if ln.startswith("        return (")))
    assert f"line {line + 1}:" in fwd["error"]
    assert bwd["error"] is None and bwd["reproduced"] is True
    assert doc["totals"]["failed"] == 1 and doc["totals"]["reproduced"] == 1
    assert not marker.exists()
    table = _run(str(bad_dir)).output
    assert "not rebuilt" in table and "yes" in table


def test_symbolic_graph_needs_sym_and_replays_with_it(tmp_path):
    from torch.fx.experimental.proxy_tensor import make_fx

    from test_replay_graph_text import _fsdp_like, _inputs, _printed

    symbolic = _printed(make_fx(_fsdp_like, tracing_mode="symbolic")(*_inputs()))
    log = next((FIXTURE_LOGS / "spmd_auto").glob("*rank_0_*.log"))
    run = tmp_path / "run"
    run.mkdir()
    _replace_graph_text(log, run / log.name, 0, symbolic)
    doc = json.loads(_run(str(run), "--graph", "0/0:0", "--format", "json").output)
    assert "s67" in doc["graphs"][0]["error"] and "--sym" in doc["graphs"][0]["error"]
    res = _run(str(run), "--graph", "0/0:0", "--sym", "s67=128", "--format", "json")
    g = json.loads(res.output)["graphs"][0]
    # The graph was rebuilt; it is not the graph the outcome came from, and replay says so.
    assert g["error"] is None and g["reproduced"] is False
    assert g["mismatches"][0] == "all_gather: recorded 8->1, replayed 2->1"
    assert res.exit_code == 1


def test_outcome_without_graph_text_is_reported():
    from tracekit.read.reader import GraphSource

    real = _sources("spmd_auto", 0)[0]
    src = GraphSource(real.rank, real.compile_id, real.graph_index, real.graph, None, None)
    r = replay_source(src, ReplayOptions(caps=[CapRequest(1.0)]))
    assert r.reproduced is None and r.replays == []
    assert r.error.startswith("no graph text logged for this outcome")


def test_symbol_hints_from_the_source_are_used():
    from torch.fx.experimental.proxy_tensor import make_fx

    from test_replay_graph_text import _fsdp_like, _inputs, _printed
    from tracekit.read.reader import GraphSource

    real = _sources("spmd_auto", 0)[0]
    text = _printed(make_fx(_fsdp_like, tracing_mode="symbolic")(*_inputs()))
    src = GraphSource(real.rank, real.compile_id, real.graph_index, real.graph, text, "before_post_grad_graph")
    src.symbol_hints = {"s67": 128}  # what a create_symbol entry records
    r = replay_source(src, ReplayOptions())
    assert r.error is None and r.symbols == {"s67": 128}
    r = replay_source(src, ReplayOptions(symbols={"s67": 4096}))  # --sym wins over the hint
    assert r.symbols == {"s67": 4096}


def test_cli_what_if_hardware_auto_cap():
    res = _run(str(FIXTURE_LOGS / "spmd_auto"), "--cap", "auto", "--interconnect", "ib-ndr",
               "--group-size", "512", "--gpus-per-node", "8", "--format", "json")
    doc = json.loads(res.output)
    assert doc["hardware"] == {"interconnect": "IB_NDR", "group_size": 512, "gpus_per_node": 8}
    rep = doc["graphs"][0]["replays"][0]
    # 0.9/0.1 * (30 + 511*12) us * 22 GB/s = 1.2 GB: above the 500 MB ceiling.
    assert (rep["bucket_cap_mb"], rep["cap_source"]) == (500.0, "ceiling")
    assert rep["hardware"] == {"interconnect": "IB_NDR", "group_size": 512, "n_nodes": 64}
    assert doc["graphs"][0]["reproduction"]["hardware"] == {"interconnect": "NVLINK_A100", "group_size": 4, "n_nodes": 1}
    bad = _run(str(FIXTURE_LOGS / "spmd_auto"), "--interconnect", "token-ring")
    assert bad.exit_code == 2 and "token-ring" in bad.output


def test_all_ranks_rebuild_each_distinct_graph_once():
    from tracekit.replay.engine import replay_source as one

    rebuilt: dict = {}
    results = [one(s, ReplayOptions(), rebuilt) for s in _sources("spmd_auto")]
    assert len(results) == 8 and all(r.reproduced for r in results)
    assert len(rebuilt) == 2  # forward and backward texts are the same on every rank
    assert sorted({r.rank for r in results}) == [0, 1, 2, 3]


def test_cli_says_so_when_there_is_nothing_to_replay(tmp_path):
    empty = _run(str(tmp_path), "--format", "json")  # no log at all: unreadable input
    assert empty.exit_code == 2 and "no log could be read" in empty.output
    src = next((FIXTURE_LOGS / "spmd_auto").glob("*rank_0_*.log")).read_text(encoding="utf-8")
    head = src[: src.index('"name": "before_post_grad_graph"')]
    head = head[: head.rindex("\nV") + 1]  # whole entries before any graph: read, no outcome
    (tmp_path / "dedicated_log_torch_trace_rank_0_x.log").write_text(head, encoding="utf-8")
    res = _run(str(tmp_path), "--format", "json")
    assert res.exit_code == 0  # nothing to replay is no finding
    doc = json.loads(res.stdout)
    assert doc["graphs"] == [] and doc["diagnostics"]["counts"] == {}
    # the cause summarize knows (a compile that never reached the post-grad passes), not a cache
    assert doc["notes"][0].startswith("no bucketing recorded: 1 compile was logged, but no graph reached")
    assert res.stderr == ""  # no error: the notes say why, as summarize's NO DATA does (exit 0 too)
    text = _run(str(tmp_path)).stdout
    assert text.startswith("Nothing to replay: no recorded bucketing outcome\n")
    assert "note: no bucketing recorded: 1 compile was logged" in text and "ranks    graph" not in text


def test_recorded_sizes_are_checked_too():
    import copy

    from tracekit.read.reader import GraphSource

    real = _sources("spmd_small_cap", 0)[0]
    assert real.graph.sizes_mb is not None  # the fixtures log the verbose sizes
    g = copy.deepcopy(real.graph)
    g.sizes_mb.before[1].size_mb = 0.5
    g.sizes_mb.after[0].size_mb = 0.126
    r = replay_source(GraphSource(real.rank, real.compile_id, real.graph_index, g, real.text, real.text_artifact),
                      ReplayOptions())
    assert r.reproduced is False
    assert r.mismatches == [
        "sizes before: collective #2: recorded ('AG', 0.5, 'all_gather_into_tensor_1'), "
        "rebuilt graph ('AG', 0.001, 'all_gather_into_tensor_1')",
        "sizes after (AG, MB): recorded [0.001, 0.017, 0.017, 0.125, 0.126], "
        "replayed [0.001, 0.017, 0.017, 0.125, 0.125]",
    ]


def test_cuda_graph_texts_replay_on_a_cpu_machine():
    """Logs of GPU jobs annotate cuda:N devices; fake tensors carry them without CUDA."""
    from tracekit.read.reader import GraphSource

    real = _sources("spmd_small_cap", 0)[1]
    text = real.text.replace(']cpu"', ']cuda:0"').replace("device(type='cpu')", "device(type='cuda', index=0)")
    assert text.count('cuda:0"') > 100
    src = GraphSource(real.rank, real.compile_id, real.graph_index, real.graph, text, real.text_artifact)
    r = replay_source(src, ReplayOptions(caps=[CapRequest(1.0)], apply=True))
    assert r.reproduced is True
    assert r.replays[0].applied["ok"] and r.replays[0].applied["matches_plan"]
    assert r.replays[0].collectives["reduce_scatter"] == {"before": 8, "after": 1}


def test_symbol_hints_are_read_from_create_symbol_entries(tmp_path):
    """Dynamo's create_symbol entry (format of a real dynamic-shape log, torch 2.13) gives the hint."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from test_replay_graph_text import _fsdp_like, _inputs, _printed

    symbolic = _printed(make_fx(_fsdp_like, tracing_mode="symbolic")(*_inputs()))
    log = next((FIXTURE_LOGS / "spmd_auto").glob("*rank_0_*.log"))
    run = tmp_path / "run"
    run.mkdir()
    _replace_graph_text(log, run / log.name, 0, symbolic)
    lines = (run / log.name).read_text(encoding="utf-8").split("\n")
    at = next(i for i, ln in enumerate(lines) if '"name": "before_post_grad_graph"' in ln)
    lines.insert(at, 'V1202 14:33:40.100000 5389 torch/fx/experimental/symbolic_shapes.py:5137] '
                     '{"create_symbol": {"symbol": "s67", "val": "128", "vr": "[2, int_oo]", '
                     '"source": "L[\'g\'].size()[0]"}, "rank": 0, "frame_id": 0, "frame_compile_id": 0, "attempt": 0}')
    (run / log.name).write_text("\n".join(lines), encoding="utf-8")
    g = json.loads(_run(str(run), "--graph", "0/0:0", "--format", "json").output)["graphs"][0]
    assert g["error"] is None and g["symbols"] == {"s67": 128}
    g = json.loads(_run(str(run), "--graph", "0/0:0", "--sym", "s67=4096", "--format", "json").output)["graphs"][0]
    assert g["symbols"] == {"s67": 4096}
    # The backward (same compile id, a static text) needs no hint and still reproduces.
    g = json.loads(_run(str(run), "--graph", "0/0:1", "--format", "json").output)["graphs"][0]
    assert g["reproduced"] is True and g["symbols"] == {}


def test_python_api():
    import sys

    import tracekit.replay

    run = tracekit.replay.replay(FIXTURE_LOGS / "spmd_small_cap", cap_mb=[0.05], auto=True, graphs=["0/0:1"])
    assert [(g.rank, g.label, g.reproduced) for g in run.graphs] == [(0, "0/0:1", True)]
    assert [r.cap_source for r in run.graphs[0].replays] == ["override", "saturation"]
    doc = run.to_dict()
    assert doc["schema"] == "tracekit.replay/3" and doc["caps"] == ["0.05", "auto"]
    assert "torch" in sys.modules  # replay is the one part of tracekit that uses torch
