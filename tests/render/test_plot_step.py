"""``--plot`` draws what the recommendation decides by: the whole step's est ms, exposed ms and
peak memory against the cap, with the recorded and the recommended caps marked. Checked on the
figure's data (its axes' lines and labels, not pixels), from the replay documents the golden
replays hold (``tracekit replay --recommend --format json`` on the fixture logs)."""

from __future__ import annotations

import copy
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
        assert lines["est ms (step)"] == (CAPS, [0.2751, 0.2751, 0.2884, 0.299] + [0.3211] * 10)
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
    # overlap_cap_b ran at 64 MB; 1 MB is estimated faster (0.2751 against 0.3211 ms)
    data = step_series(_doc("replay-recommend/overlap_cap_b:json"))
    assert (data["recorded"], data["recommended"], data["partial"]) == (64.0, 1.0, None)
    assert (data["est_ms"][0], data["est_ms"][data["caps"].index(64.0)]) == (0.2751, 0.3211)
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


def _drawn(fig):
    """The figure's axes that carry a legend or cap ticks, with the renderer (drawn once)."""
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _labels(ax, minor=False):
    return [t.get_text() for t in ax.get_xticklabels(minor=minor) if t.get_visible() and t.get_text()]


def _apart(boxes) -> bool:
    return all(a.x1 <= b.x0 for a, b in zip(boxes, boxes[1:]))


@pytest.mark.parametrize("case, ticks", [
    # the recorded and recommended caps first, then the ends, then every cap that fits beside them
    ("overlap_cap_a", ["1.5", "4", "8", "16", "32", "64", "128", "512", "2048"]),
    ("fsdp_tp2_overlap", ["1", "2", "4", "10.4", "32", "64", "128", "512", "2048"]),
])
def test_cap_ticks_are_plain_mb_and_never_overprint(case, ticks):
    fig, _ = figure(_doc(f"replay-recommend/{case}:json"))
    try:
        renderer = _drawn(fig)
        for ax in fig.axes:
            assert _labels(ax) == ticks and _labels(ax, minor=True) == []
            shown = [t for t in ax.get_xticklabels() if t.get_text()]
            assert _apart([t.get_window_extent(renderer) for t in shown])
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_a_sweep_within_one_decade_labels_its_caps_not_powers_of_ten():
    """Caps of 20, 30 and 40 MB: matplotlib's log axis labelled them 2x10^1 3x10^1 4x10^1 as
    minor ticks, run together; the caps themselves are the labels now."""
    doc = copy.deepcopy(_doc("replay-recommend/overlap_cap_b:json"))
    steps = list({s["bucket_cap_mb"][0]: s for s in doc["totals"]["step"]
                  if s["bucket_cap_mb"] in ([16.0], [32.0], [64.0]) and s["cap"] != "recorded"}.values())
    for s, mb in zip(steps, (20.0, 30.0, 40.0), strict=True):
        s["bucket_cap_mb"] = [mb]
    doc["totals"]["step"] = steps
    doc["recommendation"]["cap_mb"] = 30.0
    doc["graphs"] = []
    fig, panels = figure(doc)
    try:
        _drawn(fig)
        assert panels == 1 and _labels(fig.axes[0]) == ["20", "30", "40"]
        assert _labels(fig.axes[0], minor=True) == []
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


@pytest.mark.parametrize("case", ["overlap_cap_a", "fsdp_tp2_overlap"])
def test_the_legends_cover_no_line_nor_title(case):
    fig, panels = figure(_doc(f"replay-recommend/{case}:json"))
    try:
        renderer = _drawn(fig)
        legends = [ax for ax in fig.axes if ax.get_legend() is not None]
        assert len(legends) == panels == 3
        for ax in legends:
            leg = ax.get_legend().get_window_extent(renderer)
            plot_area = ax.get_window_extent(renderer)  # every data line is drawn inside it
            for line in ax.get_lines():
                assert plot_area.contains(*line.get_window_extent(renderer).p0)
            assert leg.y0 >= plot_area.y1  # above the axes, so over no line
            assert ax.title.get_window_extent(renderer).y0 >= leg.y1  # the title above the legend
            assert not any(leg.overlaps(o.get_window_extent(renderer)) for o in fig.axes if o is not ax
                           and o.bbox.bounds != ax.bbox.bounds)  # nor over another panel
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_a_graph_panel_plots_the_comm_ms_the_scheduler_table_prints():
    """fsdp_tp2_overlap's backward runs 2 TP all-reduces beside its FSDP collectives: the table
    after torch's scheduler prints comm ms 0.1004 at the recorded cap (all collectives, final
    1/1/2), the FSDP groups' estimate alone is 0.0613; the panel draws the table's figure and
    says so."""
    doc = _doc("replay-recommend/fsdp_tp2_overlap:json")
    fig, _ = figure(doc)
    try:
        ax = next(a for a in fig.axes if a.get_title() == "ranks 0, graph 0/0:1")
        assert ax.get_ylabel() == "collectives after (all groups)"
        (twin,) = [a for a in fig.axes if a is not ax and a.bbox.bounds == ax.bbox.bounds]
        assert twin.get_ylabel() == "comm ms (all groups)"
        (comm,) = twin.get_lines()
        assert comm.get_label() == "comm ms, all collectives (the table's)"
        xs, ys = list(comm.get_xdata()), list(comm.get_ydata())
        assert ys[xs.index(10.4)] == 0.1004 and ys[xs.index(1.0)] == 0.2239
        counts = dict(zip(*(list(v) for v in _lines(ax)["collectives after"]), strict=True))
        assert (counts[10.4], counts[1.0]) == (4, 15)  # final AG/RS/AR 1/1/2 and 6/7/2
        assert [t.get_text() for t in ax.get_legend().get_texts()] == [
            "collectives after", "comm ms, all collectives (the table's)", "recorded 10.4 MB"]
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_without_a_schedule_the_panel_says_it_counts_the_fsdp_groups():
    doc = copy.deepcopy(_doc("replay-recommend/fsdp_tp2_overlap:json"))
    for g in doc["graphs"]:
        for r in [g["reproduction"], *g["replays"]]:
            r["comm_ms"] = None
    fig, _ = figure(doc)
    try:
        ax = next(a for a in fig.axes if a.get_title() == "ranks 0, graph 0/0:1")
        assert ax.get_ylabel() == "collectives after (FSDP groups)"
        (twin,) = [a for a in fig.axes if a is not ax and a.bbox.bounds == ax.bbox.bounds]
        (comm,) = twin.get_lines()
        assert comm.get_label() == "est comm ms, FSDP groups only"
        xs, ys = list(comm.get_xdata()), list(comm.get_ydata())
        assert (ys[xs.index(10.4)], ys[xs.index(1.0)]) == (0.0613, 0.1847)
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
