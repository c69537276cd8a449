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
``bad_gzip`` diagnostics by :func:`tracekit.read.pairing.merge_files`).

For example, with rank 3's log cut inside the backward's entries::

    before:  DIVERGE: 1 of 4 ranks (3) differ from the majority on 1 graph
    after:   INCOMPLETE: rank 3's log is cut (ends inside an entry at line 5803 of ...): ...
"""

from __future__ import annotations

from typing import Any

from tracekit.model import Run
from tracekit.model.rankset import format_ranks, rank_members


def cut_ranks(run: Run) -> set[int | None]:
    """The ranks at least one of whose files is cut short."""
    return {c["rank"] for c in run.cut}


def _members(v: Any) -> list[int | None]:
    return rank_members(v) if isinstance(v, str) else list(v)


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
        ranks = _members(item[key])
        if ranks and set(ranks) <= cut and _lacks(item, side):
            return True
    return False


def compared_items(items: list[dict[str, Any]], run: Run) -> list[dict[str, Any]]:
    """``items`` without those a cut log explains (:func:`explained_by_cut`)."""
    cut = cut_ranks(run)
    return [d for d in items if not explained_by_cut(d, cut)]


def cut_text(run: Run) -> str:
    """The verdict's clause for cut logs, e.g. ``rank 3's log is cut (it ends inside an entry,
    line 5803 of FILE): compared only on what it logged``; empty when no log is cut."""
    if not run.cut:
        return ""
    ranks = sorted({c["rank"] for c in run.cut}, key=lambda r: -1 if r is None else r)
    first = run.cut[0]
    where = f"{first['file']}:{first['line']}" if first["line"] else first["file"]
    how = "it ends inside an entry" if first["line"] and "kind" not in first else first["detail"]
    who = (
        f"rank {format_ranks(ranks)}'s log is"
        if len(ranks) == 1
        else f"the logs of ranks {format_ranks(ranks)} are"
    )
    more = f"; and {len(run.cut) - 1} more cut file(s)" if len(run.cut) > 1 else ""
    text = f"{who} cut ({how}, at {where}{more})"
    if len(run.ranks) < 2:
        return text
    return f"{text}: compared only on what {'it' if len(ranks) == 1 else 'they'} logged"
