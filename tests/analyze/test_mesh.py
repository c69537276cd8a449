"""Two-dimensional meshes (issue 37): the mesh read from the logs, per-communicator schedule
checks, and the collectives pre-bucketing never handles on a mesh. Exact values from the
fixtures ``hsdp`` (replicate 2 x shard 2), ``fsdp_tp`` (shard 2 x tp 2) and ``hsdp_diverge``
(HSDP, rank 3 builds one more layer), made by ``fixtures/generate.py``."""

from __future__ import annotations

import subprocess
import sys

import pytest

import tracekit
from conftest import FIXTURE_LOGS, ROOT, rank_log
from tracekit.render.summary_document import summary_document
from tracekit.analyze.mesh import mesh_groups, mesh_text, role_names
from tracekit.model.world import expected_world

HSDP = FIXTURE_LOGS / "hsdp"
FSDP_TP = FIXTURE_LOGS / "fsdp_tp"
HSDP_DIVERGE = FIXTURE_LOGS / "hsdp_diverge"
#: mesh (shard, tp): the shard groups are made first (ranks 0, 2 and 1, 3), then the tp groups
FSDP_TP_GROUPS = [("1", 2, (0, 2), "shard"), ("2", 2, (1, 3), "shard"), ("3", 2, (0, 1), "tp"), ("4", 2, (2, 3), "tp")]
#: (graph_index, group, peers): rank 3 differs first on its shard group 4, with rank 2
HSDP_DIVERGE_ITEMS = [(0, "4", "2-3"), (1, "4", "2-3")]


@pytest.fixture(scope="module")
def hsdp_doc():
    return summary_document(tracekit.load(HSDP))


def _groups(path):
    return [(g.name, g.size, g.members, g.role) for g in mesh_groups(tracekit.load(path))]


def test_hsdp_groups_members_sizes_and_roles():
    assert _groups(HSDP) == [
        ("1", 2, (0, 2), "replicate"),
        ("2", 2, (1, 3), "replicate"),
        ("3", 2, (0, 1), "shard"),
        ("4", 2, (2, 3), "shard"),
    ]


def test_fsdp_tp_groups_members_sizes_and_roles():
    assert _groups(FSDP_TP) == FSDP_TP_GROUPS


def test_mesh_text_of_both_meshes():
    for path, text in ((HSDP, "world 4 = replicate 2 × shard 2"), (FSDP_TP, "world 4 = shard 2 × tp 2")):
        run = tracekit.load(path)
        assert mesh_text(expected_world(run), mesh_groups(run)) == text


def test_world_from_one_rank_log_is_the_world_size_line():
    # the FSDP group has 2 ranks; the log's "# World size: 4" tells the world
    one = rank_log(HSDP, 1)
    w = summary_document(tracekit.load(one))["world"]
    assert (w["expected"], w["found"], w["missing"]) == (4, 1, "0,2-3")


def test_healthy_hsdp_is_no_divergence_and_one_outcome_row(hsdp_doc):
    assert hsdp_doc["verdict"]["status"] == "agree"
    assert hsdp_doc["verdict"]["text"].startswith("OK: all 4 ranks agree on all 2 graphs; FINDING: ")
    assert hsdp_doc["schedule_divergence"] == [] and hsdp_doc["divergence"] == []
    assert [(g["ranks"], [x["mesh_fsdp_groups"] for x in g["graphs"]]) for g in hsdp_doc["groups"]] == [
        ("0-3", [["3", "4"], ["3", "4"]])
    ]


def test_healthy_fsdp_tp_is_no_divergence():
    doc = summary_document(tracekit.load(FSDP_TP))
    assert doc["verdict"]["status"] == "agree"
    assert doc["schedule_divergence"] == [] and doc["divergence"] == []
    assert [g["ranks"] for g in doc["groups"]] == ["0-3"]


def test_hsdp_replicate_all_reduces_never_bucketed(hsdp_doc):
    (item,) = hsdp_doc["mesh_not_prebucketed"]
    assert {k: item[k] for k in ("compile_id", "graph_index", "ranks", "role", "groups", "kind", "count")} == {
        "compile_id": "0/0",
        "graph_index": 1,
        "ranks": "0-3",
        "role": "replicate",
        "groups": ["1", "2"],
        "kind": "all_reduce",
        "count": 8,
    }
    # 8 gradients: weights 8,192 + 65,536 + 65,536 + 8,192 B, biases 256 + 256, scales 516 + 68
    assert (item["bytes"], item["est_ms"]) == (148_552, 0.0658)
    assert hsdp_doc["verdict"]["text"] == (
        "OK: all 4 ranks agree on all 2 graphs; FINDING: collectives pre-bucketing never handles on this mesh, "
        "run one by one: 8 all_reduce on replicate groups 1 | 2 (0/0 backward, ranks 0-3: 148,552 B, 0.0658 ms est.)")
    # the reason, read off the graph: no all-gather on the replicate group, FSDP group 3 only
    assert item["fsdp_groups"] == ["3"]
    assert item["reason"] == (
        "group 1 (replicate) runs no all-gather in this graph, and torch's pre-bucketing buckets only on the "
        "groups of its FSDP all-gathers (3): its 8 all_reduce run one by one")


def test_fsdp_tp_tp_all_reduces_run_once_per_graph_and_are_no_finding():
    """FSDP x TP: each graph runs one all-reduce of activations on each rank's tp group (the
    Megatron pair's g in the forward, f in the backward). The issue's rule asks for a kind that
    runs more than once on a group the pass never saw: one alone has nothing to be bucketed with."""
    run = tracekit.load(FSDP_TP)
    tp = {"3", "4"}
    for r in run.ranks:
        assert [sum(1 for c in g.final.collectives if c.group in tp) for g in r.graphs] == [1, 1]
        assert {c.kind for g in r.graphs for c in g.final.collectives if c.group in tp} == {"all_reduce"}
    doc = summary_document(run)
    assert doc["mesh_not_prebucketed"] == []
    assert doc["verdict"]["text"] == "OK: all 4 ranks agree on all 2 graphs"


def test_one_rank_diverging_inside_its_shard_group_is_named_with_group_and_peers():
    doc = summary_document(tracekit.load(HSDP_DIVERGE))
    assert doc["verdict"]["status"] == "diverge"
    items = doc["schedule_divergence"]
    assert {(d["ranks"], d["majority_ranks"], d["majority"]) for d in items} == {("3", "0-2", True)}
    assert [(d["graph_index"], d["group"], d["peers"]) for d in items] == HSDP_DIVERGE_ITEMS
    assert doc["verdict"]["text"].startswith(
        "DIVERGE: 1 of 4 ranks (3) differ from the majority on 2 graphs inside shard group 4 (members 2-3); FINDING")
    assert [d["role"] for d in items] == ["shard", "shard"]


def test_role_names_only_for_roles_with_several_groups():
    assert role_names(mesh_groups(tracekit.load(FIXTURE_LOGS / "spmd_auto"))) == {}
    assert role_names(mesh_groups(tracekit.load(HSDP))) == {"1": "replicate", "2": "replicate", "3": "shard", "4": "shard"}


def test_summarize_text_shows_mesh_and_groups_by_role():
    out = subprocess.run(
        [sys.executable, "-m", "tracekit", "summarize", str(HSDP)], capture_output=True, text=True, cwd=ROOT
    ).stdout
    assert "Mesh: world 4 = replicate 2 × shard 2; replicate groups 1 (0,2) | 2 (1,3); shard groups 3 (0-1) | 4 (2-3)\n" in out
    assert "shard groups 3 | 4" in out
    assert "0/0           backward  replicate 1 | 2  all_reduce 8->8  148,552  0.0658    0-3" in out


def test_one_rank_log_gives_the_whole_mesh():
    """One HSDP rank's log: the replicate all-reduces' estimate rows say group_size:None, so the
    replicate size is the log's world (4) over the shard groups' size (2), not the 1 rank seen."""
    one = rank_log(HSDP, 1)
    doc = summary_document(tracekit.load(one))
    assert doc["mesh"]["text"] == "world 4 = replicate 2 × shard 2"
    assert [(g["name"], g["size"], g["members"], g["role"]) for g in doc["mesh"]["groups"]] == [
        ("2", 2, "1", "replicate"), ("3", 2, "1", "shard")]
    out = subprocess.run(
        [sys.executable, "-m", "tracekit", "summarize", str(one)], capture_output=True, text=True, cwd=ROOT
    ).stdout
    assert "Mesh: world 4 = replicate 2 × shard 2; replicate group 2 (1, 1 of 2 seen); shard group 3 (1, 1 of 2 seen)\n" in out


def _fsdp_tp_without_tp_collectives(tmp_path):
    """fsdp_tp copied as plain logs, its tp all-reduces (and their waits) taken out of every
    graph's schedule and estimate table: a shard 2 x tp 2 job whose TP ran outside the compiled
    graphs, as DTensor's eager collectives do (issue 50, item 3)."""
    import json

    from conftest import plain_copytree
    from logtext import edit_payloads

    def schedule(text):
        ops = json.loads(text)
        at = next(i for i, op in enumerate(ops) if "all_reduce" in op)
        del ops[at : at + 2]  # the all-reduce and the wait after it
        return json.dumps(ops, indent=0)

    def estimates(text):
        return "\n".join(ln for ln in text.split("\n") if "all_reduce" not in ln)

    d = plain_copytree(FSDP_TP, tmp_path / "fsdp_tp_no_tp")
    for p in sorted(d.glob("*.log")):
        text = edit_payloads(p.read_text(), "inductor_collective_schedule", schedule)
        p.write_text(edit_payloads(text, "fx_collectives_analytical_estimation", estimates))
    return d


def test_fsdp_tp_with_no_tp_collective_in_a_graph_infers_the_tp_dimension(tmp_path):
    # it printed "Mesh: world 4 = shard 2", the tp dimension lost
    d = _fsdp_tp_without_tp_collectives(tmp_path)
    run = tracekit.load(d, jobs=1)
    assert _groups(d) == FSDP_TP_GROUPS[:2] and run.diagnostics.total == 0
    doc = summary_document(run)
    reason = "world 4 / shard 2 = 2, and each shard group steps by 2 (1: 0,2): no tp collective ran in a compiled graph"
    assert doc["mesh"]["text"] == "world 4 = shard 2 × tp 2 (inferred)"
    assert doc["mesh"]["dimensions"] == [
        {"role": "shard", "size": 2, "groups": ["1", "2"]},
        {"role": "tp", "size": 2, "groups": [], "inferred": reason},
    ]
    assert doc["verdict"]["text"] == "OK: all 4 ranks agree on all 2 graphs"
    from tracekit.render.summary_text import render_text

    assert (
        "Mesh: world 4 = shard 2 × tp 2 (inferred); shard groups 1 (0,2) | 2 (1,3); tp 2 inferred: " + reason + "\n"
    ) in render_text(doc, "table")
    from tracekit.render.mesh_text import mesh_csv_rows

    assert [r for r in mesh_csv_rows(doc) if r.get("value") == "inferred"] == [
        {"section": "mesh", "field": "tp", "value": "inferred", "group_size": 2, "detail": reason}
    ]


def test_the_tp_dimension_is_inferred_only_where_no_group_shows_it():
    # tp groups in the graphs (fsdp_tp), a contiguous shard group with its replicate groups
    # (hsdp): nothing inferred
    for path in (FSDP_TP, HSDP):
        dims = summary_document(tracekit.load(path))["mesh"]["dimensions"]
        assert [d.get("inferred") for d in dims] == [None, None]


def test_the_outcome_columns_say_which_groups_they_count(hsdp_doc):
    # HSDP: AR 0->0 in every outcome row (torch's counts on its FSDP group) beside the finding
    # of 8 replicate all-reduces; the legend says which groups each table's columns count
    # (issue 50, item 10)
    from tracekit.render.html import render_html
    from tracekit.render.summary_text import render_text

    text = render_text(hsdp_doc, "table")
    counted = (
        "AG, RS, AR: pre-bucketing's counts, on the FSDP groups only (shard groups 3 | 4); not the all_reduce "
        "on replicate groups 1 | 2 (under Bucketing did nothing on the mesh)"
    )
    assert f"differs from before by rounding only\n{counted}\n\nRank consensus" in text
    assert "bytes: one rank's input (for AG, its shard: the gathered size / group size); AG, RS, AR: on every group of the mesh\n" in text
    import html

    assert f'<p class="muted" id="counted-groups">{html.escape(counted)}</p>' in render_html(hsdp_doc)
    tp = render_text(summary_document(tracekit.load(FSDP_TP)), "table")
    assert (
        "AG, RS, AR: pre-bucketing's counts, on the FSDP groups only (shard groups 1 | 2); not the all_reduce on tp "
        "groups 3 | 4 (under On the mesh, one of a kind)"
    ) in tp
    one_d = render_text(summary_document(tracekit.load(FIXTURE_LOGS / "spmd_auto")), "table")
    assert "pre-bucketing's counts" not in one_d and "on every group" not in one_d
