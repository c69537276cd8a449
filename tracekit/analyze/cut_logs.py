"""Logs cut short: a rank whose log ends early is incomplete, not divergent.

Pure functions of a :class:`tracekit.model.Run` and of the divergence items
(:func:`tracekit.analyze.summarize.divergence`, :func:`tracekit.analyze.schedule.schedule_divergence`,
:func:`tracekit.analyze.schedule.compile_divergence`); nothing here reads a file.

A rank log cut mid-entry (a crash, a full disk, a copy that stopped) lacks what its rank
compiled after the cut: the backward's outcome, its schedule, later compile ids. Its peers
logged them, so a comparison of everything would blame the cut rank ("differs from the
majority", "no schedule: a hang risk"). Here a cut rank is compared only on what it logged:
a difference whose only cause is that the cut side lacks the item is dropped, and the verdict
says the rank is cut and where (``Run.cut``, read off the ``truncated_entry`` and
``bad_gzip`` diagnostics by :func:`tracekit.read.merge.merge_files`).

A log that ends after a whole compile, short of its peers', is taken as cut only when it lacks
part of a compile it began (the backward of its forward); one that lacks only whole compile ids
(the others recompiled) stays divergent, and :func:`shorter_logs` finds both readings.

For example, with rank 3's log cut inside the backward's entries::

    before:  DIVERGE: 1 of 4 ranks (3) differ from the majority on 1 graph
    after:   INCOMPLETE: rank 3's log is cut (ends inside an entry at line 5803 of ...): ...
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tracekit.model import Diagnostics, Run
from tracekit.model.rankset import format_ranks, rank_list, rank_order

#: The kind (a diagnostic and a ``Run.cut`` record) of a log that ends after a whole compile,
#: where the other ranks logged more (:func:`with_logs_that_end_early`).
ENDS_EARLY = "ends_after_compile"


def cut_ranks(run: Run) -> set[int | None]:
    """The ranks at least one of whose files is cut short."""
    return {c["rank"] for c in run.cut}


def _lacks(item: dict[str, Any], side: str) -> bool:
    """Whether ``side`` (``""`` the item's ranks, ``"majority_"`` the ones compared with)
    lacks what the other side holds, as a log that stops early does: a graph absent, no
    value, no schedule, or a sequence that is a prefix of the other's."""
    other = "majority_" if side == "" else ""
    if item.get("field") == "presence":
        return item[f"{side}value"] == "absent"
    if "field" in item:
        return item[f"{side}value"] is None
    length, other_length = item.get(f"{side}length"), item.get(f"{other}length")
    if length is None:
        return True
    return other_length is not None and item.get("position") == length < other_length


def explained_by_cut(item: dict[str, Any], cut: set[int | None]) -> bool:
    """Whether a divergence item is only a cut log lacking what its peers logged: every rank
    of one side is cut, and that side lacks the item."""
    if not cut:
        return False
    for side, key in (("", "ranks"), ("majority_", "majority_ranks")):
        ranks = rank_list(item[key])
        if ranks and set(ranks) <= cut and _lacks(item, side):
            return True
    return False


def _graph_name(compile_id: Any, graph_index: Any) -> str:
    part = {0: "forward", 1: "backward"}.get(graph_index, f"graph {graph_index}")
    return f"{compile_id} {part}"


def _lacking(item: dict[str, Any]) -> tuple[list[int | None], list[int | None]]:
    """``(ranks that lack the item, ranks that hold it)``: the side a log that stops early
    would be on, whichever side is the majority (1 of 4, 2 of 4, 3 of 4, 1 of 2 alike); two
    empty lists when neither side lacks it (the two hold different values)."""
    ranks, others = rank_list(item["ranks"]), rank_list(item["majority_ranks"])
    if _lacks(item, ""):
        return ranks, others
    if _lacks(item, "majority_"):
        return others, ranks
    return [], []


def _logged_more(items: list[dict[str, Any]], rank: int | None) -> tuple[list[str], set[int | None]]:
    """What other ranks logged past ``rank``'s end, from the items it lacks: graphs
    (``0/0 backward``) and compile ids, each once, in the items' order; and the ranks that
    logged them."""
    out: list[str] = []
    holders: set[int | None] = set()
    for d in items:
        lack, hold = _lacking(d)
        if rank not in lack:
            continue
        holders.update(hold)
        if "graph_index" in d:
            name = _graph_name(d.get("compile_id"), d["graph_index"])
        elif d.get("what") == "compile_ids":
            held = d.get("majority_value") if rank in rank_list(d["ranks"]) else d.get("value")
            name = f"compile {held}"
        else:
            name = f"{d.get('what')} at #{d.get('position')}"
        if name not in out:
            out.append(name)
    return out, holders


def _others_text(holders: set[int | None], early: set[int | None], run: Run) -> str:
    """Who logged more: ``the other ranks`` when every rank not said early did (``the other
    rank (0)`` when that is one rank: 3 of 4 logs ending early, or 1 of 2), else their ranks
    (``rank 0``, ``ranks 0-1``)."""
    rest = {r.rank for r in run.ranks} - early
    named = sorted(holders, key=rank_order)
    if holders >= rest:
        return f"the other rank ({format_ranks(named)})" if len(rest) == 1 else "the other ranks"
    return f"rank {format_ranks(named)}" if len(named) == 1 else f"ranks {format_ranks(named)}"


def with_logs_that_end_early(run: Run, items: list[dict[str, Any]]) -> Run:
    """``run`` with the ranks whose logs end after a whole compile, where the other ranks
    logged more, said cut short (``Run.cut`` and a ``ends_after_compile`` diagnostic): such a
    file ends where torch ends a compile, so the reader finds it whole, yet its rank differs
    from its peers only by lacking what they logged after it. ``items`` are the divergence
    items of every section (graphs, schedules, compile ids). A rank is taken when it is on the
    side of some item that lacks it (:func:`_lacking`: the majority's side or not, so 3 of 4
    logs ending after the same compile, or 1 of 2, are taken as 1 of 4 is; the side that
    logged more never is), is not cut already, and every item it is on is explained by its
    lacking the item (:func:`explained_by_cut`): a rank whose logged compiles differ from the
    others' stays divergent. The run itself is not changed (a new one is returned).

    spmd_auto with rank 3's log ending after its forward's ``compilation_metrics`` (the
    backward, compiled at the first backward call, never logged): ``DIVERGE: 1 of 4 ranks (3)
    differ`` (the backward absent, its schedule missing) becomes ``INCOMPLETE: ... rank 3's
    log ends after compile 0/0 forward; the other ranks logged 1 more (0/0 backward)``."""
    cut = cut_ranks(run)
    early = {r for d in items for r in _lacking(d)[0]} - cut
    early -= {r for r in early if lacks_whole_compiles_only(run, items, r)}
    while early:
        assumed = cut | early
        stay = {
            r
            for d in items
            if not explained_by_cut(d, assumed)
            for r in (*rank_list(d["ranks"]), *rank_list(d["majority_ranks"]))
        }
        if not stay & early:
            break
        early -= stay
    if not early:
        return run
    diagnostics = Diagnostics(max_examples_per_kind=run.diagnostics.max_examples_per_kind)
    diagnostics.merge(run.diagnostics)
    added = []
    by_rank = {r.rank: r for r in run.ranks}
    for rank in sorted(early, key=rank_order):
        r = by_rank.get(rank)
        if r is None or not r.files:
            continue
        last = r.graphs[-1] if r.graphs else None
        after = "" if last is None else f" after compile {_graph_name(last.compile_id, last.graph_index)}"
        more, holders = _logged_more(items, rank)
        others = f"{_others_text(holders, early, run)} logged {len(more)} more ({', '.join(more)})"
        detail = f"it ends{after}, a whole one; {others}"
        added.append(
            {
                "rank": rank,
                "file": r.files[-1],
                "line": 0,
                "detail": detail,
                "kind": ENDS_EARLY,
                "ends": f"ends{after}",
                "others": others,
            }
        )
        diagnostics.add(ENDS_EARLY, r.files[-1], 0, detail)
    return dataclasses.replace(run, cut=[*run.cut, *added], diagnostics=diagnostics)


def _began(run: Run, rank: int | None) -> set[str]:
    """The compile ids ``rank`` logged: began (``dynamo_start``) or holding a graph."""
    for r in run.ranks:
        if r.rank == rank:
            return set(r.compile_ids) | {g.compile_id for g in r.graphs}
    return set()


def lacks_whole_compiles_only(run: Run, items: list[dict[str, Any]], rank: int | None) -> bool:
    """Whether all ``rank`` lacks, of what other ranks logged, is whole compile ids it never
    began (other frames, recompiles), and nothing of a compile it began (the backward of its
    own forward, a graph's schedule). Its log then ends after a whole compile, where torch ends
    one: no evidence of a cut, since ranks that compile differently (a recompile on one rank's
    guards, a frame that failed on another) log just that. Such a rank stays divergent, and
    :func:`shorter_logs` finds both readings (issue 50, item 4)."""
    began = _began(run, rank)
    lacked = [d for d in items if rank in _lacking(d)[0]]
    if not lacked:
        return False
    for d in lacked:
        if "graph_index" in d and d.get("compile_id") in began:
            return False
        if d.get("what") == "cache":
            held = d.get("majority_value") if rank in rank_list(d["ranks"]) else d.get("value")
            if isinstance(held, dict) and held.get("compile_id") in began:
                return False
        elif "graph_index" not in d and d.get("what") != "compile_ids":
            return False
    return True


def shorter_logs(run: Run, items: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Both readings of ranks whose compile ids are a prefix of others' (``items``: the
    compile-id divergence items), when the shorter logs end after a whole compile
    (:func:`lacks_whole_compiles_only`), as data: ``short`` (their ranks), ``counts`` (how many
    compile ids they logged), ``ends`` (the last compile id of each), ``more`` (``[n, from,
    ranks]`` a group: how many more the longer logs logged, from which compile id) and
    ``longer`` (their ranks); said by :func:`tracekit.render.summary_words.shorter_logs_text`.
    None when no such ranks."""
    short: dict[int | None, int] = {}  # a shorter log's rank -> its compile ids
    more: dict[int | None, tuple[int, Any]] = {}  # a longer log's rank -> (how many more, from)
    for d in items:
        if d.get("what") != "compile_ids" or d.get("length") is None or d.get("majority_length") is None:
            continue
        lack, hold = _lacking(d)
        if not lack or not all(lacks_whole_compiles_only(run, items, r) for r in lack):
            continue
        mine_short = set(lack) <= set(rank_list(d["ranks"]))
        n_short, n_hold = (
            (d["length"], d["majority_length"]) if mine_short else (d["majority_length"], d["length"])
        )
        first = d["majority_value"] if mine_short else d["value"]
        for r in lack:
            short[r] = n_short
        for r in hold:
            more[r] = (n_hold - n_short, first)
    if not short or not more:
        return None
    shorts = sorted(short, key=rank_order)
    by_rank = {r.rank: r for r in run.ranks}
    lasts = {by_rank[r].compile_ids[-1] for r in shorts if r in by_rank and by_rank[r].compile_ids}
    per: dict[tuple[int, Any], list[int | None]] = {}
    for r, v in more.items():
        per.setdefault(v, []).append(r)
    return {
        "short": shorts,
        "counts": sorted({n for n in short.values()}),
        "ends": sorted(lasts),
        "more": [
            [n, first, ranks]
            for (n, first), ranks in sorted(per.items(), key=lambda kv: min(map(rank_order, kv[1])))
        ],
        "longer": sorted(more, key=rank_order),
    }


def compared_items(items: list[dict[str, Any]], run: Run) -> list[dict[str, Any]]:
    """``items`` without those a cut log explains (:func:`explained_by_cut`)."""
    cut = cut_ranks(run)
    return [d for d in items if not explained_by_cut(d, cut)]


def cut_logs(run: Run) -> dict[str, Any] | None:
    """The verdict's finding on cut logs, as data: ``cut`` (:attr:`tracekit.model.Run.cut`'s
    entries) and ``ranks`` (how many ranks were read); said by
    :func:`tracekit.render.summary_words.cut_text`. None when no log is cut."""
    return {"cut": list(run.cut), "ranks": len(run.ranks)} if run.cut else None
