"""The report's Cap sweep charts (tracekit/render/sweep.py) read at a glance: their axes span the
data, not 0 to the largest value, so the few per cent between caps show, and say where they start;
the marked caps' names sit above the chart, apart from each other, over no line. Checked on the
SVG of the golden replay documents of the real overlap_cap_a / overlap_cap_b fixtures
(``tracekit replay --recommend --format json``); the browser's own boxes are checked in
test_sweep_browser.py."""

from __future__ import annotations

import copy
import json

from golden.make_replay_golden import load_golden
from htmltree import parse

from tracekit.render.sweep import data_range, mark_labels, section_sweep


def _svgs(case: str, edit=None):
    doc = json.loads(load_golden()[f"replay-recommend/{case}:json"]["stdout"])
    if edit:
        doc = copy.deepcopy(doc)
        edit(doc)
    return parse(section_sweep(doc)).find_all("svg")


def _texts(svg, cls):
    return [t.text for t in svg.find_all("text") if t.attrs.get("class", "").split()[:1] == [cls]]


def test_the_axes_span_the_data_with_a_margin_and_say_they_do_not_start_at_0():
    est, peak, pareto = _svgs("overlap_cap_a")
    # est ms 0.2751 to 0.3211 (3% and 17% above the least): the axis from 0.2682 to 0.328
    assert (est.attrs["data-y-min"], est.attrs["data-y-max"]) == ("0.2682", "0.328")
    assert _texts(est, "title") == ["estimated step ms against the cap (axis from 0.2682 ms, not 0)"]
    assert _texts(est, "axis")[:3] == ["0.2751 ms", "0.2981 ms", "0.3211 ms"]  # the least, mid, largest
    assert (peak.attrs["data-y-min"], peak.attrs["data-y-max"]) == ("7.525", "15.975")
    assert _texts(peak, "title") == ["peak memory MiB against the cap (axis from 7.525 MiB, not 0)"]
    assert [pareto.attrs[k] for k in ("data-x-min", "data-x-max", "data-y-min", "data-y-max")] == [
        "7.525", "15.975", "0.2682", "0.328"]
    assert _texts(pareto, "title") == [
        "Pareto front: estimated step ms against peak MiB (lower left is better; ms and MiB axes not from 0)"]
    # cap 2 is 0.0133 ms (5%) slower than cap 1: 23 px apart, where the axis from 0 gave 4
    cy = {c.attrs["data-cap"]: float(c.attrs["cy"]) for c in est.find_all("circle")}
    assert round(cy["1"] - cy["2"], 1) == 22.7


def test_an_axis_whose_margin_would_cross_0_starts_at_0_and_says_nothing():
    assert data_range([0.01, 1.0]) == (0.0, 1.1485)
    assert data_range([2.0, 2.0]) == (1.97, 2.03)  # one value: a tenth of it, a margin of that

    def near_zero(doc):
        for s in doc["totals"]["step"]:
            s["est_ms"] = 0.0001 if s["bucket_cap_mb"] == [1.0] else s["est_ms"]

    est = _svgs("overlap_cap_b", near_zero)[0]
    assert est.attrs["data-y-min"] == "0"
    assert _texts(est, "title") == ["estimated step ms against the cap"]


def test_the_marked_caps_names_sit_above_the_chart_apart():
    # overlap_cap_a: recorded and recommended both 1.5 MB, one label
    est = _svgs("overlap_cap_a")[0]
    assert _texts(est, "mark") == ["recorded, recommended"]
    # overlap_cap_b: recommended 1 MB, recorded 64 MB, one row
    est = _svgs("overlap_cap_b")[0]
    assert _texts(est, "mark") == ["recommended", "recorded"]
    top = min(float(line.attrs["y1"]) for line in est.find_all("line") if "mark" in line.attrs["class"])
    assert all(float(t.attrs["y"]) <= top - 4 for t in est.find_all("text") if "mark" in t.attrs["class"])
    # caps close together go a row down, and near the right end the name goes left of its mark
    assert mark_labels({"recorded": 1.0, "recommended": 1.2}, {"recorded": 100.0, "recommended": 110.0}) == [
        ("recorded", 103.0, 0, "start"), ("recommended", 113.0, 1, "start")]
    assert mark_labels({"recorded": 2048.0}, {"recorded": 524.0}) == [("recorded", 521.0, 0, "end")]


def test_the_cap_labels_never_touch():
    """1024 and 2048 are 40 px apart; 1, 1.5 and 2 (overlap_cap_a's grid) closer: only the
    labels that fit are written, the ends always."""
    est = _svgs("overlap_cap_a")[0]
    ticks = [(float(t.attrs["x"]), t.text) for t in est.find_all("text") if t.attrs.get("class") == "axis tick"]
    assert [t for _, t in ticks] == ["1", "4", "16", "64", "256", "1024", "2048"]
    halves = [(x - 3.5 * len(t), x + 3.5 * len(t)) for x, t in ticks]  # at most 7 px a character
    assert all(a[1] <= b[0] for a, b in zip(halves, halves[1:]))
