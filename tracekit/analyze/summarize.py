"""Per-rank model -> summary: rank groups, totals, rank consensus/divergence, world, verdict.

Pure functions of a :class:`tracekit.model.Run`; nothing here reads a file or formats text.

- :func:`rank_groups`: ranks whose graphs are identical, as groups (1,024 identical ranks are
  one group); every analysis below works on groups, so its cost grows with distinct outcomes.
- :func:`divergence`: where the ranks' bucketing outcomes differ from the majority, graph by
  graph and field by field, with the first differing collective.
- :func:`totals`, :func:`did_nothing`, :func:`notes`, :func:`verdict`.
- :func:`summary_document` (the ``tracekit.summary/2`` JSON document: groups by default, per
  rank with ``per_rank=True``) and :func:`run_from_document` (back to a Run, for diff; reads
  ``tracekit.summary/1`` too).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from bucketing.compat import TESTED_TORCH
from bucketing.gc_pause import gc_paused
from tracekit.analyze.compiled_regions import compiled_regions, failures_text, fsdp2_text, no_collective_text
from tracekit.analyze.cut import compared_items, cut_text, with_logs_that_end_early
from tracekit.analyze.mesh import MeshGroup, RoleSequences, is_mesh, mesh_document, mesh_groups, role_names
from tracekit.analyze.mesh_not_prebucketed import (
    mesh_not_prebucketed,
    mesh_not_prebucketed_text,
    mesh_run_once,
)
from tracekit.analyze.not_prebucketed import counts_text, not_prebucketed, table_totals, unmerged_kinds
from tracekit.analyze.schedule import compile_divergence, reference, schedule_divergence, split_groups
from tracekit.model import COLLECTIVE_TYPES, SHORT_NAMES, CollectiveSize, Diagnostics, Graph, Rank, Run
from tracekit.model.fields import (
    GRAPH_FIELDS,
    compared_values,
    graph_to_dict,
    rank_from_dict,
    rank_to_dict,
    stand_ins,
    stand_ins_without_groups,
)
from tracekit.model.json_forms import DumpMemo, final_to_dict
from tracekit.model.rankset import format_ranks, rank_members
from tracekit.model.words import rank_noun
from tracekit.model.world import world

SCHEMA = "tracekit.summary/2"

#: Releases whose logs tracekit was tested on (``2.13``, ``2.14``, ``2.15``): each logs a
#: ``before_post_grad_graph`` for every graph inductor compiles.
TESTED_RELEASES = tuple(".".join(v.split(".")[:2]) for v in TESTED_TORCH)


def graph_label(graph_index: int | None) -> str:
    """``forward`` for the first outcome of a compile id, ``backward`` for the second, then N."""
    labels: dict[int | None, str] = {0: "forward", 1: "backward"}
    return labels.get(graph_index, str(graph_index))


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
    by its role (:func:`tracekit.model.mesh.role_names`): ``fsdp_groups`` entries, ``group``
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
    mesh (``roles``: :func:`tracekit.model.mesh.role_names`), identical up to the group names
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


def _rank_order(r: int | None) -> int:
    return -1 if r is None else r


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
            out = lists[k] = sorted((rk for rks in parts for rk in rks), key=_rank_order)
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


def _sum_sizes(graphs: list[Graph], after: bool) -> float | None:
    total, any_ = 0.0, False
    for g in graphs:
        if g.sizes_mb is None:
            continue
        lst = g.sizes_mb.after if after else g.sizes_mb.before
        if lst is None:
            continue
        any_ = True
        total += sum(s.size_mb for s in lst)
    return round(total, 3) if any_ else None


def totals(run: Run) -> dict[str, Any]:
    """Counts over every rank's pre-bucketing outcomes: graphs, collectives before/after, MB
    before/after, counters (the document's ``totals`` add the graphs never pre-bucketed:
    :func:`tracekit.analyze.not_prebucketed.table_totals`)."""
    graphs = [g for r in run.ranks for g in r.graphs]
    return {
        "ranks": len(run.ranks),
        "graphs": len(graphs),
        "compiles": sum(r.compiles for r in run.ranks),
        "compiled_graphs": sum(r.compiled_graphs for r in run.ranks),
        "cache_hits": sum(r.cache_hits for r in run.ranks),
        "collectives": {
            t: {
                "before": sum(g.collectives[t].before for g in graphs if t in g.collectives),
                "after": sum(g.collectives[t].after for g in graphs if t in g.collectives),
            }
            for t in COLLECTIVE_TYPES
        },
        "mb_before": _sum_sizes(graphs, after=False),
        "mb_after": _sum_sizes(graphs, after=True),
        "did_nothing": sum(1 for g in graphs if g.did_nothing()),
        # graphs torch never pre-bucketed (tracekit.analyze.not_prebucketed), one per rank and graph
        "not_prebucketed": sum(
            1 for r in run.ranks for f in r.schedules_without_outcome if unmerged_kinds(f)
        ),
    }


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
        item["ranks"].sort(key=_rank_order)
        item["explain"] = explain_command(run.paths, item["ranks"], item["compile_id"], item["graph_index"])
    return items


def findings_text(dn: list[dict[str, Any]]) -> str:
    """The verdict's finding for graphs never pre-bucketed (``dn``: :func:`did_nothing`'s
    items), e.g. ``FINDING: 1 graph not pre-bucketed (0/0 backward on ranks 0-3: 8
    reduce-scatters, ...)``; empty when there is none."""
    items = [d for d in dn if d.get("outcome") == "not pre-bucketed"]
    if not items:
        return ""
    keys = {(d["compile_id"], d["graph_index"]) for d in items}
    what = "; ".join(
        f"{d['compile_id']} {graph_label(d['graph_index'])} on {rank_noun(format_ranks(d['ranks']))} {format_ranks(d['ranks'])}: "
        f"{counts_text(d)}, run one by one"
        for d in items[:3]
    )
    more = f"; and {len(items) - 3} more" if len(items) > 3 else ""
    n = len(keys)
    return (
        f"FINDING: {n} graph{'s' if n != 1 else ''} never pre-bucketed ({what}{more}); "
        "see Bucketing did nothing"
    )


def explain_command(paths: list[str], ranks: list[int | None], compile_id: str, graph_index: int) -> str:
    """The ``tracekit explain`` command that says why a graph's collectives were not merged."""
    import shlex

    named = [r for r in ranks if r is not None]
    rank = f" --rank {min(named)}" if named else ""
    return (
        f"tracekit explain {' '.join(shlex.quote(p) for p in paths)}{rank} --graph {compile_id}:{graph_index}"
    )


def notes(run: Run, t: dict[str, Any] | None = None) -> list[str]:
    """Plain-language remarks, true to what the logs hold: e.g. why a run has no bucketing
    outcome at all (``t``: the run's :func:`totals`, when the caller has them already)."""
    out: list[str] = []
    if t is None:
        t = totals(run)
    if not run.ranks and run.unplaced:
        k = len(run.unplaced)
        out.append(f"no rank read: {k} file{'s are' if k != 1 else ' is'} no rank log (see Diagnostics)")
    elif not run.ranks:
        out.append("no log entries read")
    elif t["graphs"] == 0:
        if t["cache_hits"]:
            out.append(
                f"no bucketing recorded: {_graphs_were(t['cache_hits'])} inductor cache hits "
                "(the cache skips the post-grad passes); re-run with caches disabled "
                "(torch._inductor.config.force_disable_caches = True)"
            )
        elif t["compiled_graphs"] and _no_collective(run):
            out += _no_collective(run)
        elif t["compiled_graphs"]:
            out.append(
                f"no bucketing recorded: {t['compiled_graphs']} graph{'' if t['compiled_graphs'] == 1 else 's'} went through the post-grad "
                "passes without FSDP collectives pre-bucketing (is "
                "aten_distributed_optimizations.enable_overlap_scheduling on, and are the "
                "all-gathers FSDP ones?)"
            )
        elif t["compiles"]:
            versions = sorted({r.torch_version for r in run.ranks if r.torch_version})
            head = (
                f"no bucketing recorded: {t['compiles']} compile{' was' if t['compiles'] == 1 else 's were'} "
                "logged, but no graph reached the post-grad passes' log (no before_post_grad_graph): "
            )
            if versions and all(
                v.startswith(TESTED_RELEASES) for v in versions
            ):  # the tested releases log them: the compiles stopped
                why = (
                    f"torch {', '.join(versions)} logs one for every graph inductor compiles, so the compiles "
                    "stopped before inductor's post-grad passes (an error, a graph break with nothing to "
                    "compile, or another backend)"
                )
            else:
                torch = (
                    f"torch {', '.join(versions)}" if versions else "a torch that does not say its version"
                )
                why = (
                    f"{torch} may not log them (tracekit reads the logs of torch {', '.join(TESTED_RELEASES)}), "
                    "or the compiles stopped before inductor"
                )
            out.append(head + why)
        else:
            out.append(
                "no bucketing recorded: the logs hold no compile (no dynamo_start entry); "
                "were they written with TORCH_TRACE set?"
            )
        out += _failure_notes(run)
    elif t["cache_hits"]:
        out.append(
            f"{_graphs_were(t['cache_hits'])} inductor cache hits and have no bucketing record; "
            "re-run with caches disabled to see them"
        )
    return out


def _no_collective(run: Run) -> list[str]:
    """The notes of a run whose compiled graphs hold no collective (:mod:`tracekit.analyze.compiled_regions`):
    that, and what FSDP2's graph breaks say; empty when some graph holds one."""
    regions = compiled_regions(run)
    text = None if regions is None else no_collective_text(regions)
    if regions is None or text is None:
        return []
    fsdp2 = fsdp2_text(regions)
    return [f"no bucketing recorded: {text}; see Compiled regions"] + ([fsdp2] if fsdp2 else [])


def _failure_notes(run: Run) -> list[str]:
    """One note on the frame compiles that failed, when some did (:func:`tracekit.analyze.compiled_regions.failures_text`)."""
    regions = compiled_regions(run)
    text = None if regions is None else failures_text(regions)
    return [f"{text}; see Compiled regions"] if text else []


def why_no_outcome(run: Run) -> str:
    """Why ``run`` gives replay or explain no recorded bucketing outcome to work on: the cause
    :func:`notes` finds (cache hits, no FSDP pre-bucketing, an older torch, no compile)."""
    all_notes = notes(run)
    found = [n for n in all_notes if n.startswith(("no bucketing recorded", "no rank read", "no log"))]
    if found:
        # summarize's section, named as the command that has it; FSDP2's reason said with it
        fsdp2 = [n for n in all_notes if n.startswith("FSDP2")]
        return "; ".join(
            [
                found[0].replace("; see Compiled regions", "; see Compiled regions in tracekit summarize"),
                *fsdp2,
            ]
        )
    return (
        "no recorded pre_bucketing_fsdp_collectives outcome matched the selection "
        "(--rank, --graph): see tracekit summarize for the graphs there are"
    )


def verdict(
    run: Run,
    w: dict[str, Any],
    div: list[dict[str, Any]],
    t: dict[str, Any],
    other: Sequence[dict[str, Any]] = (),
    dn: Sequence[dict[str, Any]] = (),
) -> dict[str, str]:
    """``{status, text}``: ``status`` is ``diverge`` (ranks differ: ``div``, the bucketing
    outcome, or ``other``, the schedule and compile-id divergence items, their ``ranks`` as
    ranges), ``incomplete`` (ranks missing or seen in two runs), ``agree`` or ``no_data``;
    ``text`` one line, printed first; a divergence also has ``sections``, the document keys
    whose items prove it (``divergence``, ``schedule_divergence``, ``compile_divergence``).
    Graphs never pre-bucketed (``dn``, :func:`did_nothing`'s items) add ``findings`` (their
    count) and a FINDING to the text, whatever the status."""
    v = _verdict(run, w, div, t, other, dn)
    found = findings_text(list(dn))
    if found:
        v["text"] += "; " + found
        v["findings"] = len({(d["compile_id"], d["graph_index"]) for d in dn if d.get("outcome")})
    return v


def _in_groups(items: Sequence[dict[str, Any]]) -> str:
    """Where, in a mesh, the blamed ranks first differ: `` inside shard group 4 (members
    2-3)``; empty outside a mesh (schedule items without ``group``)."""
    where = sorted({(d.get("role") or "", d["group"], d.get("peers") or "") for d in items if d.get("group")})
    if not where:
        return ""
    return " inside " + ", ".join(f"{(r + ' ') if r else ''}group {g} (members {p})" for r, g, p in where)


def _verdict(
    run: Run,
    w: dict[str, Any],
    div: list[dict[str, Any]],
    t: dict[str, Any],
    other: Sequence[dict[str, Any]],
    dn: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    n = len(run.ranks)
    incomplete = []
    if w["missing"]:
        incomplete.append(f"{w['missing_count']} of {w['expected']} ranks missing ({w['missing']})")
    if w["duplicated"]:
        incomplete.append(
            f"{rank_noun(w['duplicated'])} {w['duplicated']} also found in another run (not merged)"
        )
    if w.get("unplaced"):
        k = len(w["unplaced"])
        incomplete.append(f"{k} file{'s' if k != 1 else ''} read as no rank (see Diagnostics)")
    cut = cut_text(run)
    if cut:
        incomplete.append(cut)
    tail = "; " + "; ".join(incomplete) if incomplete else ""
    if div or other:
        items = [*div, *other]

        def members(d: dict[str, Any], key: str = "ranks") -> list[int | None]:
            v = d[key]
            return rank_members(v) if isinstance(v, str) else v

        def on(graph_keys: set) -> str:
            n = len(graph_keys)
            return f"on {n} graph{'s' if n != 1 else ''}" if n else "in what they compiled"

        parts = []
        blamed = [d for d in items if d.get("majority", True)]
        if blamed:
            odd = {r for d in blamed for r in members(d)}
            graphs = {(d["compile_id"], d["graph_index"]) for d in blamed if "graph_index" in d}
            parts.append(
                f"{len(odd)} of {n} ranks ({format_ranks(odd)}) differ from the majority {on(graphs)}"
                + _in_groups(blamed)
            )
        splits: dict[tuple[str, ...], set] = {}
        for d in items:
            if not d.get("majority", True):
                splits.setdefault(tuple(d["groups"]), set()).add(
                    (d.get("compile_id"), d.get("graph_index")) if "graph_index" in d else None
                )
        for groups, keys in splits.items():
            parts.append(
                f"ranks split into {len(groups)} groups with no majority ({'; '.join(groups)}) "
                f"{on({k for k in keys if k is not None})}"
            )
        proof = [
            k
            for k, v in (
                ("divergence", div),
                ("schedule_divergence", [d for d in other if "graph_index" in d]),
                ("compile_divergence", [d for d in other if "what" in d]),
            )
            if v
        ]
        return {"status": "diverge", "text": "DIVERGE: " + "; ".join(parts) + tail, "sections": proof}
    if t["graphs"] == 0:
        regions = compiled_regions(run)
        none_held = regions is not None and no_collective_text(regions)
        fsdp2 = (
            " (FSDP2: its collectives run in eager code)"
            if none_held and regions and regions["fsdp2_breaks"]
            else ""
        )
        return {
            "status": "no_data",
            "text": "NO DATA: no bucketing outcome in the logs"
            + ("; no compiled graph holds a collective" + fsdp2 if none_held else "")
            + (
                f"; {regions['failed']} frame compile{' failed' if regions['failed'] == 1 else 's failed'}"
                if regions is not None and regions["failed"]
                else ""
            )
            + tail,
            "sections": (["compiled_regions"] if regions is not None else [])
            + ["notes"]
            + (["world"] if incomplete else []),
        }
    if incomplete:
        agree = "agree on what all of them logged" if cut else "agree"
        return {
            "status": "incomplete",
            "text": (f"INCOMPLETE: the {n} ranks found {agree}" if n != 1 else "INCOMPLETE: one rank found")
            + tail,
            # "see Diagnostics" only where it shows the cause
            "sections": ["world"] + (["diagnostics"] if run.diagnostics.total else []),
        }
    ngraphs = len(
        {g.key for r in run.ranks for g in r.graphs}
        | {(d["compile_id"], ("schedule", d["graph_index"])) for d in dn if d.get("outcome")}
    )
    news = nothing_merged_text(run, t)
    if n == 1:
        return {
            "status": "agree",
            "text": f"OK: one rank, {ngraphs} graph{'s' if ngraphs != 1 else ''}" + news,
        }
    which = f"all {ngraphs} graphs" if ngraphs != 1 else "1 graph"
    return {"status": "agree", "text": f"OK: all {n} ranks agree on {which}" + news}


def _graphs_were(n: int) -> str:
    """``1 graph was`` / ``3 graphs were``."""
    return f"{n} graph was" if n == 1 else f"{n} graphs were"


def nothing_merged_text(run: Run, t: dict[str, Any]) -> str:
    """The verdict's news when pre-bucketing merged no collective in any graph it ran on (every
    count N -> N), e.g. ``; NOTHING MERGED: pre-bucketing merged no collective in any graph
    (cap 0.001 MB); see Bucketing did nothing``; empty when some graph merged some, or there is
    no collective to merge."""
    c = t["collectives"]
    if not t["graphs"] or not any(v["before"] for v in c.values()):
        return ""
    if any(v["before"] != v["after"] for v in c.values()):
        return ""
    caps = sorted({g.bucket_cap_mb for r in run.ranks for g in r.graphs})
    cap = "cap " + ", ".join(f"{x:.6g}" for x in caps[:3]) + (", ..." if len(caps) > 3 else "") + " MB"
    return f"; NOTHING MERGED: pre-bucketing merged no collective in any graph ({cap}); see Bucketing did nothing"


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
def summary_document(run: Run, *, per_rank: bool = False, with_ranks: bool = True) -> dict[str, Any]:
    """The ``tracekit.summary/2`` JSON document of a Run: world, verdict, rank groups (ranks with
    identical outcomes), totals, divergence, did-nothing graphs, notes, diagnostics; rank sets
    as ranges. ``per_rank``: also ``ranks``, one entry per rank with its files and where each
    graph was read (``with_ranks=False`` leaves it to :func:`write_summary_json`).

    The cyclic collector is paused meanwhile (:func:`bucketing.gc_pause.gc_paused`, as for the
    read): the checks make many small objects and no cycles, and its passes over the Run's
    objects found nothing (a 1,024-rank HSDP mesh: 16 passes, 11% of the summary)."""
    mesh = mesh_groups(run)
    roles = role_names(mesh) if is_mesh(mesh) else {}
    by_role = RoleSequences(roles) if roles else None  # each final's sequence by role, made once
    groups = rank_groups(run, roles, by_role)
    memo = DumpMemo()  # values shared between graphs: one JSON form each
    t = totals(run)
    # a cut log is compared only on what it logged (tracekit.analyze.cut), a log that ends
    # after a whole compile, short of its peers', too; in a mesh, group names are compared by
    # role (tracekit.model.mesh.role_names)
    raw = (divergence(run, groups, roles), schedule_divergence(run, mesh, by_role), compile_divergence(run))
    run = with_logs_that_end_early(run, [d for items in raw for d in items])
    w = world(run)
    div, sched, comp = (compared_items(items, run) for items in raw)
    dn = did_nothing(run, groups)
    unb = mesh_not_prebucketed([(g.ranks, g.graphs) for g in groups], mesh) if roles else []
    once = mesh_run_once([(g.ranks, g.graphs) for g in groups], mesh) if roles else []
    v: dict[str, Any] = verdict(run, w, div, t, sched + comp, dn)
    if unb:
        v["text"] += "; " + mesh_not_prebucketed_text(unb)
        v["mesh_findings"] = len(unb)
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "paths": list(run.paths),
        "world": w,
        **({"mesh": mesh_document(w["expected"], mesh)} if is_mesh(mesh) else {}),
        "verdict": v,
        "groups": [group_to_dict(g, memo, mesh if roles else None) for g in groups],
        "totals": table_totals(t, dn),  # the outcome table's, graphs never pre-bucketed included
        "divergence": _with_ranges(div, "ranks", "majority_ranks"),
        "schedule_divergence": sched,
        "compile_divergence": comp,
        "did_nothing": _with_ranges(dn, "ranks"),
        **({"mesh_not_prebucketed": unb} if roles else {}),
        **({"mesh_run_once": once} if once else {}),  # no finding: said, not counted
        "notes": notes(run, t),
        "diagnostics": run.diagnostics.to_dict(),
    }
    if t["graphs"] == 0:  # what the logs hold instead: the frames dynamo compiled
        regions = compiled_regions(run)
        if regions is not None:
            doc["compiled_regions"] = regions
    if per_rank and with_ranks:
        doc["ranks"] = [rank_to_dict(r) for r in run.ranks]
    return doc


def write_summary_json(
    run: Run, write: Callable[[bytes], Any], *, per_rank: bool = False, head: dict[str, Any] | None = None
) -> None:
    """Write :func:`summary_document` as pretty JSON (sorted keys, 2-space indent, trailing
    newline: the same text as ``render.dumps_json(summary_document(run, per_rank=...))``). The
    graph lists (of each group, and with ``per_rank`` of each rank) are written one graph at a
    time, so memory holds neither the text of the whole document nor, for ``ranks``, its dicts:
    that of the Run, plus one graph's text. ``head``: the document without ``ranks``, when the
    caller has it already."""
    opt = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
    memo = DumpMemo()

    def dump(value: Any, indent: int) -> None:
        text = orjson.dumps(value, option=opt)
        write(text.replace(b"\n", b"\n" + b" " * indent) if indent and b"\n" in text else text)

    def items(values: list[Any], indent: int, each: Callable[[Any, int], None]) -> None:
        if not values:
            write(b"[]")
            return
        write(b"[\n")
        pad = b" " * (indent + 2)
        for i, v in enumerate(values):
            write(pad)
            each(v, indent + 2)
            write(b",\n" if i < len(values) - 1 else b"\n")
        write(b" " * indent + b"]")

    def obj(d: dict[str, Any], indent: int, special: dict[str, Callable[[Any, int], None]]) -> None:
        keys = sorted(d)
        write(b"{\n")
        pad = b" " * (indent + 2)
        for i, k in enumerate(keys):
            write(pad + orjson.dumps(k) + b": ")
            (special.get(k) or dump)(d[k], indent + 2)
            write(b",\n" if i < len(keys) - 1 else b"\n")
        write(b" " * indent + b"}")

    def graph_list(graphs: list[Any], indent: int) -> None:
        items(graphs, indent, lambda g, ind: dump(g if isinstance(g, dict) else graph_to_dict(g, memo), ind))

    def group(grp: dict[str, Any], indent: int) -> None:
        obj(grp, indent, {"graphs": graph_list})

    def rank(r: Rank, indent: int) -> None:
        rd = rank_to_dict(dataclasses.replace(r, graphs=[]))
        rd["graphs"] = r.graphs  # Graph objects: dumped one at a time
        obj(rd, indent, {"graphs": graph_list})

    if head is None:
        head = summary_document(run, per_rank=per_rank, with_ranks=False)
    top = dict(head)
    if per_rank:
        top["ranks"] = run.ranks
    obj(
        top,
        0,
        {"groups": lambda gs, ind: items(gs, ind, group), "ranks": lambda rs, ind: items(rs, ind, rank)},
    )
    write(b"\n")


class DocumentError(ValueError):
    """A JSON document that is not a ``tracekit.summary`` document."""


def run_from_document(doc: Any) -> Run:
    """A Run back from a ``tracekit.summary/1`` or ``/2`` document (graphs, counters,
    diagnostics): per-rank entries when the document has them, else every rank of every group
    (``/2``'s default), each with the group's graphs."""
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith("tracekit.summary/"):
        raise DocumentError("not a tracekit.summary document (no 'schema': 'tracekit.summary/2')")
    try:
        if doc.get("ranks") is not None or "groups" not in doc:
            ranks = [rank_from_dict(r) for r in doc.get("ranks") or []]
        else:
            ranks = []
            for grp in doc["groups"]:
                for rk in rank_members(str(grp["ranks"])):
                    ranks.append(rank_from_dict({**grp, "rank": rk, "files": []}))
            ranks.sort(key=lambda r: (r.rank is None, _rank_order(r.rank)))
        diag = Diagnostics()
        d = doc.get("diagnostics") or {}
        diag.counts = {str(k): int(v) for k, v in (d.get("counts") or {}).items()}
        diag.examples = list(d.get("examples") or [])
    except (KeyError, TypeError, ValueError) as e:
        raise DocumentError(f"malformed summary document: {e}") from None
    w = doc.get("world") or {}
    dup_v = w.get("duplicated") or []
    try:
        dup: list[int | None] = [
            r for r in (rank_members(dup_v) if isinstance(dup_v, str) else dup_v) if isinstance(r, int)
        ]
    except (TypeError, ValueError):
        raise DocumentError("malformed summary document: world.duplicated is not a rank set") from None
    return Run(paths=list(doc.get("paths", [])), ranks=ranks, diagnostics=diag, duplicated=dup)
