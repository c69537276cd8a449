"""summarize prints exactly what it printed before the speed work of issue 21: every format
(table, json, csv, markdown, per-rank, --strict) on every fixture scenario and every case of the
damaged corpus, compared byte for byte, with the exit status and stderr, to the outputs main
printed (tests/golden/summaries.json.gz, made by tests/golden/make_golden.py); read with the
scanner's C loop, and again with its regex alone (an install without the C part)."""

from __future__ import annotations

import pytest

from golden.make_golden import load_golden, outputs


@pytest.fixture(scope="module")
def now(tmp_path_factory):
    return outputs(tmp_path_factory.mktemp("golden_corpus"))


@pytest.fixture(scope="module")
def now_without_c(tmp_path_factory):
    """The same outputs read by the regex scanner alone (an install without the C part)."""
    from tracekit.read import envelopes

    saved = envelopes.NATIVE
    envelopes.NATIVE = False
    try:
        return outputs(tmp_path_factory.mktemp("golden_corpus_no_c"))
    finally:
        envelopes.NATIVE = saved


GOLDEN = load_golden()


def test_same_cases(now):
    assert sorted(now) == sorted(GOLDEN)


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_same_output(now, case):
    got, want = now[case], GOLDEN[case]
    assert got["status"] == want["status"]
    assert got["stderr"] == want["stderr"]
    assert got["stdout"] == want["stdout"]


def test_same_outputs_without_the_c_scanner(now_without_c):
    assert sorted(now_without_c) == sorted(GOLDEN)
    differ = [case for case in GOLDEN if now_without_c[case] != GOLDEN[case]]
    assert differ == []
