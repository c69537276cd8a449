"""Symbolic sizes in graph annotations: ``s77``, ``2*s1 + 4``, ``(s0//2)``, ``Max(1, s0)``.

Size expressions are parsed with :mod:`ast` into a tiny tree of ints, symbol names and the
operators ``+ - * // %`` (and ``Max``/``Min``, which torch prints in strides), then evaluated
against concrete values. Nothing is ever handed to ``eval``.

    >>> expr = parse_size_expr("2*s1 + 4")
    >>> sorted(free_symbols(expr)), evaluate(expr, {"s1": 3})
    (['s1'], 10)
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass

#: Symbol names torch prints: s0, s77 (backed), u0 (unbacked), and a few other one-letter prefixes.
SYMBOL_NAME = re.compile(r"^[a-z]{1,4}\d+$")
MAX_EXPR_DEPTH = 40
MAX_EXPR_CHARS = 2000
#: A size larger than this (2**62) is refused rather than turned into a tensor.
MAX_SIZE_VALUE = 1 << 62


class SizeExprError(ValueError):
    """A size expression that is not made of ints, symbols and + - * // % Max Min."""


@dataclass(frozen=True)
class Sym:
    name: str


@dataclass(frozen=True)
class BinOp:
    op: str  # "+", "-", "*", "//", "%", "max", "min"
    left: SizeExpr
    right: SizeExpr


@dataclass(frozen=True)
class Neg:
    operand: SizeExpr


SizeExpr = int | Sym | BinOp | Neg

_BINOPS: dict[type, str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.FloorDiv: "//",
    ast.Mod: "%",
}


def parse_size_expr(text: str) -> SizeExpr:
    """One size expression (``"s0"``, ``"2*s1 + 4"``, ``"64"``) as a :data:`SizeExpr`."""
    text = text.strip()
    if not text or len(text) > MAX_EXPR_CHARS:
        raise SizeExprError(f"size expression of {len(text)} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise SizeExprError(f"not a size expression: {text!r} ({type(e).__name__})") from None
    return from_ast(tree.body, text)


def from_ast(node: ast.AST, text: str = "", depth: int = 0) -> SizeExpr:
    """Convert an already parsed expression node into a :data:`SizeExpr` (refusing anything else)."""
    if depth > MAX_EXPR_DEPTH:
        raise SizeExprError(f"size expression nested deeper than {MAX_EXPR_DEPTH}: {text!r}")
    if isinstance(node, ast.Constant) and type(node.value) is int:
        if abs(node.value) > MAX_SIZE_VALUE:
            raise SizeExprError(f"size {node.value} is absurdly large")
        return node.value
    if isinstance(node, ast.Name):
        if not SYMBOL_NAME.match(node.id):
            raise SizeExprError(f"{node.id!r} is not a symbol name (in {text!r})")
        return Sym(node.id)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return BinOp(
            _BINOPS[type(node.op)],
            from_ast(node.left, text, depth + 1),
            from_ast(node.right, text, depth + 1),
        )
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = from_ast(node.operand, text, depth + 1)
        return Neg(inner) if isinstance(node.op, ast.USub) else inner
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("Max", "Min")
        and len(node.args) >= 2
        and not node.keywords
    ):
        op = node.func.id.lower()
        out = from_ast(node.args[0], text, depth + 1)
        for arg in node.args[1:]:
            out = BinOp(op, out, from_ast(arg, text, depth + 1))
        return out
    raise SizeExprError(f"unsupported size expression {text!r} ({type(node).__name__})")


def free_symbols(expr: SizeExpr) -> set[str]:
    """The symbol names an expression needs."""
    out: set[str] = set()
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, Sym):
            out.add(e.name)
        elif isinstance(e, BinOp):
            stack += [e.left, e.right]
        elif isinstance(e, Neg):
            stack.append(e.operand)
    return out


def evaluate(expr: SizeExpr, values: Mapping[str, int]) -> int:
    """The integer value of ``expr`` with every symbol taken from ``values`` (KeyError if missing)."""
    if isinstance(expr, int):
        return expr
    if isinstance(expr, Sym):
        return int(values[expr.name])
    if isinstance(expr, Neg):
        return -evaluate(expr.operand, values)
    a, b = evaluate(expr.left, values), evaluate(expr.right, values)
    if expr.op in ("//", "%") and b == 0:
        raise SizeExprError("division by zero in a size expression")
    if expr.op == "+":
        r = a + b
    elif expr.op == "-":
        r = a - b
    elif expr.op == "*":
        r = a * b
    elif expr.op == "//":
        r = a // b
    elif expr.op == "%":
        r = a % b
    elif expr.op == "max":
        r = max(a, b)
    else:
        r = min(a, b)
    if abs(r) > MAX_SIZE_VALUE:
        raise SizeExprError(f"size expression evaluates to an absurd {r}")
    return r


def parse_sym_assignments(items: list[str] | tuple[str, ...]) -> dict[str, int]:
    """``["s0=8", "s77=1024"]`` (from ``--sym``) as ``{"s0": 8, "s77": 1024}``."""
    out: dict[str, int] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not SYMBOL_NAME.match(name):
            raise SizeExprError(f"--sym wants NAME=VALUE with a symbol name like s0, got {item!r}")
        try:
            out[name] = int(value)
        except ValueError:
            raise SizeExprError(f"--sym {name}: {value!r} is not an integer") from None
    return out
