"""The ``tracekit report`` page in a real browser: Debian's chromium, headless, over the DevTools
pipe (tests/browser.py). Asserts the DOM after the page's script ran (rank map, rank finder),
no console error or warning, no uncaught exception, no CSP violation, and no request but the
page's own file. CI installs chromium (.ci/run); nothing here is skipped."""

from __future__ import annotations

from browser import visit
from htmltree import parse
from report_docs import distinct_run, fixture_doc, v2_doc, wide_doc

from tracekit.render.summary_document import summary_document

from tracekit.render.html import render_html

TYPE_RANK = ('var box = document.getElementById("rank-find"); box.value = "{}"; '
             'box.dispatchEvent(new Event("input"))')
PROBES = {
    "js": "document.body.dataset.js",
    "cells": "Array.from(document.querySelectorAll('#rank-map i'), c => c.className)",
    "found": "document.getElementById('rank-found').textContent",
    "hits": "Array.from(document.querySelectorAll('.hit'), e => e.dataset.where)",
    "buttons": "Array.from(document.querySelectorAll('button.copy'), b => b.hidden)",
    "sections": "Array.from(document.querySelectorAll('section'), s => s.id)",
}


def open_page(tmp_path, doc, fragment="", steps=()):
    page = tmp_path / "report.html"
    page.write_text(render_html(doc), encoding="utf-8")
    url = page.as_uri()
    seen = visit(url + fragment, str(tmp_path / "profile"), PROBES, steps=list(steps))
    assert seen.problems() == []
    assert seen.requests == [url]  # the page itself, nothing else
    return seen


def test_diverge_rank_in_chromium(tmp_path):
    seen = open_page(tmp_path, fixture_doc("diverge_rank"), steps=[TYPE_RANK.format(3)])
    v = seen.values
    assert v["js"] == "ready"
    assert v["sections"] == ["verdict", "world", "groups", "divergence", "sizes", "did-nothing",
                             "diagnostics"]
    assert v["cells"] == ["c0", "c0", "c0", "c1 sel"]  # ranks 0-2 one group, rank 3 another
    assert v["found"] == "rank 3: group 2; divergence; schedule divergence"
    # the differing ranks, the rows: 9 bucketing differences, 2 schedule ones
    assert v["hits"] == ["group 2"] + ["divergence"] * (1 + 9) + ["schedule divergence"] * 2
    dom = parse(seen.dom)  # the DOM chromium built, script run
    assert dom.find("body").attrs["data-js"] == "ready" and dom.find("body").attrs["data-found"] == "13"
    assert dom.find("section", id="divergence").attrs["data-differing-ranks"] == "3"
    assert len(dom.find("div", id="rank-map").find_all("i")) == 4
    assert len(dom.find("section", id="sizes").find_all("rect")) == 54


def test_1024_ranks_in_chromium(tmp_path):
    seen = open_page(tmp_path, wide_doc(), fragment="#rank=777")
    v = seen.values
    assert v["js"] == "ready"
    assert len(v["cells"]) == 1024
    assert {i for i, c in enumerate(v["cells"]) if c.startswith("c1")} == {300, 777}
    assert v["cells"][777] == "c1 sel" and v["cells"][0] == "c0"
    assert v["found"] == "rank 777: group 2; divergence; schedule divergence"
    dom = parse(seen.dom)
    assert dom.find("section", id="divergence").attrs["data-differing-ranks"] == "300,777"


def test_1024_rank_groups_in_chromium(tmp_path):
    """The worst case, each rank its own group: groups past the 64th are table rows."""
    seen = open_page(tmp_path, summary_document(distinct_run()), fragment="#rank=1000")
    v = seen.values
    assert v["cells"][:9] == ["c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "cx"]
    assert v["cells"][1000] == "cx sel"
    assert v["found"] == "rank 1000: group 1001; divergence"
    assert v["hits"] == ["group 1001", "divergence"]  # its rows are past the first 400


def test_summary_v2_in_chromium(tmp_path):
    seen = open_page(tmp_path, v2_doc(), steps=[TYPE_RANK.format(5)])
    v = seen.values
    assert v["cells"] == ["c0", "c0", "c0", "c1", "missing", "missing sel", "missing", "missing"]
    assert v["found"] == "rank 5: missing"
    assert v["buttons"] == [False]  # the explain command's copy button, shown by the script
    seen = visit((tmp_path / "report.html").as_uri(), str(tmp_path / "profile2"), PROBES,
                 steps=[TYPE_RANK.format(1)])
    assert seen.values["found"] == "rank 1: group 1; did nothing" and seen.problems() == []


SWEEP_PROBES = {
    "js": "document.body.dataset.js",
    "sections": "Array.from(document.querySelectorAll('section'), s => s.id)",
    "points": "document.querySelectorAll('#sweep svg.est circle').length",
    "rec_row": "Array.from(document.querySelectorAll('#sweep tr.rec'), r => r.dataset.cap)",
    "hover": ("(function () { var c = document.querySelector('#sweep svg.peak circle[data-cap=\"64\"]');"
              " c.dispatchEvent(new MouseEvent('mouseover', {bubbles: true}));"
              " return Array.from(document.querySelectorAll('#sweep tr.hit'), r => r.dataset.cap); })()"),
    "copy": "Array.from(document.querySelectorAll('#sweep button.copy'), b => b.hidden)",
    "config": "document.querySelector('#sweep pre.config').textContent",
    "svg_box": "document.querySelector('#sweep svg.est').getBoundingClientRect().width",
}


def test_cap_sweep_in_chromium(tmp_path):
    """The Cap sweep section of overlap_cap_a's report with its saved replay (--recommend)."""
    import pytest

    pytest.importorskip("torch")  # the replay document is made by tracekit replay
    from report_docs import replay_doc

    page = tmp_path / "report.html"
    page.write_text(render_html(fixture_doc("overlap_cap_a"), replay_doc("overlap_cap_a")), encoding="utf-8")
    url = page.as_uri()
    seen = visit(url + "#sweep", str(tmp_path / "profile"), SWEEP_PROBES)
    assert seen.problems() == []
    assert seen.requests == [url]
    v = seen.values
    assert v["js"] == "ready"
    assert v["sections"] == ["verdict", "world", "groups", "divergence", "sizes", "sweep", "did-nothing",
                             "diagnostics"]
    assert v["points"] == 14
    # the recommended cap's row, marked by the script: the recorded 1.5 MB, as no cap is faster
    assert v["rec_row"] == ["1.5"]
    assert v["hover"] == ["64"]
    assert v["copy"] == [False]
    assert v["config"].endswith("pre_bucketing_fsdp_collectives_bucket_cap_mb = 1.5")
    assert v["svg_box"] == 560
    dom = parse(seen.dom)
    assert len(dom.find("section", id="sweep").find_all("tr", **{"class": "rec"})) == 1


def test_hsdp_mesh_in_chromium(tmp_path):
    """A healthy 2-D run: one rank group (no divergence), the mesh's groups shown under World,
    and a rank looked up is found in its group and in the replicate all-reduces' row."""
    seen = open_page(tmp_path, fixture_doc("hsdp"), steps=[TYPE_RANK.format(2)])
    v = seen.values
    assert v["js"] == "ready"
    assert v["sections"] == ["verdict", "world", "groups", "divergence", "sizes", "did-nothing",
                             "diagnostics"]
    assert v["cells"] == ["c0", "c0", "c0 sel", "c0"]
    assert v["found"] == "rank 2: group 1; mesh not pre-bucketed"
    dom = parse(seen.dom)
    assert dom.find("p", id="mesh").text.startswith("Mesh: world 4 = replicate 2 × shard 2;")
