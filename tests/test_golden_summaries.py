"""summarize prints exactly what it printed before the speed work of issue 21: every format
(table, json, csv, markdown, per-rank, --strict) on every fixture scenario and every case of the
damaged corpus, compared byte for byte, with the exit status and stderr, to the outputs main
printed (tests/golden/summaries.json.gz, made by tests/golden/make_golden.py)."""

from __future__ import annotations

import pytest

from golden.make_golden import load_golden, outputs


@pytest.fixture(scope="module")
def now(tmp_path_factory):
    return outputs(tmp_path_factory.mktemp("golden_corpus"))


GOLDEN = load_golden()


def test_same_cases(now):
    assert sorted(now) == sorted(GOLDEN)


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_same_output(now, case):
    got, want = now[case], GOLDEN[case]
    assert got["status"] == want["status"]
    assert got["stderr"] == want["stderr"]
    assert got["stdout"] == want["stdout"]
