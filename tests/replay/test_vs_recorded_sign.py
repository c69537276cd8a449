"""One number, one value (issue 39): "vs recorded" has one sign convention everywhere it appears
(docs/output.md): the figure minus the baseline, negative = less (faster). overlap_cap_b ran at
64 MB; 1 MB is estimated faster: step est 0.2751 against 0.3211 ms, -0.0460 in the replay text,
its JSON, the recommendation's words and the report; hsdp's what-if "our pass given the groups as
well" is 0.1512 against 0.2058 ms as run: -0.0546; saved_params' backward given the forward's
groups costs 0.0116 against 0.0704 ms run one by one: -0.0588."""

from __future__ import annotations

import json

from click.testing import CliRunner
from conftest import FIXTURE_LOGS

from tracekit.cli import main

B = str(FIXTURE_LOGS / "overlap_cap_b")


def _out(*args: str) -> str:
    r = CliRunner().invoke(main, list(args))
    assert r.exit_code == 0, r.output
    return r.stdout


def test_every_vs_recorded_is_the_figure_minus_the_recorded(tmp_path):
    saved = tmp_path / "r.json"
    doc = json.loads(_out("replay", B, "--recommend", "--format", "json"))
    saved.write_text(json.dumps(doc))
    n = 0
    for g in doc["graphs"]:
        base_comm, base_est = g["recorded"]["estimated_comm_ms"], g["reproduction"]["est_ms"]
        for r in g["replays"]:
            assert r["comm_ms_vs_recorded"] == round(r["estimated_comm_ms"] - base_comm, 4)
            assert r["est_ms_vs_recorded"] == round(r["est_ms"] - base_est, 4)
            n += 1
    assert n == 2 * 13  # two graphs, 13 caps besides the recorded one
    steps = {s["cap"]: s for s in doc["totals"]["step"]}
    for s in steps.values():
        assert s["est_ms_vs_recorded"] == round(s["est_ms"] - steps["recorded"]["est_ms"], 4)
    assert (steps["1"]["est_ms"], steps["recorded"]["est_ms"], steps["1"]["est_ms_vs_recorded"]) == (0.2751, 0.3211, -0.046)
    rec = doc["recommendation"]
    assert (rec["cap_mb"], rec["vs_recorded_ms"]) == (1.0, -0.046)  # faster: negative

    text = _out("replay", B, "--recommend")
    (row,) = [ln.split() for ln in text.splitlines() if ln.startswith("1         1         17 ")]
    assert row[-1] == "-0.0460"  # the whole step's est vs recorded
    assert "0.0460 ms faster than the recorded cap" in text
    page = _out("report", B, "--replay", str(saved), "--jobs", "1")
    assert "0.0460 ms faster than the recorded cap" in page


def test_the_mesh_and_never_pre_bucketed_what_ifs_use_the_same_sign():
    text = _out("replay", str(FIXTURE_LOGS / "hsdp"))
    assert "  our pass given the groups as well: exposed 0.0403, est 0.1512 ms (-0.0546)\n" in text
    assert "whole step (rank 0's graphs) at the recorded cap: exposed 0.0949, est 0.2058 ms as run" in text
    assert round(0.1512 - 0.2058, 4) == -0.0546

    doc = json.loads(_out("replay", str(FIXTURE_LOGS / "saved_params"), "--what-if", "forward-groups",
                          "--format", "json"))
    (entry,) = doc["not_prebucketed"]
    (r,) = [r for r in entry["replays"] if r.get("what_if") == "forward_groups"]
    assert (r["estimated_comm_ms"], entry["recorded"]["estimated_comm_ms"], r["comm_ms_vs_recorded"]) == (
        0.0116, 0.0704, -0.0588)
