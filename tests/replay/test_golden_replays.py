"""replay and explain print exactly what they printed before the speed work of issue 41:
``replay --recommend`` and ``explain`` in every format on every fixture scenario (and
``--all-ranks``, explicit caps), stdout and exit status compared byte for byte with
tests/golden/replays.json.gz (made by tests/golden/make_replay_golden.py)."""

from __future__ import annotations

import pytest

from golden.make_replay_golden import load_golden, outputs

GOLDEN = load_golden()


@pytest.fixture(scope="module")
def now():
    return outputs()


def test_same_cases(now):
    assert sorted(now) == sorted(GOLDEN)


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_same_output(now, case):
    got, want = now[case], GOLDEN[case]
    assert got["status"] == want["status"]
    assert got["stdout"] == want["stdout"]
