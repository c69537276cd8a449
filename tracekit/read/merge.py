"""Files into a Run: the files of one rank merged (graph indices and post-grad positions
continued per compile id), a rank's second file that is another run of the job or a copy of its
first told apart (:func:`tracekit.read.sources.same_log`), where each rank's log is cut, and the
ranks in order. The values ranks share are made one object as each file comes
(:class:`tracekit.read.interning.Interner`)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tracekit.model import Diagnostics, Graph, Rank, Run
from tracekit.read.interning import Interner
from tracekit.read.pairing import FileResult
from tracekit.read.sources import same_log


def another_run(first: FileResult | _Merging, other: FileResult) -> str | None:
    """Why ``other``, a second file of ``first``'s rank, is another run of the job (and must
    not be merged), or None when it continues the same one (a log split across files).
    ``first``: the rank's first file, or what the merge kept of it (:class:`_Merging`)."""
    mine = _pid_set(first.pids)
    if mine and other.pids and mine.isdisjoint(other.pids):
        return f"written by another process: pid {min(other.pids)}, not {min(mine)}"
    if first.torch_version and other.torch_version and first.torch_version != other.torch_version:
        return f"another torch: {other.torch_version}, not {first.torch_version}"
    if other.first_compile_id is not None and other.first_compile_id == first.first_compile_id:
        return f"its compile ids start again at {other.first_compile_id}"
    return None


def _pid_set(pids: int | frozenset[int]) -> frozenset[int]:
    """The pids :class:`_Merging` keeps (an int for one process, the usual case) as a set."""
    return frozenset((pids,)) if isinstance(pids, int) else pids


@dataclass(slots=True)
class _Merging:
    """One rank while the files are merged: its :class:`Rank`, and what a later file of the
    rank is checked against (:func:`another_run`: its first file's pids, first compile id and
    torch version) and continued from. Kept for every rank until the merge ends (100,000 rank
    logs), so small: one pid is an int, not a set; the post-grad positions of a rank of one
    file are a tuple shared between ranks; next graph indices are made only when a second
    file comes (a rank's first file starts them at 0)."""

    rank: Rank
    pids: int | frozenset[int]
    first_compile_id: str | None
    torch_version: str | None
    positions: tuple[tuple[str, int], ...] | dict[str, int]  # positions started per compile id
    next_index: dict[str, int] | None = None  # next graph index per compile id, from the 2nd file


def merge_files(paths: list[str], results: Iterable[FileResult], diagnostics: Diagnostics) -> Run:
    """One Run from the files' results, in the order given (a generator is consumed as it
    comes): files of one rank are merged, their graph indices and post-grad positions continued
    per compile id, compile ids kept once; ranks sorted (the rank-less one last).

    A second file of a rank that belongs to another run (:func:`another_run`) is never merged:
    it is a ``duplicate_rank`` diagnostic and its rank is listed in ``Run.duplicated``; unless it
    holds the same log or a start of it (:func:`tracekit.read.sources.same_log`): a copy, or a copy cut short,
    read once (``copied_file``, ``Run.copies``); when the rank's first file is the start of the
    second, the second is read instead. Where a copy or another run's file ends is no rank's
    cut. A file
    whose name says another rank than its entries is a ``rank_mismatch`` diagnostic (the
    entries win)."""

    merging: dict[int | None, _Merging] = {}
    duplicated: set[int | None] = set()
    interner = Interner()
    unplaced: list[str] = []
    cut: list[dict[str, Any]] = []
    # rank -> where its last file ends, when that ends no compile: (path, line, entry kind), the
    # cut's record made at the end, for the reported ones only (a hang can leave every one of
    # 100,000 logs open: a record a rank until then would cost ~380 B a rank, this ~150 B)
    open_ends: dict[int | None, tuple[str, int, str]] = {}
    closed = False  # a file of the run ends with a compile's closing metrics
    copies: list[str] = []
    others: list[str] = []  # files of another run, not merged: where they end is no rank's cut
    for res in results:
        end = open_end(res)
        if res.entries and end is None and not cut_ends(res):
            closed = True
        if (
            res.readable
            and not res.entries
            and not res.graphs
            and (res.diagnostics.total or not res.ranked_by_entries)
        ):  # bad lines only, blank lines, or empty: no log at all, whatever its name
            empty = "empty_file" in res.diagnostics.counts
            bad = 0 if empty else res.diagnostics.total
            diagnostics.add(
                "no_entries",
                res.path,
                0,
                f"no log entries in {res.path}"
                + (" (the file is empty)" if empty else "")
                + (f" ({bad} bad line{'s' if bad != 1 else ''})" if bad else ""),
            )
            unplaced.append(res.path)
            continue
        if res.diagnostics.counts:
            diagnostics.merge(res.diagnostics)
        if not res.readable:
            continue
        cut.extend(cut_ends(res))
        if res.rank is None and res.bad_rank is not None:
            diagnostics.add("unplaced_rank", res.path, 0, f"not placed: {res.bad_rank}; the file is left out")
            unplaced.append(res.path)
            continue
        if res.rank is not None and res.name_rank is not None and res.rank != res.name_rank:
            diagnostics.add(
                "rank_mismatch",
                res.path,
                0,
                f"the entries say rank {res.rank}, the file name rank {res.name_rank}",
            )
        m = merging.get(res.rank)
        why = same = None
        if m is not None:
            why = another_run(m, res)
            same = same_log(m.rank.files[0], res.path) if why is not None else ""
            if same == "cut_a" and len(m.rank.files) == 1:  # the rank's file so far: a cut copy of this one
                first = m.rank.files[0]
                diagnostics.add(
                    "copied_file", first, 0, f"a copy cut short of {res.path}: {res.path} read instead"
                )
                copies.append(first)
                open_ends.pop(res.rank, None)
                del merging[res.rank]
                m = None
        if m is None:
            r = Rank(
                res.rank,
                [res.path],
                list(res.graphs),
                res.compiled_graphs,
                res.cache_hits,
                res.compiles,
                res.torch_version,
                res.schedules_without_outcome,
                res.compile_ids,
                res.cache_events,
                tuple(res.frames),  # () when none: one shared empty tuple, no list a rank
                tuple(res.compile_events),
            )
            pids = next(iter(res.pids)) if len(res.pids) == 1 else res.pids
            positions = tuple(res.positions.items())
            merging[res.rank] = _Merging(
                r,
                pids,
                res.first_compile_id,
                res.torch_version,
                interner.share(("positions", positions), positions),
            )
        else:
            r = m.rank
            if same and same != "cut_a":
                how = {
                    "bytes": "a byte-identical copy",
                    "content": "a copy (the same log once decompressed)",
                    "cut_b": "a copy cut short",
                }[same]
                diagnostics.add("copied_file", res.path, 0, f"{how} of {r.files[0]}: read once")
                copies.append(res.path)
                continue
            if why is not None:
                who = "-" if res.rank is None else res.rank
                diagnostics.add(
                    "duplicate_rank",
                    res.path,
                    0,
                    f"rank {who} is also in {r.files[0]}; this file is another run ({why}): not merged",
                )
                duplicated.add(res.rank)
                others.append(res.path)
                continue
            _continue_rank(m, res)
        if end is not None and not cut_ends(res):  # a rank's later file goes on from its earlier
            open_ends[res.rank] = end  # one: its end counts (a file cut otherwise is said cut once)
        else:
            open_ends.pop(res.rank, None)
        for g in res.graphs:  # shared as each file comes: memory never holds every rank's copies
            interner.graph(g)
        interner.rank_lists(r)  # (a later file of the rank makes new lists: never changes these)
    if None in merging and len(merging) > 1:  # a rank-less log among ranked ones: never blamed, never "-"
        for path in merging.pop(None).rank.files:
            diagnostics.add(
                "unknown_rank",
                path,
                0,
                "neither its entries nor its name give a rank; left out of the "
                f"{len(merging)} rank{'s' if len(merging) != 1 else ''} (it cannot be compared with them)",
            )
            unplaced.append(path)
        duplicated.discard(None)
    ranks = [merging[k].rank for k in _rank_order(merging)]
    del merging
    if closed and open_ends:  # its peers end where torch ends a compile: these logs stop early
        ranks_left = {r.rank for r in ranks}
        for rank, end in open_ends.items():
            if rank in ranks_left:
                c = _open_end_cut(rank, *end)
                diagnostics.add(c["kind"], c["file"], c["line"], c["detail"])
                cut.append(c)
    return Run(
        paths=list(paths),
        ranks=ranks,
        diagnostics=diagnostics,
        duplicated=_rank_order(duplicated),
        unplaced=unplaced,
        cut=[
            c
            for c in cut
            if c["file"] not in unplaced and c["file"] not in copies and c["file"] not in others
        ],
        copies=copies,
    )


#: Diagnostics kinds that say a file ends before its writer finished it.
CUT_KINDS = ("truncated_entry", "bad_gzip")


def cut_ends(res: FileResult) -> list[dict[str, Any]]:
    """Where ``res``'s file is cut short (``{rank, file, line, detail}``: it ends inside an
    entry, or its gzip stream stops), from its own diagnostics; ``[]`` for a whole file."""
    return [
        {"rank": res.rank, "file": res.path, "line": e["line"], "detail": e["detail"]}
        for e in res.diagnostics.examples
        if e["kind"] in CUT_KINDS
    ][:1]


def open_end(res: FileResult) -> tuple[str, int, str] | None:
    """Where ``res``'s file stops between two entries inside a compile (its last entry is whole
    but is not the compile's closing ``compilation_metrics``: the file was cut at a line end,
    e.g. during the backward): ``(path, line, last entry's kind)``
    (:func:`tracekit.read.envelopes._open_end`); :func:`_open_end_cut` makes the cut of it, as
    :func:`cut_ends` gives one. None for a file that ends a compile."""
    if res.open_end is None:
        return None
    kind, line = res.open_end
    return (res.path, line, sys.intern(kind))  # one kind string for every file


def _open_end_cut(rank: int | None, path: str, line: int, kind: str) -> dict[str, Any]:
    """The cut (as :func:`cut_ends` gives one) of a file that ends open (:func:`open_end`)."""
    detail = f"it ends between two entries, inside a compile: its last entry, a {kind}, closes none"
    return {"rank": rank, "file": path, "line": line, "detail": detail, "kind": "cut_between_entries"}


def _rank_order(ranks: Iterable[int | None]) -> list[int | None]:
    """Ranks in order, the rank-less one (None) last (ints sorted as such: no key a rank)."""
    ranks = list(ranks)
    ints = sorted(r for r in ranks if r is not None)
    return [*ints, None] if len(ints) < len(ranks) else [*ints]


def _index_ends(ends: dict[str, int], graphs: list[Graph]) -> dict[str, int]:
    """``ends`` (next graph index per compile id) moved past ``graphs``; returned."""
    for g in graphs:
        ends[g.compile_id] = max(ends.get(g.compile_id, 0), g.graph_index + 1)
    return ends


def _continue_rank(m: _Merging, res: FileResult) -> None:
    """Add a later file of a rank to it: counters, graphs (graph indices continued after those
    of the rank's earlier files, per compile id), schedules (post-grad positions continued),
    compile ids (each once) and cache events."""
    r = m.rank
    r.files.append(res.path)
    r.compiled_graphs += res.compiled_graphs
    r.cache_hits += res.cache_hits
    r.compiles += res.compiles
    if r.torch_version is None:
        r.torch_version = res.torch_version
    offsets = m.next_index
    if offsets is None:  # the rank's second file: its first file's graphs say where they end
        offsets = m.next_index = _index_ends({}, r.graphs)
    for g in res.graphs:
        g.graph_index += offsets.get(g.compile_id, 0)
    r.graphs.extend(res.graphs)
    _index_ends(offsets, res.graphs)
    positions = m.positions = dict(m.positions)
    for f in [g.final for g in res.graphs if g.final is not None] + res.schedules_without_outcome:
        f.position += positions.get(f.compile_id, 0)
    for cid, n in res.positions.items():
        positions[cid] = positions.get(cid, 0) + n
    # new lists, never += : a rank's lists may be shared with other ranks (the interner)
    r.schedules_without_outcome = r.schedules_without_outcome + res.schedules_without_outcome
    seen = set(r.compile_ids)
    r.compile_ids = r.compile_ids + [c for c in res.compile_ids if c not in seen]
    r.cache_events = r.cache_events + res.cache_events
    r.frames = r.frames + tuple(res.frames)
    r.compile_events = r.compile_events + tuple(res.compile_events)
