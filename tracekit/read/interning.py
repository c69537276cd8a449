"""Equal values of a read made one object: as the files are built (:class:`BuildMemo`), and
as they are merged into a Run (:class:`Interner`), so that memory grows with the distinct
outcomes of a job, not with its ranks times their collectives. The shared values are
read-only: the model's users copy one before they change it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tracekit.model import CollectiveSize, FinalSchedule, Graph, Rank, Sizes
from tracekit.read.entry_parser import Estimation
from tracekit.read.schedule_parsers import final_schedule


class BuildMemo:
    """What the builders of a read share as they build, so that equal values are one object
    from the start (a long log repeats a schedule under thousands of compile ids, and a job's
    ranks repeat theirs; these were made again for each graph, then shared only at the merge):

    - :meth:`final`: :func:`tracekit.read.schedule_parsers.final_schedule` once per distinct schedule. Its
      collectives and counts are shared by every graph whose schedule, estimation and dtypes
      are the very same parsed values (the parsers' memos give one object a distinct payload,
      and a batch of a worker's results keeps them one); only the compile id and position are
      new a graph::

        "0/0", 0, ops, est, dtypes -> FinalSchedule("0/0", 0, counts, colls, 8, "matched")
        "1/0", 0, ops, est, dtypes -> FinalSchedule("1/0", 0, counts, colls, 8, "matched")
                                      (the same counts and colls objects)

    - :meth:`sizes`: one :class:`tracekit.model.Sizes` for the very same size lists.

    Keyed by the inputs' identity, each held by its entry (so an id is never another object's
    while the entry lives); each table is cleared when it holds ``limit`` entries. The values
    are read-only, as the merge's shared values are. One a read (:func:`tracekit.read.reader.load`
    gives its files' builders one), so nothing is held once the read is done."""

    def __init__(self, limit: int = 4096) -> None:
        self._limit = limit
        self._finals: dict[tuple[int, int, int], tuple[tuple, FinalSchedule]] = {}
        self._sizes: dict[tuple[int, int], tuple[tuple, Sizes]] = {}

    def final(
        self,
        compile_id: str,
        position: int,
        ops: list[tuple[str, str]],
        est: Estimation | None,
        dtypes: dict[str, list[str]] | None,
    ) -> FinalSchedule:
        key = (id(ops), id(est), id(dtypes))
        hit = self._finals.get(key)
        if hit is None:
            f = final_schedule(compile_id, position, ops, est, dtypes)
            self._keep(self._finals, key, ((ops, est, dtypes), f))
            return f
        return hit[1].at(compile_id, position)

    def sizes(self, before: list[CollectiveSize] | None, after: list[CollectiveSize] | None) -> Sizes:
        """``Sizes(before or [], after)``, one for the very same lists (None for both: one ``[]``)."""
        key = (id(before), id(after))
        hit = self._sizes.get(key)
        if hit is None:
            hit = self._keep(self._sizes, key, ((before, after), Sizes(before=before or [], after=after)))
        return hit[1]

    def _keep(self, table: dict, key: tuple[int, ...], entry: tuple[tuple, Any]) -> tuple[tuple, Any]:
        """``table[key] = entry``: ``(the inputs whose ids are the key, held; the value)``, the
        table cleared first when full."""
        if len(table) >= self._limit:
            table.clear()
        table[key] = entry
        return entry


class Interner:
    """Shares equal values between ranks once a Run is merged: at 8,192 ranks of one model,
    memory grows with the distinct outcomes, not with ranks x collectives. The shared values
    (size lists, collective counts, FSDP groups, final schedules, compile-id and cache-event
    lists, empty lists of schedules without outcome) are read-only: the model's users copy one
    before they change it."""

    def __init__(self) -> None:
        self._seen: dict[Any, Any] = {}
        self._parts: dict[tuple, int] = {}  # a final's shared parts -> their number
        self._finals: dict[tuple[str, int, int], FinalSchedule] = {}  # (compile id, position, parts)

    def share(self, key: Any, value: Any) -> Any:
        return self._seen.setdefault(key, value)

    def _canonical(self, value: Any, key_of: Callable[[Any], Any]) -> Any:
        """The shared value equal to ``value`` (``key_of(value)``: its key)."""
        return self._seen.setdefault(key_of(value), value)

    def rank_lists(self, r: Rank) -> None:
        """The rank's compile-id and cache-event lists, its torch version, and its list of
        schedules without outcome when it is empty (as each of its files is merged)."""
        r.compile_ids = self.share(("compile_ids", *r.compile_ids), r.compile_ids)
        r.cache_events = self.share(("cache", *map(tuple, r.cache_events)), r.cache_events)
        if r.torch_version is not None:
            r.torch_version = self.share(("torch", r.torch_version), r.torch_version)
        if not r.schedules_without_outcome:
            r.schedules_without_outcome = self.share(("no_schedules",), r.schedules_without_outcome)

    def graph(self, g: Graph) -> None:
        """The graph's values (once its file is merged: its final's position is known)."""
        g.fsdp_groups = self._canonical(g.fsdp_groups, _groups_key)
        g.collectives = self._canonical(g.collectives, _counts_key)
        s = g.sizes_mb
        if s is not None:  # a Sizes a graph, of shared lists: known by its lists
            g.sizes_mb = self._canonical(s, _sizes_key)
        f = g.final
        if f is not None:
            # within a rank too: a long log repeats a schedule under thousands of compile ids
            f.counts = self._canonical(f.counts, _final_counts_key)
            # the key of a final is kept for every graph (compile ids differ): small, so it names
            # the rest by a number, one a distinct (counts, collectives, world size, sizes), the
            # shared counts and collectives by identity (held here)
            f.collectives = self._canonical(f.collectives, _final_collectives_key)
            parts = (id(f.counts), id(f.collectives), f.world_size, f.sizes)
            n = self._parts.get(parts)
            if n is None:
                n = self._parts[parts] = len(self._parts)
            g.final = self._finals.setdefault((f.compile_id, f.position, n), f)


def _groups_key(groups: list[str]) -> tuple:
    return ("groups", *groups)


def _counts_key(counts: dict) -> tuple:
    return ("counts", *((t, c.before, c.after) for t, c in counts.items()))


def _sizes_key(s: Sizes) -> tuple:
    return (
        "sizes",
        tuple((x.type, x.size_mb, x.name) for x in s.before),
        None if s.after is None else tuple((x.type, x.size_mb, x.name) for x in s.after),
    )


def _final_counts_key(counts: dict[str, int]) -> tuple:
    return ("final_counts", tuple(counts.items()))


def _final_collectives_key(colls: list | tuple) -> tuple:
    return (
        "final_collectives",
        tuple((c.kind, c.op, c.group, c.group_size, c.bytes, c.est_ms, c.dtype) for c in colls),
    )
