"""Rebuild a ``torch.fx.GraphModule`` from the ``print_readable`` text a log recorded, safely.

The text is what torch (2.13 to 2.15) writes as the ``before_post_grad_graph`` artifact, i.e.
``gm.print_readable(include_stride=True, include_device=True)``::

    class GraphModule(torch.nn.Module):
        def forward(self, primals_1: "f32[16, 64][64, 1]cpu", primals_2: "Sym(s77)"):
            # File: ... (comments are ignored)
            all_gather_into_tensor: "f32[64, 64][64, 1]cpu" = torch.ops._c10d_functional.all_gather_into_tensor.default(primals_1, 4, '0')
            wait_tensor: "f32[64, 64][64, 1]cpu" = torch.ops._c10d_functional.wait_tensor.default(all_gather_into_tensor);  all_gather_into_tensor = None
            getitem: "f32[2, 4][4, 1]cpu" = split_with_sizes[0]
            return (wait_tensor, None)

The text is untrusted: it is only ever handed to :func:`ast.parse` and then walked node by node.
Call targets resolve only to ``torch.ops.<namespace>.<op>.<overload>`` (each name checked to be a
plain identifier without dunders before any ``getattr`` on ``torch.ops``, and the result checked
to be an ``OpOverload``) or to a short allow-list of builtins (``operator.getitem``, the operators
fx prints as ``a + b`` ...). Values are literals, lists/tuples, ``torch.float32``-style dtypes,
layouts and memory formats, ``device(...)`` and ``slice(...)``. Anything else (imports, lambdas,
comprehensions, attribute chains, calls elsewhere) raises :class:`GraphTextError` naming the line.
No op is ever run: ``meta["val"]`` is made from the annotations as fake tensors (a meta tensor
wrapped in a ``FakeTensor``), so ``f32[99999999999999]`` allocates nothing.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
from torch._ops import OpOverload, OpOverloadPacket, _OpNamespace
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx._lazy_graph_module import _LazyGraphModule
from torch.fx.graph import dtype_abbrs

from bucketing.gc_pause import gc_paused
from tracekit.replay import symbols as sx
from tracekit.replay.annotations import (
    Annotation,
    GraphTextError,
    SymAnnotation,
    TensorAnnotation,
    UnresolvedSymbolsError,
    fake_tensor,
    parse_annotation,
)

#: Refuse texts larger than this (a 5,000-collective graph is about 10 MB).
MAX_TEXT_CHARS = 512 * 1024 * 1024
#: Refuse argument structures (lists of lists ...) nested deeper than this.
MAX_VALUE_DEPTH = 24


#: Values that may appear as attribute chains, by their printed spelling.
NAMED_VALUES: dict[str, Any] = {str(dt): dt for dt in dtype_abbrs}
NAMED_VALUES.update(
    {
        "torch.strided": torch.strided,
        "torch.sparse_coo": torch.sparse_coo,
        "torch.sparse_csr": torch.sparse_csr,
        "torch.sparse_csc": torch.sparse_csc,
        "torch.sparse_bsr": torch.sparse_bsr,
        "torch.sparse_bsc": torch.sparse_bsc,
        "torch._mkldnn": torch._mkldnn,
        "torch.jagged": torch.jagged,
        "torch.contiguous_format": torch.contiguous_format,
        "torch.preserve_format": torch.preserve_format,
        "torch.channels_last": torch.channels_last,
        "torch.channels_last_3d": torch.channels_last_3d,
    }
)
#: Bare names fx's code generator defines as globals.
BARE_NAMES: dict[str, Any] = {"inf": math.inf, "nan": math.nan}

#: Call targets outside torch.ops that graphs print, by their printed spelling.
BUILTIN_TARGETS: dict[str, Any] = {
    "operator.getitem": operator.getitem,
    "torch.sym_sum": torch.sym_sum,
    "torch.sym_max": torch.sym_max,
    "torch.sym_min": torch.sym_min,
    "torch.sym_float": torch.sym_float,
    "torch.sym_int": torch.sym_int,
    "torch.sym_not": torch.sym_not,
}
#: aten ops whose names are dunders (bitwise operators); the only dunders accepted, and only
#: as the op component of ``torch.ops.aten.<op>.<overload>``.
DUNDER_OPS = frozenset(
    "__and__ __or__ __xor__ __lshift__ __rshift__ __iand__ __ior__ __ixor__ __ilshift__ __irshift__".split()
)

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.MatMult: operator.matmul,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert, ast.Not: operator.not_}
_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}

#: (namespace, op, overload) -> OpOverload, for names already checked and resolved.
_OP_CACHE: dict[tuple[str, str, str], OpOverload] = {}

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LAMBDA_CLASS = re.compile(r"^(\s*)class <([A-Za-z_][A-Za-z0-9_]*)>\(", re.M)


# --- the parser ----------------------------------------------------------------------------------


@dataclass
class _Pending:
    node: fx.Node
    annotation: Annotation | None
    line: int


class _Builder:
    """Walks the parsed module and builds an fx graph; every refusal names its line."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        self.graph = fx.Graph()
        self.env: dict[str, fx.Node] = {}
        self.pending: list[_Pending] = []
        self.buffers: dict[str, _Pending] = {}
        self.line = 0
        self.returned = False

    def error(self, message: str, line: int | None = None) -> GraphTextError:
        line = line or self.line
        src = self.lines[line - 1] if line and 0 < line <= len(self.lines) else None
        return GraphTextError(message, line, src)

    # module / class / def -----------------------------------------------------------------------

    def module(self, tree: ast.Module) -> str:
        classes = [s for s in tree.body if not _is_docstring(s)]
        if len(classes) != 1 or not isinstance(classes[0], ast.ClassDef):
            first = classes[0] if classes else None
            raise self.error(
                "expected exactly one `class ...(torch.nn.Module):` block",
                getattr(first, "lineno", 1),
            )
        cls = classes[0]
        self.line = cls.lineno
        if cls.decorator_list or cls.keywords:
            raise self.error("class decorators and keywords are not accepted")
        forward = None
        for stmt in cls.body:
            self.line = stmt.lineno
            if _is_docstring(stmt):
                continue
            if isinstance(stmt, ast.ClassDef):
                raise self.error(
                    "nested graph modules (higher-order ops such as checkpoint or cond) are not supported"
                )
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "forward" and forward is None:
                forward = stmt
                continue
            raise self.error(f"unexpected {type(stmt).__name__} in the class body")
        if forward is None:
            raise self.error("no `def forward(self, ...)` found", cls.lineno)
        self.forward(forward)
        return cls.name

    def forward(self, fn: ast.FunctionDef) -> None:
        self.line = fn.lineno
        a = fn.args
        if fn.decorator_list or a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
            raise self.error("forward() may only have plain positional parameters")
        if not a.args or a.args[0].arg != "self":
            raise self.error("forward() must start with `self`")
        for arg in a.args[1:]:
            self.line = arg.lineno
            name = self.check_name(arg.arg)
            node = self.graph.placeholder(name)
            self.define(name, node, arg.annotation)
        for stmt in fn.body:
            self.line = stmt.lineno
            if self.returned:
                raise self.error("statement after return")
            self.statement(stmt)
        if not self.returned:
            raise self.error("forward() has no return", fn.lineno)

    # statements ---------------------------------------------------------------------------------

    def statement(self, stmt: ast.stmt) -> None:
        if _is_docstring(stmt) or isinstance(stmt, ast.Pass):
            return
        if isinstance(stmt, ast.Return):
            value = None if stmt.value is None else self.value(stmt.value)
            self.graph.output(value)
            self.returned = True
            return
        if isinstance(stmt, ast.Assign):
            if isinstance(stmt.value, ast.Constant) and stmt.value.value is None:
                # `a = b = None`: fx frees dead values; nothing to build.
                for t in stmt.targets:
                    if not isinstance(t, ast.Name) or t.id not in self.env:
                        raise self.error("only known names can be set to None")
                return
            if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
                raise self.error("an assignment must bind exactly one plain name")
            self.assign(stmt.targets[0].id, None, stmt.value)
            return
        if isinstance(stmt, ast.AnnAssign):
            if not isinstance(stmt.target, ast.Name) or stmt.value is None:
                raise self.error("an annotated assignment must bind one name to a value")
            self.assign(stmt.target.id, stmt.annotation, stmt.value)
            return
        raise self.error(f"{type(stmt).__name__} statements are not accepted")

    def assign(self, name: str, annotation: ast.expr | None, value: ast.expr) -> None:
        name = self.check_name(name)
        if name in self.env:
            raise self.error(f"{name!r} is defined twice")
        if isinstance(value, ast.Name):
            # `x = x_1`: fx's alias of a renamed placeholder.
            self.env[name] = self.node_ref(value)
            return
        node = self.node_for(name, value, annotation)
        self.define(name, node, annotation)

    def define(self, name: str, node: fx.Node, annotation: ast.expr | None) -> None:
        ann = None
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            try:
                ann = parse_annotation(annotation.value)
            except GraphTextError as e:
                raise self.error(e.reason) from None
        # Non-string annotations (`x : torch.Tensor`) are ignored: never resolved, never run.
        self.env[name] = node
        self.pending.append(_Pending(node, ann, self.line))
        if node.op == "get_attr":
            if not isinstance(ann, TensorAnnotation):
                raise self.error("a constant (self.<name>) needs a tensor annotation")
            self.buffers[str(node.target)] = self.pending[-1]

    def node_for(self, name: str, value: ast.expr, annotation: ast.expr | None) -> fx.Node:
        g = self.graph
        if isinstance(value, ast.Call):
            target = self.call_target(value.func)
            args = tuple(self.value(a) for a in value.args)
            kwargs = {}
            for kw in value.keywords:
                if kw.arg is None:
                    raise self.error("**kwargs are not accepted")
                kwargs[self.check_name(kw.arg)] = self.value(kw.value)
            return g.create_node("call_function", target, args, kwargs, name=name)
        if isinstance(value, ast.Subscript):
            return g.create_node(
                "call_function",
                operator.getitem,
                (self.node_ref(value.value), self.value(value.slice)),
                name=name,
            )
        if isinstance(value, ast.BinOp) and type(value.op) in _BINARY:
            args = (self.value(value.left), self.value(value.right))
            return g.create_node("call_function", _BINARY[type(value.op)], args, name=name)
        if isinstance(value, ast.UnaryOp) and type(value.op) in _UNARY:
            args = (self.value(value.operand),)
            return g.create_node("call_function", _UNARY[type(value.op)], args, name=name)
        if isinstance(value, ast.Compare) and len(value.ops) == 1 and type(value.ops[0]) in _COMPARE:
            args = (self.value(value.left), self.value(value.comparators[0]))
            return g.create_node("call_function", _COMPARE[type(value.ops[0])], args, name=name)
        if (
            isinstance(value, ast.Attribute)
            and isinstance(value.value, ast.Name)
            and value.value.id == "self"
        ):
            attr = self.check_name(value.attr)
            return g.create_node("get_attr", attr, name=name)
        raise self.error(f"{type(value).__name__} is not a graph node expression")

    # call targets -------------------------------------------------------------------------------

    def call_target(self, func: ast.expr) -> Any:
        chain = self.attribute_chain(func)
        if chain[:2] == ["torch", "ops"]:
            return self.resolve_op(chain)
        spelled = ".".join(chain)
        target = BUILTIN_TARGETS.get(spelled)
        if target is None:
            raise self.error(
                f"call to {spelled[:80]!r}: only torch.ops.<ns>.<op>.<overload> "
                "and a few builtins (operator.getitem, ...) may be called"
            )
        return target

    def attribute_chain(self, expr: ast.expr) -> list[str]:
        parts: list[str] = []
        while isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
            if len(parts) > 8:
                raise self.error("attribute chain too long")
        if not isinstance(expr, ast.Name):
            raise self.error(f"call of a {type(expr).__name__}: only named functions may be called")
        parts.append(expr.id)
        parts.reverse()
        return parts

    def resolve_op(self, chain: list[str]) -> OpOverload:
        spelled = ".".join(chain)
        if len(chain) != 5:
            raise self.error(f"{spelled[:80]!r} is not torch.ops.<namespace>.<op>.<overload>")
        _, _, ns, op, overload = chain
        for i, part in enumerate((ns, op, overload)):
            if not _IDENT.match(part):
                raise self.error(f"{part[:40]!r} in {spelled[:80]!r} is not a plain identifier")
            if "__" in part and not (i == 1 and ns == "aten" and part in DUNDER_OPS):
                raise self.error(f"dunder name {part!r} in {spelled[:80]!r} is refused")
        if ns == "higher_order":
            raise self.error(
                f"higher-order op {spelled[:80]!r} is not supported (its subgraphs are not printed inline)"
            )
        cached = _OP_CACHE.get((ns, op, overload))
        if cached is not None:
            return cached
        # Ask the dispatcher first: a getattr on torch.ops would create any namespace named.
        schemas = torch._C._jit_get_schemas_for_operator(f"{ns}::{op}")
        if not schemas:
            raise self.error(f"unknown operator torch.ops.{ns}.{op} (not registered in this process)")
        if overload not in {sc.overload_name or "default" for sc in schemas}:
            raise self.error(f"{spelled!r}: operator has no overload {overload!r}")
        namespace = getattr(torch.ops, ns, None)
        if type(namespace) is not _OpNamespace:
            raise self.error(
                f"torch.ops.{ns} is not an operator namespace (higher-order ops are not supported)"
            )
        try:
            packet = getattr(namespace, op)
        except (AttributeError, RuntimeError):
            raise self.error(f"unknown operator torch.ops.{ns}.{op}") from None
        if not isinstance(packet, OpOverloadPacket):
            raise self.error(f"torch.ops.{ns}.{op} is not an operator")
        target = getattr(packet, overload)
        if not isinstance(target, OpOverload):
            raise self.error(f"{spelled!r} is not an operator overload")
        _OP_CACHE[(ns, op, overload)] = target
        return target

    # values -------------------------------------------------------------------------------------

    def node_ref(self, expr: ast.expr) -> fx.Node:
        if isinstance(expr, ast.Name) and expr.id in self.env:
            return self.env[expr.id]
        if isinstance(expr, ast.Name):
            raise self.error(f"{expr.id[:40]!r} is not defined before this line")
        raise self.error(f"{type(expr).__name__} where a graph value name was expected")

    def value(self, expr: ast.expr, depth: int = 0) -> Any:
        if depth > MAX_VALUE_DEPTH:
            raise self.error(f"value nested deeper than {MAX_VALUE_DEPTH} levels")
        if isinstance(expr, ast.Constant):
            v = expr.value
            if v is None or v is Ellipsis or type(v) in (bool, int, float, str, complex):
                return v
            raise self.error(f"{type(v).__name__} literal is not accepted")
        if isinstance(expr, ast.Name):
            if expr.id in self.env:
                return self.env[expr.id]
            if expr.id in BARE_NAMES:
                return BARE_NAMES[expr.id]
            raise self.error(f"{expr.id[:40]!r} is not defined before this line")
        if isinstance(expr, (ast.List, ast.Tuple)):
            items = [self.value(e, depth + 1) for e in expr.elts]
            return items if isinstance(expr, ast.List) else tuple(items)
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
            v = self.value(expr.operand, depth + 1)
            if type(v) in (int, float, complex):
                return -v if isinstance(expr.op, ast.USub) else v
            raise self.error("unary minus is accepted on number literals only")
        if isinstance(expr, ast.Attribute):
            spelled = ".".join(self.attribute_chain(expr))
            if spelled in NAMED_VALUES:
                return NAMED_VALUES[spelled]
            raise self.error(f"{spelled[:80]!r} is not a known dtype, layout or memory format")
        if isinstance(expr, ast.Call):
            return self.call_value(expr, depth)
        if isinstance(expr, ast.Slice):
            parts = [
                None if p is None else self.value(p, depth + 1) for p in (expr.lower, expr.upper, expr.step)
            ]
            return slice(*parts)
        raise self.error(f"{type(expr).__name__} expressions are not accepted")

    def call_value(self, expr: ast.Call, depth: int) -> Any:
        chain = self.attribute_chain(expr.func)
        spelled = ".".join(chain)
        args = [self.value(a, depth + 1) for a in expr.args]
        kwargs = {}
        for kw in expr.keywords:
            if kw.arg is None:
                raise self.error("**kwargs are not accepted")
            kwargs[kw.arg] = self.value(kw.value, depth + 1)
        plain = all(v is None or type(v) in (int, str) for v in [*args, *kwargs.values()])
        if spelled in ("device", "torch.device") and plain and set(kwargs) <= {"type", "index"}:
            try:
                return torch.device(*args, **kwargs)
            except (RuntimeError, TypeError, ValueError) as e:
                raise self.error(f"bad device: {e}") from None
        if spelled == "slice" and plain and not kwargs and len(args) <= 3:
            return slice(*args)
        raise self.error(f"call to {spelled[:80]!r} inside an argument is not accepted")

    def check_name(self, name: str) -> str:
        if not _IDENT.match(name) or "__" in name or name == "self" or len(name) > 200:
            raise self.error(f"{name[:40]!r} is not an accepted name")
        return name


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


# --- fake values ---------------------------------------------------------------------------------


def _set_values(b: _Builder, values: Mapping[str, int], mode: FakeTensorMode) -> None:
    for p in b.pending:
        ann = p.annotation
        try:
            if isinstance(ann, TensorAnnotation):
                p.node.meta["val"] = fake_tensor(mode, ann, values)
            elif isinstance(ann, SymAnnotation) and ann.expr is not None and ann.symbols() <= values.keys():
                # only tensor annotations need values: a Sym(...) with an unknown symbol gets none
                p.node.meta["val"] = sx.evaluate(ann.expr, values)
        except (sx.SizeExprError, RuntimeError, ValueError, OverflowError) as e:
            raise b.error(f"cannot make a fake tensor for {p.node.name}: {e}", p.line) from None
    # Multi-output ops (split_with_sizes, var_mean) print no annotation; their getitems do.
    for p in b.pending:
        node = p.node
        if "val" in node.meta or not isinstance(node.target, OpOverload):
            continue
        items: dict[int, Any] = {}
        for user in node.users:
            if user.target is operator.getitem and type(user.args[1]) is int and "val" in user.meta:
                items[user.args[1]] = user.meta["val"]
        if not items or min(items) < 0 or max(items) > 10_000:
            continue
        seq = [items.get(i) for i in range(max(items) + 1)]
        returns = node.target._schema.returns
        node.meta["val"] = seq if len(returns) == 1 else tuple(seq)
    _set_lazy_bits(b, mode)


#: Ops whose output is a lazily conjugated or negated view: a bit of the tensor no annotation
#: prints (``c64[1, 128, 1, 8]`` either way).
_LAZY_BIT_OPS = frozenset({torch.ops.aten._conj.default, torch.ops.aten._neg_view.default})


def _set_lazy_bits(b: _Builder, mode: FakeTensorMode) -> None:
    """Give the values of ``_conj`` / ``_neg_view`` their conjugate / negative bit, which their
    annotation cannot say, by running the op on its input's fake value. torch's post-grad passes
    tell a ``clone`` that resolves the bit from one that copies for nothing (``remove_noop_ops``
    keeps the first, drops the second): without the bit, a rotary embedding's
    ``clone(_conj(freqs))`` went from the rebuilt graph where torch's kept it."""
    for p in b.pending:
        node = p.node
        if node.target not in _LAZY_BIT_OPS or "val" not in node.meta or not node.args:
            continue
        src = node.args[0]
        val = src.meta.get("val") if isinstance(src, fx.Node) else None
        if isinstance(val, torch.Tensor):
            with mode:
                node.meta["val"] = node.target(val)


def _required_symbols(b: _Builder) -> dict[str, int]:
    """symbol -> first line that needs it (only tensor annotations need values)."""
    need: dict[str, int] = {}
    for p in b.pending:
        if isinstance(p.annotation, TensorAnnotation):
            for s in p.annotation.symbols():
                need.setdefault(s, p.line)
    return need


# --- entry points --------------------------------------------------------------------------------


def graph_text_symbols(text: str) -> set[str]:
    """The size symbols a graph text's tensor annotations use (parses, builds nothing fake)."""
    b = _parse(text)
    return set(_required_symbols(b))


def _parse(text: str) -> _Builder:
    if not isinstance(text, str):
        raise GraphTextError("graph text must be a str")
    if len(text) > MAX_TEXT_CHARS:
        raise GraphTextError(f"graph text of {len(text)} characters is larger than {MAX_TEXT_CHARS}")
    if "\x00" in text:
        raise GraphTextError("graph text contains NUL bytes", text[: text.index("\x00")].count("\n") + 1)
    # print_readable names lambdas' classes `class <lambda>(...)`, which is not Python.
    prepared = _LAMBDA_CLASS.sub(lambda m: f"{m.group(1)}class _{m.group(2)}_(", text)
    lines = prepared.split("\n")
    try:
        tree = ast.parse(prepared, mode="exec")
    except SyntaxError as e:
        src = lines[e.lineno - 1] if e.lineno and 0 < e.lineno <= len(lines) else None
        raise GraphTextError(f"not Python syntax: {e.msg}", e.lineno, src) from None
    except (ValueError, RecursionError, MemoryError, OverflowError) as e:
        raise GraphTextError(f"cannot parse graph text: {type(e).__name__}: {str(e)[:100]}") from None
    b = _Builder(lines)
    try:
        b.class_name = b.module(tree)  # type: ignore[attr-defined]  # set here, read below
    except RecursionError:
        raise b.error("graph text nested too deeply") from None
    return b


def parse_graph_text(text: str, symbols: Mapping[str, int] | None = None) -> fx.GraphModule:
    """Build a linted ``GraphModule`` whose nodes carry fake ``meta["val"]`` from ``text``.

    ``symbols`` gives values for symbolic sizes (hints from the log, then ``--sym`` overrides);
    a size symbol without a value raises :class:`UnresolvedSymbolsError` naming all of them.
    Raises :class:`GraphTextError` (with the line) for anything it does not accept.
    """
    with gc_paused():  # the collector re-scans the growing AST and graph: 2.5x the parse time
        return _build_graph_module(text, symbols)


def _build_graph_module(text: str, symbols: Mapping[str, int] | None) -> fx.GraphModule:
    b = _parse(text)
    values = dict(symbols or {})
    required = _required_symbols(b)
    missing = {s: line for s, line in required.items() if s not in values}
    if missing:
        raise UnresolvedSymbolsError(missing)
    mode = FakeTensorMode(allow_non_fake_inputs=False)
    _set_values(b, values, mode)
    root = torch.nn.Module()
    for target, p in b.buffers.items():
        ann = p.annotation
        shape = [sx.evaluate(e, values) for e in ann.shape]  # type: ignore[union-attr]  # buffers are annotated
        root.register_buffer(target, torch.empty(shape, dtype=ann.dtype, device="meta"))  # type: ignore[union-attr]  # as above
    try:
        b.graph.lint()
        # Lazy: fx generates the module's Python code only if it is asked for (forward, .code);
        # passes and plans only read the graph, and code generation is a third of the parse.
        gm = _LazyGraphModule(root, b.graph, class_name=b.class_name)  # type: ignore[attr-defined]  # set above
    except (RuntimeError, ValueError, TypeError, NameError, SyntaxError, AttributeError) as e:
        raise GraphTextError(f"the rebuilt graph does not lint: {type(e).__name__}: {str(e)[:200]}") from None
    gm.meta["fake_mode"] = mode
    gm.meta["tracekit_symbols"] = {s: values[s] for s in sorted(required)}  # the ones it used
    return gm
