"""summarize on the real fixture logs: totals, consensus, divergence naming rank 3, did-nothing,
the JSON document and its round trip, and the command's formats."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

from click.testing import CliRunner

from conftest import FIXTURE_LOGS, ROOT
from tracekit.commands.summarize_cmd import summarize
from tracekit.model import Counts, Rank, Run
from tracekit.read.reader import load
from tracekit.analyze.documents import run_from_document
from tracekit.analyze.notes import notes
from tracekit.analyze.summarize import SCHEMA, did_nothing, divergence
from tracekit.render.summary_document import summary_document
from tracekit.render.summary_words import note_text
from tracekit.analyze.totals import totals


def test_spmd_auto_ranks_agree_and_totals_add_up():
    run = load(FIXTURE_LOGS / "spmd_auto", jobs=1)
    assert divergence(run) == []
    t = totals(run)
    assert t["ranks"] == 4 and t["graphs"] == 8 and t["compiled_graphs"] == 8 and t["cache_hits"] == 0
    assert t["collectives"] == {"all_gather": {"before": 52, "after": 8},
                                "reduce_scatter": {"before": 32, "after": 4},
                                "all_reduce": {"before": 0, "after": 0}}
    assert t["mb_before"] == 3.348 and t["mb_after"] == 3.34
    assert did_nothing(run) == [] and notes(run) == []


def test_diverge_rank_names_rank_3_and_the_first_difference():
    run = load(FIXTURE_LOGS / "diverge_rank", jobs=1)
    div = divergence(run)
    assert {r for d in div for r in d["ranks"]} == {3}
    assert all(d["majority_ranks"] == [0, 1, 2] for d in div)
    fwd_ag = next(d for d in div if d["graph_index"] == 0 and d["field"] == "all_gather")
    assert fwd_ag["compile_id"] == "0/0"
    assert fwd_ag["majority_value"] == {"before": 8, "after": 1}
    assert fwd_ag["value"] == {"before": 10, "after": 1}
    # rank 3's extra layer: two more all-gathers after the 8 the others have
    assert fwd_ag["first_difference"] == {"index": 8, "type": "AG", "majority_size_mb": None,
                                          "size_mb": 0.004, "list": "before"}
    bwd_rs = next(d for d in div if d["graph_index"] == 1 and d["field"] == "reduce_scatter")
    assert bwd_rs["value"] == {"before": 10, "after": 1}
    assert bwd_rs["first_difference"]["index"] == 1 and bwd_rs["first_difference"]["type"] == "RS"
    assert bwd_rs["first_difference"]["majority_size_mb"] == 0.016
    assert bwd_rs["first_difference"]["size_mb"] == 0.004
    # final: the collectives that run (tracekit.analyze.schedule has the details)
    assert sorted({d["field"] for d in div}) == ["all_gather", "final", "reduce_scatter",
                                                 "sizes_mb.after", "sizes_mb.before"]


def test_a_graph_some_ranks_lack_is_a_presence_divergence():
    run = load(FIXTURE_LOGS / "spmd_auto", jobs=1)
    run.ranks[2].graphs.pop()  # rank 2 loses its backward
    div = divergence(run)
    assert div == [{"compile_id": "0/0", "graph_index": 1, "majority_ranks": [0, 1, 3], "majority": True,
                    "ranks": [2], "field": "presence", "majority_value": "present",
                    "value": "absent", "first_difference": None}]


def test_did_nothing_and_no_bucketing_notes():
    run = load(FIXTURE_LOGS / "spmd_small_cap", jobs=1)
    g = run.ranks[0].graphs[1]
    # as if the cap were below every size (ranks share equal values: copy before changing one)
    g.collectives = {**g.collectives, "all_gather": Counts(5, 5)}
    (item,) = did_nothing(run)
    assert item == {"compile_id": "0/0", "graph_index": 1, "types": ["all_gather"],
                    "counts": {"all_gather": 5}, "bucket_cap_mb": 0.1, "ranks": [0],
                    "explain": f"tracekit explain {FIXTURE_LOGS / 'spmd_small_cap'} --rank 0 --graph 0/0:1"}
    cached = Run(paths=["x"], ranks=[Rank(rank=0, files=["x"], cache_hits=2)])
    assert note_text(notes(cached)[0]).startswith("no bucketing recorded: 2 graphs were inductor cache hits")


def test_summary_document_has_the_schema_fields_and_round_trips():
    run = load(FIXTURE_LOGS / "spmd_auto", jobs=1)
    doc = json.loads(json.dumps(summary_document(run, per_rank=True)))
    assert doc["schema"] == SCHEMA == "tracekit.summary/2"
    assert set(doc) >= {"schema", "paths", "world", "verdict", "groups", "ranks", "totals", "divergence",
                        "did_nothing", "diagnostics"}
    g = doc["ranks"][1]["graphs"][1]
    assert {k: g[k] for k in ("compile_id", "graph_index", "fsdp_groups", "group_size", "n_nodes",
                              "bucket_cap_mb")} == {"compile_id": "0/0", "graph_index": 1,
                                                    "fsdp_groups": ["0"], "group_size": 4,
                                                    "n_nodes": 1, "bucket_cap_mb": 27.4}
    assert g["collectives"]["reduce_scatter"] == {"before": 8, "after": 1}
    assert len(g["sizes_mb"]["before"]) == 13 and len(g["sizes_mb"]["after"]) == 2
    assert doc["diagnostics"] == {"counts": {}, "examples": []}
    assert doc["world"] == {"expected": 4, "found": 4, "ranks": "0-3", "missing": "", "missing_count": 0,
                            "duplicated": "", "unplaced": []}
    assert doc["verdict"] == {"status": "agree", "text": "OK: all 4 ranks agree on all 2 graphs"}
    (grp,) = doc["groups"]  # four identical ranks: one group
    assert (grp["ranks"], grp["count"], grp["compiles"], grp["compiled_graphs"]) == ("0-3", 4, 1, 2)
    assert grp["graphs"][1] == {k: v for k, v in g.items() if k not in ("file", "line")}
    back = run_from_document(doc)
    assert [r.graphs for r in back.ranks] == [r.graphs for r in run.ranks]
    assert summary_document(back)["divergence"] == []
    # the default document (groups, no per-rank entries) rebuilds the same outcomes
    grouped = json.loads(json.dumps(summary_document(run)))
    assert "ranks" not in grouped
    again = run_from_document(grouped)
    assert [r.rank for r in again.ranks] == [0, 1, 2, 3]
    assert [[(x.key, x.collectives, x.sizes_mb) for x in r.graphs] for r in again.ranks] == \
        [[(x.key, x.collectives, x.sizes_mb) for x in r.graphs] for r in run.ranks]


def test_groups_and_divergence_with_ranges():
    run = load(FIXTURE_LOGS / "diverge_rank", jobs=1)
    doc = summary_document(run)
    assert [(grp["ranks"], grp["count"]) for grp in doc["groups"]] == [("0-2", 3), ("3", 1)]
    assert {(d["ranks"], d["majority_ranks"]) for d in doc["divergence"]} == {("3", "0-2")}
    assert doc["verdict"] == {"status": "diverge",
                              "text": "DIVERGE: 1 of 4 ranks (3) differ from the majority on 2 graphs",
                              "sections": ["divergence", "schedule_divergence"]}


def test_graph_to_dict_is_asdict_of_every_field():
    # graph_to_dict is written out field by field (for speed): a field added to Graph and
    # forgotten there would silently drop out of the JSON.
    import dataclasses

    from tracekit.model import Graph
    from tracekit.model.fields import graph_to_dict

    graphs = [g for sc in ("spmd_small_cap", "tracekit_pass")
              for r in load(FIXTURE_LOGS / sc, jobs=1).ranks for g in r.graphs]
    assert len(graphs) == 16 and any(g.sizes_mb and g.sizes_mb.after for g in graphs)
    for g in graphs:
        d = graph_to_dict(g)
        assert list(d) == [f.name for f in dataclasses.fields(Graph)]
        assert d == dataclasses.asdict(g)


def test_command_table_json_csv_markdown(tmp_path):
    runner = CliRunner()
    path = str(FIXTURE_LOGS / "diverge_rank")
    table = runner.invoke(summarize, [path, "--jobs", "1"])
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    assert lines[:3] == ["Verdict", "=======", "DIVERGE: 1 of 4 ranks (3) differ from the majority on 2 graphs"]
    assert "World: 4 ranks found (0-3) of 4 expected; missing: none; seen in two runs: none" in lines
    assert "#8 AG (before): 0.004 vs - MB" in table.output
    rows = [ln.split() for ln in lines if ln.startswith(("0-2 ", "3 "))]
    assert [r[:4] + r[5:7] for r in rows[:4]] == [
        ["0-2", "3", "0/0", "forward", "4", "1"], ["3", "1", "0/0", "forward", "4", "1"],
        ["0-2", "3", "0/0", "backward", "4", "1"], ["3", "1", "0/0", "backward", "4", "1"]]
    assert next(ln for ln in lines if ln.startswith("0-2 ")).split()[4] == "0"  # the FSDP group, no repr
    assert "['" not in "\n".join(lines)
    out = tmp_path / "s.json"
    js = runner.invoke(summarize, [path, "--format", "json", "--output", str(out), "--jobs", "1"])
    assert js.exit_code == 0 and js.output == ""
    doc = json.loads(out.read_text())
    assert doc["schema"] == "tracekit.summary/2" and len(doc["divergence"]) == 9 and "ranks" not in doc
    rows = list(csv.DictReader(io.StringIO(runner.invoke(summarize, [path, "--format", "csv"]).output)))
    assert [(r["field"], r["value"]) for r in rows if r["section"] == "verdict"] == [
        ("status", "diverge"), ("text", "DIVERGE: 1 of 4 ranks (3) differ from the majority on 2 graphs")]
    outcome = [r for r in rows if r["section"] == "outcome"]
    last = outcome[-1]
    assert [last[k] for k in ("ranks", "count", "compile_id", "graph", "fsdp_groups", "group_size", "machines",
                              "cap_mb", "AG_before", "AG_after", "RS_before", "RS_after", "AR_before", "AR_after",
                              "mb_before", "mb_after")] == [
        "3", "1", "0/0", "backward", "0", "4", "1", "27.4", "7", "1", "10", "1", "0", "0", "0.56", "0.559"]
    (total,) = [r for r in rows if r["section"] == "total"]
    assert (total["count"], total["value"], total["AG_before"], total["mb_before"]) == ("4", "8", "56", "3.36")
    div = [(r["graph"], r["field"], r["value"], r["majority_value"]) for r in rows if r["section"] == "divergence"]
    assert div[0] == ("forward", "all_gather.before", "10", "8") and len(div) == 11
    assert [(r["field"], r["value"], r["majority_value"]) for r in rows if r["section"] == "schedule"] == [
        ("bytes", "75596", "74536"), ("bytes", "70988", "69928")]
    per_rank = list(csv.DictReader(io.StringIO(runner.invoke(summarize, [path, "--format", "csv", "--per-rank"]).output)))
    per_rank = [r for r in per_rank if r["section"] == "outcome"]
    assert len(per_rank) == 8 and (per_rank[-1]["ranks"], per_rank[-1]["count"], per_rank[-1]["AG_before"]) == ("3", "1", "7")
    md = runner.invoke(summarize, [path, "--format", "markdown"]).output
    assert md.startswith("## Verdict") and "| ranks " in md


def test_no_graphs_no_empty_tables(tmp_path):
    """A log with compiles but no before_post_grad_graph (older torch): no "no compiled graph
    found", no empty tables, a note that says why."""
    src = next((FIXTURE_LOGS / "spmd_auto").glob("*rank_0_*.log")).read_text(encoding="utf-8")
    keep = []
    skipping = False
    for ln in src.split("\n"):
        if not ln.startswith("\t"):
            skipping = '"artifact": {"name": "before_post_grad_graph"' in ln or '"pre_bucketing_' in ln
        if not skipping:
            keep.append(ln)
    log = tmp_path / "dedicated_log_torch_trace_rank_0.log"
    log.write_text("\n".join(keep), encoding="utf-8")
    r = CliRunner().invoke(summarize, [str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "NO DATA: no bucketing outcome in the logs" in r.output
    assert "Rank consensus" not in r.output and "Bucketing did nothing" not in r.output
    assert "no compiled graph found" not in r.output
    assert ("no bucketing recorded: 1 compile was logged, but no graph reached the post-grad passes' "
            "log (no before_post_grad_graph): torch 2.13.0+cpu logs one for every graph inductor compiles, "
            "so the compiles stopped before inductor's post-grad passes") in r.output
    # the rank from the name, no suffix; the world from the log's "# World size: 4" (issue 37)
    assert "1 rank found (0) of 4 expected" in r.output


def test_help_does_not_import_torch():
    code = ("import sys\nfrom tracekit.cli import main\n"
            "try:\n    main(['summarize', '--help'])\nexcept SystemExit:\n    pass\n"
            "assert 'torch' not in sys.modules\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "--strict" in out.stdout and "--jobs" in out.stdout


def test_streamed_json_is_the_document_text():
    import io

    from tracekit.render.text import dumps_json
    from tracekit.render.summary_json import write_summary_json

    for scenario in ("diverge_rank", "tracekit_pass"):
        run = load(FIXTURE_LOGS / scenario, jobs=1)
        buf = io.BytesIO()
        write_summary_json(run, buf.write)
        assert buf.getvalue().decode() == dumps_json(summary_document(run))
        buf = io.BytesIO()
        write_summary_json(run, buf.write, per_rank=True)
        assert buf.getvalue().decode() == dumps_json(summary_document(run, per_rank=True))
    empty = io.BytesIO()
    write_summary_json(Run(paths=[]), empty.write, per_rank=True)
    assert json.loads(empty.getvalue())["ranks"] == []


def test_no_graphs_on_an_older_torch_names_that_torch(tmp_path):
    """The same log, its torch_version entry edited to 2.7.0 (MD5 made anew): the note names
    that torch as the likely cause; on 2.13 it says the compiles stopped (2.13 logs the graphs)."""
    import hashlib
    import re

    src = next((FIXTURE_LOGS / "spmd_auto").glob("*rank_0_*.log")).read_text(encoding="utf-8")
    keep, skipping = [], False
    for ln in src.split("\n"):
        if not ln.startswith("\t"):
            skipping = '"artifact": {"name": "before_post_grad_graph"' in ln or '"pre_bucketing_' in ln
        if not skipping:
            keep.append(ln)
    lines = keep
    i = next(k for k, ln in enumerate(lines) if '"name": "torch_version"' in ln)
    j = i + 1
    while j < len(lines) and lines[j].startswith("\t"):
        j += 1
    payload = [ln.replace('"2.13.0+cpu"', '"2.7.0+cpu"') for ln in lines[i + 1:j]]
    md5 = hashlib.md5("\n".join(p[1:] for p in payload).encode()).hexdigest()
    lines[i] = re.sub(r'"has_payload": "[0-9a-f]{32}"', f'"has_payload": "{md5}"', lines[i])
    lines[i + 1:j] = payload
    (tmp_path / "dedicated_log_torch_trace_rank_0.log").write_text("\n".join(lines), encoding="utf-8")
    r = CliRunner().invoke(summarize, [str(tmp_path), "--strict"])
    # no bad input; rank 0 of 4 alone, so --strict fails on the 3 missing ranks
    assert (r.exit_code, r.stderr) == (1, "tracekit summarize: 3 of 4 ranks missing (1-3) (--strict)\n")
    assert ("no graph reached the post-grad passes' log (no before_post_grad_graph): torch 2.7.0+cpu may "
            "not log them (tracekit reads the logs of torch 2.13, 2.14, 2.15), or the compiles stopped before "
            "inductor") in r.output
