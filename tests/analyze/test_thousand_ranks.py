"""1,024 ranks made from real fixture logs (bench/make_ranks.py), two of them diverging: a verdict
that reads at once, in every format, and grouped JSON that stays small."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from conftest import FIXTURE_LOGS, ROOT

_spec = importlib.util.spec_from_file_location("bench_make_ranks_1024", ROOT / "bench" / "make_ranks.py")
make_ranks = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = make_ranks
_spec.loader.exec_module(make_ranks)

CMD = [sys.executable, "-m", "tracekit"]
MAJORITY = "0-299,301-776,778-1023"


@pytest.fixture(scope="module")
def ranks_1024(tmp_path_factory):
    out = tmp_path_factory.mktemp("r1024") / "job"
    odd = make_ranks.rank_log(FIXTURE_LOGS / "diverge_rank", 3)
    make_ranks.make_ranks(out, 1024, diverge={300: odd, 777: odd}, small=True)
    return str(out)


def tk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CMD, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_the_table_is_short_narrow_and_names_the_two_ranks_first(ranks_1024):
    r = tk("summarize", ranks_1024)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) <= 60 and max(map(len, lines)) <= 200
    assert lines[2] == "DIVERGE: 2 of 1024 ranks (300,777) differ from the majority on 2 graphs"
    assert lines[3] == "Why: see Rank consensus (9 rows), Schedule consensus (2 rows) below"
    assert lines[5] == "World: 1024 ranks found (0-1023) of 1024 expected; missing: none; seen in two runs: none"
    rows = [ln.split()[:4] for ln in lines if ln.startswith((MAJORITY + " ", "300,777 "))]
    assert rows[:4] == [[MAJORITY, "1022", "0/0", "forward"], ["300,777", "2", "0/0", "forward"],
                        [MAJORITY, "1022", "0/0", "backward"], ["300,777", "2", "0/0", "backward"]]


@pytest.mark.parametrize("fmt", ["markdown", "csv"])
def test_other_formats_print_rank_ranges_too(ranks_1024, fmt):
    r = tk("summarize", ranks_1024, "--format", fmt)
    lines = r.stdout.splitlines()
    # a CSV's header names every column once, whatever the ranks: its rows are what must stay short
    body = lines[1:] if fmt == "csv" else lines
    assert len(lines) <= (80 if fmt == "markdown" else 60) and max(map(len, body)) <= 200
    assert sum(MAJORITY in ln for ln in lines) >= 2 and not any("0,1,2,3" in ln for ln in lines)


def test_grouped_json_is_small_and_per_rank_json_is_whole(ranks_1024, tmp_path):
    grouped = tmp_path / "g.json"
    assert tk("summarize", ranks_1024, "--format", "json", "-o", str(grouped)).returncode == 0
    doc = json.loads(grouped.read_text())
    assert grouped.stat().st_size < 64_000
    assert [(g["ranks"], g["count"]) for g in doc["groups"]] == [(MAJORITY, 1022), ("300,777", 2)]
    assert {(d["ranks"], d["majority_ranks"]) for d in doc["divergence"]} == {("300,777", MAJORITY)}
    assert [d["ranks"] for d in doc["schedule_divergence"]] == ["300,777", "300,777"]
    per_rank = tmp_path / "r.json"
    assert tk("summarize", ranks_1024, "--format", "json", "--per-rank", "-o", str(per_rank)).returncode == 0
    ranks = json.loads(per_rank.read_text())["ranks"]
    assert len(ranks) == 1024 and ranks[777]["graphs"][0]["collectives"]["all_gather"] == {"before": 10, "after": 1}


def test_fail_on_divergence_for_ci_after_a_hang(ranks_1024):
    r = tk("summarize", ranks_1024, "--fail-on-divergence", "--format", "json")
    assert r.returncode == 1
    assert r.stderr == ("tracekit summarize: the ranks diverge: 9 bucketing differences, "
                        "2 schedule differences (--fail-on-divergence)\n")
