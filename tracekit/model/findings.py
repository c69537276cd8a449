"""What an analysis found, as plain data for a renderer to say: a :class:`Finding` is a kind and
the numbers, ranks and names its sentence needs; a :class:`Verdict` is summarize's verdict, its
status and findings in the order they are said, with the document's other verdict keys."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Finding:
    """One thing found: ``kind`` names it (``"missing"``, ``"nothing_merged"``, ...), ``values``
    hold what a sentence about it needs (counts, rank sets as ranges, names, items)."""

    kind: str
    values: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    """Summarize's verdict as data: ``status`` (``diverge``, ``incomplete``, ``agree``,
    ``no_data``), ``clauses`` (its findings, in the order the line says them) and ``keys`` (the
    document's other verdict keys: ``sections``, ``findings``, ``mesh_findings``, ``unmerged``)."""

    status: str
    clauses: tuple[Finding, ...]
    keys: dict[str, Any] = field(default_factory=dict)
