"""Values the log recorded for symbolic sizes: the hints of its ``create_symbol`` entries.

Dynamo logs ``{"create_symbol": {"symbol": "s77", "val": "8", ...}}`` when it makes a size
symbolic; ``val`` is the size seen then (the hint). A frame's forward and backward share one
shape environment, so the hints of a compile id serve both its graphs. Unbacked symbols
(``u0``) have no hint: they need ``--sym``.

Read through the reader's public :func:`tracekit.reader.iter_entries`, and only for the files
whose graph texts have symbolic sizes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from tracekit.model import Diagnostics

#: A tensor annotation with a symbol among its sizes, or a Sym(...) annotation with a symbol.
_SYMBOLIC = re.compile(r'"(?:[a-z0-9]+\[[^\]"]*\b[a-z]{1,4}\d+|Sym\([^)"]*\b[a-z]{1,4}\d+)')


def needs_hints(text: str | None) -> bool:
    """Whether a graph text has symbolic sizes (a cheap scan; the parser decides for real)."""
    return bool(text) and _SYMBOLIC.search(text) is not None


def symbol_hints(paths: Iterable[str], diagnostics: Diagnostics | None = None) -> dict[tuple[str, str], dict[str, int]]:
    """``(file, compile_id) -> {symbol: hint}`` from the ``create_symbol`` entries of ``paths``."""
    from tracekit.reader import iter_entries

    out: dict[tuple[str, str], dict[str, int]] = {}
    for path in paths:
        for e in iter_entries(path, lambda etype, _name: etype == "create_symbol",
                              diagnostics=diagnostics, payload_for=lambda _t, _n: False):
            body: Any = e.envelope.get("create_symbol")
            if not isinstance(body, dict) or e.compile_id is None:
                continue
            name, val = body.get("symbol"), body.get("val")
            if not isinstance(name, str) or not isinstance(val, (str, int)):
                continue
            try:
                out.setdefault((path, e.compile_id), {})[name] = int(val)
            except ValueError:
                continue  # e.g. a symbolic hint: none to use
    return out


def attach_hints(sources: list, diagnostics: Diagnostics | None = None) -> None:
    """Set ``symbol_hints`` on the sources whose texts need them (reads only their files)."""
    files = sorted({s.graph.file for s in sources if needs_hints(s.text)})
    if not files:
        return
    hints = symbol_hints(files, diagnostics)
    for s in sources:
        if s.graph.file in files:
            s.symbol_hints = hints.get((s.graph.file, s.compile_id), {})
