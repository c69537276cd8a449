"""Older or partial logs are not blamed: a log where pre-bucketing never ran (an older torch, the
pass off, overlap scheduling off) has no pre_bucketing_* artifact at all. Made at test time from
spmd_auto with every pre_bucketing_* and fx_bucketing_passes_* artifact dropped: replay and
explain rebuild its graphs, say they are not compared and why, and blame nothing (exit 0)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import FIXTURE_LOGS, plain_copytree
from tracekit.cli import main
from tracekit.read.pairing import NotPrebucketedSource
from tracekit.read.reader import graph_and_not_prebucketed_sources
from tracekit.replay.not_prebucketed_graphs import NOT_RUN

_DROPPED = re.compile(r'"name": "(pre_bucketing_\w+|fx_bucketing_passes_\w+)"')


def _never_ran(tmp_path: Path, scenario: str = "spmd_auto") -> Path:
    out = tmp_path / scenario
    plain_copytree(scenario, out)
    for f in out.glob("*.log"):
        kept, keep = [], True
        for ln in f.read_text().split("\n"):
            if not ln.startswith("\t"):
                keep = not _DROPPED.search(ln)
            if keep:
                kept.append(ln)
        f.write_text("\n".join(kept))
    return out


def test_the_reader_says_the_file_logged_no_prebucketing(tmp_path):
    mixed = graph_and_not_prebucketed_sources([str(_never_ran(tmp_path))])
    not_prebucketed = [s for s in mixed if isinstance(s, NotPrebucketedSource)]
    assert len(not_prebucketed) == 8  # 4 ranks, forward and backward, none with an outcome
    assert {s.prebucketing_logged for s in not_prebucketed} == {False}
    # saved_params's backward: its file logged the forward's outcome, so it is compared
    (saved,) = [s for s in graph_and_not_prebucketed_sources([str(FIXTURE_LOGS / "saved_params")])
                if isinstance(s, NotPrebucketedSource) and s.rank == 0]  # fmt: skip
    assert saved.prebucketing_logged is True


def test_replay_does_not_blame_a_log_where_prebucketing_never_ran(tmp_path):
    logs = str(_never_ran(tmp_path))
    res = CliRunner().invoke(main, ["replay", logs, "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["graphs"] == []
    assert [(e["compile_id"], e["graph_index"], e["reproduced"]) for e in doc["not_prebucketed"]] == [
        ("0/0", 0, None),
        ("0/0", 1, None),
    ]
    fwd, bwd = doc["not_prebucketed"]
    assert fwd["mismatches"] == [
        NOT_RUN,
        "the rebuilt graph has FSDP groups ['0']: torch's pre-bucketing would group its collectives where it runs",
        "AG: the schedule runs 1, the rebuilt graph has 8 (a pass the log does not record changed them)",
    ]
    assert bwd["mismatches"][2:] == [
        "AG: the schedule runs 1, the rebuilt graph has 5 (a pass the log does not record changed them)",
        "RS: the schedule runs 1, the rebuilt graph has 8 (a pass the log does not record changed them)",
    ]
    text = CliRunner().invoke(main, ["replay", logs]).output
    assert "torch would have pre-bucketed it" not in text and "NOT REPRODUCED" not in text
    assert "2 graphs never pre-bucketed: 0 reproduced, 2 not compared (pre-bucketing never ran in the log).\n" in text
    assert re.search(r"\n0\s+0/0:0\s+59\s+not pre-bucketed\s+AG 1\s+-\s+not compared\s+0.0704\n", text), text


@pytest.mark.slow
def test_explain_does_not_blame_it_either(tmp_path):
    res = CliRunner().invoke(main, ["explain", str(_never_ran(tmp_path)), "--graph", "0/0:0", "--format", "json"])
    assert res.exit_code == 0, res.output
    (g,) = json.loads(res.output)["graphs"]
    assert (g["reproduced"], g["not_compared"], g["mismatches"][0]) == (None, True, NOT_RUN)
