"""The device mesh a run used, read from the logs: its process groups and the world.

Pure functions of a :class:`tracekit.model.Run`; nothing here reads a file or imports torch.

c10d names process groups in creation order and every rank creates every group of a
DeviceMesh, so a group name means the same group on every rank. A group's members are the ranks
whose logs use its name (in a final schedule or as an FSDP group of a bucketing outcome). Its
role is read from what runs on it:

- ``shard``: the FSDP all-gathers and reduce-scatters (an ``fsdp_groups`` entry of torch's
  pre-bucketing outcome; without any outcome, a group with all-gathers or reduce-scatters);
- ``tp``: collectives on activations (all-reduces in a forward graph, or all-gathers and
  reduce-scatters on a group that is no FSDP group);
- ``replicate``: all-reduces in backward graphs only (the gradients of HSDP or DDP).

The world is the ``# World size: N`` line of ``fx_collectives_analytical_estimation``
(:attr:`tracekit.model.FinalSchedule.world_size`) when a log has one
(:func:`tracekit.model.world.log_world_size`).

For an HSDP run of 4 ranks (replicate 2 x shard 2)::

    >>> mesh_text(4, groups)             # doctest: +SKIP
    'world 4 = replicate 2 × shard 2'
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tracekit.model import FinalSchedule, Graph, Run
from tracekit.model.rankset import MAX_RANK, format_ranks
from tracekit.model.world import log_world_size

#: Roles in the order a mesh is written (outermost dimension first).
ROLES: tuple[str, ...] = ("replicate", "shard", "tp")


@dataclass(frozen=True, slots=True)
class MeshGroup:
    """One process group: its name (c10d's ``group_name``), size, member ranks and role, with
    the reason the role was given."""

    name: str
    size: int | None
    members: tuple[int, ...]
    role: str  # "shard" | "replicate" | "tp" | "unknown"
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "size": self.size,
            "members": format_ranks(self.members),
            "role": self.role,
            "reason": self.reason,
        }


@dataclass(slots=True)
class _Seen:
    members: set[int]
    sizes: set[int]
    fsdp: bool = False
    forward_kinds: set[str] | None = None
    backward_kinds: set[str] | None = None


def _role(s: _Seen, any_fsdp: bool) -> tuple[str, str]:
    fwd, bwd = s.forward_kinds or set(), s.backward_kinds or set()
    sharding = {"all_gather", "reduce_scatter"}
    if s.fsdp:
        return "shard", "FSDP all-gathers and reduce-scatters (torch's pre-bucketing FSDP group)"
    if not any_fsdp and (fwd | bwd) & sharding:
        return "shard", "all-gathers and reduce-scatters (no pre-bucketing outcome names the FSDP group)"
    if (fwd | bwd) & sharding:
        return "tp", "all-gathers or reduce-scatters of activations on a group that is no FSDP group"
    if "all_reduce" in fwd:
        return "tp", "all-reduces of activations in the forward graph"
    if "all_reduce" in bwd:
        return "replicate", "all-reduces of gradients in backward graphs only"
    return "unknown", "no collective on it tells"


def mesh_groups(run: Run) -> list[MeshGroup]:
    """Every process group the logs use, by name (numeric names in number order). A final
    schedule, or a list of FSDP groups, shared by many ranks (:mod:`tracekit.read.interning`
    shares equal ones) is looked at once: its groups' sizes, kinds and FSDP flag are set then,
    and each further rank that has it is only added to those groups' members. Nothing is kept
    a rank but its number in the members of its groups."""
    seen: dict[str, _Seen] = {}
    any_fsdp = False
    # id of a shared value -> (the value, kept so the id stays its own; the groups it names)
    fsdp_done: dict[int, tuple[tuple[list[str], int | None], tuple[_Seen, ...]]] = {}
    final_done: dict[int, tuple[FinalSchedule, tuple[_Seen, ...]]] = {}

    def at(name: str) -> _Seen:
        s = seen.get(name)
        if s is None:
            s = seen[name] = _Seen(set(), set(), forward_kinds=set(), backward_kinds=set())
        return s

    def fsdp_seen(g: Graph) -> tuple[_Seen, ...]:
        out = tuple(at(name) for name in g.fsdp_groups)
        for s in out:
            s.fsdp = True
            if g.group_size and 0 < g.group_size <= MAX_RANK:
                s.sizes.add(g.group_size)
        return out

    def final_member(f: FinalSchedule, rank: int | None) -> None:
        fhit = final_done.get(id(f))
        if fhit is None or fhit[0] is not f:
            fhit = final_done[id(f)] = (
                f,
                tuple(
                    _add_facts(at(name), ((size, kind),), fwd) for name, size, kind, fwd in _final_facts(f)
                ),
            )
        if rank is not None:
            for s in fhit[1]:
                s.members.add(rank)

    for r in run.ranks:
        for g in r.graphs:
            if g.fsdp_groups:
                any_fsdp = True
                # the FSDP groups and the group size are read together: keyed by both
                hit = fsdp_done.get(id(g.fsdp_groups))
                if hit is None or hit[0][0] is not g.fsdp_groups or hit[0][1] != g.group_size:
                    hit = fsdp_done[id(g.fsdp_groups)] = ((g.fsdp_groups, g.group_size), fsdp_seen(g))
                if r.rank is not None:
                    for s in hit[1]:
                        s.members.add(r.rank)
            if g.final is not None:
                final_member(g.final, r.rank)
        for f in r.schedules_without_outcome:
            final_member(f, r.rank)
    names = sorted(seen, key=lambda n: (not n.isdigit(), int(n) if n.isdigit() else 0, n))
    roles = {name: _role(seen[name], any_fsdp) for name in names}
    inferred = _inferred_size(run, seen, {n: r for n, (r, _) in roles.items()})
    out = []
    for name in names:
        s = seen[name]
        role, reason = roles[name]
        # a group holds at least the ranks seen in it (an all-reduce logs no group size, and the
        # size inferred for its role from the world can be smaller: nested_waits' tp groups)
        size = max(s.sizes) if s.sizes else inferred.get(role)
        size = max(size or 0, len(s.members)) or None
        out.append(MeshGroup(name, size, tuple(sorted(s.members)), role, reason))
    return out


def _inferred_size(run: Run, seen: dict[str, _Seen], roles: dict[str, str]) -> dict[str, int]:
    """The size of the one role whose groups' sizes no log states (an all-reduce's estimate
    row says ``group_size:None``), as the world (``# World size``) over the other roles' sizes:
    one HSDP rank's log (world 4, shard groups of 2) gives replicate 2, not the 1 rank it
    shows. Empty when the world is unknown, more than one role's size is, or it does not
    divide."""
    read: dict[str, int] = {}
    unread: set[str] = set()
    for name, s in seen.items():
        if roles[name] == "unknown":
            continue
        if s.sizes:
            read[roles[name]] = max(read.get(roles[name], 0), max(s.sizes))
        else:
            unread.add(roles[name])
    unread -= read.keys()
    world = log_world_size(run)
    product = 1
    for v in read.values():
        product *= v
    if world is None or len(unread) != 1 or world % product:
        return {}
    return {unread.pop(): world // product}


def _add_facts(s: _Seen, facts: Iterable[tuple[int | None, str]], forward: bool) -> _Seen:
    """``s`` with the sizes and kinds of collectives on it added (in a forward graph or not)."""
    kinds = s.forward_kinds if forward else s.backward_kinds
    assert kinds is not None
    for size, kind in facts:
        if size is not None:
            s.sizes.add(size)
        kinds.add(kind)
    return s


def _final_facts(f: FinalSchedule) -> tuple[tuple[str, int | None, str, bool], ...]:
    """``(group, size, kind, in a forward graph)`` of each collective of a final schedule, once
    each (size None when the log gives none, or an implausible one)."""
    out = {
        (
            c.group,
            c.group_size if c.group_size and 0 < c.group_size <= MAX_RANK else None,
            c.kind,
            f.position == 0,
        )
        for c in f.collectives
        if c.group is not None
    }
    return tuple(out)


class RoleSequences:
    """Final schedules' sequences compared by role: ``(kind, role, bytes, dtype)`` per
    collective, a group name that has no role in ``roles`` kept (:func:`role_names`).

    Made once per collectives list (the ranks of one graph share it: :mod:`tracekit.read.interning`)
    and equal sequences are one object with one number, so the 512 shard groups of a 1,024-rank
    HSDP mesh, whose schedules differ by their group names only, give a few sequences. For the
    schedules of shard group ``3`` (ranks 0-1) and ``4`` (ranks 2-3)::

        [["all_gather", "3", 148552, "f32"]]  ->  (("all_gather", "shard", 148552, "f32"),)  # both
    """

    __slots__ = ("roles", "_by_list", "_numbers")

    def __init__(self, roles: dict[str, str]) -> None:
        self.roles = roles
        # id of a collectives list -> (the list, kept alive so the id stays its own; the number)
        self._by_list: dict[int, tuple[list[Any], int]] = {}
        self._numbers: dict[tuple[tuple[Any, ...], ...], int] = {}

    def number(self, f: FinalSchedule) -> int:
        """The number of ``f``'s sequence by role: equal numbers, equal sequences."""
        hit = self._by_list.get(id(f.collectives))
        if hit is not None and hit[0] is f.collectives:
            return hit[1]
        roles = self.roles
        seq = tuple((c.kind, roles.get(c.group, c.group), c.bytes, c.dtype) for c in f.collectives)  # type: ignore[arg-type]
        n = self._numbers.setdefault(seq, len(self._numbers))
        self._by_list[id(f.collectives)] = (f.collectives, n)
        return n


def is_mesh(groups: Iterable[MeshGroup]) -> bool:
    """True when the groups form more than one communicator: a mesh (2-D or more), or
    groups of one role that split the ranks (each rank's FSDP group is another group)."""
    return len(list(groups)) > 1


def role_names(groups: list[MeshGroup]) -> dict[str, str]:
    """Group name -> its role, for the groups whose role has more than one group (``shard``
    groups ``19`` and ``20`` both map to ``shard``): the names cross-rank checks compare
    instead of the names themselves. Empty on a 1-D run (one group)."""
    by_role: dict[str, list[str]] = {}
    for g in groups:
        if g.role != "unknown":
            by_role.setdefault(g.role, []).append(g.name)
    return {n: role for role, names in by_role.items() if len(names) > 1 for n in names}


def dimensions(groups: list[MeshGroup]) -> list[tuple[str, int | None, list[str]]]:
    """``(role, size, group names)`` per role, in :data:`ROLES` order (others last)."""
    by_role: dict[str, list[MeshGroup]] = {}
    for g in groups:
        by_role.setdefault(g.role, []).append(g)
    order = [r for r in ROLES if r in by_role] + sorted(r for r in by_role if r not in ROLES)
    return [
        (role, max((g.size or 0 for g in by_role[role]), default=0) or None, [g.name for g in by_role[role]])
        for role in order
    ]


def _stride(members: tuple[int, ...]) -> int | None:
    """The step between a group's members (``0,2`` -> 2), None unless they are evenly spaced
    and at least two."""
    if len(members) < 2:
        return None
    steps = {b - a for a, b in zip(members, members[1:], strict=False)}
    return steps.pop() if len(steps) == 1 else None


def inferred_dimension(world: int | None, groups: list[MeshGroup], schedules: bool) -> dict[str, Any] | None:
    """The tp dimension of a mesh whose tp collectives never ran in a compiled graph, read off
    the world and the shard groups, or None. DeviceMesh lays the world out with the tp
    dimension innermost (torchtitan's ``dp_shard × tp``), so a shard group steps over the tp
    ranks: ``shard 2 × tp 2`` has shard groups ``0,2`` and ``1,3``. Inferred when the world is
    known, no group is tp, every size is read, the world leaves a factor over them, and every
    shard group steps by exactly that factor; otherwise nothing is claimed.

    ``{"role": "tp", "size": 2, "reason": "world 4 / shard 2 = 2, and each shard group steps
    by 2 (1: 0,2): no tp collective ran in a compiled graph"}``. ``schedules``: whether the
    logs hold any compiled graph's schedule (when none, the reason says no schedule was
    logged, not that no tp collective ran)."""
    dims = dimensions(groups)
    if not world or any(role in ("tp", "unknown") or not size for role, size, _ in dims):
        return None
    product = 1
    for _, size, _ in dims:
        product *= size or 1
    shard = [g for g in groups if g.role == "shard"]
    if not shard or product >= world or world % product:
        return None
    missing = world // product
    if missing < 2 or {_stride(g.members) for g in shard} != {missing}:
        return None
    over = " × ".join(f"{role} {size}" for role, size, _ in dims)
    first = shard[0]
    why = (
        "no tp collective ran in a compiled graph"
        if schedules
        else "no compiled graph logged the collectives it runs, so none shows a tp group"
    )
    return {
        "role": "tp",
        "size": missing,
        "reason": f"world {world} / {over} = {missing}, and each shard group steps by {missing} "
        f"({first.name}: {format_ranks(first.members)}): {why}",
    }


def mesh_text(world: int | None, groups: list[MeshGroup], inferred: dict[str, Any] | None = None) -> str:
    """``world 4 = replicate 2 × shard 2`` (sizes per role; ``?`` where one is unknown); an
    ``inferred`` dimension (:func:`inferred_dimension`) last, marked: ``world 4 = shard 2 ×
    tp 2 (inferred)``. When one role's groups differ in size (a world group and a mesh's), no
    product is claimed: ``world 4; shard groups of 2 and 4 ranks, tp groups of 2 ranks: not one
    mesh (a role's groups differ in size)``."""
    mixed = {
        role: sorted({g.size for g in groups if g.role == role and g.size})
        for role, _, _ in dimensions(groups)
    }
    if any(len(sizes) > 1 for sizes in mixed.values()):  # no product of dimensions to claim
        parts = [
            f"{role} groups of {' and '.join(map(str, sizes))} ranks"
            for role, sizes in mixed.items()
            if sizes
        ]
        return f"world {world if world else '?'}; {', '.join(parts)}: not one mesh (a role's groups differ in size)"
    dims = [f"{role} {size if size else '?'}" for role, size, _ in dimensions(groups)]
    if inferred:
        dims.append(f"{inferred['role']} {inferred['size']} (inferred)")
    return f"world {world if world else '?'} = {' × '.join(dims)}"


def mesh_document(world: int | None, groups: list[MeshGroup], schedules: bool = True) -> dict[str, Any]:
    """The ``mesh`` section of the summary document: its text, dimensions and groups. A
    dimension no group shows (:func:`inferred_dimension`) is listed with no groups and its
    ``inferred`` reason. ``schedules``: whether any compiled graph's schedule was logged."""
    extra = inferred_dimension(world, groups, schedules)
    dims = [{"role": r, "size": s, "groups": names} for r, s, names in dimensions(groups)]
    if extra:
        dims.append({"role": extra["role"], "size": extra["size"], "groups": [], "inferred": extra["reason"]})
    return {
        "text": mesh_text(world, groups, extra),
        "dimensions": dims,
        "groups": [g.to_dict() for g in groups],
    }


def logs_schedules(run: Run) -> bool:
    """Whether any rank logged a compiled graph's collective schedule."""
    return any(r.schedules_without_outcome or any(g.final is not None for g in r.graphs) for r in run.ranks)
