"""The safe print_readable parser of replay: real graph texts round-trip, hostile texts are refused
without running anything, absurd shapes cost nothing, and mutations never escape GraphTextError."""

from __future__ import annotations

import operator

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.fx.experimental.proxy_tensor import make_fx

from tracekit.replay.graph_text import (
    _BINARY,
    _COMPARE,
    _UNARY,
    BUILTIN_TARGETS,
    GraphTextError,
    UnresolvedSymbolsError,
    graph_text_symbols,
    parse_annotation,
    parse_graph_text,
)

c10d = torch.ops._c10d_functional


def _fsdp_like(x, w1, w2, g):
    a = c10d.wait_tensor.default(c10d.all_gather_into_tensor.default(w1, 4, "0"))
    b = c10d.wait_tensor.default(c10d.all_gather_into_tensor.default(w2, 4, "0"))
    y = torch.relu(x @ a.view(16, 16).t()) @ b.view(16, 16)
    parts = torch.split(y, [4, 4], dim=0)
    r = c10d.wait_tensor.default(c10d.reduce_scatter_tensor.default(g, "sum", 4, "0"))
    return parts[0] + parts[1], r, y.new_zeros(3, dtype=torch.bfloat16)


def _inputs():
    return torch.randn(8, 16), torch.randn(64), torch.randn(64), torch.randn(128)


def _printed(gm: torch.fx.GraphModule) -> str:
    return gm.print_readable(print_output=False, include_stride=True, include_device=True)


def _code_lines(text: str) -> list[str]:
    return [ln for ln in text.split("\n") if ln.strip() and not ln.strip().startswith("#")]


@pytest.fixture(scope="module")
def traced():
    gm = make_fx(_fsdp_like, tracing_mode="fake")(*_inputs())
    return gm, _printed(gm)


@pytest.fixture(scope="module")
def traced_symbolic():
    gm = make_fx(_fsdp_like, tracing_mode="symbolic")(*_inputs())
    return gm, _printed(gm)


def _targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def test_real_traced_graph_round_trips(traced):
    original, text = traced
    gm = parse_graph_text(text)
    gm.graph.lint()
    assert len(gm.graph.nodes) == len(original.graph.nodes) == 22
    assert _targets(gm) == _targets(original)
    assert _targets(gm).count(c10d.all_gather_into_tensor.default) == 2
    assert _targets(gm).count(c10d.reduce_scatter_tensor.default) == 1
    assert _code_lines(_printed(gm)) == _code_lines(text)


def test_fake_values_follow_the_annotations(traced):
    gm = parse_graph_text(traced[1])
    nodes = {n.name: n for n in gm.graph.nodes}
    ag = nodes["all_gather_into_tensor"].meta["val"]
    assert isinstance(ag, torch._subclasses.FakeTensor)
    assert (tuple(ag.shape), ag.stride(), ag.dtype, ag.device) == ((256,), (1,), torch.float32, torch.device("cpu"))
    assert tuple(nodes["t"].meta["val"].stride()) == (1, 16)
    assert nodes["new_zeros"].meta["val"].dtype == torch.bfloat16
    # split_with_sizes prints no annotation: its value is rebuilt from its getitems, as a list.
    split = nodes["split_with_sizes"].meta["val"]
    assert isinstance(split, list) and [tuple(t.shape) for t in split] == [(4, 16), (4, 16)]
    assert nodes["getitem_1"].target is operator.getitem and nodes["getitem_1"].args[1] == 1
    assert nodes["new_zeros"].kwargs == {"dtype": torch.bfloat16, "pin_memory": False}


def test_symbolic_sizes_need_values_and_name_them(traced_symbolic):
    original, text = traced_symbolic
    assert "(s67//4)" in text  # the real symbolic trace's spelling
    assert graph_text_symbols(text) == {"s67"}
    with pytest.raises(UnresolvedSymbolsError) as e:
        parse_graph_text(text)
    assert e.value.symbols == ["s67"] and "--sym" in str(e.value)
    hints = {str(k): int(v) for k, v in original.shape_env.backed_var_to_val.items()}
    assert hints["s67"] == 128
    gm = parse_graph_text(text, {"s67": hints["s67"]})
    rs = next(n for n in gm.graph.nodes if n.name == "reduce_scatter_tensor")
    assert tuple(rs.meta["val"].shape) == (32,)
    gm = parse_graph_text(text, {"s67": 4096})
    rs = next(n for n in gm.graph.nodes if n.name == "reduce_scatter_tensor")
    assert tuple(rs.meta["val"].shape) == (1024,)


def test_annotations():
    a = parse_annotation("f32[s77, 64][64, 1]cuda:0")
    assert a.dtype == torch.float32 and a.device == torch.device("cuda", 0) and a.symbols() == {"s77"}
    assert parse_annotation("Sym(s77)").symbols() == {"s77"}
    assert parse_annotation("Sym(Eq(s0, 4))").expr is None  # tolerated, no value
    assert parse_annotation("bf16[2*s1 + 4][1]cpu").symbols() == {"s1"}
    with pytest.raises(GraphTextError):
        parse_annotation("DTensor(f32[4][1]cpu)")
    with pytest.raises(GraphTextError):
        parse_annotation("f32[__import__('os')][1]cpu")


def _graph(*body: str, params: str = 'x: "f32[4][1]cpu"') -> str:
    lines = ["class GraphModule(torch.nn.Module):", f"    def forward(self, {params}):"]
    lines += [f"        {b}" for b in body]
    return "\n".join(lines)


def test_absurd_shapes_allocate_nothing():
    text = _graph(
        'ag: "f32[99999999999999][1]cpu" = torch.ops._c10d_functional.all_gather_into_tensor.default(x, 4, \'0\')',
        "return (ag,)",
    )
    gm = parse_graph_text(text)
    val = next(n for n in gm.graph.nodes if n.name == "ag").meta["val"]
    assert val.numel() == 99999999999999 and val.element_size() == 4
    too_big = text.replace("99999999999999", "9" * 30)
    with pytest.raises(GraphTextError, match="line 3"):
        parse_graph_text(too_big)
    overflow = text.replace("[99999999999999][1]", "[4611686018427387904, 4611686018427387904][4611686018427387904, 1]")
    with pytest.raises(GraphTextError):
        parse_graph_text(overflow)


HOSTILE = {
    "dunder import": "y = __import__('os').system('touch {marker}')",
    "builtin open": "y = open('{marker}', 'w')",
    "exec": "y = exec(\"open('{marker}', 'w')\")",
    "attribute chain": "y = x.__class__.__base__.__subclasses__()",
    "dunder via torch.ops": "y = torch.ops.aten.__class__.__init__.__globals__(x)",
    "ops method": "y = torch.ops.load_library.x.y('{marker}')",
    "ops import_module": "y = torch.ops.import_module.a.b('{marker}')",
    "too long op chain": "y = torch.ops.aten.add.Tensor.__call__(x, x)",
    "lambda": "y = (lambda: open('{marker}', 'w'))()",
    "comprehension": "y = [open('{marker}', 'w') for _ in range(1)]",
    "import statement": "import os",
    "from import": "from os import system",
    "call outside torch.ops": "y = os.system('touch {marker}')",
    "torch function": "y = torch.save(x, '{marker}')",
    "walrus in argument": "y = torch.ops.aten.add.Tensor(x, (z := open('{marker}', 'w')))",
    "call inside argument": "y = torch.ops.aten.add.Tensor(x, open('{marker}', 'w'))",
    "starred": "y = torch.ops.aten.add.Tensor(*x)",
    "subscript call": "y = getattr(x, '__class__')",
    "with statement": "with open('{marker}', 'w'): pass",
    "global": "global x",
    "fstring": "y = f'{{open(\"{marker}\", \"w\")}}'",
    "higher order op": "y = torch.ops.higher_order.run_and_save_rng_state(x)",
    "dunder name": "__builtins__ = x",
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_text_is_refused_without_running(kind, tmp_path):
    marker = tmp_path / "pwned"
    stmt = HOSTILE[kind].format(marker=marker)
    text = _graph(stmt, "return (x,)")
    with pytest.raises(GraphTextError) as e:
        parse_graph_text(text)
    assert e.value.line == 3, str(e.value)
    assert "line 3" in str(e.value)
    assert not marker.exists()


def test_hostile_module_level_code_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    text = f"import os\nos.system('touch {marker}')\n" + _graph("return (x,)")
    with pytest.raises(GraphTextError, match="line 1"):
        parse_graph_text(text)
    nested = _graph("return (x,)").replace(
        "    def forward", "    class Inner(torch.nn.Module):\n        pass\n    def forward"
    )
    with pytest.raises(GraphTextError, match="nested graph modules"):
        parse_graph_text(nested)
    assert not marker.exists()


def test_deep_nesting_is_refused():
    deep_list = "[" * 60 + "1" + "]" * 60
    with pytest.raises(GraphTextError, match="nested deeper"):
        parse_graph_text(_graph(f"y = torch.ops.aten.add.Tensor(x, {deep_list})", "return (y,)"))
    deeper = "[" * 5000 + "]" * 5000  # beyond Python's own parser limit
    with pytest.raises(GraphTextError, match="line"):
        parse_graph_text(_graph(f"y = torch.ops.aten.add.Tensor(x, {deeper})", "return (y,)"))
    chain = " + ".join(["1"] * 100_000)
    with pytest.raises(GraphTextError):
        parse_graph_text(_graph(f"y = torch.ops.aten.add.Tensor(x, {chain})", "return (y,)"))
    shape = "+".join(["s0"] * 500)
    with pytest.raises(GraphTextError):
        parse_graph_text(_graph("return (x,)", params=f'x: "f32[{shape}][1]cpu"'), {"s0": 1})


def test_sym_placeholder_without_a_value_gets_no_val():
    text = _graph("y = torch.ops.aten.relu.default(x)", "return (y,)", params='x: "f32[4][1]cpu", n: "Sym(s5)"')
    gm = parse_graph_text(text)
    n = next(n for n in gm.graph.nodes if n.name == "n")
    assert "val" not in n.meta
    gm = parse_graph_text(text, {"s5": 7})
    assert next(n for n in gm.graph.nodes if n.name == "n").meta["val"] == 7
    # Unicode digits and a trailing newline are not sizes.
    with pytest.raises(GraphTextError):
        parse_graph_text(_graph("return (x,)", params='x: "f32[\u0663][1]cpu"'))


def test_unknown_namespace_is_refused_without_creating_it():
    with pytest.raises(GraphTextError, match="unknown operator"):
        parse_graph_text(_graph("y = torch.ops.tracekit_nowhere.foo.default(x)", "return (y,)"))
    assert "tracekit_nowhere" not in vars(torch.ops)
    text = _graph("y = torch.ops.aten.__and__.Tensor(x, x)", "return (y,)")
    gm = parse_graph_text(text)
    assert torch.ops.aten.__and__.Tensor in _targets(gm)


def test_use_before_definition_and_redefinition_are_refused():
    with pytest.raises(GraphTextError, match="not defined"):
        parse_graph_text(_graph("y = torch.ops.aten.add.Tensor(x, z)", "return (y,)"))
    with pytest.raises(GraphTextError, match="defined twice"):
        parse_graph_text(_graph("y = torch.ops.aten.relu.default(x)", "y = torch.ops.aten.relu.default(x)", "return (y,)"))
    with pytest.raises(GraphTextError, match="no overload"):
        parse_graph_text(_graph("y = torch.ops.aten.relu.nonsense(x)", "return (y,)"))


_ALPHABET = list("()[]{},.:;=\"'_ +-*/#\n\t0123456789asx") + ["__", "torch.ops.", "lambda ", "Sym(", "import "]


@st.composite
def _mutations(draw, n_lines: int):
    edits = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["insert", "delete", "replace", "dup_line", "drop_line"]))
        edits.append((kind, draw(st.integers(0, n_lines * 80)), draw(st.sampled_from(_ALPHABET)), draw(st.integers(1, 6))))
    return edits


def _apply(text: str, edits) -> str:
    for kind, pos, piece, length in edits:
        pos = pos % (len(text) + 1)
        if kind == "insert":
            text = text[:pos] + piece + text[pos:]
        elif kind == "delete":
            text = text[:pos] + text[pos + length :]
        elif kind == "replace":
            text = text[:pos] + piece + text[pos + length :]
        else:
            lines = text.split("\n")
            i = pos % len(lines)
            lines = lines[: i + 1] + lines[i:] if kind == "dup_line" else lines[:i] + lines[i + 1 :]
            text = "\n".join(lines)
    return text



def _assert_safe_outcome(text: str, symbols=None) -> None:
    """Parsing either refuses the text with a GraphTextError that says why, or gives a graph that
    lints and calls only registered ops and allow-listed builtins."""
    try:
        gm = parse_graph_text(text, symbols) if symbols is not None else parse_graph_text(text)
    except GraphTextError as e:
        assert e.reason and str(e)
        assert e.line is None or 1 <= e.line <= text.count("\n") + 1
        return
    gm.graph.lint()
    allowed = set(map(id, BUILTIN_TARGETS.values())) | {id(f) for table in (_BINARY, _UNARY, _COMPARE) for f in table.values()}
    for n in gm.graph.nodes:
        if n.op == "call_function":
            assert isinstance(n.target, torch._ops.OpOverload) or id(n.target) in allowed, n.target
        else:
            assert n.op in ("placeholder", "output", "get_attr"), n.op


_TRACED_TEXT = None


def _traced_text() -> str:
    global _TRACED_TEXT
    if _TRACED_TEXT is None:
        _TRACED_TEXT = _printed(make_fx(_fsdp_like, tracing_mode="fake")(*_inputs()))
    return _TRACED_TEXT


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutations(30))
def test_mutated_real_text_never_escapes_graph_text_error(edits):
    _assert_safe_outcome(_apply(_traced_text(), edits), {"s0": 3})


def _fixture_texts():
    from tests.conftest import FIXTURE_LOGS
    from tracekit.read.reader import graph_sources

    out = {}
    for scenario in ("spmd_auto", "diverge_rank", "tracekit_pass"):
        for s in graph_sources([FIXTURE_LOGS / scenario]):
            out.setdefault((scenario, s.rank, s.graph_index), s.text)
    return out


_FIXTURE_TEXTS: dict | None = None


def _fixture_text(key):
    global _FIXTURE_TEXTS
    if _FIXTURE_TEXTS is None:
        _FIXTURE_TEXTS = _fixture_texts()
    return _FIXTURE_TEXTS[key]


@pytest.mark.parametrize(
    "key,nodes,ags,rss",
    [
        (("spmd_auto", 0, 0), 59, 8, 0),
        (("spmd_auto", 0, 1), 110, 5, 8),
        (("diverge_rank", 3, 0), 72, 10, 0),
        (("diverge_rank", 3, 1), 140, 7, 10),
        (("tracekit_pass", 0, 1), 110, 5, 8),
    ],
)
def test_fixture_log_graphs_round_trip(key, nodes, ags, rss):
    text = _fixture_text(key)
    gm = parse_graph_text(text)
    gm.graph.lint()
    targets = _targets(gm)
    assert len(gm.graph.nodes) == nodes
    assert targets.count(c10d.all_gather_into_tensor.default) == ags
    assert targets.count(c10d.reduce_scatter_tensor.default) == rss
    # Printed again, the rebuilt graph is the logged text, comments aside.
    assert _code_lines(_printed(gm)) == _code_lines(text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutations(110))
def test_mutated_fixture_log_text_never_escapes_graph_text_error(edits):
    _assert_safe_outcome(_apply(_fixture_text(("spmd_auto", 0, 1)), edits))


_PIECES = _ALPHABET + ["class G(torch.nn.Module):\n", "    def forward(self, x):\n", "        return x\n",
                       "\x00", "é", "\r\n", 'y: "f32[4][1]cpu" = ', "torch.ops.aten.relu.default(x)\n"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=60))
def test_random_text_never_escapes_graph_text_error(pieces):
    _assert_safe_outcome("".join(pieces))
