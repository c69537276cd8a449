"""explain shows progress per graph while torch's passes and scheduler run, as replay does: on
saved_params, the forward (a recorded outcome) and the backward torch never pre-bucketed (whose
what-if runs torch's overlap scheduler): ``0/2 graphs`` before the first, ``2/2`` at the end.
And the "loading torch" status is cleared by what the bar shows next, never left on screen."""

from __future__ import annotations

import io

from click.testing import CliRunner

from conftest import FIXTURE_LOGS, ROOT
from tracekit.commands import progress


def _screen(written: str) -> str:
    """The last line of a terminal after ``written`` (``\\r`` returns to column 0, characters
    overwrite; ``\\n`` starts a line)."""
    line: list[str] = []
    col = 0
    for ch in written:
        if ch == "\r":
            col = 0
        elif ch == "\n":
            line, col = [], 0
        else:
            if col < len(line):
                line[col] = ch
            else:
                line.append(ch)
            col += 1
    return "".join(line).rstrip()


def _terminal(monkeypatch) -> io.StringIO:
    drawn = io.StringIO()
    drawn.isatty = lambda: True  # type: ignore[method-assign]
    real = progress.ProgressBar

    def on_terminal(*a, **k):
        k["stream"] = drawn
        return real(*a, **k)

    monkeypatch.setattr(progress, "ProgressBar", on_terminal)
    return drawn


def test_explain_feeds_progress_over_both_kinds_of_graph():
    from tracekit.explain.buckets import explain_mixed
    from tracekit.read.reader import graph_and_not_prebucketed_sources
    from tracekit.replay.selection import replay_sources_for

    mixed = replay_sources_for(
        [str(FIXTURE_LOGS / "saved_params")], reader=graph_and_not_prebucketed_sources
    )
    seen: list[tuple[int, int]] = []
    doc = explain_mixed(mixed, progress=lambda done, total: seen.append((done, total)))
    assert [(g["compile_id"], g["graph_index"], g.get("outcome")) for g in doc["graphs"]] == [
        ("0/0", 0, None), ("0/0", 1, "not pre-bucketed")]
    assert seen == [(0, 2), (1, 2), (2, 2)]


def test_the_commands_bar_counts_graphs_and_is_cleared(monkeypatch):
    from tracekit.commands.explain_cmd import explain

    drawn = _terminal(monkeypatch)
    monkeypatch.chdir(ROOT)
    r = CliRunner().invoke(explain, ["fixtures/logs/saved_params"])
    assert r.exit_code == 0, r.output
    out = drawn.getvalue()
    assert "explaining [------------------------------]   0.0% 0/2 graphs" in out
    assert "explaining [##############################] 100.0% 2/2 graphs" in out
    assert _screen(out) == ""  # the bar closed: nothing left on the line


def test_the_loading_torch_status_is_replaced_by_the_bar():
    drawn = io.StringIO()
    drawn.isatty = lambda: True  # type: ignore[method-assign]
    bar = progress.ProgressBar(stream=drawn, label="explaining", unit="graphs", min_total=2)
    bar.say("tracekit: loading torch…")
    assert _screen(drawn.getvalue()) == "tracekit: loading torch…"
    bar(0, 2)
    assert _screen(drawn.getvalue()) == "explaining [------------------------------]   0.0% 0/2 graphs"
    bar.close()
    assert _screen(drawn.getvalue()) == ""
