"""``tracekit explain`` and ``replay --bucket-mode`` on a bf16/f32 run.

The fixture logs are all f32, so the log here is made at test time: the graph is the
alternating bf16/f32 FSDP graph of ``bucketing_support`` (traced with make_fx on torch's
fake process group), logged as ``before_post_grad_graph`` text, followed by the artifacts that
torch's own ``pre_bucket_fsdp_collectives`` wrote for it (captured from ``trace_structured``),
in the TORCH_TRACE line format.
"""

from __future__ import annotations

import hashlib
import json

import pytest
import torch._inductor.config as inductor_config
from click.testing import CliRunner
from torch._inductor.fx_passes import fsdp as torch_fsdp

from bucketing_support import captured_artifacts, trace
from tracekit.cli import main

CAP_MB = 100
SIZES = [0.125, 1.0, 2.0, 16.0, 0.125, 12.0]
DTYPES = ["bf16", "f32"] * 3
NAMES = ["all_gather_into_tensor"] + [f"all_gather_into_tensor_{i}" for i in range(1, 6)]


def _torch_artifacts(bucket_mode: str | None) -> list[tuple[str, str]]:
    gm, _ = trace("mixed_alternating")
    patch = {"aten_distributed_optimizations.pre_bucketing_fsdp_collectives_verbose": True}
    if bucket_mode:
        patch["aten_distributed_optimizations.bucket_mode"] = bucket_mode
    with inductor_config.patch(patch), captured_artifacts() as records:
        torch_fsdp.pre_bucket_fsdp_collectives(gm, bucket_cap_mb=CAP_MB)
    return records


def _envelope(name: str, payload: str) -> list[str]:
    env = {"artifact": {"name": name, "encoding": "string"}, "rank": 0, "frame_id": 0,
           "frame_compile_id": 0, "attempt": 0, "has_payload": hashlib.md5(payload.encode()).hexdigest()}
    return [f"V1202 15:15:54.453000 13271 torch/_inductor/compile_fx.py:1366] {json.dumps(env)}",
            *("\t" + line for line in payload.split("\n"))]


@pytest.fixture(scope="module")
def mixed_log(tmp_path_factory) -> str:
    gm, _ = trace("mixed_alternating")
    text = gm.print_readable(print_output=False, include_stride=True, include_device=True)
    lines = _envelope("before_post_grad_graph", text)
    for name, payload in _torch_artifacts(None):
        lines += _envelope(name, payload)
    path = tmp_path_factory.mktemp("mixed") / "dedicated_log_torch_trace_rank_0_mixed.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def _json(args: list[str]) -> tuple[int, dict]:
    result = CliRunner().invoke(main, args)
    return result.exit_code, (json.loads(result.output) if result.output.startswith("{") else result.output)


def test_the_log_holds_torchs_outcome(mixed_log) -> None:
    with open(mixed_log, encoding="utf-8") as f:
        text = f.read()
    assert "bucket_cap_mb=100.0, all_gather 6->6, reduce_scatter 0->0, all_reduce 0->0" in text


def test_explain_says_dtype_break_with_a_verified_bucket_mode_what_if(mixed_log) -> None:
    code, doc = _json(["explain", mixed_log, "--format", "json"])
    assert code == 0
    assert doc["schema"] == "tracekit.explain/1"
    (g,) = doc["graphs"]
    assert (g["rank"], g["compile_id"], g["graph_index"], g["cap_mb"]) == (0, "0/0", 0, 100.0)
    assert g["reproduced"] is True and g["buckets_checked"] == "members" and g["mismatches"] == []
    assert g["bucket_mode"] == "default" and g["buckets"] == {"AG": [], "RS": [], "AR": []}
    cs = g["collectives"]
    assert [c["name"] for c in cs] == NAMES
    assert [c["size_mb"] for c in cs] == SIZES
    assert [c["dtype"] for c in cs] == DTYPES
    assert {c["kind"] for c in cs} == {"AG"} and {c["bucket"] for c in cs} == {None}
    assert [c["reason"] for c in cs] == ["dtype_break"] * 6
    assert [c["what_if"]["bucket_mode"] for c in cs] == ["custom_ops_multidtype"] * 6
    assert all(c["what_if"]["verified"] for c in cs)
    assert cs[0]["detail"] == (
        "the next candidate, all_gather_into_tensor_1, has dtype f32 (this: bf16): only adjacent "
        "candidates with one key bucket, and bucket mode 'default' keys all-gathers by (group, dtype)")
    assert cs[2]["detail"].startswith(
        "the previous candidate, all_gather_into_tensor_1, has dtype f32 (this: bf16); "
        "the next candidate, all_gather_into_tensor_3, has dtype f32 (this: bf16)")


def test_explain_table_names_the_what_if(mixed_log) -> None:
    result = CliRunner().invoke(main, ["explain", mixed_log])
    assert result.exit_code == 0
    assert "recorded AG 6->6, RS 0->0, AR 0->0; the planner reproduces it (bucket members checked)" in result.output
    assert ("all_gather_into_tensor_3  AG      16     f32      -         dtype_break  "
            "bucket_mode=custom_ops_multidtype") in result.output
    assert ("What if: bucket_mode=custom_ops_multidtype buckets it (all-gathers keyed by group only) "
            "(verified by planning again).") in result.output


def test_replay_bucket_mode_models_inductors_setting_as_torch_does(mixed_log) -> None:
    # torch, with inductor's bucket_mode set: one bucket
    line = dict(_torch_artifacts("custom_ops_multidtype"))["pre_bucketing_fsdp_collectives"]
    assert line.endswith("all_gather 6->1, reduce_scatter 0->0, all_reduce 0->0")
    code, doc = _json(["replay", mixed_log, "--bucket-mode", "custom_ops_multidtype", "--format", "json"])
    assert code == 0
    (g,) = doc["graphs"]
    assert g["reproduced"] is True  # the reproduction stays in the recorded (configured) mode
    (r,) = g["replays"]
    assert (r["bucket_cap_mb"], r["cap_source"]) == (100.0, "recorded")
    assert r["collectives"]["all_gather"] == {"before": 6, "after": 1}
    assert r["bucket_sizes_mb"]["AG"] == [31.25]
    assert doc["bucket_mode"] == "custom_ops_multidtype"
    # the pass's own mode argument does not reach the all-gather grouping (as in torch)
    code, doc = _json(["replay", mixed_log, "--mode", "custom_ops_multidtype", "--cap-mb", "100", "--format", "json"])
    assert code == 0
    assert doc["graphs"][0]["replays"][0]["collectives"]["all_gather"] == {"before": 6, "after": 6}


def test_replay_bucket_mode_rejects_unknown_modes(mixed_log) -> None:
    result = CliRunner().invoke(main, ["replay", mixed_log, "--bucket-mode", "fancy"])
    assert result.exit_code == 2
    assert "unknown bucket mode 'fancy'" in result.output


def test_summarize_points_did_nothing_rows_to_the_exact_explain_command(mixed_log) -> None:
    import shlex

    result = CliRunner().invoke(main, ["summarize", mixed_log, "--format", "json"])
    (item,) = json.loads(result.output)["did_nothing"]
    command = f"tracekit explain {shlex.quote(mixed_log)} --rank 0 --graph 0/0:0"
    assert item["explain"] == command
    table = CliRunner().invoke(main, ["summarize", mixed_log]).output
    assert "Bucketing did nothing" in table and command in table
    # the command runs as printed
    code, doc = _json([*shlex.split(command)[1:], "--format", "json"])
    assert code == 0 and [c["reason"] for c in doc["graphs"][0]["collectives"]] == ["dtype_break"] * 6


def test_explain_groups_alike_paragraphs_and_keeps_lines_short(mixed_log) -> None:
    # six lone all-gathers: the first and the last differ (only a next, only a previous
    # candidate); the four between are alike but for names and dtypes: one paragraph
    out = CliRunner().invoke(main, ["explain", mixed_log]).output
    paragraphs = [ln for ln in out.splitlines() if ln.startswith("  ") and not ln.startswith("    ")]
    assert [p.split(":")[0].strip() for p in paragraphs] == [
        "all_gather_into_tensor", "4 collectives, dtype_break", "all_gather_into_tensor_5"]
    assert paragraphs[1].startswith("  4 collectives, dtype_break: all_gather_into_tensor_1, all_gather_into_tensor_2, "
                                    "all_gather_into_tensor_3, all_gather_into_tensor_4. For all_gather_into_tensor_1: ")
    assert "What if, for each: bucket_mode=custom_ops_multidtype buckets it" in out
    assert max(len(ln) for ln in out.splitlines()) <= 200
