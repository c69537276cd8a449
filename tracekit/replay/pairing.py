"""Which recorded outcomes to replay: the reader pairs each outcome with its graph text
(:func:`tracekit.reader.graph_sources`, per rank and compile id, forward then backward); here
we pick ranks and graphs, and attach the symbol hints the log recorded.

- default: the lowest rank (ranks are normally identical; ``tracekit summarize`` tells when
  they are not); only that rank's files are read when their names carry the rank;
- ``rank``: that rank; ``all_ranks``: every rank;
- ``graphs``: ``[(compile_id, graph_index or None)]`` from ``--graph 0/0`` / ``--graph 0/0:1``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from tracekit.model import Diagnostics


def parse_graph_selector(text: str) -> tuple[str, int | None]:
    """``0/0`` -> ("0/0", None); ``0/0:1`` -> ("0/0", 1)."""
    cid, sep, idx = text.rpartition(":")
    if sep and idx.isdigit() and cid:
        return cid, int(idx)
    return text, None


def select(sources: Iterable[Any], graphs: list[tuple[str, int | None]]) -> Iterator[Any]:
    """The sources matching any of ``graphs`` (all of them when ``graphs`` is empty)."""
    for src in sources:
        if not graphs or any(
            src.compile_id == cid and (idx is None or src.graph_index == idx) for cid, idx in graphs
        ):
            yield src


def replay_sources_for(
    paths: list[str],
    *,
    rank: int | None = None,
    all_ranks: bool = False,
    graphs: list[tuple[str, int | None]] | None = None,
    diagnostics: Diagnostics | None = None,
) -> list[Any]:
    """The :class:`tracekit.reader.GraphSource` values to replay, with ``symbol_hints`` set."""
    from tracekit.reader import graph_sources
    from tracekit.replay.hints import attach_hints
    from tracekit.sources import find_logs

    diag = diagnostics if diagnostics is not None else Diagnostics()
    logs = find_logs(list(paths), diag)
    if not all_ranks:
        named = sorted({lg.rank_hint for lg in logs if lg.rank_hint is not None})
        wanted = rank if rank is not None else (named[0] if named else None)
        if wanted is not None:
            logs = [lg for lg in logs if lg.rank_hint in (wanted, None)]
    # Ranks log the same texts: keep one copy of each (1,024 ranks hold one rank's texts).
    texts: dict[str, str] = {}
    sources = []
    for src in select(graph_sources([lg.path for lg in logs], diag), graphs or []):
        if src.text is not None:
            src.text = texts.setdefault(src.text, src.text)
        sources.append(src)
    if not all_ranks and sources:
        seen = sorted({s.rank for s in sources if s.rank is not None})
        chosen = rank if rank is not None else (seen[0] if seen else None)
        if chosen is not None:
            sources = [s for s in sources if s.rank == chosen]
    attach_hints(sources, diag)
    return sources
