"""The progress bar: drawn on a terminal only, erased at the end, fed by load()."""

from __future__ import annotations

import io

from conftest import FIXTURE_LOGS
from tracekit.progress import ProgressBar
from tracekit.reader import load


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bar_on_a_terminal_follows_load_and_is_erased():
    out = FakeTTY()
    seen = []
    bar = ProgressBar(stream=out, min_total=0)

    def progress(done, total):
        seen.append((done, total))
        bar(done, total)

    run = load(FIXTURE_LOGS / "spmd_auto", jobs=1, progress=progress)
    bar.close()
    total = sum(p.stat().st_size for p in (FIXTURE_LOGS / "spmd_auto").glob("*.log"))
    assert len(run.ranks) == 4
    assert seen[-1] == (total, total) and all(t == total for _, t in seen)
    assert "reading [" in out.getvalue() and "100.0%" in out.getvalue()
    assert out.getvalue().endswith("\r")


def test_no_bar_when_not_a_terminal():
    out = io.StringIO()
    with ProgressBar(stream=out, min_total=0) as bar:
        load(FIXTURE_LOGS / "spmd_auto", jobs=1, progress=bar)
    assert out.getvalue() == ""
