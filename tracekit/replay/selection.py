"""Which recorded outcomes to replay: the reader pairs each outcome with its graph text
(:func:`tracekit.read.reader.graph_sources`, per rank and compile id, forward then backward); here
we pick ranks and graphs. Each source carries the symbol hints its file recorded
(``create_symbol`` entries, read in the same pass).

- default: the lowest rank (ranks are normally identical; ``tracekit summarize`` tells when
  they are not); only that rank's files are read when their names carry the rank;
- ``rank``: that rank; ``all_ranks``: every rank;
- ``graphs``: ``[(compile_id, graph_index or None)]`` from ``--graph 0/0`` / ``--graph 0/0:1``.

:class:`Selection` holds those three; :func:`read_selected` reads what a replay or an explain
run works on (the graphs torch never pre-bucketed too), telling a :class:`Progress`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tracekit.model import Diagnostics

#: A compile id as the logs write it (``0/0``, ``1/2_1``, ``!0/3/0``; ``-`` outside torch.compile),
#: optionally with ``:INDEX`` (0 forward, 1 backward).
_SELECTOR_RE = re.compile(r"(?:(?:(?:!-?\d+/)?-?\d+/-?\d+|!-?\d+)(?:_\d+)?|-)(?::\d+)?")


class SelectionError(ValueError):
    """A ``--rank`` or ``--graph`` that is malformed or names nothing in the logs; the message
    says what the logs have."""


def parse_graph_selector(text: str) -> tuple[str, int | None]:
    """``0/0`` -> ("0/0", None); ``0/0:1`` -> ("0/0", 1); SelectionError when malformed."""
    text = text.strip()
    if not _SELECTOR_RE.fullmatch(text):
        raise SelectionError(f"{text!r} is not a graph: COMPILE_ID[:INDEX], e.g. 0/0 or 0/0:1")
    cid, sep, idx = text.rpartition(":")
    if sep:
        return cid, int(idx)
    return text, None


def _selector_text(sel: tuple[str, int | None]) -> str:
    return sel[0] if sel[1] is None else f"{sel[0]}:{sel[1]}"


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
    reader: Any = None,
    progress: Any = None,
) -> list[Any]:
    """The :class:`tracekit.read.reader.GraphSource` values to replay (one pass over their files).
    ``reader``: what yields the sources of the files (default
    :func:`tracekit.read.reader.graph_sources`; :func:`tracekit.read.reader.graph_and_not_prebucketed_sources`
    adds the graphs never pre-bucketed).

    Raises :class:`SelectionError` when no log could be read, or when ``rank`` or a selector of
    ``graphs`` names nothing in the logs (the message says which ranks or graphs are there).
    ``progress(done_bytes, total_bytes)`` after each file read."""
    from tracekit.model.rankset import format_ranks
    from tracekit.read.reader import graph_sources
    from tracekit.read.sources import find_logs
    from tracekit.replay.rank_estimates import align_across_ranks

    diag = diagnostics if diagnostics is not None else Diagnostics()
    logs = find_logs(list(paths), diag)
    if not logs:
        raise SelectionError("no log could be read")
    named = sorted({lg.rank_hint for lg in logs if lg.rank_hint is not None})
    if not all_ranks:
        wanted = rank if rank is not None else (named[0] if named else None)
        if wanted is not None:
            logs = [lg for lg in logs if lg.rank_hint in (wanted, None)]
    # Ranks log the same texts: keep one copy of each (1,024 ranks hold one rank's texts).
    texts: dict[str, str] = {}
    sources = []
    for src in (reader or graph_sources)(
        [], diag, progress, logs=logs
    ):  # the files found above, not found again
        if src.text is not None:
            src.text = texts.setdefault(src.text, src.text)
        sources.append(src)
    if not sources and logs and diag.counts.get("unreadable_file", 0) >= len(logs):
        raise SelectionError("no log could be read")
    read_ranks = {s.rank for s in sources if s.rank is not None}  # before choosing one
    # several ranks read: their benchmarked compute estimates aligned as torch's scheduler did
    align_across_ranks(sources)
    if not all_ranks and sources:
        seen = sorted(read_ranks)
        chosen = rank if rank is not None else (seen[0] if seen else None)
        if chosen is not None:
            sources = [s for s in sources if s.rank == chosen]
    if rank is not None and not sources:
        there = sorted(set(named) | read_ranks)
        raise SelectionError(
            f"rank {rank} has no recorded outcome in the logs (ranks there: {format_ranks(there) or 'none'})"
        )
    for sel in graphs or []:
        if next(select(sources, [sel]), None) is None:
            listed = ", ".join(dict.fromkeys(f"{s.compile_id}:{s.graph_index}" for s in sources))
            raise SelectionError(
                f"graph {_selector_text(sel)} is not in the logs (graphs there: {listed or 'none'})"
            )
    return list(select(sources, graphs or []))


@dataclass
class Selection:
    """Which ranks and graphs a run reads: ``rank`` (None: the lowest), or ``all_ranks``;
    ``graphs``: selectors as :func:`parse_graph_selector` gives them (empty: every graph)."""

    rank: int | None = None
    all_ranks: bool = False
    graphs: list[tuple[str, int | None]] = field(default_factory=list)


@dataclass
class Progress:
    """Whom a replay or explain run tells how far it is (each None: nobody)."""

    phase: Callable[[str], None] | None = None  # a step without a count: "reading the logs ..."
    reading: Callable[[int, int], None] | None = None  # bytes of the logs read, of all
    read: Callable[[], None] | None = None  # the reading is over (whether it failed or not)
    caps: Callable[[int, int, int, int], None] | None = None  # replay: graph, graphs, its caps done, of all
    graphs: Callable[[int, int], None] | None = None  # explain: graphs done, of all


def read_selected(
    paths: list[str], selection: Selection, diagnostics: Diagnostics, progress: Progress | None = None
) -> list[Any]:
    """The selected graph sources of ``paths`` and the graphs torch never pre-bucketed
    (:class:`~tracekit.read.pairing.NotPrebucketedSource`), in log order
    (:func:`replay_sources_for` with :func:`tracekit.read.reader.graph_and_not_prebucketed_sources`).
    Raises :class:`SelectionError` as :func:`replay_sources_for` does."""
    from tracekit.read.reader import graph_and_not_prebucketed_sources

    p = progress or Progress()
    if p.phase is not None:
        p.phase("reading the logs ...")
    try:
        return replay_sources_for(
            paths,
            rank=selection.rank,
            all_ranks=selection.all_ranks,
            graphs=selection.graphs,
            diagnostics=diagnostics,
            reader=graph_and_not_prebucketed_sources,
            progress=p.reading,
        )
    finally:
        if p.read is not None:
            p.read()
