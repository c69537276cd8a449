"""summarize on ``nested_waits`` (a forward on a 2 x 2 mesh and the world group, never
pre-bucketed; fixtures/README.md): two figures a new user would read as true. The collectives in
the compiled graph are counted from the graph's code, not from the comments that quote the user's
source above each call; and a world group beside the mesh's groups is no mesh dimension."""

from __future__ import annotations

import gzip
import re

from conftest import ROOT
from tracekit.analyze.mesh import mesh_document, mesh_groups
from tracekit.read.parsers import parse_graph_inputs
from tracekit.read.reader import load

NESTED = ROOT / "fixtures" / "logs" / "nested_waits"


def _graph_text() -> str:
    f = sorted(NESTED.glob("*rank_0*.log.gz"))[0]
    lines = gzip.open(f, "rt", encoding="utf-8").read().split("\n")
    start = next(i for i, ln in enumerate(lines) if '"dynamo_output_graph"' in ln)
    body = []
    for ln in lines[start + 1 :]:
        if not ln.startswith("\t"):
            break
        body.append(ln[1:])
    return "\n".join(body)


def test_collective_calls_are_counted_in_the_code_not_in_the_comments():
    text = _graph_text()
    calls = [c for c in re.findall(r"^\s*\w+: \"[^\"]*\" = torch\.ops\._c10d_functional\.(\w+)\(", text, re.M) if c != "wait_tensor"]
    assert sorted(calls) == ["all_reduce"] * 3 + ["reduce_scatter_tensor"] * 3
    quoted = [ln for ln in text.splitlines() if ln.lstrip().startswith("#") and "_c10d_functional" in ln]
    assert quoted  # the source comments quote the calls too: counted, they doubled the figure
    assert parse_graph_inputs(text).collectives == 6


def test_a_world_group_beside_the_meshs_groups_claims_no_mesh_product():
    mesh = mesh_document(4, mesh_groups(load([NESTED], jobs=1)))
    assert mesh["text"] == (
        "world 4; shard groups of 2 and 4 ranks, tp groups of 2 ranks: not one mesh (a role's groups differ in size)"
    )
    sizes = {g["name"]: g["size"] for g in mesh["groups"]}
    assert sizes == {"0": 4, "1": 2, "2": 2, "3": 2, "4": 2}  # the tp groups hold ranks 0,2 and 1,3
