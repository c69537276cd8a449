"""The JSON forms of the values a graph holds: final schedules (:func:`final_to_dict`, the one
writer of a final's JSON, for summaries and replay documents alike), size lists and counts, and
:class:`DumpMemo`, which writes a value shared between graphs once.

Plain dicts and lists, read back with the ``*_from_dict`` / ``*_load`` functions; nothing here
reads files. A graph's and a rank's documents are made from these field by field
(:mod:`tracekit.model.fields`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, overload

from tracekit.model import CollectiveSize, Counts, FinalSchedule, ScheduledCollective, Sizes


class DumpMemo:
    """JSON forms of the values graphs share (size lists, counts, FSDP groups, collective
    lists: see :class:`tracekit.read.interning.Interner`), made once per shared object, so that a
    document of thousands of graphs holds one dict per distinct value, not one per graph.
    The forms it hands out are shared: read-only. Keyed by identity; the objects are kept
    alive with their forms, so an id is never reused while the memo lives."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[Any, Any]] = {}

    def shared(self, value: Any, dump: Callable[[Any], Any]) -> Any:
        """``dump(value)``, made once per object ``value`` (None stays None)."""
        if value is None:
            return None
        hit = self._by_id.get(id(value))
        if hit is None:
            hit = self._by_id[id(value)] = (value, dump(value))
        return hit[1]


def _unshared(value: Any, dump: Callable[[Any], Any]) -> Any:
    return dump(value)


def counts_dump(c: dict[str, Counts]) -> dict[str, Any]:
    return {t: {"before": x.before, "after": x.after} for t, x in c.items()}


def counts_load(d: dict[str, Any]) -> dict[str, Counts]:
    return {t: Counts(int(c["before"]), int(c["after"])) for t, c in d.items()}


def _size_to_dict(s: CollectiveSize) -> dict[str, Any]:
    return {"type": s.type, "size_mb": s.size_mb, "name": s.name}


def _size_from_dict(d: dict[str, Any]) -> CollectiveSize:
    # Newer documents may add keys to size entries: take the ones this version knows.
    try:
        size_mb = d["size_mb"]
        if isinstance(size_mb, bool) or not isinstance(size_mb, (int, float)):
            raise TypeError
        return CollectiveSize(type=str(d["type"]), size_mb=float(size_mb), name=str(d.get("name", "")))
    except (KeyError, TypeError):
        raise ValueError(f"bad size entry {d!r}") from None


def sizes_dump(s: Sizes | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {
        "before": [_size_to_dict(x) for x in s.before],
        "after": None if s.after is None else [_size_to_dict(x) for x in s.after],
    }


def sizes_load(d: dict[str, Any] | None) -> Sizes | None:
    if d is None:
        return None
    return Sizes(
        before=[_size_from_dict(x) for x in d.get("before") or []],
        after=None if d.get("after") is None else [_size_from_dict(x) for x in d["after"]],
    )


def _collective_dump(c: ScheduledCollective, dtype: bool = True) -> dict[str, Any]:
    """A collective's JSON form (without its dtype, as replay documents give it, when not
    ``dtype``)."""
    out = {
        "kind": c.kind,
        "op": c.op,
        "group": c.group,
        "group_size": c.group_size,
        "bytes": c.bytes,
        "est_ms": c.est_ms,
    }
    if dtype:
        out["dtype"] = c.dtype
    return out


def _collectives_dump(cs: list[ScheduledCollective]) -> list[dict[str, Any]]:
    return [_collective_dump(c) for c in cs]


def _opt(v: Any, t: type) -> Any:
    """``v`` as ``t`` (int or float), None stays None; ValueError on anything else."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"not a number: {v!r}")
    return t(v)


def final_to_dict(
    f: FinalSchedule | None, memo: DumpMemo | None = None, *, replay: bool = False
) -> dict[str, Any] | None:
    """The JSON form of a FinalSchedule: its fields, nested values as plain dicts. With a :class:`DumpMemo`, its counts and collectives are written once
    per shared object (the forms shared: read-only).

    ``replay``: the form replay and explain documents give a graph's recorded final
    (``recorded_final``): the counts of the kinds it has, ``sizes`` and the collectives without
    their dtype; no compile id, position or world size (the document names its graph)::

        {"counts": {"all_gather": 2}, "sizes": "matched", "collectives": [{"kind": ..., "op": ...,
         "group": ..., "group_size": ..., "bytes": ..., "est_ms": ...}, ...]}
    """
    if f is None:
        return None
    if replay:
        return {
            "counts": {k: v for k, v in f.counts.items() if v},
            "sizes": f.sizes,
            "collectives": [_collective_dump(c, dtype=False) for c in f.collectives],
        }
    share = _unshared if memo is None else memo.shared
    return {
        "compile_id": f.compile_id,
        "position": f.position,
        "counts": share(f.counts, dict),
        "collectives": share(f.collectives, _collectives_dump),
        "world_size": f.world_size,
        "sizes": f.sizes,
    }


@overload
def final_from_dict(d: dict[str, Any]) -> FinalSchedule: ...
@overload
def final_from_dict(d: None) -> None: ...
def final_from_dict(d: dict[str, Any] | None) -> FinalSchedule | None:
    """A FinalSchedule from its JSON form (``counts`` are recounted from the collectives)."""
    if d is None:
        return None
    try:
        collectives = [
            ScheduledCollective(
                kind=str(c["kind"]),
                op=str(c.get("op", "")),
                group=None if c.get("group") is None else str(c["group"]),
                group_size=_opt(c.get("group_size"), int),
                bytes=_opt(c.get("bytes"), int),
                est_ms=_opt(c.get("est_ms"), float),
                dtype=None if c.get("dtype") is None else str(c["dtype"]),
            )
            for c in d.get("collectives") or []
        ]
        return FinalSchedule(
            compile_id=str(d["compile_id"]),
            position=int(d["position"]),
            counts=FinalSchedule.count_kinds(collectives),
            collectives=collectives,
            world_size=_opt(d.get("world_size"), int),
            sizes=str(d.get("sizes", "not_logged")),
        )
    except (KeyError, TypeError, AttributeError):
        raise ValueError(f"bad final schedule {str(d)[:80]!r}") from None
