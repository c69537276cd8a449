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
from tracekit.reader import load
from tracekit.summarize import (
    SCHEMA,
    did_nothing,
    divergence,
    notes,
    run_from_document,
    summary_document,
    totals,
)


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
    assert sorted({d["field"] for d in div}) == ["all_gather", "reduce_scatter", "sizes_mb.after",
                                                 "sizes_mb.before"]


def test_a_graph_some_ranks_lack_is_a_presence_divergence():
    run = load(FIXTURE_LOGS / "spmd_auto", jobs=1)
    run.ranks[2].graphs.pop()  # rank 2 loses its backward
    div = divergence(run)
    assert div == [{"compile_id": "0/0", "graph_index": 1, "majority_ranks": [0, 1, 3],
                    "ranks": [2], "field": "presence", "majority_value": "present",
                    "value": "absent", "first_difference": None}]


def test_did_nothing_and_no_bucketing_notes():
    run = load(FIXTURE_LOGS / "spmd_small_cap", jobs=1)
    g = run.ranks[0].graphs[1]
    g.collectives["all_gather"] = Counts(5, 5)  # as if the cap were below every size
    (item,) = did_nothing(run)
    assert item == {"compile_id": "0/0", "graph_index": 1, "types": ["all_gather"],
                    "counts": {"all_gather": 5}, "bucket_cap_mb": 0.1, "ranks": [0],
                    "explain": f"tracekit explain {FIXTURE_LOGS / 'spmd_small_cap'} --rank 0 --graph 0/0:1"}
    cached = Run(paths=["x"], ranks=[Rank(rank=0, files=["x"], cache_hits=2)])
    assert notes(cached)[0].startswith("no bucketing recorded: 2 graphs were inductor cache hits")


def test_summary_document_has_the_schema_fields_and_round_trips():
    run = load(FIXTURE_LOGS / "spmd_auto", jobs=1)
    doc = json.loads(json.dumps(summary_document(run)))
    assert doc["schema"] == SCHEMA == "tracekit.summary/1"
    assert set(doc) >= {"schema", "paths", "ranks", "totals", "divergence", "did_nothing", "diagnostics"}
    g = doc["ranks"][1]["graphs"][1]
    assert {k: g[k] for k in ("compile_id", "graph_index", "fsdp_groups", "group_size", "n_nodes",
                              "bucket_cap_mb")} == {"compile_id": "0/0", "graph_index": 1,
                                                    "fsdp_groups": ["0"], "group_size": 4,
                                                    "n_nodes": 1, "bucket_cap_mb": 27.4}
    assert g["collectives"]["reduce_scatter"] == {"before": 8, "after": 1}
    assert len(g["sizes_mb"]["before"]) == 13 and len(g["sizes_mb"]["after"]) == 2
    assert doc["diagnostics"] == {"counts": {}, "examples": []}
    back = run_from_document(doc)
    assert [r.graphs for r in back.ranks] == [r.graphs for r in run.ranks]
    assert summary_document(back)["divergence"] == []


def test_graph_to_dict_is_asdict_of_every_field():
    # graph_to_dict is written out field by field (for speed): a field added to Graph and
    # forgotten there would silently drop out of the JSON.
    import dataclasses

    from tracekit.model import Graph, graph_to_dict

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
    assert "differing rank(s): 3" in table.output
    assert "#8 AG (before): - vs 0.004 MB" in table.output
    out = tmp_path / "s.json"
    js = runner.invoke(summarize, [path, "--format", "json", "--output", str(out), "--jobs", "1"])
    assert js.exit_code == 0 and js.output == ""
    doc = json.loads(out.read_text())
    assert doc["schema"] == "tracekit.summary/1" and len(doc["divergence"]) == 7
    rows = list(csv.reader(io.StringIO(runner.invoke(summarize, [path, "--format", "csv"]).output)))
    assert rows[0][:3] == ["rank", "compile id", "graph"]
    assert rows[-1] == ["3", "0/0", "backward", "0", "4", "1", "27.4", "7->1", "10->1", "0->0",
                        "0.56", "0.559"]
    md = runner.invoke(summarize, [path, "--format", "markdown"]).output
    assert md.startswith("## Bucketing per rank and graph") and "| rank " in md


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

    from tracekit.render import dumps_json
    from tracekit.summarize import write_summary_json

    for scenario in ("diverge_rank", "tracekit_pass"):
        run = load(FIXTURE_LOGS / scenario, jobs=1)
        buf = io.BytesIO()
        write_summary_json(run, buf.write)
        assert buf.getvalue().decode() == dumps_json(summary_document(run))
    empty = io.BytesIO()
    write_summary_json(Run(paths=[]), empty.write)
    assert json.loads(empty.getvalue())["ranks"] == []
