"""Rank sets as ranges: ``[0, 1, 2, 3, 5, 7, 8]`` <-> ``"0-3,5,7-8"``.

At 1,024 ranks a list of rank numbers is unreadable; every place tracekit prints a set of ranks
(tables, JSON, markdown, HTML) prints it with :func:`format_ranks`. A rank of ``None`` (a log
whose entries carry no rank and whose file name has none) is printed as ``-``, last.

>>> format_ranks([3, 0, 1, 2, 5, 7, 8])
'0-3,5,7-8'
>>> parse_ranks("0-3,5")
[0, 1, 2, 3, 5]
"""

from __future__ import annotations

from collections.abc import Iterable

#: Ranks are below this (a million ranks): a larger number in a log or a document is refused,
#: so that no rank set or world grows without bound from untrusted input.
MAX_RANK = 1 << 20


def format_ranks(ranks: Iterable[int | None]) -> str:
    """Sorted, de-duplicated ranks as comma-separated ranges (``""`` for none)."""
    items = set(ranks)
    has_none = None in items
    nums = sorted(r for r in items if r is not None)
    parts: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    if has_none:
        parts.append("-")
    return ",".join(parts)


def parse_ranks(text: str) -> list[int]:
    """The ranks of a :func:`format_ranks` string (``-`` entries are dropped); ValueError on
    anything else, and on ranks of :data:`MAX_RANK` or more."""
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part or part == "-":
            continue
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"not a rank range: {part!r}")
        a, b = int(lo), int(hi) if sep else int(lo)
        if b < a:
            raise ValueError(f"empty rank range: {part!r}")
        if b >= MAX_RANK:
            raise ValueError(f"rank beyond {MAX_RANK - 1}: {part!r}")
        out.update(range(a, b + 1))
    return sorted(out)


def rank_order(rank: int | None) -> int:
    """The sort key of a rank: its number, the rank-less one (None) first."""
    return -1 if rank is None else rank


def rank_members(text: str) -> list[int | None]:
    """The ranks of a :func:`format_ranks` string, the rank-less one (``-``) as None, last."""
    return [*parse_ranks(text), *([None] if "-" in text.split(",") else [])]


def rank_list(ranks: str | Iterable[int | None]) -> list[int | None]:
    """The ranks of a rank set however a document spells it: a :func:`format_ranks` string
    (:func:`rank_members`) or a list (``tracekit.summary/1``)."""
    return rank_members(ranks) if isinstance(ranks, str) else list(ranks)
