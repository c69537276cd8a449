"""Printed graphs compared up to names (no tests here; no torch: the tests that run without torch
may import it)."""

from __future__ import annotations

import re

_DEF = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)(?::\s*\"[^\"]*\")?\s*=\s")
_NAME = re.compile(r"(?<![.\w])[A-Za-z_][A-Za-z0-9_]*\b")  # a name, not an attribute (aten.le)


def canonical(text: str) -> list[str]:
    """The statements of a printed graph (``print_readable``), comments and the ``x = None`` frees
    left out, each node named by its place: ``in0``, ``in1``... for the graph's inputs, then
    ``n<k>`` in the order the nodes are defined, so that two graphs that differ only in the names
    of their nodes read the same, and two that differ in order do not."""
    lines = [ln.strip() for ln in text.splitlines()]
    body = [ln.split(";  ")[0] for ln in lines if ln and not ln.startswith(("#", "class ", "def "))]
    header = next(ln for ln in lines if ln.startswith("def forward("))
    inputs = re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*:", header[len("def forward(") :])
    names = {n: f"in{i}" for i, n in enumerate(x for x in inputs if x != "self")}
    for ln in body:
        m = _DEF.match(ln)
        if m and m.group(1) not in names:
            names[m.group(1)] = f"n{len(names)}"
    return [_NAME.sub(lambda m: names.get(m.group(0), m.group(0)), ln) for ln in body]
