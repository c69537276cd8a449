"""How a number reads back exactly, shared by every stage (as :mod:`tracekit.model.rankset` is
for rank sets): explain writes a verified cap into its document's text, render into tables."""

from __future__ import annotations


def exact_mb(x: float) -> str:
    """Megabytes as the shortest text (3 decimals or more) that reads back as ``x`` exactly: a
    what-if cap is shown as the number that was verified."""
    for decimals in range(3, 18):
        text = f"{x:.{decimals}f}".rstrip("0").rstrip(".")
        if float(text) == x:
            return text
    return repr(x)
