"""Plain text: a count agrees with its noun ("1 graph", never "1 graphs"), in summarize's text
of every fixture and of a run edited at test time to hold one graph."""

from __future__ import annotations

import re
import shutil

import pytest

from conftest import FIXTURE_LOGS
from tracekit.analyze.summarize import summary_document
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
