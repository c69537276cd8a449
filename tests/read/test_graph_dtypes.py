"""The collectives' dtypes read off ``inductor_post_grad_graph`` (GraphDtypeParser): the line
search finds exactly what the pattern finds tried at every line, on every fixture's graphs and
on graphs edited at test time (two collectives on a line, an op name in a comment, no final
newline)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import log_text
from tests.logtext import artifacts
from tracekit.read.schedule_parsers import _COLLECTIVE_NODE_RE, GraphDtypeParser, _collective_node_lines

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


def _post_grad_graphs() -> list[str]:
    out = []
    for log in sorted(p for p in LOGS.glob("*/*.log*") if p.parent.name != "spmd_auto_gz"):  # a copy
        out += [p for name, _src, p in artifacts(log_text(log)) if name == "inductor_post_grad_graph"]
    return out


GRAPHS = _post_grad_graphs()


def _by_pattern(text: str) -> list[tuple[int, str, str]]:
    return [(m.start(), m[1], m[2]) for m in _COLLECTIVE_NODE_RE.finditer(text)]


def _by_lines(text: str) -> list[tuple[int, str, str]]:
    return [(m.start(), m[1], m[2]) for m in _collective_node_lines(text)]


def test_fixtures_have_post_grad_graphs_with_collectives():
    assert len(GRAPHS) >= 20
    assert sum(len(_by_pattern(g)) for g in GRAPHS) >= 100


@pytest.mark.parametrize("i", range(len(GRAPHS)))
def test_line_search_equals_pattern_on_fixture_graphs(i):
    assert _by_lines(GRAPHS[i]) == _by_pattern(GRAPHS[i])


def test_line_search_equals_pattern_on_edited_graphs():
    g = next(g for g in GRAPHS if _by_pattern(g))
    start = next(_COLLECTIVE_NODE_RE.finditer(g)).start()
    first = g[start : g.find("\n", start)]  # a node line the pattern matches
    edited = [
        first + "  # again: torch.ops._c10d_functional.reduce_scatter_tensor.default(x)",  # two on a line
        "# torch.ops._c10d_functional.all_reduce.default is called below\n" + g,  # not a node line
        g.rstrip("\n") + "\n" + first,  # the last line, without a newline
        first,  # the whole text is one node line
        g.replace("torch.ops._c10d_functional.", "torch.ops._c10d_functional_x."),  # another namespace
    ]
    for text in edited:
        assert _by_lines(text) == _by_pattern(text)
    assert len(_by_lines(edited[0])) == 1
    assert _by_lines(edited[4]) == []


def test_dtypes_by_kind_from_a_fixture_graph():
    g = next(g for g in GRAPHS if _by_pattern(g))
    got = GraphDtypeParser().parse(g, {})
    assert [op for _s, _d, op in _by_pattern(g)] == ["all_gather_into_tensor_out", "wait_tensor"]
    assert got == {"all_gather": ["f32"]}  # waits are dropped
