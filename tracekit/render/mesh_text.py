"""The mesh of a summary document (its ``mesh`` and ``mesh_not_prebucketed`` sections) as text:
one line for the mesh, one cell for a row's FSDP groups, and the mesh's CSV rows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tracekit.model.nouns import graph_label
from tracekit.model.rankset import rank_members
from tracekit.render.cells import groups_text
from tracekit.render.text import ranks_cell

#: Groups of one role named in a line or a cell; past it, the first ones, ``...``, the last one
#: and the count (a 1,024-rank HSDP mesh has 512 shard groups).
MAX_GROUPS_SHOWN = 4


def names_text(names: list[str], limit: int = MAX_GROUPS_SHOWN) -> str:
    """``3 | 4``; past ``limit`` names ``3 | 4 | ... | 514 (512 groups)``."""
    if len(names) <= limit:
        return " | ".join(names)
    return " | ".join([*names[: limit - 2], "...", names[-1]]) + f" ({len(names)} groups)"


def groups_by_role(doc: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The ``mesh`` section's groups by role, in the order of its dimensions (roles without a
    dimension last): ``[("replicate", [{name: "17", members: "0,2", ...}, ...]), ...]``."""
    by_role: dict[str, list[dict[str, Any]]] = {}
    for g in doc.get("groups") or []:
        if isinstance(g, dict) and {"role", "name", "members"} <= g.keys():
            by_role.setdefault(str(g["role"]), []).append(g)
    roles = [str(d.get("role")) for d in doc.get("dimensions") or [] if isinstance(d, dict)]
    roles += [r for r in by_role if r not in roles]
    return [(r, by_role.get(r, [])) for r in roles]


#: Members of a group shown in the Mesh line (a cut range string past it: ``render.text.ranks_cell``).
MAX_MEMBERS_CELL = 24


def _members(g: dict[str, Any]) -> str:
    """A group's members (cut past :data:`MAX_MEMBERS_CELL` characters), with how many of its
    size the logs show when some are missing: ``1, 1 of 2 seen``."""
    members = str(g["members"])
    seen = len(rank_members(members))
    size = g.get("size")
    text = ranks_cell(members, MAX_MEMBERS_CELL)
    if isinstance(size, int) and not isinstance(size, bool) and seen < size:
        return f"{text}, {seen} of {size} seen"
    return text


def mesh_line(doc: dict[str, Any]) -> str:
    """The ``mesh`` section in one line: ``world 4 = replicate 2 × shard 2; replicate groups
    17 (0,2) | 18 (1,3); shard groups 19 (0-1) | 20 (2-3)``."""
    dims = {str(d.get("role")) for d in doc.get("dimensions") or [] if isinstance(d, dict)}
    parts = [
        f"{r} group{'s' if len(gs) != 1 else ''} " + names_text([f"{g['name']} ({_members(g)})" for g in gs])
        for r, gs in groups_by_role(doc)
        if r in dims and gs
    ]
    parts += [
        f"{d.get('role')} {d.get('size')} inferred: {d['inferred']}"
        for d in doc.get("dimensions") or []
        if isinstance(d, dict) and d.get("inferred")
    ]
    return "; ".join([doc.get("text", ""), *parts])


def fsdp_groups_cell(graph: dict[str, Any]) -> str:
    """An outcome row's FSDP groups: ``shard groups 19 | 20`` when the row's ranks use several
    shard groups of a mesh (``mesh_fsdp_groups``), else the graph's own (``0``, ``-``)."""
    if graph.get("mesh_fsdp_groups"):
        return f"shard groups {names_text([str(n) for n in graph['mesh_fsdp_groups']])}"
    return groups_text(graph.get("fsdp_groups") or [])


def run_once_text(doc: dict[str, Any], fmt: str) -> str:
    """Collectives on groups pre-bucketing never sees that run once in a graph
    (``mesh_run_once``: fsdp_tp's all-reduce of activations on the tp groups): one row per
    graph and kind, then why there is no finding; empty when there are none."""
    from tracekit.render.text import heading, table

    items = doc.get("mesh_run_once") or []
    if not items:
        return ""
    rows = [
        [
            d["compile_id"],
            graph_label(d["graph_index"]),
            f"{d['role']} {names_text(d['groups'])}",
            f"{d['kind']} {d['count']}",
            "?" if d["bytes"] is None else f"{d['bytes']:,}",
            "?" if d["est_ms"] is None else f"{d['est_ms']:.4f}",
            ranks_cell(d["ranks"]),
        ]
        for d in items
    ]
    return (
        "\n"
        + heading("On the mesh, one of a kind (groups pre-bucketing never sees; no finding)", fmt)
        + table(rows, ["compile id", "graph", "groups", "runs", "bytes", "est ms", "ranks"], fmt)
        + "\nwhy: "
        + items[0]["reason"]
        + "\n"
    )


def mesh_csv_rows(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The CSV rows of the mesh: ``mesh`` (field ``world``: the mesh's text; then one row per
    group: field its role, value its name, ranks its members, group_size, detail the reason
    for the role) and ``mesh_not_prebucketed`` (one row per finding: field the kind, value the
    count, fsdp_groups the FSDP groups pre-bucketing saw, bytes and est_ms one rank's, detail
    the groups it never saw and the reason), then ``mesh_run_once`` with the same fields (a
    kind that runs once on such a group: no finding)."""
    mesh = doc.get("mesh") or {}
    if mesh:
        yield {"section": "mesh", "field": "world", "value": mesh.get("text", "")}
    for role, groups in groups_by_role(mesh):
        for g in groups:
            yield {
                "section": "mesh",
                "ranks": g["members"],
                "field": role,
                "value": g["name"],
                "group_size": g.get("size"),
                "detail": g.get("reason", ""),
            }
    for d in mesh.get("dimensions") or []:  # a dimension no group shows: its size and why
        if isinstance(d, dict) and d.get("inferred"):
            yield {
                "section": "mesh",
                "field": d.get("role"),
                "value": "inferred",
                "group_size": d.get("size"),
                "detail": d["inferred"],
            }
    for section in ("mesh_not_prebucketed", "mesh_run_once"):  # run once: no finding
        for it in doc.get(section) or []:
            yield {
                "section": section,
                "ranks": it["ranks"],
                "compile_id": it["compile_id"],
                "graph": graph_label(it["graph_index"]),
                "field": it["kind"],
                "value": it["count"],
                "fsdp_groups": " ".join(it.get("fsdp_groups") or []),
                "bytes": it.get("bytes"),
                "est_ms": it.get("est_ms"),
                "detail": f"groups={' '.join(it['groups'])}; role={it['role']}; {it['reason']}",
            }


def counted_groups_text(doc: dict[str, Any]) -> str:
    """On a mesh, which groups the outcome table's AG, RS and AR count: torch's pre-bucketing
    counts, on the FSDP (shard) groups only; the collectives on groups it never sees (the
    replicate groups' gradient all-reduces of HSDP) are named with where they are counted.
    Empty outside a mesh. For hsdp: ``AG, RS, AR: pre-bucketing's counts, on the FSDP groups
    only (shard groups 3 | 4); not the all_reduce on replicate groups 1 | 2 (under Bucketing did
    nothing on the mesh)``."""
    mesh = doc.get("mesh")
    if not mesh:
        return ""
    shard = [str(g["name"]) for r, gs in groups_by_role(mesh) if r == "shard" for g in gs]
    text = "AG, RS, AR: pre-bucketing's counts, on the FSDP groups only" + (
        f" (shard group{'s' if len(shard) != 1 else ''} {names_text(shard)})" if shard else ""
    )
    elsewhere: dict[tuple[str, str], list[str]] = {}
    for section, title in (
        ("mesh_not_prebucketed", "Bucketing did nothing on the mesh"),
        ("mesh_run_once", "On the mesh, one of a kind"),
    ):
        for it in doc.get(section) or []:
            names = elsewhere.setdefault((f"{it['kind']} on {it.get('role') or 'other'} groups", title), [])
            names += [str(n) for n in it.get("groups") or [] if str(n) not in names]
    for (what, title), names in elsewhere.items():
        text += f"; not the {what.replace(' groups', ' group' if len(names) == 1 else ' groups')} {names_text(names)} (under {title})"
    return text


def schedule_groups_text(doc: dict[str, Any]) -> str:
    """On a mesh, which groups the schedule table's AG, RS and AR count: every group (what runs,
    replicate and tp groups included); empty outside a mesh."""
    return "AG, RS, AR: on every group of the mesh" if doc.get("mesh") else ""
