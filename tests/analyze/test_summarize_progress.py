"""The progress bar: drawn on a terminal only, erased at the end, fed by load()."""

from __future__ import annotations

import io

from conftest import FIXTURE_LOGS
from tracekit.commands.progress import ProgressBar
from tracekit.read.reader import load


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


def test_a_count_bar_and_a_status_line_on_a_terminal():
    out = FakeTTY()
    with ProgressBar(stream=out, label="replaying", unit="graphs", min_total=2) as bar:
        bar.say("importing torch ...")
        assert out.getvalue() == "\rimporting torch ...\r"
        bar(1, 3)
        bar(3, 3)
    text = out.getvalue()
    assert "replaying [##########--------------------]  33.3% 1/3 graphs" in text
    assert "100.0% 3/3 graphs" in text and text.endswith("\r")
    quiet = io.StringIO()
    with ProgressBar(stream=quiet, unit="graphs", min_total=2) as bar:
        bar.say("importing torch ...")
        bar(1, 3)
    assert quiet.getvalue() == ""


def test_explain_feeds_the_bar_one_graph_at_a_time():
    from tracekit.explain.buckets import explain_document
    from tracekit.replay.selection import replay_sources_for

    seen = []
    sources = replay_sources_for([str(FIXTURE_LOGS / "spmd_auto")])
    explain_document(sources, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 2), (2, 2)]


def test_replay_feeds_the_bar_one_distinct_replay_at_a_time():
    from tracekit.replay.engine import replay_sources
    from tracekit.replay.results import ReplayOptions
    from tracekit.replay.selection import replay_sources_for

    seen = []
    sources = replay_sources_for([str(FIXTURE_LOGS / "spmd_auto")], all_ranks=True)
    replay_sources(sources, ReplayOptions(), progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 2), (2, 2)]  # 4 ranks share the forward and the backward replays


def test_replay_and_explain_reading_feeds_the_bar_file_by_file():
    from tracekit.replay.selection import replay_sources_for

    seen = []
    replay_sources_for([str(FIXTURE_LOGS / "spmd_auto")], all_ranks=True,
                       progress=lambda done, total: seen.append((done, total)))
    sizes = sorted(p.stat().st_size for p in (FIXTURE_LOGS / "spmd_auto").glob("*.log"))
    total = sum(sizes)
    assert len(seen) == 4 and seen[-1] == (total, total) and all(t == total for _, t in seen)
    assert [b - a for (a, _), (b, _) in zip([(0, 0), *seen], seen)] != [] and sorted(
        b - a for (a, _), (b, _) in zip([(0, 0), *seen], seen)) == sizes
