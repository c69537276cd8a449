"""Plain text: a count agrees with its noun ("1 graph", never "1 graphs"), in summarize's text
of every fixture and of a run edited at test time to hold one graph."""

from __future__ import annotations

import re
import shutil

import pytest

from conftest import FIXTURE_LOGS, plain_copytree, rank_log
from tracekit.render.summary_document import summary_document
from tracekit.commands.summarize_cmd import render_text
from tracekit.read.reader import load

NOUNS = "graphs|ranks|collectives|files|caps|regions|frames|copies|buckets|entries|lines|groups|rows"
ONE_PLURAL = re.compile(rf"(?<![\d.,])\b1 (?:{NOUNS})\b")


@pytest.mark.parametrize("scenario", sorted(p.name for p in FIXTURE_LOGS.iterdir() if p.is_dir()))
@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_no_count_of_one_takes_a_plural(scenario, fmt):
    text = render_text(summary_document(load(FIXTURE_LOGS / scenario, jobs=1)), fmt)
    assert ONE_PLURAL.findall(text) == []


def test_a_run_of_one_graph_says_1_graph(tmp_path):
    # every rank's log ends after its forward's compilation_metrics: one graph a rank
    d = tmp_path / "spmd_auto"
    shutil.copytree(FIXTURE_LOGS / "spmd_auto", d)
    for f in d.iterdir():
        data = f.read_bytes()
        at = data.index(b'{"compilation_metrics": ')
        f.write_bytes(data[: data.index(b"\n", at) + 1])
    doc = summary_document(load(d, jobs=1))
    assert doc["verdict"]["text"] == "OK: all 4 ranks agree on 1 graph"
    text = render_text(doc, "table")
    assert ONE_PLURAL.findall(text) == []


def test_the_check_finds_a_plural_after_one():
    assert ONE_PLURAL.findall("on all 1 graphs; 21 ranks; 0.1 ranks; 1 graph") == ["1 graphs"]


#: "(s)" after a noun: a count said without agreeing with it ("1 bad input(s)", "9 difference(s)").
MAYBE_PLURAL = re.compile(r"\b[a-z][a-z-]+\(s\)")


@pytest.mark.parametrize("scenario", sorted(p.name for p in FIXTURE_LOGS.iterdir() if p.is_dir()))
def test_no_noun_says_maybe_plural(scenario):
    text = render_text(summary_document(load(FIXTURE_LOGS / scenario, jobs=1)), "table")
    assert MAYBE_PLURAL.findall(text) == []


def test_counts_agree_in_a_divergent_cut_run_and_its_exit_lines(tmp_path):
    """diverge_rank (rank 3 differs: 9 differences, 2 graphs of schedule differences) with rank
    2's log holding a line of one NUL byte and rank 1's cut mid-entry: every count agrees with its
    noun, in the text, the report's divergence line and --strict / --fail-on-divergence's last
    lines (they said '9 difference(s)', '2 graph(s) where', '2 bad input(s)')."""
    from click.testing import CliRunner

    from tracekit.cli import main

    d = tmp_path / "diverge_rank"
    shutil.copytree(FIXTURE_LOGS / "diverge_rank", d)
    (r1,) = d.glob("*_rank_1_*.log")
    data = r1.read_bytes()
    r1.write_bytes(data[: data.index(b'"name": "inductor_collective_schedule"', len(data) // 2)])
    (r2,) = d.glob("*_rank_2_*.log")
    lines = r2.read_bytes().split(b"\n")
    at = next(i for i, line in enumerate(lines) if line.startswith(b"V") and b'"str"' in line)
    lines.insert(at, b"\0")  # a line of one NUL byte between two entries
    r2.write_bytes(b"\n".join(lines))
    text = render_text(summary_document(load(d, jobs=1)), "table")
    assert "9 differences from the majority\n" in text
    assert "2 graphs where ranks run other collectives" in text
    assert "1 NUL byte in the line" in text
    assert MAYBE_PLURAL.findall(text) == []
    r = CliRunner().invoke(main, ["summarize", str(d), "--strict"])
    assert (r.exit_code, r.stderr) == (1, "tracekit summarize: 2 bad inputs (--strict)\n")
    r = CliRunner().invoke(main, ["summarize", str(d), "--fail-on-divergence"])
    assert r.stderr == (
        "tracekit summarize: the ranks diverge: 9 bucketing differences, 2 schedule differences (--fail-on-divergence)\n"
    )
    page = tmp_path / "r.html"
    assert CliRunner().invoke(main, ["report", str(d), "-o", str(page)]).exit_code == 0
    html = page.read_text()
    assert "differing rank: " in html and MAYBE_PLURAL.findall(html) == []


def test_the_maybe_plural_check_finds_one():
    assert MAYBE_PLURAL.findall("1 bad input(s); 2 all-gather(s); f(s)") == ["input(s)", "all-gather(s)"]


def test_findings_on_one_rank_say_rank(tmp_path):
    """The verdict's findings name one rank as 'rank 0' (they said 'ranks 0'): saved_params with
    ranks 1-3 removed (its backward never pre-bucketed), and hsdp with ranks 1-3 ending after the
    forward (rank 0's backward alone holds the replicate all-reduces)."""
    d = tmp_path / "saved_params"
    shutil.copytree(FIXTURE_LOGS / "saved_params", d)
    for r in (1, 2, 3):
        rank_log(d, r).unlink()
    assert summary_document(load(d, jobs=1))["verdict"]["text"] == (
        "INCOMPLETE: one rank found; 3 of 4 ranks missing (1-3); FINDING: 1 graph never pre-bucketed "
        "(0/0 backward on rank 0: 8 reduce-scatters, 298,144 B, 0.0704 ms estimated, run one by one); "
        "see Bucketing did nothing"
    )
    h = tmp_path / "hsdp"
    plain_copytree("hsdp", h)
    for r in (1, 2, 3):
        f = rank_log(h, r)
        data = f.read_bytes()
        f.write_bytes(data[: data.index(b"\n", data.index(b'{"compilation_metrics": ')) + 1])
    text = summary_document(load(h, jobs=1))["verdict"]["text"]
    assert text.endswith(
        "FINDING: collectives pre-bucketing never handles on this mesh, run one by one: 8 all_reduce on "
        "replicate group 1 (0/0 backward, rank 0: 148,552 B, 0.0658 ms est.)"
    )
