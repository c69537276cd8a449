"""Counts in words, for every stage that writes a sentence (the reader's diagnostics, the
analysis's verdicts, the renderers' tables): ``plural(1, "graph")`` is ``1 graph``,
``plural(2, "graph")`` is ``2 graphs``; never ``graph(s)``. A set of ranks as text takes its noun
from :func:`rank_noun`: ``rank 3``, ``ranks 0-3``."""

from __future__ import annotations


def plural(n: int, word: str, many: str | None = None) -> str:
    """A count and its noun, in agreement: ``1 graph``, ``2 graphs`` (``many`` for an irregular
    plural: ``plural(n, "copy", "copies")``)."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def rank_noun(ranks: object) -> str:
    """``rank`` for a rank set's text that is one rank (``"3"``), ``ranks`` otherwise
    (``"0-3"``, ``"0,2"``): the noun before :func:`tracekit.model.rankset.format_ranks`'s text."""
    return "rank" if str(ranks).isdigit() else "ranks"


def graph_label(graph_index: int | None) -> str:
    """``forward`` for the first outcome of a compile id, ``backward`` for the second, then N."""
    labels: dict[int | None, str] = {0: "forward", 1: "backward"}
    return labels.get(graph_index, str(graph_index))
