"""``measure --estimates REPLAY.json``: torch's exposed estimate of each graph, read from a
``tracekit replay --all-ranks --format json`` document made in this module from the profiled 12 MB
fixture's logs (replay runs torch's overlap scheduler: marked torch and slow; measure itself
never imports torch), and the documents it refuses, one line and exit 2 each."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = [pytest.mark.torch, pytest.mark.slow]

PROFILED = ROOT / "fixtures" / "profiled"
CAP_12MB = PROFILED / "gloo_cap_12mb"
CAP_1MB = PROFILED / "gloo_cap_1mb"
CMD = [sys.executable, "-m", "tracekit"]


def tk(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([*CMD, *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def replay_12mb(tmp_path_factory) -> Path:
    """The saved replay document of the 12 MB run's logs, both ranks."""
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("replay") / "replay.json"
    p = tk("replay", CAP_12MB / "logs", "--all-ranks", "--format", "json", "-o", out)
    assert p.returncode == 0, p.stderr
    return out


def measure_12mb(*args: str | Path, logs: Path = CAP_12MB / "logs") -> subprocess.CompletedProcess:
    return tk("measure", logs, "--profile", CAP_12MB / "traces", "--jobs", "1", *args)


def test_exposed_estimates_come_from_the_replay_documents_recorded_cap(replay_12mb):
    replay = json.loads(replay_12mb.read_text())
    # the field read: each graph's reproduction, torch's scheduler at the recorded cap (12 MB)
    assert [(g["ranks"], g["compile_id"], g["graph_index"], g["reproduction"]["cap_source"],
             g["reproduction"]["bucket_cap_mb"], g["reproduction"]["exposed_ms"]) for g in replay["graphs"]] == [
        ("0-1", "0/0", 0, "recorded", 12.0, 0.0875),
        ("0-1", "0/0", 1, "recorded", 12.0, 0.0546),
    ]
    p = measure_12mb("--estimates", replay_12mb, "--format", "json")
    assert (p.returncode, p.stderr) == (0, "")
    doc = json.loads(p.stdout)
    assert [(r["rank"], g["label"], g["exposed_est_ms"], g["exposed_measured_ms"])
            for r in doc["ranks"] for g in r["graphs"]] == [
        (0, "0/0:0", 0.0875, 16.1758),
        (0, "0/0:1", 0.0546, 42.8392),
        (1, "0/0:0", 0.0875, 16.0374),
        (1, "0/0:1", 0.0546, 51.3342),
    ]
    # (16.1758 + 42.8392 + 16.0374 + 51.3342) / (2 * (0.0875 + 0.0546)) = 444.7
    assert doc["verdict"] == (
        "collectives 390x slower than estimated; exposed 445x; graph 0/0:1 (backward) takes 70% "
        "of the step; rank 1 arrives last at graph 0/0:1 (8.0 ms)"
    )
    assert "replay document" in doc["basis"]["exposed"]
    # the same document without --estimates: everything else unchanged
    plain = json.loads(measure_12mb("--format", "json").stdout)
    for r in plain["ranks"]:
        for g in r["graphs"]:
            assert g.pop("exposed_est_ms") is None
    for r in doc["ranks"]:
        for g in r["graphs"]:
            g.pop("exposed_est_ms")
    for d in (doc, plain):
        d.pop("verdict"), d["basis"].pop("exposed")
    assert doc == plain


def test_the_table_shows_the_exposed_estimate_beside_the_measured(replay_12mb):
    p = measure_12mb("--estimates", replay_12mb)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("collectives 390x slower than estimated; exposed 445x;")
    head = next(ln for ln in lines if ln.startswith("graph    phase"))
    assert head.split("  ")[-1].strip() == "exposed est ms"
    rows = [ln for ln in lines if ln.startswith("0/0:0    forward")]
    assert [ln.split()[-1] for ln in rows] == ["0.0875", "0.0875"]


def test_a_replay_of_another_cap_is_refused(replay_12mb):
    p = measure_12mb("--estimates", replay_12mb, logs=CAP_1MB / "logs")
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr == (
        f"tracekit measure: --estimates {replay_12mb}: graph 0/0:0 of rank 0 has another recorded final "
        "schedule than the log's (kinds or bytes differ): a replay of another run or cap?\n"
    )


def test_documents_that_are_no_replay_of_these_logs_are_refused(replay_12mb, tmp_path):
    replay = json.loads(replay_12mb.read_text())
    cases = {
        "measure.json": ({"schema": "tracekit.measure/1"}, "is no tracekit replay document (schema "
                         "'tracekit.measure/1', not tracekit.replay/3)"),
        "rank7.json": ({**replay, "graphs": [{**replay["graphs"][0], "ranks": "0-1,7"}]},
                       "holds rank 7, which the logs do not: a replay of other logs?"),
        "graph.json": ({**replay, "graphs": [{**replay["graphs"][0], "compile_id": "3/0"}]},
                       "holds graph 3/0:0 of rank 0, which its log does not: a replay of other logs?"),
        "exposed.json": ({**replay, "graphs": [{**replay["graphs"][0],
                                                "reproduction": {**replay["graphs"][0]["reproduction"],
                                                                 "exposed_ms": "0.1"}}]},
                         "graphs[0]: exposed_ms '0.1' is no duration"),
    }
    for name, (doc, said) in cases.items():
        path = tmp_path / name
        path.write_text(json.dumps(doc))
        p = measure_12mb("--estimates", path)
        assert (p.returncode, p.stdout) == (2, ""), name
        assert p.stderr.startswith("tracekit measure: --estimates ") and said in p.stderr, p.stderr
        assert len(p.stderr.splitlines()) == 1
    (tmp_path / "cut.json").write_text(replay_12mb.read_text()[:100])
    p = measure_12mb("--estimates", tmp_path / "cut.json")
    assert p.returncode == 2 and "not a JSON document (JSONDecodeError" in p.stderr


def test_a_replay_of_one_graph_leaves_the_others_unknown_and_says_so(replay_12mb, tmp_path):
    replay = json.loads(replay_12mb.read_text())
    path = tmp_path / "forward.json"
    path.write_text(json.dumps({**replay, "graphs": replay["graphs"][:1]}))
    p = measure_12mb("--estimates", path, "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert [g["exposed_est_ms"] for r in doc["ranks"] for g in r["graphs"]] == [0.0875, None, 0.0875, None]
    assert f"rank 0: {path} gives no exposed estimate of graph 0/0:1 (replay --all-ranks covers every rank)" in doc["notes"]
    # (16.1758 + 16.0374) / (2 * 0.0875) = 184.1: the ratio over the graphs both measured and estimated
    assert "; exposed 184x;" in doc["verdict"]
