"""The report's Cap sweep as chromium lays it out (tests/browser.py, headless Debian chromium):
in each chart no two texts overlap, and no text lies over the plotted line, its points or a
marked cap's line; the overlap_cap_a and overlap_cap_b replays (recorded and recommended at one
cap; at 64 and 1 MB). The boxes are the browser's own (getBBox), so the font's real widths."""

from __future__ import annotations

import json

import pytest
from browser import visit
from golden.make_replay_golden import load_golden
from report_docs import fixture_doc

from tracekit.render.html import render_html

BOXES = """Array.from(document.querySelectorAll('svg.sweep'), svg => ({
  css: svg.getAttribute('class'),
  texts: Array.from(svg.querySelectorAll('text'), t => {
    const b = t.getBBox(); return [t.textContent, b.x, b.y, b.width, b.height]; }),
  drawn: Array.from(svg.querySelectorAll('path, circle, line.mark'), e => {
    const b = e.getBBox(); return [e.tagName + '.' + e.getAttribute('class'), b.x, b.y, b.width, b.height]; }),
}))"""


def _overlap(a, b) -> bool:
    (_, ax, ay, aw, ah), (_, bx, by, bw, bh) = a, b
    return ax < bx + bw and bx < ax + aw and ay < by + bh and by < ay + ah


def _line_boxes(drawn):
    """The plotted line as the boxes of its segments (its one box would be the whole chart)."""
    return [d for d in drawn if not d[0].startswith("path")]


@pytest.mark.parametrize("case, marks", [
    ("overlap_cap_a", ["recorded, recommended"]),
    ("overlap_cap_b", ["recommended", "recorded"]),
])
def test_no_label_overprints_another_or_the_chart(tmp_path, case, marks):
    replay = json.loads(load_golden()[f"replay-recommend/{case}:json"]["stdout"])
    page = tmp_path / "report.html"
    page.write_text(render_html(fixture_doc(case), replay), encoding="utf-8")
    seen = visit(page.as_uri(), str(tmp_path / "profile"), {"charts": BOXES})
    assert seen.problems() == []
    charts = seen.values["charts"]
    assert [c["css"] for c in charts] == ["sweep est", "sweep peak", "sweep pareto"]
    for c in charts:
        texts = c["texts"]
        clashes = [(a[0], b[0]) for i, a in enumerate(texts) for b in texts[i + 1:] if _overlap(a, b)]
        assert clashes == [], c["css"]
        over = [(t[0], d[0]) for t in texts for d in _line_boxes(c["drawn"]) if _overlap(t, d)]
        assert over == [], c["css"]
        # the plotted line: no text inside the chart's plot area (the path's box)
        (path,) = [d for d in c["drawn"] if d[0] in ("path.line", "path.front")] or [None]
        if path is not None and path[3] and path[4]:
            assert [t[0] for t in texts if _overlap(t, path)] == [], c["css"]
    names = [t[0] for t in charts[0]["texts"] if t[0] in marks]
    assert names == marks
