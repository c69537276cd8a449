"""Do the ranks run the same collectives? Cross-rank checks on what inductor finally emits.

Pure functions of a :class:`tracekit.model.Run`; nothing here reads a file or formats text.

A rank that runs another sequence of collectives than its peers, or the same ops with other
sizes, hangs the job or corrupts it. After bucketing every rank may run "one all-gather" while
the sizes differ (one rank with two more layers), so op names alone, what tlparse 0.4.3 compares,
say nothing. Here each post-grad graph's final schedule (:class:`tracekit.model.FinalSchedule`:
the ``inductor_collective_schedule`` with sizes from ``fx_collectives_analytical_estimation``)
is compared as a sequence of ``(kind, group, bytes)``, and so are the compile ids each rank
compiled and its FX graph cache hits and misses.

- :func:`schedule_divergence`: per compile id and post-grad position, the ranks whose sequence
  differs from the majority's, with the first differing position and both values.
- :func:`compile_divergence`: ranks whose compile-id sequence, or cache hit/miss sequence,
  differs from the majority's, with the first difference.
- :func:`first_difference`: the first differing index of two sequences.

Rank sets are printed as ranges (:func:`tracekit.model.rankset.format_ranks`): ``"0-2"``, ``"3"``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tracekit.analyze.mesh import MeshGroup, RoleSequences, is_mesh, role_names
from tracekit.model import FinalSchedule, Rank, Run
from tracekit.model.rankset import format_ranks

#: The names of a sequence entry of :meth:`FinalSchedule.sequence`, for the JSON items.
ENTRY_KEYS = ("kind", "group", "bytes", "dtype")


def rank_finals(rank: Rank) -> dict[tuple[str, int], FinalSchedule]:
    """Every final schedule of a rank by ``(compile_id, position)``: those of its bucketing
    outcomes and those of graphs without one."""
    out = {(f.compile_id, f.position): f for f in (g.final for g in rank.graphs) if f is not None}
    for f in rank.schedules_without_outcome:
        out.setdefault((f.compile_id, f.position), f)
    return out


def _lowest(ranks: list[int | None]) -> int:
    return min(-1 if r is None else r for r in ranks)


def majority(groups: dict[Any, list[int | None]]) -> Any:
    """The key of the group with more ranks than every other group, or None when there is
    none (a tie: two ranks that differ, a 2-2 split): then no group is blamed."""
    sizes = sorted((len(v) for v in groups.values()), reverse=True)
    if len(sizes) > 1 and sizes[0] == sizes[1]:
        return None
    return max(groups, key=lambda k: len(groups[k]))


def reference(groups: dict[Any, list[int | None]]) -> tuple[Any, bool]:
    """``(key, is_majority)``: the majority's group, or, on a tie, the group holding the
    lowest rank (what the others are compared with; it is no majority)."""
    maj = majority(groups)
    if maj is not None:
        return maj, True
    return min(groups, key=lambda k: _lowest(groups[k])), False


def split_groups(groups: dict[Any, list[int | None]]) -> list[str]:
    """Every group's ranks as ranges, the group of the lowest rank first (for a split)."""
    return [format_ranks(v) for v in sorted(groups.values(), key=_lowest)]


def first_difference(a: Sequence[Any], b: Sequence[Any]) -> int | None:
    """The first index where two sequences differ (the shorter length when one is a prefix of
    the other), or None when they are equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _at(seq: Sequence[Any] | None, i: int | None, as_value: Callable[[Any], Any]) -> Any:
    return None if seq is None or i is None or i >= len(seq) else as_value(seq[i])


def _same_values(
    ranks: list[Rank], key: Callable[[Rank], Any], value: Callable[[Rank], Any]
) -> list[tuple[list[int | None], Any]]:
    """``(ranks, value)`` for the ranks whose ``key`` is the same (identities of the values
    :mod:`tracekit.read.pairing` shares between ranks: 100,000 ranks of one model are a few
    keys), ``value`` made once for each, in the order of their first rank."""
    out: dict[Any, tuple[list[int | None], Any]] = {}
    for r in ranks:
        k = key(r)
        hit = out.get(k)
        if hit is None:
            out[k] = ([r.rank], value(r))
        else:
            hit[0].append(r.rank)
    return list(out.values())


def _diverging_groups(
    values: list[tuple[list[int | None], Any]],
    as_value: Callable[[Any], Any],
    canon: Callable[[Any], Any] | None = None,
) -> list[dict[str, Any]]:
    """Ranks grouped by their sequence (``values``: (ranks, list or None), in the order of
    their first rank: :func:`_same_values`); one item per group that is not the majority's:
    ranks, majority ranks, first differing position, both values there (``as_value`` makes an
    entry JSON-able; None past the end) and both lengths. ``majority`` is False when no group
    is larger than every other: ``majority_ranks`` is then the group of the lowest rank,
    compared with, not blamed, and ``groups`` names every group. ``canon``: what a sequence
    is compared as (in a mesh, each entry with its group name mapped to the group's role); the
    values shown are those of each group's first rank."""
    groups: dict[Any, list[int | None]] = {}
    seqs: dict[Any, Any] = {}
    for ranks, seq in values:
        cseq = seq if canon is None or seq is None else canon(seq)
        k = None if cseq is None else tuple(tuple(x) if isinstance(x, list) else x for x in cseq)
        groups.setdefault(k, []).extend(ranks)
        seqs.setdefault(k, seq)
    if len(groups) < 2:
        return []
    maj, is_majority = reference(groups)
    split = {} if is_majority else {"groups": split_groups(groups)}
    items = []
    for k, ranks in groups.items():
        if k == maj:
            continue
        a, b = seqs[k], seqs[maj]
        pos = None if a is None or b is None else first_difference(a, b)
        items.append(
            {
                "ranks": format_ranks(ranks),
                "majority_ranks": format_ranks(groups[maj]),
                "majority": is_majority,
                **split,
                "position": pos,
                "value": _at(a, pos, as_value),
                "majority_value": _at(b, pos, as_value),
                "length": None if a is None else len(a),
                "majority_length": None if b is None else len(b),
            }
        )
    return items


def _entry(x: list[Any]) -> dict[str, Any]:
    return dict(zip(ENTRY_KEYS, x, strict=False))


def _by_role(roles: dict[str, str]) -> Callable[[list[list[Any]]], list[list[Any]]]:
    """A sequence with each entry's group name replaced by its role (``19`` -> ``shard``)."""

    def canon(seq: list[list[Any]]) -> list[list[Any]]:
        return [[x[0], roles.get(x[1], x[1]), *x[2:]] for x in seq]

    return canon


def schedule_divergence(
    run: Run, mesh: list[MeshGroup] | None = None, by_role: RoleSequences | None = None
) -> list[dict[str, Any]]:
    """Ranks whose final collective sequence (kind, group, bytes, in run order) differs from
    the majority's, per compile id and post-grad position; ``[]`` when all agree.

    In a mesh (``mesh``: :func:`tracekit.analyze.mesh.mesh_groups`, more than one group), each
    communicator's members must agree on what runs on it; ranks in different groups of one role
    (shard groups ``19`` and ``20``) are compared after mapping each group name to its role, so
    a different name alone is no finding and a different sequence is one. Items then also name
    ``group`` (the group of the first differing collective, on the odd ranks' side), its
    ``role`` (``shard``) and ``peers`` (that group's members, as ranges).

    Items: ``{compile_id, graph_index, ranks, majority_ranks, majority, position, value,
    majority_value, length, majority_length}`` (and ``groups`` on a split: ``majority``
    false). ``graph_index`` is the post-grad position (0 forward, 1
    backward: :mod:`tracekit.read.pairing`); ``position`` the first differing index in the sequence,
    ``value`` / ``majority_value`` the entries there (``{"kind": "all_gather", "group": "0",
    "bytes": 70988}``, null past the end). A rank that logged no schedule for the graph has
    ``position``, ``value`` and ``length`` null. Bytes are null where the estimation could not
    be matched (:func:`tracekit.read.schedule_parsers.final_schedule`). ``by_role``: the sequences by
    role made so far (one :class:`RoleSequences` of the mesh's roles, shared with the caller's
    other checks)."""
    if len(run.ranks) < 2:
        return []
    roles = role_names(mesh) if mesh and is_mesh(mesh) else {}
    canon = _by_role(roles) if roles else None
    members = {g.name: g.members for g in mesh or []}
    if roles and (by_role is None or by_role.roles != roles):
        by_role = RoleSequences(roles)
    # ranks whose graphs run the same (shared) final schedules: their finals are made once; in
    # a mesh, ranks whose finals are the same by role (a rank's backward is its own final there)
    rb = by_role if roles else None
    finals = _same_values(
        run.ranks, _finals_key if rb is None else lambda r: _role_finals_key(r, rb), rank_finals
    )
    order: dict[str, int] = {}
    for _, fs in finals:
        for cid, _pos in fs:
            order.setdefault(cid, len(order))
    keys = sorted({k for _, fs in finals for k in fs}, key=lambda k: (order[k[0]], k[1]))
    items = []
    for cid, pos in keys:
        if not roles or by_role is None:
            values = [
                (ranks, None if fs.get((cid, pos)) is None else fs[(cid, pos)].sequence())
                for ranks, fs in finals
            ]
        else:
            values = _same_by_role(finals, (cid, pos), by_role)
        for it in _diverging_groups(values, _entry, canon):
            item = {"compile_id": cid, "graph_index": pos} | it
            if roles:
                side = it["value"] or it["majority_value"] or {}
                group = side.get("group")
                item["group"] = group
                item["role"] = roles.get(group, "") if group is not None else ""
                item["peers"] = format_ranks(members.get(group, ())) if group is not None else ""
            items.append(item)
    return items


def _same_by_role(
    finals: list[tuple[list[int | None], dict[tuple[str, int], FinalSchedule]]],
    key: tuple[str, int],
    by_role: RoleSequences,
) -> list[tuple[list[int | None], list[list[Any]] | None]]:
    """``(ranks, sequence)`` of one graph for the ranks whose sequences are equal by role, in
    the order of their first rank, the first one's sequence: what :func:`_diverging_groups`
    would group them into, made once per group (512 shard groups are one) and not per rank."""
    out: dict[int | None, tuple[list[int | None], FinalSchedule | None]] = {}
    for ranks, fs in finals:
        f = fs.get(key)
        n = None if f is None else by_role.number(f)
        hit = out.get(n)
        if hit is None:
            out[n] = (list(ranks), f)
        else:
            hit[0].extend(ranks)
    return [(ranks, None if f is None else f.sequence()) for ranks, f in out.values()]


def _finals_key(rank: Rank) -> tuple:
    """What :func:`rank_finals` makes a rank's finals from, by identity: ranks with the same
    key have the same finals (the objects are the rank's own, alive while the Run is)."""
    return (tuple(id(g.final) for g in rank.graphs), tuple(map(id, rank.schedules_without_outcome)))


def _role_finals_key(rank: Rank, by_role: RoleSequences) -> tuple:
    """What :func:`rank_finals` makes a rank's finals from, by role: ranks with the same key
    have finals at the same compile ids and positions whose sequences by role are equal
    (:meth:`RoleSequences.number`), so one rank's finals stand for theirs in a mesh's check."""
    return (
        tuple(
            None if (f := g.final) is None else (f.compile_id, f.position, by_role.number(f))
            for g in rank.graphs
        ),
        tuple((f.compile_id, f.position, by_role.number(f)) for f in rank.schedules_without_outcome),
    )


def compile_divergence(run: Run) -> list[dict[str, Any]]:
    """Ranks whose compile ids (in ``dynamo_start`` order), or FX graph cache events
    (``fx_graph_cache_hit`` / ``_miss`` / ``_bypass``, in order), differ from the majority's.

    Items: ``{what, ranks, majority_ranks, position, value, majority_value, length,
    majority_length}``, ``what`` is ``"compile_ids"`` (values: compile ids, ``"0/1"``) or
    ``"cache"`` (values: ``{"compile_id": "0/0", "state": "hit"}``); null past the end.
    ``[]`` when all ranks agree (or fewer than two ranks were read)."""
    if len(run.ranks) < 2:
        return []
    items = []
    fields: tuple[tuple[str, Callable[[Rank], Any], Callable[[Any], Any]], ...] = (
        ("compile_ids", lambda r: r.compile_ids, lambda x: x),
        ("cache", lambda r: r.cache_events, lambda x: {"compile_id": x[0], "state": x[1]}),
    )
    for what, get, as_value in fields:

        def key(r: Rank, get: Callable[[Rank], Any] = get) -> int:
            return id(get(r))

        def value(r: Rank, get: Callable[[Rank], Any] = get) -> list[Any]:
            return list(get(r))

        same = _same_values(run.ranks, key, value)
        for it in _diverging_groups(same, as_value):
            items.append({"what": what} | it)
    return items
