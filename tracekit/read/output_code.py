"""Which wait ends which collective: read off each graph's ``inductor_output_code`` (the Python
module inductor generated; it is code, and is only ever read as text here, never run).

In the generated ``call()``, each collective is one line that names the buffer it fills and each
wait one line that names the buffer it waits on::

    torch.ops._c10d_functional.all_gather_into_tensor_out.default(reinterpret_tensor(buf0, ...), 2, '0', out=buf0)
    torch.ops._c10d_functional.wait_tensor.default(buf0)
    buf28 = torch.ops._c10d_functional.all_gather_into_tensor.default(primals_3, 2, '0')
    buf38 = torch.ops._c10d_functional.reduce_scatter_tensor.default(reinterpret_tensor(buf37, ...), 'sum', 2, '0')
    torch.ops._c10d_functional.wait_tensor.default(buf38)
    torch.ops._c10d_functional.wait_tensor.default(buf28)

so the waits need not end collectives in the order they were issued (above: the reduce-scatter's
wait comes before the all-gather's). :func:`wait_orders` gives, per rank, compile id and graph
position (0 forward, 1 backward: the order of a compile id's output code entries, as the reader
pairs graphs), the index of the collective each wait ends, in wait order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from tracekit.model import Diagnostics
from tracekit.read.envelope_fields import compile_id
from tracekit.read.envelopes import PREFIX_RE
from tracekit.read.sources import find_logs, open_log

_CALL_RE = re.compile(
    r"^\s*(?:(?P<lhs>\w+)\s*=\s*)?torch\.ops\._c10d_functional\.(?P<op>\w+)\.default\((?P<args>.*)\)\s*$"
)
_OUT_RE = re.compile(r"\bout=(\w+)")
_FIRST_ARG_RE = re.compile(r"\s*(\w+)")

#: Key of :func:`wait_orders`: (rank, compile id, position).
GraphKey = tuple[int | None, str, int]


def waits_of(code: str) -> list[int] | None:
    """The collective (its index among the code's collectives, in issue order) each wait ends,
    in wait order; None when a wait names a buffer no collective filled."""
    filled: list[str | None] = []  # per collective: its buffer, None once waited
    out: list[int] = []
    for line in code.split("\n"):
        if "_c10d_functional." not in line or line.lstrip().startswith("#"):
            continue
        m = _CALL_RE.match(line)
        if m is None:
            continue
        if m["op"] == "wait_tensor":
            a = _FIRST_ARG_RE.match(m["args"])
            buf = a[1] if a else None
            k = next((i for i in range(len(filled) - 1, -1, -1) if filled[i] == buf), None)
            if k is None:
                return None
            filled[k] = None
            out.append(k)
            continue
        o = _OUT_RE.search(m["args"])
        filled.append(o[1] if o else m["lhs"])
    return out


def _lines(stream: Any) -> Iterator[bytes]:  # a file or a TolerantGzip
    """The stream's lines (``read`` in 1 MiB pieces: a TolerantGzip has no line iterator)."""
    rest = b""
    while True:
        piece = stream.read(1 << 20)
        if not piece:
            break
        parts = (rest + piece).split(b"\n")
        rest = parts.pop()
        yield from parts
    if rest:
        yield rest


def _entries(path: str) -> Iterator[tuple[dict, str]]:
    """``(envelope, payload)`` of each ``inductor_output_code`` entry of one log file."""
    stream, raw = open_log(path)
    try:
        env: dict | None = None
        lines: list[bytes] = []
        for line in _lines(stream):
            if line.startswith(b"\t"):
                if env is not None:
                    lines.append(line[1:].rstrip(b"\r"))
                continue
            if env is not None:
                yield env, b"\n".join(lines).decode("utf-8", "replace")
                env, lines = None, []
            if b'"inductor_output_code"' not in line[:300]:
                continue
            m = PREFIX_RE.match(line)
            if m is None:
                continue
            try:
                doc = orjson.loads(line[m.end() :])
            except orjson.JSONDecodeError:
                continue
            if isinstance(doc, dict) and "inductor_output_code" in doc:
                env = doc
        if env is not None:
            yield env, b"\n".join(lines).decode("utf-8", "replace")
    finally:
        stream.close()
        if raw is not stream:
            raw.close()


def wait_orders(paths: Iterable[str]) -> dict[GraphKey, list[int]]:
    """Per (rank, compile id, position), the collective each wait ends (:func:`waits_of`), from
    every log file under ``paths``; a graph whose code could not be read is left out."""
    out: dict[GraphKey, list[int]] = {}
    seen: dict[tuple[int | None, str], int] = {}
    for f in find_logs(list(paths), Diagnostics()):
        try:
            entries = list(_entries(f.path))
        except OSError:
            continue
        for env, code in entries:
            cid = compile_id(env)
            rank = env.get("rank") if isinstance(env.get("rank"), int) else f.rank_hint
            if cid is None:
                continue
            pos = seen.get((rank, cid), 0)
            seen[(rank, cid)] = pos + 1
            waits = waits_of(code)
            if waits is not None:
                out[(rank, cid, pos)] = waits
    return out


__all__ = ["GraphKey", "wait_orders", "waits_of"]
