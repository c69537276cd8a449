"""One number, one value (issue 39): a cap of 0.0000001 MB is printed as ``1e-07``, never ``0``,
everywhere a cap prints: replay's tables (other caps, after torch's scheduler, the whole step),
its JSON, the --trace-out files and their metadata, the report's cap sweep, the --plot marks,
and the texts of caps in explain and bucketing's reasons. overlap_cap_a at --cap-mb 0.0000001
(nothing merges: AG 6->6 forward, AG 5->5 and RS 6->6 backward, as recorded at 1.5 MB)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import FIXTURE_LOGS
from htmltree import parse

from bucketing.decisions import MB, mb_text
from tracekit.cli import main
from tracekit.explain.not_prebucketed import cap_text
from tracekit.render.text import fmt_caps, fmt_mb

LOGS = str(FIXTURE_LOGS / "overlap_cap_a")


def _out(*args: str) -> str:
    r = CliRunner().invoke(main, list(args))
    assert r.exit_code == 0, r.output
    return r.stdout


def test_the_texts_of_a_tiny_cap():
    assert fmt_mb(1e-07) == "1e-07"
    assert fmt_caps([1e-07, None]) == {None: "-", 1e-07: "1e-07"}  # was {1e-07: "0"}
    assert fmt_caps([1e-07, 1.0001e-07, 1.5]) == {None: "-", 1e-07: "1e-07", 1.0001e-07: "1.0001e-07", 1.5: "1.5"}
    assert fmt_caps([1.001, 1.002, 1.0019])[1.0019] == "1.0019"  # as before
    assert mb_text(1e-07 * MB) == "1e-07" and mb_text(27.38 * MB) == "27.38"  # bucketing's reasons
    assert cap_text(1e-07) == "1e-07" and cap_text(27.3826) == "27.38"  # explain's what-if


def test_replay_text_and_json_print_the_tiny_cap():
    text = _out("replay", LOGS, "--cap-mb", "0.0000001")
    rows = [ln.split() for ln in text.splitlines() if "1e-07" in ln]
    # Other caps (both graphs), after torch's scheduler (both graphs), the whole step (cap, cap MB)
    assert [r[:4] for r in rows] == [
        ["0", "0/0:0", "1e-07", "override"], ["0", "0/0:1", "1e-07", "override"],
        ["0", "0/0:0", "1e-07", "6/0/0"], ["0", "0/0:1", "1e-07", "5/6/0"], ["1e-07", "1e-07", "17", "0.2563"]]
    assert not [ln for ln in text.splitlines() if ln.split()[2:3] == ["0"] and "override" in ln]

    doc = json.loads(_out("replay", LOGS, "--cap-mb", "0.0000001", "--format", "json"))
    assert [r["bucket_cap_mb"] for g in doc["graphs"] for r in g["replays"]] == [1e-07, 1e-07]
    assert [(s["cap"], s["bucket_cap_mb"]) for s in doc["totals"]["step"]] == [("recorded", [1.5]), ("1e-07", [1e-07])]


def test_the_timeline_report_and_plot_print_the_tiny_cap(tmp_path):
    out = tmp_path / "t"
    saved = tmp_path / "r.json"
    _out("replay", LOGS, "--cap-mb", "0.0000001", "--recommend", "--format", "json", "-o", str(saved),
         "--trace-out", str(out))
    tiny = json.loads((out / "cap_1e-07MB.json").read_text())
    assert (tiny["metadata"]["cap"], tiny["metadata"]["bucket_cap_mb"]) == ("1e-07", [1e-07])

    page = parse(_out("report", LOGS, "--replay", str(saved), "--jobs", "1"))
    (row,) = page.find_all("tr", data_cap="1e-07")
    assert row.find_all("td")[0].text == "1e-07"
    assert not page.find_all("tr", data_cap="0")

    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from tracekit.render.plot import figure, step_series

    doc = json.loads(saved.read_text())
    doc["recommendation"]["cap_mb"] = 1e-07  # the same document, recommending the tiny cap
    assert step_series(doc)["caps"][0] == 1e-07
    fig, _ = figure(doc)
    try:
        labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        assert labels[-2:] == ["recorded 1.5 MB", "recommended 1e-07 MB"]
    finally:
        plt.close(fig)
