"""The step of a cut rank says it is partial (issue 50, item 6): ``replay --rank 0`` on
overlap_cap_a with rank 0's log cut inside the backward's first pre-bucketing entry (line 5349,
a copy cut at test time) replays the forward alone (0/0:0, est 0.1042 ms); the step says
``partial`` and where the log is cut, the last line says so, and the status is 1 (a replay
that did not reproduce everything, docs/output.md)."""

from __future__ import annotations

import json
import shutil

from click.testing import CliRunner

from conftest import FIXTURE_LOGS, log_text, rank_log
from tracekit.cli import main

LOGS = FIXTURE_LOGS / "overlap_cap_a"


def _cut_copy(tmp_path):
    src = rank_log(LOGS, 0)
    lines = log_text(src).split("\n")
    assert '"name": "pre_bucketing_collective_sizes"' in lines[5348]
    dst = tmp_path / src.name.removesuffix(".gz")
    dst.write_text("\n".join(lines[:5348]) + "\n" + lines[5348][:60])
    shutil.copy(rank_log(LOGS, 1), tmp_path)
    return dst


def test_a_cut_rank_step_is_partial(tmp_path):
    log = _cut_copy(tmp_path)
    res = CliRunner().invoke(main, ["replay", str(tmp_path), "--rank", "0", "--format", "json"])
    assert res.exit_code == 1, res.stdout
    doc = json.loads(res.stdout)
    assert [(g["compile_id"], g["graph_index"], g["verdict"]) for g in doc["graphs"]] == [("0/0", 0, "reproduced")]
    (s,) = doc["totals"]["step"]
    assert (s["graphs"], s["est_ms"]) == (1, 0.1042)
    assert s["cut"] == {"rank": 0, "file": str(log), "line": 5349, "kind": "truncated_entry"}
    why = (
        f"partial: rank 0's log is cut (ends inside an entry at line 5349 of {log}): "
        "the graphs it logged after the cut are missing"
    )
    assert s["partial"] == why
    res = CliRunner().invoke(main, ["replay", str(tmp_path), "--rank", "0"])
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    assert f"recorded: {why}" in lines
    assert (
        "1 graph: 1 rebuilt, 1 reproduced, 0 not reproduced, 0 not rebuilt; "
        "the step is partial: rank 0's log is cut." in lines
    )


def test_the_whole_rank_is_not_partial(tmp_path):
    _cut_copy(tmp_path)
    res = CliRunner().invoke(main, ["replay", str(tmp_path), "--rank", "1", "--format", "json"])
    assert res.exit_code == 0, res.stdout
    (s,) = json.loads(res.stdout)["totals"]["step"]
    assert (s["graphs"], s["partial"], "cut" in s) == (2, None, False)
