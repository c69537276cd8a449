"""Per-rank model -> summary: rank groups, rank consensus/divergence, did-nothing graphs, and
the summary document that holds them with the world, totals, notes and verdict.

Pure functions of a :class:`tracekit.model.Run`; nothing here reads a file.

- :func:`rank_groups`: ranks whose graphs are identical, as groups (1,024 identical ranks are
  one group); every analysis below works on groups, so its cost grows with distinct outcomes.
- :func:`divergence`: where the ranks' bucketing outcomes differ from the majority, graph by
  graph and field by field, with the first differing collective.
- :func:`did_nothing`; the totals, notes and verdict are :mod:`tracekit.analyze.totals`,
  :mod:`tracekit.analyze.notes` and :mod:`tracekit.analyze.verdict`.
- :func:`summary_findings` (the ``tracekit.summary/2`` document before its verdict and notes are said:
  groups by default, per rank with ``per_rank=True``; :func:`tracekit.render.summary_document.summary_document`
  says it); a saved one is read back by :mod:`tracekit.analyze.documents`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import orjson

from bucketing.gc_pause import gc_paused
from tracekit.analyze.compile_events import breaks_and_recompiles
from tracekit.analyze.compiled_regions import compiled_regions
from tracekit.analyze.cut_logs import compared_items, shorter_logs, with_logs_that_end_early
from tracekit.analyze.mesh import (
    MeshGroup,
    RoleSequences,
    is_mesh,
    logs_schedules,
    mesh_document,
    mesh_groups,
    role_names,
)
from tracekit.analyze.mesh_not_prebucketed import (
    mesh_not_prebucketed,
    mesh_run_once,
)
from tracekit.analyze.not_prebucketed import not_prebucketed, table_totals
from tracekit.analyze.notes import notes
from tracekit.analyze.schedule import compile_divergence, reference, schedule_divergence, split_groups
from tracekit.analyze.totals import totals
from tracekit.analyze.verdict import run_facts, verdict
from tracekit.model import SHORT_NAMES, CollectiveSize, Graph, Rank, Run
from tracekit.model.fields import (
    GRAPH_FIELDS,
    compared_values,
    graph_to_dict,
    rank_to_dict,
    stand_ins,
    stand_ins_without_groups,
)
from tracekit.model.json_forms import DumpMemo, final_to_dict
from tracekit.model.rankset import format_ranks, rank_order
from tracekit.model.world import world

SCHEMA = "tracekit.summary/2"


@dataclass
class RankGroup:
    """Ranks whose graphs (every compared value of every graph) and counters are identical;
    ``graphs`` are the first rank's."""

    ranks: list[int | None]
    graphs: list[Graph]
    compiled_graphs: int
    cache_hits: int
    compiles: int
    rank: Rank  # the first rank: its compile ids, cache events, schedules without outcome


def _graph_canon(g: Graph, roles: dict[str, str] | None = None) -> str:
    """The canonical text of a graph's compared values (its compile id and index apart), with
    group names mapped to their roles when ``roles`` is given (:func:`role_view`)."""
    v = compared_values(g)
    return _canon(role_view(v, roles) if roles else v)


def role_view(v: Any, roles: dict[str, str]) -> Any:
    """A compared value (or a final schedule's dict) with every process-group name replaced
    by its role (:func:`tracekit.analyze.mesh.role_names`): ``fsdp_groups`` entries, ``group``
    values and the group of each ``final`` entry (``[kind, group, bytes, dtype]``). In a mesh,
    ranks of shard group ``19`` and of shard group ``20`` then compare equal."""
    if isinstance(v, dict):
        out: dict[str, Any] = {}
        for k, x in v.items():
            if k == "fsdp_groups" and isinstance(x, list):
                out[k] = [roles.get(n, n) for n in x]
            elif k == "group" and isinstance(x, str):
                out[k] = roles.get(x, x)
            elif k == "final" and isinstance(x, list):
                out[k] = [
                    [e[0], roles.get(e[1], e[1]), *e[2:]] if isinstance(e, list) and len(e) > 1 else e
                    for e in x
                ]
            else:
                out[k] = role_view(x, roles) if isinstance(x, (dict, list)) else x
        return out
    if isinstance(v, list):
        first = v[0] if v else None
        if not isinstance(first, (dict, list)) or (
            isinstance(first, list) and first and not isinstance(first[0], (dict, list))
        ):
            return v  # scalars, or rows of scalars (sizes): each list here is of one shape, no group name
        return [role_view(x, roles) for x in v]
    return v


def rank_groups(
    run: Run, roles: dict[str, str] | None = None, by_role: RoleSequences | None = None
) -> list[RankGroup]:
    """The ranks of ``run`` grouped by identical outcomes, in order of their first rank; in a
    mesh (``roles``: :func:`tracekit.analyze.mesh.role_names`), identical up to the group names
    of one role (ranks 0-1 on shard group ``19`` and 2-3 on ``20`` are one group)."""
    groups: dict[tuple, RankGroup] = {}
    canon: dict[tuple, str] = {}  # graph parts by identity (by role in a mesh) -> canonical text
    if roles and (by_role is None or by_role.roles != roles):
        by_role = RoleSequences(roles)
    for r in run.ranks:
        key = (
            r.compiled_graphs,
            r.cache_hits,
            r.compiles,
            r.torch_version,
            tuple(r.compile_ids),
            tuple(map(tuple, r.cache_events)),
            _canon(role_view([final_to_dict(f) for f in r.schedules_without_outcome], roles or {}))
            if r.schedules_without_outcome
            else "",
            tuple(_cached_canon(g, canon, roles, by_role if roles else None) for g in r.graphs),
        )
        grp = groups.get(key)
        if grp is None:
            groups[key] = RankGroup([r.rank], r.graphs, r.compiled_graphs, r.cache_hits, r.compiles, r)
        else:
            grp.ranks.append(r.rank)
    return list(groups.values())


def _cached_canon(
    g: Graph,
    cache: dict[tuple, str],
    roles: dict[str, str] | None = None,
    by_role: RoleSequences | None = None,
) -> tuple[str, int, str]:
    # graphs of identical ranks, and graphs of one rank with equal outcomes, share their
    # values (tracekit.read.pairing interns them): one canonical text per distinct outcome. In
    # a mesh, the graphs of two shard groups differ by their group names only: keyed by role,
    # 512 shard groups' graphs are canonicalized once, not once per group
    k: tuple
    if by_role is None:
        k = stand_ins(g)
    else:
        k = (
            stand_ins_without_groups(g),
            tuple(map(by_role.roles.get, g.fsdp_groups, g.fsdp_groups)),
            None if g.final is None else by_role.number(g.final),
        )
    text = cache.get(k)
    if text is None:
        text = cache[k] = _graph_canon(g, roles)
    return (g.compile_id, g.graph_index, text)


def _canon(v: Any) -> str:
    return orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode()


def first_difference(
    majority: Graph, other: Graph, after_first: bool = False, only_type: str | None = None
) -> dict[str, Any] | None:
    """The first collective where two graphs' recorded sizes differ (before, then after lists;
    the other way round with ``after_first``; only collectives of ``only_type``, e.g. ``"RS"``,
    when given: ``index`` is then the position among them).

    ``{index, type, majority_size_mb, size_mb, list}``: ``list`` is ``"before"`` or ``"after"``;
    on a list that is longer on one side, the missing side's size is None. None when either
    graph has no sizes or they agree."""
    if majority.sizes_mb is None or other.sizes_mb is None:
        return None
    pairs = [("before", majority.sizes_mb.before, other.sizes_mb.before)]
    if majority.sizes_mb.after is not None and other.sizes_mb.after is not None:
        pairs.append(("after", majority.sizes_mb.after, other.sizes_mb.after))
    if after_first:
        pairs.reverse()
    if only_type is not None:
        pairs = [
            (w, [x for x in a if x.type == only_type], [y for y in b if y.type == only_type])
            for w, a, b in pairs
        ]
    for which, a, b in pairs:
        i = first_mismatch(a, b)
        if i is not None:
            x = a[i] if i < len(a) else None
            y = b[i] if i < len(b) else None
            return {
                "index": i,
                "type": (x or y).type  # type: ignore[union-attr]  # one of them is there (a mismatch)
                if (x is None or y is None or x.type == y.type)
                else f"{x.type}/{y.type}",
                "majority_size_mb": None if x is None else x.size_mb,
                "size_mb": None if y is None else y.size_mb,
                "list": which,
            }
    return None


def first_mismatch(a: list[CollectiveSize], b: list[CollectiveSize]) -> int | None:
    """Index of the first collective whose type or size differs (the shorter length when one
    list is a prefix of the other), or None when the lists match."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x.type != y.type or x.size_mb != y.size_mb:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def divergence(
    run: Run, groups: list[RankGroup] | None = None, roles: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """Where ranks differ from the majority, one item per graph, differing group and field.

    Items: ``{compile_id, graph_index, majority_ranks, majority, ranks, field, majority_value,
    value, first_difference}`` (rank lists sorted); ``majority`` is False when no group of
    ranks is larger than every other (a tie): ``majority_ranks`` is then the group of the
    lowest rank, compared with, not blamed, and ``groups`` lists every group's ranks. ``field`` is ``"presence"`` for a graph some ranks
    lack (``value`` ``"absent"``/``"present"``), else a compared value of the graph
    (:func:`tracekit.model.fields.compared_values`). Empty when all ranks agree. Computed on
    :func:`rank_groups` (``groups``, when the caller has them), so 8,192 identical ranks cost
    one comparison. In a mesh (``roles``), values are compared with group names mapped to
    their roles (:func:`role_view`); the values shown are each side's own."""
    if groups is None:
        groups = rank_groups(run, roles)
    if len(run.ranks) < 2 or len(groups) < 2:
        return []
    maps = [(grp.ranks, _graph_map(grp.graphs)) for grp in groups]
    keys: dict[tuple[str, int], None] = {}
    for grp in groups:
        for g in grp.graphs:
            keys.setdefault(g.key, None)
    items: list[dict[str, Any]] = []
    # one sorted list of ranks for every side made of the same groups (the majority of each
    # differing field is one list, not one of 100,000 ranks a field): known by the groups' ids
    lists: dict[tuple[int, ...], list[int | None]] = {}

    def ranks_of(parts: list[list[int | None]]) -> list[int | None]:
        k = tuple(map(id, parts))
        out = lists.get(k)
        if out is None:
            out = lists[k] = sorted((rk for rks in parts for rk in rks), key=rank_order)
        return out

    for key in keys:
        cid, gi = key
        present = ranks_of([rks for rks, m in maps if key in m])
        absent = ranks_of([rks for rks, m in maps if key not in m])
        if absent:
            pa = {"present": present, "absent": absent}
            maj, is_majority = reference(pa)
            minority = "absent" if maj == "present" else "present"
            items.append(
                {
                    "compile_id": cid,
                    "graph_index": gi,
                    "majority_ranks": pa[maj],
                    "majority": is_majority,
                    **({} if is_majority else {"groups": split_groups(pa)}),
                    "ranks": pa[minority],
                    "field": "presence",
                    "majority_value": maj,
                    "value": minority,
                    "first_difference": None,
                }
            )
        holders = [(rks, m[key], compared_values(m[key])) for rks, m in maps if key in m]
        if len(holders) < 2:
            continue
        for fname in holders[0][2]:
            parts: dict[str, list[list[int | None]]] = {}  # the groups of each value
            values: dict[str, Any] = {}
            graphs: dict[str, Graph] = {}
            for rks, g, vals in holders:
                v = vals[fname]
                c = _canon(role_view({fname: v}, roles)[fname] if roles else v)
                parts.setdefault(c, []).append(rks)
                values.setdefault(c, v)
                graphs.setdefault(c, g)
            if len(parts) < 2:
                continue
            by_value = {c: ranks_of(p) for c, p in parts.items()}
            maj, is_majority = reference(by_value)
            split = {} if is_majority else {"groups": split_groups(by_value)}
            for c, rks in by_value.items():
                if c == maj:
                    continue
                items.append(
                    {
                        "compile_id": cid,
                        "graph_index": gi,
                        "majority_ranks": by_value[maj],
                        "majority": is_majority,
                        **split,
                        "ranks": rks,
                        "field": fname,
                        "majority_value": values[maj],
                        "value": values[c],
                        "first_difference": None
                        if fname == "final"
                        else first_difference(
                            graphs[maj],
                            graphs[c],
                            after_first=fname == "sizes_mb.after",
                            only_type=SHORT_NAMES.get(fname),
                        ),  # the final's first difference: schedule_divergence
                    }
                )
    return items


def _graph_map(graphs: list[Graph]) -> dict[tuple[str, int], Graph]:
    return {g.key: g for g in graphs}


def did_nothing(run: Run, groups: list[RankGroup] | None = None) -> list[dict[str, Any]]:
    """Graphs where bucketing merged nothing (N -> N with N > 1), grouped across ranks, then
    the graphs torch never pre-bucketed (:func:`tracekit.analyze.not_prebucketed.not_prebucketed`).

    Items: ``{compile_id, graph_index, types: [...], counts: {type: N}, bucket_cap_mb, ranks:
    [...], explain}``, ``explain`` the command that tells why (:func:`explain_command`). A
    graph never pre-bucketed has ``outcome: "not pre-bucketed"``, ``bucket_cap_mb`` None, its
    ``graph_index`` is its post-grad position, and it adds bytes, estimates and a reason (see
    :func:`tracekit.analyze.not_prebucketed.finding`)."""
    found: dict[tuple[str, int, str], dict[str, Any]] = {}
    if groups is None:
        groups = rank_groups(run)
    for grp in groups:
        for g in grp.graphs:
            types = g.did_nothing()
            if not types:
                continue
            counts = {t: g.collectives[t].before for t in types}
            k = (g.compile_id, g.graph_index, _canon(counts))
            item = found.get(k)
            if item is None:
                item = found[k] = {
                    "compile_id": g.compile_id,
                    "graph_index": g.graph_index,
                    "types": types,
                    "counts": counts,
                    "bucket_cap_mb": g.bucket_cap_mb,
                    "ranks": [],
                }
            item["ranks"] += grp.ranks
    items = list(found.values()) + not_prebucketed(groups)
    for item in items:
        item["ranks"].sort(key=rank_order)
        item["explain"] = explain_command(run.paths, item["ranks"], item["compile_id"], item["graph_index"])
    return items


def explain_command(paths: list[str], ranks: list[int | None], compile_id: str, graph_index: int) -> str:
    """The ``tracekit explain`` command that says why a graph's collectives were not merged."""
    import shlex

    named = [r for r in ranks if r is not None]
    rank = f" --rank {min(named)}" if named else ""
    return (
        f"tracekit explain {' '.join(shlex.quote(p) for p in paths)}{rank} --graph {compile_id}:{graph_index}"
    )


def _with_ranges(items: list[dict[str, Any]], *keys: str) -> list[dict[str, Any]]:
    """The items with their rank lists written as ranges (``0-299,301-1023``)."""
    return [{**it, **{k: format_ranks(it[k]) for k in keys}} for it in items]


def group_to_dict(
    grp: RankGroup, memo: DumpMemo | None = None, mesh: list[MeshGroup] | None = None
) -> dict[str, Any]:
    """A rank group in the document: its ranks as ranges, and its graphs without where each
    rank's log had them (``file``, ``line``: see ``--per-rank``). In a mesh (``mesh``), a
    group's ranks may use several groups of one role: each graph then also has
    ``mesh_fsdp_groups``, the shard groups of the group's ranks (``["19", "20"]``)."""
    where = {f.name for f in GRAPH_FIELDS if f.kind == "where"}
    extra: dict[str, Any] = {}
    if mesh:
        ranks = set(grp.ranks)
        shard = [g.name for g in mesh if g.role == "shard" and ranks.intersection(g.members)]
        if len(shard) > 1:
            extra["mesh_fsdp_groups"] = shard
    per_rank = rank_to_dict(dataclasses.replace(grp.rank, graphs=[]))
    return {
        "ranks": format_ranks(grp.ranks),
        "count": len(grp.ranks),
        **{
            k: per_rank[k]
            for k in (
                "compiles",
                "compiled_graphs",
                "cache_hits",
                "torch_version",
                "compile_ids",
                "cache_events",
                "schedules_without_outcome",
            )
        },
        "graphs": [
            {k: v for k, v in graph_to_dict(g, memo).items() if k not in where}
            | (extra if g.fsdp_groups else {})
            for g in grp.graphs
        ],
    }


@gc_paused()
def summary_findings(run: Run, *, per_rank: bool = False, with_ranks: bool = True) -> dict[str, Any]:
    """The ``tracekit.summary/2`` document of a Run, its verdict and notes as data (a
    :class:`~tracekit.model.findings.Verdict`, :class:`~tracekit.model.findings.Finding` s, said by
    :func:`tracekit.render.summary_document.summary_document`): world, verdict, rank groups (ranks
    with identical outcomes), totals, divergence, did-nothing graphs, notes, diagnostics; rank
    sets as ranges. ``per_rank``: also ``ranks``, one entry per rank with its files and where each
    graph was read (``with_ranks=False`` leaves it to
    :func:`tracekit.render.summary_json.write_summary_json`).

    The cyclic collector is paused meanwhile (:func:`bucketing.gc_pause.gc_paused`, as for the
    read): the checks make many small objects and no cycles, and its passes over the Run's
    objects found nothing (a 1,024-rank HSDP mesh: 16 passes, 11% of the summary)."""
    mesh = mesh_groups(run)
    roles = role_names(mesh) if is_mesh(mesh) else {}
    by_role = RoleSequences(roles) if roles else None  # each final's sequence by role, made once
    groups = rank_groups(run, roles, by_role)
    memo = DumpMemo()  # values shared between graphs: one JSON form each
    t = totals(run)
    # a cut log is compared only on what it logged (tracekit.analyze.cut_logs), a log that ends
    # after a whole compile, short of its peers', too; in a mesh, group names are compared by
    # role (tracekit.analyze.mesh.role_names)
    raw = (divergence(run, groups, roles), schedule_divergence(run, mesh, by_role), compile_divergence(run))
    run = with_logs_that_end_early(run, [d for items in raw for d in items])
    w = world(run)
    div, sched, comp = (compared_items(items, run) for items in raw)
    dn = did_nothing(run, groups)
    unb = mesh_not_prebucketed([(g.ranks, g.graphs) for g in groups], mesh) if roles else []
    once = mesh_run_once([(g.ranks, g.graphs) for g in groups], mesh) if roles else []
    facts = run_facts(run, (g for grp in groups for g in grp.graphs), no_outcome=t["graphs"] == 0)
    facts = dataclasses.replace(facts, readings=shorter_logs(run, comp))  # more compiles, or cut logs
    v = verdict(facts, w, div, t, sched + comp, dn, unb)
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "paths": list(run.paths),
        "world": w,
        **({"mesh": mesh_document(w["expected"], mesh, logs_schedules(run))} if is_mesh(mesh) else {}),
        "verdict": v,  # said by tracekit.render.summary_document
        "groups": [group_to_dict(g, memo, mesh if roles else None) for g in groups],
        "totals": table_totals(t, dn),  # the outcome table's, graphs never pre-bucketed included
        "divergence": _with_ranges(div, "ranks", "majority_ranks"),
        "schedule_divergence": sched,
        "compile_divergence": comp,
        "did_nothing": _with_ranges(dn, "ranks"),
        **({"mesh_not_prebucketed": unb} if roles else {}),
        **({"mesh_run_once": once} if once else {}),  # no finding: said, not counted
        "notes": notes(run, t),  # said by tracekit.render.summary_document
        "diagnostics": run.diagnostics.to_dict(),
    }
    events = breaks_and_recompiles(run)
    if events:  # graph breaks and recompiles, outcomes or not (none: no key, as before)
        doc["breaks_and_recompiles"] = events
    if t["graphs"] == 0:  # what the logs hold instead: the frames dynamo compiled
        regions = compiled_regions(run)
        if regions is not None:
            doc["compiled_regions"] = regions
    if per_rank and with_ranks:
        doc["ranks"] = [rank_to_dict(r) for r in run.ranks]
    return doc
