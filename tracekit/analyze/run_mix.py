"""Settings one job shares that differ between the ranks read: a sign of mixed logs, said.

Pure functions of a :class:`tracekit.model.Run`; nothing here reads a file.

Every rank of one job runs one torch and one bucket cap. Ranks read together that differ in
either still get compared, and differ, but the verdict should say why they might:

- :func:`two_runs`: the ranks split by bucket cap (each group with caps of its own). Two jobs
  written into one directory, ranks 0-1 at 27.4 MB and ranks 2-3 at 0.1 MB, read as "ranks
  split into 2 groups with no majority"; the cap is a setting of the whole job, so these
  look like two runs.
- :func:`release_mix`: the ranks were logged by different torch releases (its
  ``torch_version`` entry). A release changes what inductor emits (2.14 moves waits, 2.15
  groups all-gathers by contiguity), so a divergence may be the release's, not the model's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tracekit.model import Run
from tracekit.model.nouns import rank_noun
from tracekit.model.rankset import format_ranks, rank_order


def _groups(values: Iterable[tuple[int | None, Any]]) -> list[tuple[Any, list[int | None]]]:
    """``(value, ranks)`` per distinct value of ``(rank, value)`` pairs, in the order of their
    lowest rank. The pairs are taken one at a time, so 100,000 ranks hold one list of ranks
    per distinct value, not a map of every rank (a rank's value is dropped once grouped)."""
    by: dict[Any, list[int | None]] = {}
    for rank, v in values:
        by.setdefault(v, []).append(rank)
    return sorted(by.items(), key=lambda kv: min(map(rank_order, kv[1])))


def _count(n: int) -> str:
    return {2: "two", 3: "three", 4: "four"}.get(n, str(n))


def _who(ranks: list[int | None]) -> str:
    text = format_ranks(ranks)
    return f"{rank_noun(text)} {text}"


def two_runs(run: Run) -> dict[str, Any] | None:
    """``{"groups": [{"ranks": "0-1", "caps": [27.4]}, ...], "text": ...}`` when the ranks
    split into groups whose bucket caps (those of their bucketing outcomes) share none: one
    job runs one cap, so these look like several runs. None when every rank has the same caps,
    when a cap is shared, or when fewer than two ranks state one."""
    caps = (
        (r.rank, frozenset(g.bucket_cap_mb for g in r.graphs if g.bucket_cap_mb is not None))
        for r in run.ranks
    )
    groups = _groups((rank, c) for rank, c in caps if c)
    if len(groups) < 2:
        return None
    seen: set[float] = set()
    for c, _ in groups:
        if seen & c:
            return None
        seen |= c
    parts = [f"{_who(ranks)} at cap {', '.join(f'{x:.6g}' for x in sorted(c))} MB" for c, ranks in groups]
    return {
        "groups": [{"ranks": format_ranks(ranks), "caps": sorted(c)} for c, ranks in groups],
        "text": f"these look like {_count(len(groups))} runs, not one job: {'; '.join(parts)} "
        "(a job runs one bucket cap on every rank)",
    }


def release_mix(run: Run) -> dict[str, Any] | None:
    """``{"groups": [{"ranks": "3", "torch": "2.15.0"}, ...], "text": ...}`` when the ranks
    were logged by more than one torch release (ranks whose log names none left out); None
    otherwise."""
    groups = _groups((r.rank, r.torch_version) for r in run.ranks if r.torch_version)
    if len(groups) < 2:
        return None
    parts = [f"{_who(ranks)} by torch {v}" for v, ranks in groups]
    return {
        "groups": [{"ranks": format_ranks(ranks), "torch": v} for v, ranks in groups],
        "text": f"the ranks were logged by {_count(len(groups))} torch releases ({'; '.join(parts)}): "
        "one job runs one torch, and a release changes what inductor emits, so a difference between "
        "them may be the release's",
    }


def mix_text(run: Run) -> str:
    """The verdict's clauses on mixed logs (:func:`two_runs`, :func:`release_mix`), ``; ``
    joined; empty when the ranks share their cap and release."""
    return "; ".join(x["text"] for x in (two_runs(run), release_mix(run)) if x)
