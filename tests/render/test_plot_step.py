"""``--plot`` draws what the recommendation decides by: the whole step's est ms, exposed ms and
peak memory against the cap, with the recorded and the recommended caps marked. Checked on the
figure's data (its axes' lines and labels, not pixels), from the replay documents the golden
replays hold (``tracekit replay --recommend --format json`` on the fixture logs)."""

from __future__ import annotations

import json

import pytest

from golden.make_replay_golden import load_golden
from tracekit.render.plot import figure, plot_replay, step_series

pytest.importorskip("matplotlib")

CAPS = [1.0, 1.5, 2.0, 4.0, 8.0, 10.385513305664062, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0]


def _doc(case: str) -> dict:
    return json.loads(load_golden()[case]["stdout"])


def _lines(ax) -> dict[str, tuple[list[float], list[float]]]:
    return {ln.get_label(): (list(ln.get_xdata()), list(ln.get_ydata())) for ln in ax.get_lines()}


def test_the_step_panel_draws_est_exposed_and_peak_against_the_cap():
    doc = _doc("replay-recommend/overlap_cap_a:json")
    fig, panels = figure(doc)
    try:
        assert panels == 1 + 2  # the step, then each graph
        ax = fig.axes[0]
        assert ax.get_title() == "whole step: what the recommendation decides by"
        assert ax.get_xscale() == "log" and ax.get_xlabel() == "bucket cap (MB)"
        lines = _lines(ax)
        assert lines["est ms (step)"] == (CAPS, [0.2751, 0.2751, 0.2871, 0.2983] + [0.3204] * 10)
        assert lines["exposed ms"] == (CAPS, [0.0431, 0.0431, 0.0438, 0.0557] + [0.0772] * 10)
        # the caps marked: a vertical line each, at the cap (recommended: keep the recorded 1.5)
        assert lines["recorded 1.5 MB"][0] == [1.5, 1.5] and lines["recommended 1.5 MB"][0] == [1.5, 1.5]
        (peak_ax,) = [a for a in fig.axes if a.get_ylabel() == "peak memory (MiB)"]
        peak = _lines(peak_ax)["peak MiB"]
        assert peak[0] == CAPS
        assert [round(b * 2**20) for b in peak[1]] == [8912900, 8912900, 13631492, 15204356] + [15728644] * 10
        assert [t.get_text() for t in ax.get_legend().get_texts()] == [
            "est ms (step)", "exposed ms", "peak MiB", "recorded 1.5 MB", "recommended 1.5 MB"]
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_a_recommended_cap_other_than_the_recorded_one_is_marked_apart():
    # overlap_cap_b ran at 64 MB; 1 MB is estimated faster (0.2751 against 0.3204 ms)
    data = step_series(_doc("replay-recommend/overlap_cap_b:json"))
    assert (data["recorded"], data["recommended"], data["partial"]) == (64.0, 1.0, None)
    assert (data["est_ms"][0], data["est_ms"][data["caps"].index(64.0)]) == (0.2751, 0.3204)
    fig, _ = figure(_doc("replay-recommend/overlap_cap_b:json"))
    try:
        lines = _lines(fig.axes[0])
        assert lines["recorded 64 MB"][0] == [64.0, 64.0]
        assert lines["recommended 1 MB"][0] == [1.0, 1.0]
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_a_document_without_a_step_draws_the_graphs_alone(tmp_path):
    doc = _doc("replay-recommend/spmd_auto:json")
    doc["totals"].pop("step")
    assert step_series(doc) is None
    assert plot_replay(doc, str(tmp_path / "p.png")) == 2
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
