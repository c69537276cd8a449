"""The process groups a rebuilt graph uses, with their sizes and members, registered as fake
process groups before torch's passes and scheduler run on it.

torch resolves every collective's ``group_name`` to a process group: its FSDP pass to merge a
bucket, its overlap scheduler and NCCL model for the group's size. A 1-D run has one group,
named in the graph with its size (``all_gather_into_tensor(x, 4, '0')``). A mesh has several,
and an all-reduce names no size (``all_reduce(x, 'sum', '1')``): HSDP's backward all-reduces its
gradients on the replicate group, which a graph's all-gathers never name.

c10d names groups in creation order and every rank creates every group of a DeviceMesh, so a
name means the same group on every rank (:mod:`tracekit.analyze.mesh`). Each group of a graph gets:

- its size from the graph (the ``group_size`` argument of an all-gather or reduce-scatter);
  otherwise from the logs: the members of the group (the ranks whose logs use its name) when
  the logs of every rank of the world were read; otherwise the world (the log's
  ``# World size``) divided by the sizes of the graph's other groups, when that leaves one
  group unknown (a 2-D mesh read from one rank's log);
- its members and role (``replicate``, ``shard``, ``tp``) from the logs, when they were read.

For the HSDP fixture's backward (ranks 0-3, replicate 2 x shard 2), read from all four logs::

    3  shard      size 2 (graph)    ranks 0-1
    1  replicate  size 2 (members)  ranks 0, 2

Under torch's fake backend nothing is sent: a fake group of the group's size stands for it
(this process is its first rank; the members are what the report shows).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch.fx as fx

from tracekit.analyze.mesh import MeshGroup


@dataclass(frozen=True)
class GroupTable:
    """The groups of a run, by name, and its world size (``# World size``); ``complete`` when
    the logs of every rank of the world were read (members are then whole)."""

    groups: Mapping[str, MeshGroup]
    world: int | None
    complete: bool

    @classmethod
    def empty(cls) -> GroupTable:
        return cls({}, None, False)


@dataclass(frozen=True)
class GraphGroup:
    """One group a graph uses, as registered: ``size_from`` says where its size came from
    (``graph``, ``members``, ``world``) or is None when it is not known (not registered)."""

    name: str
    size: int | None
    size_from: str | None
    members: tuple[int, ...]
    role: str | None
    kinds: tuple[str, ...]  # the collective kinds (all_gather, reduce_scatter, all_reduce) on it

    def to_dict(self) -> dict[str, Any]:
        from tracekit.model.rankset import format_ranks

        return {
            "name": self.name,
            "size": self.size,
            "size_from": self.size_from,
            "members": format_ranks(self.members) if self.members else None,
            "role": self.role,
            "kinds": list(self.kinds),
        }

    def text(self) -> str:
        """``1 (replicate, 2 ranks: 0, 2)``."""
        from tracekit.model.rankset import format_ranks

        what = [self.role] if self.role and self.role != "unknown" else []
        if self.size is None:
            what.append("size unknown")
        else:
            what.append(
                f"{self.size} rank{'s' if self.size != 1 else ''}"
                + (f": {format_ranks(self.members)}" if self.members else "")
            )
        return f"{self.name} ({', '.join(what)})"


def group_table(paths: Iterable[str]) -> GroupTable:
    """Read every log of ``paths`` for the run's process groups (:func:`tracekit.analyze.mesh.mesh_groups`)
    and its world size. Unreadable input leaves the table empty (the replay says what it lacks)."""
    from tracekit.analyze.mesh import mesh_groups
    from tracekit.model.world import log_world_size
    from tracekit.read.reader import load

    try:  # the reader lists the files once and reads in one process below PARALLEL_MIN_BYTES
        run = load(list(paths))
    except Exception:  # noqa: BLE001 - the replay itself reports unreadable input
        return GroupTable.empty()
    world = log_world_size(run)
    ranks = {r.rank for r in run.ranks if r.rank is not None}
    groups = {g.name: g for g in mesh_groups(run)}
    complete = world is not None and len(ranks) == world  # more ranks than the world: copies, not a mesh
    return GroupTable(groups, world, complete)


def needs_table(sources: Iterable[Any]) -> bool:
    """Whether the sources' graphs use a group the graph text gives no size for, or more than
    one group (a mesh): then the run's groups are read (:func:`group_table`). A 1-D run never
    needs it. Judged from the recorded collective schedules (their group names and sizes)."""
    names: set[str] = set()
    for src in sources:
        final = getattr(src, "final", None) or getattr(getattr(src, "graph", None), "final", None)
        if final is None:
            continue
        for c in final.collectives:
            if c.group is None:
                continue
            names.add(c.group)
            if not c.group_size:
                return True
    return len(names) > 1


def table_for(paths: Iterable[str], sources: Iterable[Any]) -> GroupTable | None:
    """The run's groups when the sources need them (:func:`needs_table`), else None."""
    return group_table(paths) if needs_table(sources) else None


def collective_groups(gm: fx.GraphModule) -> dict[str, tuple[int | None, tuple[str, ...]]]:
    """Group name -> (the size the graph gives it, the collective kinds on it), in graph order."""
    from bucketing.predicates import group_name_of, group_size_of
    from tracekit.read.parsers import collective_op

    out: dict[str, tuple[int | None, list[str]]] = {}
    for n in gm.graph.nodes:
        if n.op != "call_function" or "_c10d_functional" not in str(n.target):
            continue
        op = collective_op(str(n.target))
        if op is None:
            continue
        try:
            name = group_name_of(n)
            size = group_size_of(n)
        except Exception:  # noqa: BLE001 - a collective without the arguments: not a group user
            continue
        was, kinds = out.setdefault(name, (None, []))
        if op[0] not in kinds:
            kinds.append(op[0])
        if size is not None and was is None:
            out[name] = (size, kinds)
    return {k: (s, tuple(kinds)) for k, (s, kinds) in out.items()}


def graph_groups(gm: fx.GraphModule, table: GroupTable) -> list[GraphGroup]:
    """The groups ``gm`` uses, each with its size (see the module docstring), members and role."""
    used = collective_groups(gm)
    out: dict[str, GraphGroup] = {}
    for name, (size, kinds) in used.items():
        known = table.groups.get(name)
        members = known.members if known is not None else ()
        role = known.role if known is not None else None
        size_from: str | None = "graph" if size else None
        if not size and known is not None and table.complete and known.members:
            size, size_from = len(known.members), "members"
        out[name] = GraphGroup(name, size, size_from, members, role, kinds)
    unknown = [g for g in out.values() if g.size is None]
    if len(unknown) == 1 and table.world:
        sized = {g.size for g in out.values() if g.size}
        rest = math.prod(sized) if sized else 1
        if table.world % rest == 0 and table.world // rest > 1:
            g = unknown[0]
            out[g.name] = GraphGroup(g.name, table.world // rest, "world", g.members, g.role, g.kinds)
    return list(out.values())


def register(groups: Iterable[GraphGroup], world: int | None = None) -> None:
    """Make every group of known size resolve to a fake process group of that size
    (:func:`bucketing.register_fake_process_groups`, one call per size, the largest first),
    in a fake world of at least ``world`` ranks: one already started that is too small is
    ended and a bigger one started."""
    import torch.distributed as dist

    from bucketing import register_fake_process_groups

    by_size: dict[int, list[str]] = {}
    for g in groups:
        if g.size:
            by_size.setdefault(g.size, []).append(g.name)
    if not by_size:
        return
    need = max([*by_size, world or 0])
    if dist.is_initialized() and dist.get_world_size() < need:
        dist.destroy_process_group()
    for size in sorted(by_size, reverse=True):
        register_fake_process_groups(by_size[size], size, world_size=need)


__all__ = [
    "GraphGroup",
    "GroupTable",
    "collective_groups",
    "graph_groups",
    "group_table",
    "needs_table",
    "register",
    "table_for",
]
