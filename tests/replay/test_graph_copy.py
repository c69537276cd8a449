"""Our graph copy (tracekit.replay.overlap_schedule.copy_graph, bucketing.fx_nodes) makes the
nodes torch's Graph.graph_copy makes, without create_node's walk over each node's arguments:
same names, ops, targets, arguments, users in the same order, meta, the same table behind
find_nodes, and the same code. On the
graphs of overlap_cap_a (45 and 87 nodes as rebuilt from its log) and spmd_auto (59 and 110)."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURE_LOGS

pytest.importorskip("torch")


def _rebuilt(scenario: str, index: int):
    from tracekit.read.reader import graph_sources
    from tracekit.replay.graph_text import parse_graph_text

    srcs = [s for s in graph_sources([FIXTURE_LOGS / scenario]) if s.rank in (0, None)]
    return parse_graph_text(srcs[index].text)


def _lookup_table(gm) -> dict[str, list[str]]:
    """fx's table behind ``Graph.find_nodes``: per (op, target), its nodes in the table's order."""
    table = gm.graph._find_nodes_lookup_table.table
    return {f"{op} {target}": [n.name for n in nodes] for (op, target), nodes in table.items() if nodes}


def _shape(gm):
    return [
        (n.name, n.op, str(n.target), repr(n.args), repr(n.kwargs), [u.name for u in n.users], n.type)
        for n in gm.graph.nodes
    ]


@pytest.mark.parametrize(
    ("scenario", "index", "nodes"),
    [("overlap_cap_a", 0, 45), ("overlap_cap_a", 1, 87), ("spmd_auto", 0, 59), ("spmd_auto", 1, 110)],
)
def test_the_copy_is_the_graph_torch_s_graph_copy_makes(scenario, index, nodes):
    import torch.fx as fx

    from tracekit.replay.overlap_schedule import copy_graph

    gm = _rebuilt(scenario, index)
    assert len(gm.graph.nodes) == nodes
    g = fx.Graph()
    g.output(g.graph_copy(gm.graph, {}))
    theirs = fx.GraphModule(gm, g)
    ours = copy_graph(gm)
    assert _shape(ours) == _shape(theirs)
    assert _lookup_table(ours) == _lookup_table(theirs)
    for a, b in zip(ours.graph.nodes, theirs.graph.nodes, strict=True):
        assert a.meta == b.meta and a.meta is not b.meta
        assert a.meta.get("val") is b.meta.get("val")  # fake values shared with the rebuild
    ours.graph.lint()
    assert ours.code == theirs.code
