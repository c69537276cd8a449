"""Ranks that logged different graphs (issue 50, item 7): on diverge_rank, rank 3 has two
layers more. ``replay --recommend`` reads every rank, replays each group's graphs (ranks 0-2
and rank 3), says the ranks differ, and builds each cap's step from the slowest group (rank 3:
est 0.1752 ms at the recorded cap, against 0.1454 ms for ranks 0-2); the recommendation says
whose step it is drawn from."""

from __future__ import annotations

import json

from click.testing import CliRunner

from conftest import FIXTURE_LOGS
from tracekit.cli import main


def test_the_slowest_ranks_set_the_step():
    res = CliRunner().invoke(main, ["replay", str(FIXTURE_LOGS / "diverge_rank"), "--recommend", "--format", "json"])
    assert res.exit_code == 0, res.stdout
    doc = json.loads(res.stdout)
    assert [(g["ranks"], g["compile_id"], g["graph_index"]) for g in doc["graphs"]] == [
        ("0-2", "0/0", 0), ("0-2", "0/0", 1), ("3", "0/0", 0), ("3", "0/0", 1)]
    steps = doc["totals"]["step"]
    assert len(steps) == 14  # recorded, auto and 1 MB..2 GB
    for s in steps:  # every cap: rank 3's two layers more make it the slowest
        assert (s["rank"], s["ranks"], s["est_ms"], s["exposed_ms"]) == (3, "3", 0.1752, 0.0347)
        assert s["rank_groups"] == [
            {"ranks": "0-2", "est_ms": 0.1454, "exposed_ms": 0.0346},
            {"ranks": "3", "est_ms": 0.1752, "exposed_ms": 0.0347},
        ]
    rec = doc["recommendation"]
    assert (rec["cap_mb"], rec["est_ms"], rec["ranks"], rec["keep_recorded"]) == (27.4, 0.1752, "3", True)
    assert ("the ranks logged different graphs (ranks 0-2; rank 3): each group's graphs are replayed and "
            "the step at each cap is the slowest group's") in doc["notes"]

    from tracekit.render.replay_text import render_text

    text = render_text(doc, "table")
    assert "Whole step per cap (the slowest ranks' graphs at each cap: the ranks differ)" in text
    assert ("The ranks logged different graphs; the step of each group at the recorded cap: ranks 0-2: est 0.1454 "
            "ms; rank 3: est 0.1752 ms.") in " ".join(text.split())
    assert ("The ranks differ: it is drawn from the slowest ranks' step (rank 3: ranks 0-2 est 0.1454 ms; "
            "rank 3 est 0.1752 ms at 27.4 MB).") in text.splitlines()


def test_ranks_that_agree_replay_the_lowest_only():
    from tracekit.model import Diagnostics
    from tracekit.replay.run import diverging_ranks
    from tracekit.replay.selection import Selection, read_selected

    for name, want in (("diverge_rank", [[0, 1, 2], [3]]), ("hsdp", []), ("spmd_auto", [])):
        mixed = read_selected([str(FIXTURE_LOGS / name)], Selection(None, True, []), Diagnostics())
        assert diverging_ranks(mixed) == want, name  # hsdp: each rank's group names differ, not its graphs
