"""Annotations of ``print_readable`` text, and the fake tensors made from them.

``f32[s0, 64][64, 1]cuda:0`` is dtype, sizes, strides, device; ``Sym(s77)`` a symbolic int.
Sizes are int literals (the fast path) or size expressions (:mod:`tracekit.replay.symbols`).
A fake tensor is a meta tensor (no storage: ``f32[99999999999999]`` allocates nothing)
wrapped in a ``FakeTensor`` carrying the annotated device.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.fx.graph import dtype_abbrs

from tracekit.replay import symbols as sx

DTYPES: dict[str, torch.dtype] = {abbr: dt for dt, abbr in dtype_abbrs.items()}

_DEVICE = re.compile(r"^[a-z_]{1,16}(?::\d{1,4})?$")
_TENSOR_ANN = re.compile(r"^([a-z0-9]{1,16})\[([^\[\]]*)\](?:\[([^\[\]]*)\])?(.*)$", re.S)
_SYM_ANN = re.compile(r"^Sym\((.*)\)$", re.S)


class GraphTextError(ValueError):
    """The text is not a graph this parser accepts; ``line`` is 1-based within the text."""

    def __init__(self, message: str, line: int | None = None, source: str | None = None):
        self.reason = message
        self.line = line
        self.source = source
        where = f"line {line}: " if line else ""
        shown = f"\n    {source.strip()[:200]}" if source and source.strip() else ""
        super().__init__(f"{where}{message}{shown}")


class UnresolvedSymbolsError(GraphTextError):
    """Symbolic sizes without a value: pass them with ``--sym NAME=VALUE``."""

    def __init__(self, missing: dict[str, int]):
        self.symbols = sorted(missing)
        where = ", ".join(f"{s} (line {missing[s]})" for s in self.symbols)
        super().__init__(
            f"symbolic sizes without a value: {where}; the log records no hint for them "
            f"(no create_symbol entry), set them with --sym NAME=VALUE"
        )


@dataclass(frozen=True)
class TensorAnnotation:
    """``f32[s0, 64][64, 1]cuda:0`` as dtype, size expressions, stride expressions, device."""

    dtype: torch.dtype
    shape: tuple[sx.SizeExpr, ...]
    stride: tuple[sx.SizeExpr, ...] | None
    device: torch.device

    def symbols(self) -> set[str]:
        out: set[str] = set()
        for e in self.shape + (self.stride or ()):
            out |= sx.free_symbols(e)
        return out


@dataclass(frozen=True)
class SymAnnotation:
    """``Sym(s77)`` / ``Sym(64)``; ``expr`` is None for forms we do not evaluate (``Eq(s0, 4)``)."""

    expr: sx.SizeExpr | None

    def symbols(self) -> set[str]:
        return set() if self.expr is None else sx.free_symbols(self.expr)


Annotation = TensorAnnotation | SymAnnotation


_ANNOTATION_CACHE_SIZE = 4096


@functools.lru_cache(maxsize=_ANNOTATION_CACHE_SIZE)
def parse_annotation(text: str) -> Annotation:
    """One annotation string, as printed by ``print_readable(include_stride, include_device)``.

    Cached: a graph repeats a few annotations thousands of times (the results are immutable).
    """
    text = text.strip()
    m = _SYM_ANN.match(text)
    if m:
        try:
            return SymAnnotation(sx.parse_size_expr(m.group(1)))
        except sx.SizeExprError:
            return SymAnnotation(None)
    m = _TENSOR_ANN.match(text)
    if not m:
        raise GraphTextError(f"unsupported annotation {text[:80]!r}")
    abbr, shape, stride, device = m.groups()
    dtype = DTYPES.get(abbr)
    if dtype is None:
        raise GraphTextError(f"unknown dtype {abbr!r} in annotation {text[:80]!r}")
    device = device.strip() or "cpu"
    if not _DEVICE.match(device):
        raise GraphTextError(f"unknown device {device[:40]!r} in annotation {text[:80]!r}")
    try:
        dev = torch.device(device)
        shape_t = _size_list(shape)
        stride_t = None if stride is None else _size_list(stride)
    except (sx.SizeExprError, RuntimeError) as e:
        raise GraphTextError(f"bad annotation {text[:80]!r}: {e}") from None
    if stride_t is not None and len(stride_t) != len(shape_t):
        raise GraphTextError(f"annotation {text[:80]!r} has {len(shape_t)} sizes, {len(stride_t)} strides")
    return TensorAnnotation(dtype, shape_t, stride_t, dev)


#: ASCII spaces and digits only: ``\s`` and ``\d`` also match characters ``int()`` refuses ("1\x1e").
_INT_LIST = re.compile(r"[ ]*[0-9]{1,19}(?:[ ]*,[ ]*[0-9]{1,19})*[ ]*\Z")


def _size_list(text: str) -> tuple[sx.SizeExpr, ...]:
    if not text.strip():
        return ()
    if _INT_LIST.match(text):
        # The common case, static sizes: no need for a parse tree.
        out = tuple(int(x) for x in text.split(","))
        if any(x > sx.MAX_SIZE_VALUE for x in out):
            raise sx.SizeExprError(f"size in [{text[:80]}] is absurdly large")
        return out
    if len(text) > sx.MAX_EXPR_CHARS * 8:
        raise sx.SizeExprError(f"size list of {len(text)} characters")
    try:
        tree = ast.parse(f"[{text}]", mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise sx.SizeExprError(f"not a size list: [{text[:80]}] ({type(e).__name__})") from None
    if not isinstance(tree.body, ast.List):
        raise sx.SizeExprError(f"not a size list: [{text[:80]}]")
    return tuple(sx.from_ast(e, text) for e in tree.body.elts)


def fake_tensor(mode: FakeTensorMode, ann: TensorAnnotation, values: Mapping[str, int]) -> FakeTensor:
    shape = [sx.evaluate(e, values) for e in ann.shape]
    if any(s < 0 for s in shape):
        raise sx.SizeExprError(f"negative size in {shape}")
    if ann.stride is None:
        stride, acc = [], 1
        for s in reversed(shape):
            stride.append(acc)
            acc *= max(s, 1)
        stride.reverse()
    else:
        stride = [sx.evaluate(e, values) for e in ann.stride]
        if any(s < 0 for s in stride):
            raise sx.SizeExprError(f"negative stride in {stride}")
    # A meta tensor has no storage: absurd shapes cost nothing.
    elem = torch.empty_strided(shape, stride, dtype=ann.dtype, device="meta")
    return FakeTensor(mode, elem, ann.device)
