"""Progress moves per graph and cap (issue 41): replay_sources' ``on_cap`` hears of the
reproduction and of every other cap of every distinct graph, in order (spmd_auto, all ranks:
the forward and the backward, shared by the 4 ranks; the recorded cap, then 1 and 64 MB)."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURE_LOGS

pytest.importorskip("torch")


def test_replay_feeds_progress_per_graph_and_cap():
    from tracekit.replay.engine import replay_sources
    from tracekit.replay.results import CapRequest, ReplayOptions
    from tracekit.replay.selection import replay_sources_for

    seen = []
    sources = replay_sources_for([str(FIXTURE_LOGS / "spmd_auto")], all_ranks=True)
    options = ReplayOptions(caps=[CapRequest(1.0), CapRequest(64.0)])
    replay_sources(sources, options, on_cap=lambda *step: seen.append(step))
    assert seen == [(1, 2, 1, 3), (1, 2, 2, 3), (1, 2, 3, 3), (2, 2, 1, 3), (2, 2, 2, 3), (2, 2, 3, 3)]


def test_the_commands_bar_names_the_graph_and_counts_caps(monkeypatch):
    """The command's bar, drawn on a terminal: the last graph, all its caps."""
    import io

    from click.testing import CliRunner

    from tests.conftest import ROOT
    from tracekit.commands import progress
    from tracekit.commands.replay_cmd import replay

    drawn = io.StringIO()
    drawn.isatty = lambda: True  # type: ignore[method-assign]
    real = progress.ProgressBar

    def on_terminal(*a, **k):
        k["stream"] = drawn
        return real(*a, **k)

    monkeypatch.setattr(progress, "ProgressBar", on_terminal)
    monkeypatch.chdir(ROOT)
    r = CliRunner().invoke(replay, ["--cap-mb", "1,64", "--jobs", "1", "fixtures/logs/spmd_auto"])
    assert r.exit_code == 0
    assert "replaying graph 2/2 [##############################] 100.0% 3/3 caps" in drawn.getvalue()
