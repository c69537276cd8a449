"""No false success: a graph whose run of torch's overlap scheduler fails is "partial", never
"reproduced", in the per-graph verdict, the JSON, the totals, the step and the last line, and
the command's status follows the same verdict.

The failure is real: overlap_cap_a's backward (0/0:1) is replayed with its recorded compute
estimates replaced by strings, so torch's OverlapScheduler raises a TypeError on it (as torch
2.15's scheduler did on every graph, through a roofline hook with another signature)."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURE_LOGS

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def partial_run():
    from tracekit.model import Diagnostics
    from tracekit.replay.engine import replay_sources
    from tracekit.replay.results import CapRequest, ReplayOptions, replay_document
    from tracekit.replay.selection import replay_sources_for

    sources = replay_sources_for(
        [str(FIXTURE_LOGS / "overlap_cap_a")], rank=None, all_ranks=False, graphs=[], diagnostics=Diagnostics()
    )
    assert [(s.compile_id, s.graph_index) for s in sources] == [("0/0", 0), ("0/0", 1)]
    sources[1].compute_estimates_us = {k: "1.0" for k in sources[1].compute_estimates_us}
    options = ReplayOptions(caps=[CapRequest(1.0)])
    results = replay_sources(sources, options)
    return results, replay_document(results, options, {"notes": []})


ERROR = "overlap scheduler failed: TypeError: unsupported operand type(s) for /: 'str' and 'float'"


def test_a_graph_the_scheduler_failed_on_is_partial_not_reproduced(partial_run):
    results, doc = partial_run
    assert [r.verdict for r in results] == ["reproduced", "partial"]
    assert results[1].incomplete() == [f"recorded cap 1.5 MB: {ERROR}", f"cap 1 MB: {ERROR}"]
    g = doc["graphs"][1]
    assert (g["verdict"], g["reproduced"], g["counts_reproduced"]) == ("partial", False, True)
    assert doc["graphs"][0]["reproduced"] is True


def test_totals_and_step_count_the_partial_graph(partial_run):
    _, doc = partial_run
    t = doc["totals"]
    assert (t["reproduced"], t["partial"], t["not_reproduced"], t["failed"]) == (1, 1, 0, 0)
    assert [(s["cap"], s["graphs"], s["graphs_scheduler_failed"], s["partial"]) for s in t["step"]] == [
        ("recorded", 1, 1, "partial: 1 of 2 graphs (the overlap scheduler failed on 1)"),
        ("1", 1, 1, "partial: 1 of 2 graphs (the overlap scheduler failed on 1)"),
    ]


def test_the_table_says_partial_and_its_last_line_agrees(partial_run):
    from tracekit.render.replay_text import render_text

    _, doc = partial_run
    text = render_text(doc, "table")
    assert text.rstrip("\n").splitlines()[-1] == (
        "2 graphs: 2 rebuilt, 1 reproduced, partial: 1 of 2 graphs, 0 not reproduced, 0 not rebuilt."
    )
    assert "0        0/0:1    87          1.5                5->5  6->6  0->0  PARTIAL       0.1658" in text
    assert f"ranks 0 graph 0/0:1 cap 1.5 MB: NOT SCHEDULED: {ERROR}" in text
    assert "\nrecorded: partial: 1 of 2 graphs (the overlap scheduler failed on 1)\n" in text
