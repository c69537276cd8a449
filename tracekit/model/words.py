"""Counts in words, for every stage that writes a sentence (the reader's diagnostics, the
analysis's verdicts, the renderers' tables): ``plural(1, "graph")`` is ``1 graph``,
``plural(2, "graph")`` is ``2 graphs``; never ``graph(s)``."""

from __future__ import annotations


def plural(n: int, word: str, many: str | None = None) -> str:
    """A count and its noun, in agreement: ``1 graph``, ``2 graphs`` (``many`` for an irregular
    plural: ``plural(n, "copy", "copies")``)."""
    return f"{n} {word if n == 1 else many or word + 's'}"
