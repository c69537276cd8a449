"""One number, one value (issue 39): summarize's text table, JSON, CSV and the HTML report give
the same totals for the same logs, graphs torch never pre-bucketed included, and the
did-nothing count equals its list. saved_params: the forward's 8 all-gathers merged 8->1 on each
of 4 ranks; the backward's 8 reduce-scatters (298,144 B) were never pre-bucketed and run one by
one on each rank: AG 32->4, RS 32->32, 2.277 -> 2.273 MB over every rank, 4 + 4 graphs."""

from __future__ import annotations

import csv
import io
import json

from click.testing import CliRunner
from conftest import FIXTURE_LOGS
from htmltree import parse

from tracekit.cli import main
from tracekit.model.rankset import rank_members

LOGS = str(FIXTURE_LOGS / "saved_params")
#: The table's total row, read off saved_params (AG, RS, AR before->after; MB before, after).
TABLE = ["32->4", "32->32", "0->0", "2.277", "2.273"]


def _out(*args: str) -> str:
    r = CliRunner().invoke(main, [*args])
    assert r.exit_code == 0, r.output
    return r.stdout


def test_text_json_csv_and_report_totals_are_the_tables():
    total = next(ln for ln in _out("summarize", LOGS, "--jobs", "1").splitlines() if ln.startswith("total "))
    cells = total.split()
    assert cells[1:5] == ["4", "graphs", "+", "4"]  # 4 outcomes + 4 graphs never pre-bucketed
    assert [c for c in cells[-6:] if c != "="] == TABLE

    doc = json.loads(_out("summarize", LOGS, "--jobs", "1", "--format", "json"))
    t = doc["totals"]
    got = [f"{t['collectives'][c]['before']}->{t['collectives'][c]['after']}"
           for c in ("all_gather", "reduce_scatter", "all_reduce")]
    assert got + [f"{t['mb_before']:g}", f"{t['mb_after']:g}"] == TABLE
    assert (t["graphs"], t["not_prebucketed"]) == (4, 4)

    rows = list(csv.DictReader(io.StringIO(_out("summarize", LOGS, "--jobs", "1", "--format", "csv"))))
    row, extra = [r for r in rows if r["section"] == "total"]
    got = [f"{row[f'{k}_before']}->{row[f'{k}_after']}" for k in ("AG", "RS", "AR")]
    assert got + [row["mb_before"], row["mb_after"]] == TABLE
    assert (row["value"], extra["field"], extra["value"]) == ("4", "not_prebucketed", "4")

    page = parse(_out("report", LOGS, "--jobs", "1"))
    stats = [s.text for s in page.find("p", class_="stats muted").find_all("span")]
    assert stats == ["4 ranks", "4 graph outcomes", "+ 4 not pre-bucketed", "AG 32->4", "RS 32->32",
                     "AR 0->0", "2.277 MB \u2192 2.273 MB"]


def test_the_did_nothing_count_is_its_list():
    """totals.did_nothing counts each rank's graph of the did-nothing list: saved_params' list is
    one item (0/0 backward, never pre-bucketed, ranks 0-3), so 4; overlap_cap_a's two items
    (forward AG 6->6, backward AG 5->5 and RS 6->6, ranks 0-1) make 4 too."""
    for name, want in (("saved_params", [("0/0", 1, "0-3")]), ("overlap_cap_a", [("0/0", 0, "0-1"), ("0/0", 1, "0-1")])):
        doc = json.loads(_out("summarize", str(FIXTURE_LOGS / name), "--jobs", "1", "--format", "json"))
        items = doc["did_nothing"]
        assert [(d["compile_id"], d["graph_index"], d["ranks"]) for d in items] == want
        assert doc["totals"]["did_nothing"] == sum(len(rank_members(d["ranks"])) for d in items) == 4
        text = _out("summarize", str(FIXTURE_LOGS / name), "--jobs", "1")
        section = text[text.index("\nBucketing did nothing\n"):]
        listed = [ln.split() for ln in section.splitlines() if ln.startswith("0/0 ")]
        assert [(c[0], c[1], c[c.index("tracekit") - 1]) for c in listed] == [
            (cid, "forward" if i == 0 else "backward", r) for cid, i, r in want]
