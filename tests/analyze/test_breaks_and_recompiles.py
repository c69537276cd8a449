"""Graph breaks and recompile reasons in summarize's report and JSON (issue 50, item 16), read
off the logs torch wrote (``dynamo_graph_break_reason``, ``recompile_reasons``): the FSDP2
fixtures, and a copy of spmd_auto (which has bucketing outcomes) with a graph break and a
recompile of two reasons (torch's JSON-list form) added at test time."""

from __future__ import annotations

import hashlib
import json
import shutil

from click.testing import CliRunner

from conftest import FIXTURE_LOGS
from tracekit.render.summary_document import summary_document
from tracekit.commands.summarize_cmd import summarize
from tracekit.model import GRAPH_BREAK, RECOMPILE, CompileEvent
from tracekit.read.reader import load

FSDP2_BREAK = "torch/distributed/fsdp/_fully_shard/_fsdp_common.py:30"


def test_the_reader_keeps_each_break_and_recompile_in_log_order():
    for r in load(FIXTURE_LOGS / "fsdp2").ranks:
        brk, rec = r.compile_events
        assert (brk.compile_id, brk.kind, brk.reason) == ("0/0", GRAPH_BREAK, "Attempted to call function marked as skipped")
        assert brk.at is not None and brk.at.endswith("site-packages/" + FSDP2_BREAK)
        assert rec == CompileEvent("1/1", RECOMPILE, "1/0: tensor 'x' requires_grad mismatch. expected requires_grad=0")
    for r in load(FIXTURE_LOGS / "fsdp2_per_block").ranks:
        assert r.compile_events == (
            CompileEvent("0/1", RECOMPILE, "0/0: tensor 'x' requires_grad mismatch. expected requires_grad=0"),
        )
    assert [r.compile_events for r in load(FIXTURE_LOGS / "spmd_auto").ranks] == [()] * 4


def test_the_document_and_the_text_show_them():
    doc = summary_document(load(FIXTURE_LOGS / "fsdp2"))
    assert doc["breaks_and_recompiles"] == [
        {
            "ranks": "0-1",
            "graph_breaks": 1,
            "recompiles": 1,
            "events": [
                {"compile_id": "0/0", "kind": "graph_break", "at": FSDP2_BREAK,
                 "reason": "Attempted to call function marked as skipped"},
                {"compile_id": "1/1", "kind": "recompile", "at": None,
                 "reason": "1/0: tensor 'x' requires_grad mismatch. expected requires_grad=0"},
            ],
        }
    ]  # fmt: skip
    out = CliRunner().invoke(summarize, [str(FIXTURE_LOGS / "fsdp2")]).output
    section = out.split("Graph breaks and recompiles (dynamo_graph_break_reason, recompile_reasons)\n", 1)[1]
    lines = section.splitlines()
    assert lines[1] == "ranks 0-1: 1 graph break, 1 recompile"
    assert lines[4].split() == ["0/0", "graph", "break", FSDP2_BREAK, *"Attempted to call function marked as skipped".split()]
    assert lines[5].split()[:4] == ["1/1", "recompile", "-", "1/0:"]
    assert lines[7] == "recompile why: the compile id whose guard failed, then the guard"
    # none logged: no section, no key (the outputs of such runs are as before)
    assert "breaks_and_recompiles" not in summary_document(load(FIXTURE_LOGS / "spmd_auto"))


def _entry(envelope: dict, payload: str) -> str:
    envelope = {**envelope, "has_payload": hashlib.md5(payload.encode()).hexdigest()}
    body = "".join(f"\t{x}\n" for x in payload.split("\n"))
    return f"V1202 15:14:00.250000 12482 site-packages/torch/_dynamo/guards.py:1] {json.dumps(envelope)}\n{body}"


def test_a_run_with_outcomes_reports_them_too(tmp_path):
    d = tmp_path / "spmd_auto"
    shutil.copytree(FIXTURE_LOGS / "spmd_auto", d)
    ids = {"rank": 0, "frame_id": 0, "frame_compile_id": 0, "attempt": 0}
    brk = _entry(
        {"artifact": {"name": "dynamo_graph_break_reason", "encoding": "string"}, **ids},
        "Graph break in user code at /x/train.py:12\nGraph Break Reason: Dynamic control flow is not supported\n"
        "  Explanation: ...",
    )
    rec = _entry(
        {"artifact": {"name": "recompile_reasons", "encoding": "json"}, **ids},
        json.dumps(["0/0: L['x'].size()[0] == 8", "0/0: ___check_type_id(L['self'], 1)"]),
    )
    (f,) = d.glob("*rank_0_*.log")
    text = f.read_text()
    at = text.index("\n", text.index('"dynamo_start"')) + 1  # inside compile 0/0, after its start
    f.write_text(text[:at] + rec + brk + text[at:])
    doc = summary_document(load(d, jobs=1))
    assert doc["diagnostics"]["counts"] == {}
    assert doc["totals"]["graphs"] == 8  # the outcomes are all there
    assert doc["breaks_and_recompiles"] == [
        {
            "ranks": "0",
            "graph_breaks": 1,
            "recompiles": 2,
            "events": [
                {"compile_id": "0/0", "kind": "recompile", "at": None, "reason": "0/0: L['x'].size()[0] == 8"},
                {"compile_id": "0/0", "kind": "recompile", "at": None, "reason": "0/0: ___check_type_id(L['self'], 1)"},
                {"compile_id": "0/0", "kind": "graph_break", "at": "/x/train.py:12",
                 "reason": "Dynamic control flow is not supported"},
            ],
        }
    ]  # fmt: skip
