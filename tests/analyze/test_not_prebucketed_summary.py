"""summarize, report and the verdict on a backward torch never pre-bucketed (fixture
``saved_params``: the forward's gathered parameters are saved, so the backward reduce-scatters
only; torch finds no FSDP group there and logs no pre_bucketing_* artifact). Exact values from
the logs: 8 reduce-scatters on group '0', 298,144 input bytes, 0.0704 ms estimated."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from conftest import FIXTURE_LOGS, ROOT
from tracekit.commands.summarize_cmd import summarize
from tracekit.model import FinalSchedule, Rank, ScheduledCollective
from tracekit.analyze.not_prebucketed import REASONS, finding, reason_of
from tracekit.read.reader import load
from tracekit.render.html import render_html
from tracekit.analyze.summarize import did_nothing
from tracekit.render.summary_document import summary_document
from tracekit.analyze.totals import totals

LOGS = FIXTURE_LOGS / "saved_params"
RS_BYTES = [144, 16384, 1024, 131072, 1040, 131072, 1024, 16384]
RS_MS = [0.0084, 0.0086, 0.0084, 0.0098, 0.0084, 0.0098, 0.0084, 0.0086]
WHY = ("no FSDP all-gather in this graph, so no FSDP group was found (the forward of 0/0 has FSDP "
       "group '0'; torch looks for groups in each graph alone)")


def test_the_backward_is_listed_under_did_nothing_with_bytes_ms_and_reason():
    run = load(LOGS, jobs=1)
    dn = did_nothing(run)
    assert len(dn) == 1
    d = dn[0]
    assert d["compile_id"] == "0/0" and d["graph_index"] == 1 and d["ranks"] == [0, 1, 2, 3]
    assert d["outcome"] == "not pre-bucketed" and d["types"] == ["reduce_scatter"]
    assert d["counts"] == {"reduce_scatter": 8}
    assert d["bytes"] == {"reduce_scatter": sum(RS_BYTES)} == {"reduce_scatter": 298144}
    assert d["total_bytes"] == 298144 and d["total_est_ms"] == round(sum(RS_MS), 4) == 0.0704
    assert d["groups"] == ["0"] and d["group_size"] == 4
    assert d["reason"] == "no_fsdp_all_gather" and d["reason_text"] == WHY and d["also"] == []
    assert d["forward_groups"] == ["0"] and d["forward_group_size"] == 4 and d["bucket_cap_mb"] is None
    assert d["explain"] == f"tracekit explain {LOGS} --rank 0 --graph 0/0:1"


def test_totals_and_verdict_count_it_as_a_finding():
    run = load(LOGS, jobs=1)
    t = totals(run)
    assert t["graphs"] == 4 and t["not_prebucketed"] == 4 and t["compiled_graphs"] == 8
    doc = summary_document(run)
    v = doc["verdict"]
    assert v["status"] == "agree" and v["findings"] == 1
    assert v["text"] == (
        "OK: all 4 ranks agree on all 2 graphs; FINDING: 1 graph never pre-bucketed (0/0 backward on "
        "ranks 0-3: 8 reduce-scatters, 298,144 B, 0.0704 ms estimated, run one by one); see Bucketing "
        "did nothing")
    assert doc["did_nothing"][0]["ranks"] == "0-3"


def test_the_other_fixtures_have_no_finding():
    for name in ("spmd_auto", "diverge_rank"):
        doc = summary_document(load(FIXTURE_LOGS / name, jobs=1))
        assert doc["did_nothing"] == [] and "findings" not in doc["verdict"], name
        assert doc["totals"]["not_prebucketed"] == 0


def test_summarize_table_row_did_nothing_line_and_explain_command():
    res = CliRunner().invoke(summarize, [str(LOGS), "--jobs", "1"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    row = next(x for x in lines if x.startswith("0-3") and "backward" in x)
    assert row.split() == ["0-3", "4", "0/0", "backward", "not", "pre-bucketed", "4", "-", "-",
                           "0->0", "8->8", "0->0", "0.284", "0.284"]
    total = next(x for x in lines if x.startswith("total"))
    assert total.split() == ["total", "4", "graphs", "+", "4", "not", "pre-bucketed", "32->4", "32->32",
                             "0->0", "2.277", "=", "2.273"]  # 0.004 MB over 100 rounded sizes: rounding
    assert "Bucketing did nothing: none" not in res.output
    dn = next(x for x in lines if x.startswith("0/0") and "(not pre-bucketed)" in x)
    assert dn.split()[:5] == ["0/0", "backward", "RS", "8->8", "(not"]
    assert dn.endswith(f"tracekit explain {LOGS} --rank 0 --graph 0/0:1")
    assert (f"- 0/0 backward (ranks 0-3): not pre-bucketed: {WHY}. It runs 8 reduce-scatters, "
            "298,144 B, 0.0704 ms estimated, one by one.") in lines


def test_per_rank_table_has_one_row_per_rank():
    res = CliRunner().invoke(summarize, [str(LOGS), "--jobs", "1", "--per-rank"])
    rows = [x.split()[:2] for x in res.output.splitlines() if x.split()[3:5] == ["not", "pre-bucketed"]]
    assert rows == [["0", "0/0"], ["1", "0/0"], ["2", "0/0"], ["3", "0/0"]]


def test_report_page_shows_the_row_and_the_reason():
    page = render_html(summary_document(load(LOGS, jobs=1)))
    assert "<td>not pre-bucketed</td>" in page.replace('<td class="num">', "<td>")
    assert "RS 8-&gt;8 (not pre-bucketed: no FSDP all-gather in this graph" in page
    assert "FINDING: 1 graph never pre-bucketed" in page
    assert f"tracekit explain {LOGS} --rank 0 --graph 0/0:1" in page


def _final(kinds: list[str], sizes: str = "matched") -> FinalSchedule:
    colls = [ScheduledCollective(k, k, "0", 4, 100, 0.01) for k in kinds]
    return FinalSchedule("1/0", 0, FinalSchedule.count_kinds(colls), colls, 4, sizes)


def test_reasons_for_the_other_causes():
    # no outcome anywhere, reduce-scatters only: no FSDP group at all
    rank = Rank(0)
    assert reason_of(rank, [], _final(["reduce_scatter"] * 2))[0] == "no_fsdp_group"
    # all-gathers, no outcome anywhere, no estimate logged: pre-bucketing (overlap scheduling) off
    f = _final(["all_gather"] * 3, sizes="not_logged")
    item = finding(rank, [], f)
    assert item["reason"] == "pre_bucketing_off" and item["counts"] == {"all_gather": 3}
    assert item["reason_text"].startswith(REASONS["pre_bucketing_off"])
    assert "overlap scheduling, which runs pre-bucketing, is off" in item["reason_text"]
    # a cache hit of the compile id is named too
    rank.cache_events = [["1/0", "hit"]]
    item = finding(rank, [], _final(["reduce_scatter"] * 2))
    assert item["also"] == ["cache_hit"] and "FX graph cache hits" in item["reason_text"]
    # one collective of a kind is no finding
    assert finding(Rank(0), [], _final(["reduce_scatter", "all_gather"])) is None


def test_summarize_never_imports_torch():
    code = ("import sys\nfrom tracekit.read.reader import load\nfrom tracekit.render.summary_document import summary_document\n"
            f"summary_document(load({str(LOGS)!r}, jobs=1))\nassert 'torch' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT)})
