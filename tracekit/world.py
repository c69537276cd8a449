"""Which ranks a run should have, which it has, and which are missing or were seen twice.

Pure functions of a :class:`tracekit.model.Run`. The expected world size is the largest of the
FSDP group sizes the outcomes logged and the highest rank found plus one (a group size counts
the ranks of one FSDP group; with hybrid sharding the job has more ranks than that, and the
ranks found then tell). A rank below it with no log is missing; a rank whose logs hold two runs
was seen twice (:func:`tracekit.pairing.merge_files` keeps the first run and reports the
other). Missing ranks are ``missing_rank`` diagnostics, so ``--strict`` fails on them, when
the logs hold two ranks or more (one rank's log read alone is a deliberate look at that rank:
the world still lists what is missing, as a fact, not as bad input).
"""

from __future__ import annotations

from typing import Any

from tracekit.model import Run
from tracekit.rankset import MAX_RANK, format_ranks


def expected_world(run: Run) -> int | None:
    """The world size the logs imply, or None when no rank or outcome says anything (group
    sizes above :data:`tracekit.rankset.MAX_RANK` are not plausible and not used)."""
    sizes = [g.group_size for r in run.ranks for g in r.graphs if g.group_size and g.group_size <= MAX_RANK]
    found = [r.rank for r in run.ranks if r.rank is not None]
    candidates = sizes + ([max(found) + 1] if found else [])
    return max(candidates) if candidates else None


def world(run: Run) -> dict[str, Any]:
    """``{expected, found, ranks, missing, duplicated}``: ``ranks`` is the found ranks as
    ranges (``0-1023``), ``missing`` and ``duplicated`` sorted lists of ranks."""
    expected = expected_world(run)
    found = {r.rank for r in run.ranks}
    missing = sorted(set(range(expected)) - found) if expected else []
    return {
        "expected": expected,
        "found": len(run.ranks),
        "ranks": format_ranks(found),
        "missing": missing,
        "duplicated": [r for r in run.duplicated if r is not None],
    }


def check_world(run: Run) -> None:
    """Add a ``missing_rank`` diagnostic per rank that should have a log and has none (when
    more than one rank was read)."""
    if len(run.ranks) < 2:
        return
    w = world(run)
    for r in w["missing"]:
        run.diagnostics.add("missing_rank", "", 0, f"rank {r} of {w['expected']} has no log")


def world_text(w: dict[str, Any]) -> str:
    """One line: ``4 ranks found (0-3) of 4 expected; missing: none; seen in two runs: none``."""
    exp = "expected: unknown" if w["expected"] is None else f"of {w['expected']} expected"
    missing = format_ranks(w["missing"]) or "none"
    dup = format_ranks(w["duplicated"]) or "none"
    n = w["found"]
    return (f"{n} rank{'s' if n != 1 else ''} found ({w['ranks'] or '-'}) {exp}; missing: {missing}; "
            f"seen in two runs: {dup}")
