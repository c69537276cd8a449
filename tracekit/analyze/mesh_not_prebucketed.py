"""Collectives that pre-bucketing never handles on a mesh: found in the final schedules.

Pure functions of rank groups (:func:`tracekit.analyze.summarize.rank_groups`) and the mesh
(:func:`tracekit.analyze.mesh.mesh_groups`); nothing here reads a file or imports torch.

torch's pre-bucketing (``torch._inductor.fx_passes.fsdp``, 2.13) buckets collectives only on the
groups of its FSDP all-gathers (the outcome's ``fsdp_groups``). In HSDP the gradients are then
all-reduced on the replicate group, which carries no all-gather: each all-reduce runs alone.
Any collective of a kind that runs more than once in a graph on a group the pass never saw is
such a finding: its count, bytes (one rank's input) and torch's estimated ms (the NCCL estimate
of ``fx_collectives_analytical_estimation``), with the reason read off the graph.

    HSDP backward, ranks 0-3: 8 all_reduce on replicate groups 1 | 2, one by one
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tracekit.analyze.mesh import MeshGroup
from tracekit.model import Graph
from tracekit.model.nouns import plural
from tracekit.model.rankset import format_ranks


def mesh_not_prebucketed(
    rows: Iterable[tuple[list[int | None], list[Graph]]], mesh: list[MeshGroup], once: bool = False
) -> list[dict[str, Any]]:
    """One item per (rows' graph, group role, kind) with more than one collective of that kind
    on a group the graph's pre-bucketing never saw.

    ``rows``: ``(ranks, graphs)`` of ranks with the same outcome (their first rank's graphs).
    Items: ``{compile_id, graph_index, ranks, role, groups, kind, count, bytes, est_ms,
    fsdp_groups, reason}``; ``groups`` the names of that role's groups the rows' ranks use
    (``["17", "18"]``), ``count``/``bytes``/``est_ms`` one rank's (bytes and ms None when the
    estimates were not logged or not matched). ``once``: the other side, a kind that runs once
    in the graph on such a group (tensor parallelism's all-reduce of activations), no finding:
    one alone has nothing to be bucketed with (:func:`mesh_run_once`)."""
    role = {g.name: g.role for g in mesh}
    role_reason = {g.name: g.reason for g in mesh}
    items: list[dict[str, Any]] = []
    for ranks, graphs in rows:
        members = set(ranks)
        for g in graphs:
            if g.final is None:
                continue
            seen = set(g.fsdp_groups)
            by: dict[tuple[str, str], list[Any]] = {}
            for c in g.final.collectives:
                if c.group is None or c.group in seen:
                    continue
                by.setdefault((c.group, c.kind), []).append(c)
            for (group, kind), cs in by.items():
                if (len(cs) != 1) if once else (len(cs) < 2):
                    continue
                r = role.get(group, "unknown")
                names = [m.name for m in mesh if m.role == r and members.intersection(m.members)] or [group]
                nbytes = None if any(c.bytes is None for c in cs) else sum(c.bytes for c in cs)
                ms = None if any(c.est_ms is None for c in cs) else round(sum(c.est_ms for c in cs), 4)
                items.append(
                    {
                        "compile_id": g.compile_id,
                        "graph_index": g.graph_index,
                        "ranks": format_ranks(ranks),
                        "role": r,
                        "groups": names,
                        "kind": kind,
                        "count": len(cs),
                        "bytes": nbytes,
                        "est_ms": ms,
                        "fsdp_groups": list(g.fsdp_groups),
                        "reason": _once_reason(group, r, kind, role_reason.get(group))
                        if once
                        else _reason(g, group, r, kind, len(cs)),
                    }
                )
    return items


def _reason(g: Graph, group: str, role: str, kind: str, count: int) -> str:
    """Why pre-bucketing left these ``count`` collectives alone, read off the graph: torch's
    pass finds its FSDP groups from the graph's FSDP all-gathers and buckets on those only;
    ``group`` either runs no all-gather in this graph or runs all-gathers the pass did not take
    for FSDP ones."""
    gathers = (
        sum(1 for c in g.final.collectives if c.group == group and c.kind == "all_gather") if g.final else 0
    )
    on = (
        f"group {group} ({role}) runs no all-gather in this graph"
        if not gathers
        else f"group {group} ({role}) runs {plural(gathers, 'all-gather')} the pass did not take for FSDP ones"
    )
    fsdp = ", ".join(g.fsdp_groups) or "none"
    return (
        f"{on}, and torch's pre-bucketing buckets only on the groups of its FSDP all-gathers "
        f"({fsdp}): its {count} {kind} run one by one"
    )


def mesh_run_once(
    rows: Iterable[tuple[list[int | None], list[Graph]]], mesh: list[MeshGroup]
) -> list[dict[str, Any]]:
    """Collectives of a kind that runs once in a graph on a group its pre-bucketing never saw
    (fsdp_tp: one all-reduce of activations per graph on the tp group): no finding, said with
    their count, bytes, estimate and why. The same items as :func:`mesh_not_prebucketed`."""
    return mesh_not_prebucketed(rows, mesh, once=True)


def _once_reason(group: str, role: str, kind: str, why_role: str | None) -> str:
    """Why one collective on a group the pass never saw is no finding."""
    return (
        f"group {group} ({role}{': ' + why_role if why_role else ''}) runs one {kind} in this graph: "
        "one alone has nothing to be bucketed with (no finding; replay and explain read what it "
        "carries off the graph)"
    )
