"""Which ranks a run should have, which it has, and which are missing or were seen twice.

Pure functions of a :class:`tracekit.model.Run`. The expected world size is the ``# World size``
line a log states (:func:`log_world_size`), else the largest of the FSDP
group sizes the outcomes logged and the highest rank found plus one (a group size counts the
ranks of one FSDP group; in a mesh the job has more ranks than that). A rank below it with no log is missing; a rank whose logs hold two runs
was seen twice (:func:`tracekit.read.merge.merge_files` keeps the first run and reports the
other). Missing ranks are ``missing_rank`` diagnostics, so ``--strict`` fails on them, when
the logs hold two ranks or more (one rank's log read alone is a deliberate look at that rank:
the world still lists what is missing, as a fact, not as bad input).
"""

from __future__ import annotations

import os
from typing import Any

from tracekit.model import FinalSchedule, Rank, Run
from tracekit.model.nouns import plural
from tracekit.model.rankset import MAX_RANK, format_ranks


def _finals(rank: Rank) -> list[FinalSchedule]:
    out = [g.final for g in rank.graphs if g.final is not None]
    return out + list(rank.schedules_without_outcome)


def log_world_size(run: Run) -> int | None:
    """The largest ``# World size`` any rank's log states (None when none does, or only
    implausible ones above :data:`tracekit.model.rankset.MAX_RANK`)."""
    sizes = [
        f.world_size
        for r in run.ranks
        for f in _finals(r)
        if f.world_size is not None and 0 < f.world_size <= MAX_RANK
    ]
    return max(sizes) if sizes else None


def expected_world(run: Run) -> int | None:
    """The world size the logs imply, or None when no rank or outcome says anything: the
    logs' ``# World size`` when one states it (and no rank found lies beyond it), else the
    largest FSDP group size or highest rank plus one (sizes above
    :data:`tracekit.model.rankset.MAX_RANK` are not plausible and not used)."""
    stated = log_world_size(run)
    sizes = [g.group_size for r in run.ranks for g in r.graphs if g.group_size and g.group_size <= MAX_RANK]
    found = [r.rank for r in run.ranks if r.rank is not None]
    candidates = sizes + ([max(found) + 1] if found else [])
    if stated is not None:
        candidates = [stated] + ([max(found) + 1] if found else [])
    return max(candidates) if candidates else None


def missing_ranges(expected: int | None, found: set[int | None]) -> list[tuple[int, int]]:
    """The ranks below ``expected`` without a log, as inclusive ``(first, last)`` ranges:
    as many items as gaps, never one per rank (a stray rank 1,048,575 is one gap)."""
    if not expected:
        return []
    out, nxt = [], 0
    for r in sorted(r for r in found if r is not None and 0 <= r < expected):
        if r > nxt:
            out.append((nxt, r - 1))
        nxt = r + 1
    if nxt < expected:
        out.append((nxt, expected - 1))
    return out


def _ranges_text(ranges: list[tuple[int, int]]) -> str:
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def world(run: Run) -> dict[str, Any]:
    """``{expected, found, ranks, missing, missing_count, duplicated, unplaced, cut}``: ``ranks``,
    ``missing`` and ``duplicated`` are rank sets as ranges (``0-1023``, ``""`` for none);
    ``unplaced`` the files read as no rank (no entries, or a rank that is not one: see the
    diagnostics)."""
    expected = expected_world(run)
    found = {r.rank for r in run.ranks}
    gaps = missing_ranges(expected, found)
    cut = format_ranks(c["rank"] for c in run.cut)
    return {
        "expected": expected,
        "found": len(run.ranks),
        "ranks": format_ranks(found),
        "missing": _ranges_text(gaps),
        "missing_count": sum(b - a + 1 for a, b in gaps),
        "duplicated": format_ranks(r for r in run.duplicated if r is not None),
        "unplaced": list(getattr(run, "unplaced", [])),
        **({"cut": cut} if cut else {}),
        **({"not_logs": list(run.not_logs)} if run.not_logs else {}),
        **({"copies": list(run.copies)} if run.copies else {}),
        **({"subdirectories": list(run.subdirs)} if run.subdirs else {}),
    }


def check_world(run: Run) -> None:
    """Count the ranks that should have a log and have none as ``missing_rank`` diagnostics
    (when more than one rank was read): one count per rank, one example per gap (the first
    few), so a stray high rank costs a few lines, not a million."""
    if len(run.ranks) < 2:
        return
    expected = expected_world(run)
    d = run.diagnostics
    for a, b in missing_ranges(expected, {r.rank for r in run.ranks}):
        n = d.counts.get("missing_rank", 0)
        d.counts["missing_rank"] = n + (b - a + 1)
        if sum(1 for e in d.examples if e["kind"] == "missing_rank") < d.max_examples_per_kind:
            what = (
                f"rank {a} of {expected} has no log" if a == b else f"ranks {a}-{b} of {expected} have no log"
            )
            d.examples.append({"kind": "missing_rank", "file": "", "line": 0, "detail": what})


def world_text(w: dict[str, Any]) -> str:
    """One line: ``4 ranks found (0-3) of 4 expected; missing: none; seen in two runs: none``
    (and the files that are no rank, when there are some)."""
    exp = "expected: unknown" if w["expected"] is None else f"of {w['expected']} expected"
    missing = format_ranks(w["missing"]) if isinstance(w["missing"], list) else w["missing"]
    dup = format_ranks(w["duplicated"]) if isinstance(w["duplicated"], list) else w["duplicated"]
    n = w["found"]
    ranks = w["ranks"]
    if ranks == "-":
        ranks = "its rank is not logged"
    unplaced = w.get("unplaced") or []
    tail = f"; not a rank: {plural(len(unplaced), 'file')} (see Diagnostics)" if unplaced else ""
    copies = w.get("copies") or []
    if copies:
        tail += f"; copies read once: {plural(len(copies), 'file')}"
    not_logs = w.get("not_logs") or []
    if not_logs:
        names = ", ".join(os.path.basename(f) for f in not_logs[:3]) + (", ..." if len(not_logs) > 3 else "")
        tail += f"; not a log: {plural(len(not_logs), 'file')} ({names})"
    subdirs = w.get("subdirectories") or []
    if subdirs:
        names = ", ".join(os.path.basename(f) for f in subdirs[:3]) + (", ..." if len(subdirs) > 3 else "")
        many = len(subdirs) != 1
        tail += f"; not read: {plural(len(subdirs), 'subdirectory', 'subdirectories')} holding logs ({names}: pass {'them' if many else 'it'})"
    cut = w.get("cut") or ""
    if cut:
        tail += f"; cut short: {'rank not logged' if cut == '-' else cut} (see Diagnostics)"
    return (
        f"{plural(n, 'rank')} found ({ranks or 'none'}) {exp}; missing: {missing or 'none'}; "
        f"seen in two runs: {dup or 'none'}{tail}"
    )
