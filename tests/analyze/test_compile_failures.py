"""Compile failures are reported: a readable log whose compile failed (the shape of tlparse's
``comp_failure.log``: a rank-less single-process log, ``dynamo_start``, ``dynamo_output_graph``
and a ``compilation_metrics`` whose ``fail_type`` is ``<class '...BackendCompilerFailed'>``)
is NO DATA with the failure said, what and where, in the text and the JSON (exit 0). Made at
test time from spmd_auto's rank 0 log: its compile entries kept, its metrics given the failure."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner
from conftest import FIXTURE_LOGS

from tracekit.commands.summarize_cmd import summarize
from tracekit.model import FAILED
from tracekit.read.reader import load

KEEP = ('"dynamo_start"', '"compilation_metrics"', '"str"', '"dynamo_output_graph"')
FAIL_TYPE = "<class 'torch._dynamo.exc.BackendCompilerFailed'>"
FAIL_REASON = "backend='broken_backend' raised:\nRuntimeError: broken backend"
_PREFIX = re.compile(r"^[VIWEC]\d{4} [\d:.]+ \d+ [^:]+:\d+\] ")


def _failed_compile_log(tmp_path: Path) -> Path:
    (src,) = (FIXTURE_LOGS / "spmd_auto").glob("*_rank_0_*.log")
    out, kept = [], False
    for ln in src.read_text().split("\n"):
        if not ln.startswith("\t"):
            kept = any(f"] {{{k}" in ln for k in KEEP)
            if kept and '] {"compilation_metrics"' in ln:
                prefix = _PREFIX.match(ln).group()
                entry = json.loads(ln[len(prefix) :])
                entry["compilation_metrics"].update(fail_type=FAIL_TYPE, fail_reason=FAIL_REASON)
                ln = prefix + json.dumps(entry)  # as torch writes it (", " and ": ")
        if kept:
            out.append(ln.replace('"rank": 0, ', "").replace(', "rank": 0', ""))
    log = tmp_path / "comp_failure.log"
    log.write_text("\n".join(out) + "\n")
    return log


def test_the_failed_frame_is_read_with_what_failed_and_where(tmp_path):
    run = load(_failed_compile_log(tmp_path))
    (rank,) = run.ranks
    (frame,) = rank.frames
    assert rank.rank is None
    assert (frame.compile_id, frame.name, frame.status) == ("0/0", "forward", FAILED)
    assert frame.reason == "BackendCompilerFailed: backend='broken_backend' raised: RuntimeError: broken backend"
    assert frame.where is not None and frame.where.endswith("fixtures/generate.py:238")


def test_summarize_says_the_compile_failed_in_text_and_json(tmp_path):
    log = str(_failed_compile_log(tmp_path))
    res = CliRunner().invoke(summarize, [log, "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["verdict"]["text"] == "NO DATA: no bucketing outcome in the logs; 1 frame compile failed"
    assert doc["verdict"]["sections"] == ["compiled_regions", "notes"]
    regions = doc["compiled_regions"]
    assert (regions["compiled"], regions["eager"], regions["failed"]) == (0, 0, 1)
    (frame,) = regions["groups"][0]["frames"]
    assert (frame["status"], frame["reason"]) == ("failed", "BackendCompilerFailed: backend='broken_backend' raised: "
                                                  "RuntimeError: broken backend")  # fmt: skip
    assert doc["notes"][-1] == (
        "1 frame compile failed: 0/0 forward (generate.py:238): BackendCompilerFailed: backend='broken_backend' "
        "raised: RuntimeError: broken backend; see Compiled regions"
    )
    text = CliRunner().invoke(summarize, [log]).output
    assert "Why: see Compiled regions, Notes below\n" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("0/0 "))
    assert re.split(r"\s{2,}", row) == [
        "0/0", "forward (generate.py:238)", "failed to compile", "-", "-", "-", "BackendCompilerFailed: backend='broken_backen...",
    ]  # fmt: skip
    assert "\n0 regions compiled, taking in 0 bytes of parameters; 0 frames fell back to eager; 1 failed to compile;" in text
