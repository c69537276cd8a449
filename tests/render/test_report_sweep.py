"""``tracekit report PATH --replay REPLAY.json``: the "Cap sweep" section (tracekit/render/sweep.py)
rendered from the saved replay of the real overlap_cap_a / overlap_cap_b fixtures (torch's
overlap scheduler over the cap grid, ``--recommend``), parsed with html.parser; the command end
to end (exit statuses, no torch import)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import FIXTURE_LOGS, ROOT
from htmltree import parse
from report_docs import fixture_doc, replay_doc

from tracekit.cli import main
from tracekit.render.html import render_html

pytest.importorskip("torch")  # to make the replay documents

A = str(FIXTURE_LOGS / "overlap_cap_a")
GRID = ["1", "1.5", "2", "4", "8", "10.39", "16", "32", "64", "128", "256", "512", "1024", "2048"]
CONFIG = "torch._inductor.config.aten_distributed_optimizations.pre_bucketing_fsdp_collectives_bucket_cap_mb = 1.5"


def _sweep(replay):
    page = render_html(fixture_doc("overlap_cap_a"), replay)
    return page, parse(page).find("section", id="sweep")


def test_the_section_of_overlap_cap_a():
    page, sec = _sweep(replay_doc("overlap_cap_a"))
    ids = [s.attrs["id"] for s in parse(page).find_all("section")]
    assert ids == ["verdict", "world", "groups", "divergence", "sizes", "sweep", "did-nothing", "diagnostics"]
    assert '<a href="#sweep">Cap sweep</a>' in page
    rows = sec.find("table").find_all("tr")[1:]
    assert [r.attrs["data-cap"] for r in rows] == GRID
    cells = {r.attrs["data-cap"]: [td.text for td in r.find_all("td")] for r in rows}
    # cap 1 is as fast as the recorded 1.5 MB, no faster: keep the recorded cap
    assert cells["1.5"] == ["1.5", "recorded", "0.2751", "0.0431", "8.50", "yes", "recorded, recommended"]
    assert cells["1"] == ["1", "1", "0.2751", "0.0431", "8.50", "yes", ""]
    assert cells["2"] == ["2", "2", "0.2884", "0.0438", "13.00", "", ""]
    assert cells["64"] == ["64", "64", "0.3211", "0.0772", "15.00", "", ""]
    svgs = sec.find_all("svg")
    assert [s.attrs["class"] for s in svgs] == ["sweep est", "sweep peak", "sweep pareto"]
    for s in svgs[:2]:  # one point per cap, both caps marked
        assert len(s.find_all("circle")) == 14
        assert [(m.attrs["class"], m.attrs["data-cap"]) for m in s.find_all("line")
                if "mark" in m.attrs.get("class", "")] == [("mark recorded", "1.5"), ("mark recommended", "1.5")]
    front = [c.attrs["data-cap"] for c in svgs[2].find_all("circle") if c.attrs["class"] == "pt front"]
    assert front == ["1", "1.5"]  # both caps sit on the front's one point
    assert len(svgs[2].find_all("path")) == 1
    assert sec.find("pre").text == CONFIG
    assert sec.find("button").attrs["data-copy"] == CONFIG
    assert sec.find("p", id="sweep-recommended").text.startswith(
        "recommended cap: 1.5 MB (est 0.2751 ms, peak 8.50 MiB, the recorded cap: no cap is faster); set")


def test_overlap_cap_b_recommends_a_faster_cap_than_its_recorded_64():
    _, sec = _sweep(replay_doc("overlap_cap_b"))
    rows = {r.attrs["data-cap"]: [td.text for td in r.find_all("td")] for r in sec.find("table").find_all("tr")[1:]}
    assert rows["64"][1:3] == ["recorded", "0.3211"]
    assert "1.5" not in rows  # B's grid: its recorded 64, auto and the powers of two
    assert sec.find("p", id="sweep-recommended").text.startswith(
        "recommended cap: 1 MB (est 0.2751 ms, peak 8.50 MiB, 0.0460 ms faster than the recorded cap)")


def test_without_recommend_the_front_and_the_cap_are_computed_from_the_step():
    doc = copy.deepcopy(replay_doc("overlap_cap_a"))
    del doc["pareto_front"], doc["recommendation"]
    _, sec = _sweep(doc)
    assert sec.find("pre").text == CONFIG
    assert [c.attrs["data-cap"] for c in sec.find_all("circle") if c.attrs["class"] == "pt front"] == ["1", "1.5"]


def test_a_replay_without_schedules_says_so_and_strings_are_escaped():
    doc = copy.deepcopy(replay_doc("overlap_cap_a"))
    for s in doc["totals"]["step"]:
        s["est_ms"] = None
    _, sec = _sweep(doc)
    assert "no cap with an estimated step time" in sec.text and not sec.find_all("svg")
    doc = copy.deepcopy(replay_doc("overlap_cap_a"))
    doc["totals"]["step"][0]["cap"] = "<script>x</script>"
    page, _ = _sweep(doc)
    assert "<script>x</script>" not in page and "&lt;script&gt;x&lt;/script&gt;" in page


def test_report_replay_end_to_end_without_torch(tmp_path):
    saved = tmp_path / "replay.json"
    saved.write_text(json.dumps(replay_doc("overlap_cap_a")))
    out = tmp_path / "r.html"
    code = ("import sys\nfrom tracekit.cli import main\n"
            f"sys.argv = ['tracekit', 'report', {A!r}, '--replay', {str(saved)!r}, '-o', {str(out)!r}, '-j', '1']\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert e.code in (0, None), e.code\n"
            "print('TORCH' if 'torch' in sys.modules else 'NO TORCH')\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=60, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert p.stdout == "NO TORCH\n", p.stderr
    assert parse(out.read_text()).find("section", id="sweep").find("pre").text == CONFIG


@pytest.mark.parametrize("content, message", [
    (None, "cannot read"),
    ("{not json", "bad JSON"),
    ('{"schema": "tracekit.replay/2"}', "not a tracekit.replay/3 document"),
])
def test_a_bad_replay_file_is_one_line_and_exit_2(tmp_path, content, message):
    path = tmp_path / "replay.json"
    if content is not None:
        path.write_text(content)
    r = CliRunner().invoke(main, ["report", A, "--replay", str(path), "-o", str(tmp_path / "r.html")])
    assert r.exit_code == 2
    assert r.output.count("\n") == 1 and r.output.startswith("tracekit report: --replay ") and message in r.output


def test_a_replay_of_the_recorded_cap_alone_draws_one_point():
    doc = copy.deepcopy(replay_doc("overlap_cap_b"))
    doc["totals"]["step"] = doc["totals"]["step"][:1]
    del doc["pareto_front"], doc["recommendation"]
    _, sec = _sweep(doc)
    assert [r.attrs["data-cap"] for r in sec.find("table").find_all("tr")[1:]] == ["64"]
    assert [len(s.find_all("circle")) for s in sec.find_all("svg")] == [1, 1, 1]
    assert sec.find("pre").text.endswith("bucket_cap_mb = 64")
    assert "the recorded cap: no cap is faster" in sec.find("p", id="sweep-recommended").text
