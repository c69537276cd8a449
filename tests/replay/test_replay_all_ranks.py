"""``replay --all-ranks`` replays each distinct graph once and reports it for every rank that
shares it (the fixture ranks log identical graphs; diverge_rank's rank 3 does not), while a rank
whose record differs from the others' on the same text is replayed and judged on its own."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest
from click.testing import CliRunner

from tests.conftest import FIXTURE_LOGS
from tracekit.cli import main
from tracekit.read.reader import graph_sources
from tracekit.replay import replayer
from tracekit.replay.engine import replay_sources
from tracekit.replay.results import ReplayOptions


def _replay(*args: str):
    return CliRunner().invoke(main, ["replay", *args], catch_exceptions=False)


def _doc(scenario: str, *args: str) -> dict:
    res = _replay(str(FIXTURE_LOGS / scenario), "--all-ranks", "--format", "json", *args)
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def _ag(counts: dict) -> tuple[int, int]:
    return counts["all_gather"]["before"], counts["all_gather"]["after"]


def test_identical_ranks_are_one_replay_each_graph():
    doc = _doc("spmd_auto", "--cap-mb", "0.05")
    assert doc["schema"] == "tracekit.replay/3"
    got = [(g["ranks"], g["rank"], g["compile_id"], g["graph_index"], g["reproduced"], g["nodes"])
           for g in doc["graphs"]]
    assert got == [("0-3", 0, "0/0", 0, True, 59), ("0-3", 0, "0/0", 1, True, 110)]
    assert [_ag(g["replays"][0]["collectives"]) for g in doc["graphs"]] == [(8, 5), (5, 4)]
    assert {k: doc["totals"][k] for k in ("graphs", "outcomes", "rebuilt", "reproduced", "not_reproduced",
                                          "failed")} == {"graphs": 2, "outcomes": 8, "rebuilt": 2, "reproduced": 2,
                                                         "not_reproduced": 0, "failed": 0}


def test_a_diverging_rank_is_its_own_row():
    doc = _doc("diverge_rank")
    got = [(g["ranks"], g["compile_id"], g["graph_index"], g["nodes"], _ag(g["recorded"]["collectives"]),
            g["reproduced"]) for g in doc["graphs"]]
    assert got == [
        ("0-2", "0/0", 0, 59, (8, 1), True),
        ("0-2", "0/0", 1, 110, (5, 1), True),
        ("3", "0/0", 0, 72, (10, 1), True),
        ("3", "0/0", 1, 140, (7, 1), True),
    ]
    table = _replay(str(FIXTURE_LOGS / "diverge_rank"), "--all-ranks").output
    recorded = table.split("\nAfter torch's overlap scheduler")[0]  # the first table's rows
    rows = [line.split()[:6] for line in recorded.splitlines() if line[:1].isdigit() and "/0:" in line]
    assert rows == [["0-2", "0/0:0", "59", "27.4", "8->1", "0->0"],
                    ["0-2", "0/0:1", "110", "27.4", "5->1", "8->1"],
                    ["3", "0/0:0", "72", "27.4", "10->1", "0->0"],
                    ["3", "0/0:1", "140", "27.4", "7->1", "10->1"]]
    assert table.rstrip().endswith("4 distinct graphs for 8 recorded outcomes (ranks 0-3): 4 rebuilt, "
                                   "4 reproduced, 0 not reproduced, 0 not rebuilt.")


class _Counting:
    """Counts rebuilds (GraphReplayer constructions) and plans (GraphReplayer.at calls)."""

    def __init__(self, monkeypatch):
        self.built = self.planned = 0
        real_init, real_at = replayer.GraphReplayer.__init__, replayer.GraphReplayer.at

        def init(rp, *a, **k):
            self.built += 1
            real_init(rp, *a, **k)

        def at(rp, *a, **k):
            self.planned += 1
            return real_at(rp, *a, **k)

        monkeypatch.setattr(replayer.GraphReplayer, "__init__", init)
        monkeypatch.setattr(replayer.GraphReplayer, "at", at)


@pytest.mark.parametrize("ranks", [["--rank", "0"], ["--all-ranks"]])
def test_all_ranks_cost_what_one_rank_costs(monkeypatch, ranks):
    # 2 graphs, each rebuilt once and planned at the recorded cap plus two caps, whether one
    # rank or all four are asked for (without the dedupe, all four would plan 4 times as often)
    n = _Counting(monkeypatch)
    res = _replay(str(FIXTURE_LOGS / "spmd_small_cap"), *ranks, "--cap-mb", "0.05,1",
                  "--format", "json")
    assert res.exit_code == 0, res.output
    assert (n.built, n.planned) == (2, 6)
    assert [g["ranks"] for g in json.loads(res.output)["graphs"]] == (
        ["0-3", "0-3"] if ranks == ["--all-ranks"] else ["0", "0"])


def test_same_text_other_record_is_checked_on_its_own(monkeypatch):
    # rank 2 claims its forward merged 8 all-gathers into 2: same graph text as the others,
    # another record, so it is replayed apart and not reproduced; the others still are
    sources = list(graph_sources([FIXTURE_LOGS / "spmd_auto"]))
    i = next(i for i, s in enumerate(sources) if s.rank == 2 and s.graph_index == 0)
    g = copy.deepcopy(sources[i].graph)
    g.collectives["all_gather"].after = 2
    sources[i] = dataclasses.replace(sources[i], graph=g)
    n = _Counting(monkeypatch)
    got = replay_sources(sources, ReplayOptions())
    assert [(r.ranks, r.label, r.reproduced) for r in got] == [
        ([0, 1, 3], "0/0:0", True), ([0, 1, 2, 3], "0/0:1", True), ([2], "0/0:0", False)]
    assert got[2].mismatches == ["all_gather: recorded 8->2, replayed 8->1"]
    assert n.built == 2  # the shared text is still rebuilt once
    # the recorded cap for each of the three, plus the exact automatic cap tried for rank 2's
    # mismatch (the log prints the cap rounded)
    assert n.planned == 4
