"""Per-rank model -> summary: totals, rank consensus/divergence, graphs where bucketing did nothing.

Pure functions of a :class:`tracekit.model.Run`; nothing here reads a file or formats text.

- :func:`divergence`: where the ranks' bucketing outcomes differ from
  the majority, graph by graph and field by field, with the first differing collective. Reusable
  on any Run (diff uses it on runs read from logs or from summary JSON).
- :func:`totals`, :func:`did_nothing`, :func:`notes`.
- :func:`summary_document` (the ``tracekit.summary/1`` JSON document) and
  :func:`run_from_document` (back to a Run, for diff).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from tracekit.model import (
    COLLECTIVE_TYPES,
    SHORT_NAMES,
    CollectiveSize,
    Diagnostics,
    Graph,
    Rank,
    Run,
    graph_to_dict,
    rank_from_dict,
    rank_to_dict,
)

SCHEMA = "tracekit.summary/1"

#: The fields compared across ranks, in report order: name -> value of a graph (JSON-able).
FIELDS: dict[str, Callable[[Graph], Any]] = {
    "fsdp_groups": lambda g: list(g.fsdp_groups),
    "group_size": lambda g: g.group_size,
    "n_nodes": lambda g: g.n_nodes,
    "bucket_cap_mb": lambda g: g.bucket_cap_mb,
    **{
        t: (lambda g, t=t: {"before": g.collectives[t].before, "after": g.collectives[t].after}
            if t in g.collectives else None)
        for t in COLLECTIVE_TYPES
    },
    "sizes_mb.before": lambda g: None if g.sizes_mb is None else _sizes_value(g.sizes_mb.before),
    "sizes_mb.after": lambda g: None
    if g.sizes_mb is None or g.sizes_mb.after is None
    else _sizes_value(g.sizes_mb.after),
    "source": lambda g: g.source,
}


def _sizes_value(sizes: list[CollectiveSize]) -> list[list[Any]]:
    return [[s.type, s.size_mb] for s in sizes]


def graph_label(graph_index: int) -> str:
    """``forward`` for the first outcome of a compile id, ``backward`` for the second, then N."""
    return {0: "forward", 1: "backward"}.get(graph_index, str(graph_index))


def graph_keys(run: Run) -> list[tuple[str, int]]:
    """Every (compile_id, graph_index) of any rank, in first-seen order."""
    seen: dict[tuple[str, int], None] = {}
    for r in run.ranks:
        for g in r.graphs:
            seen.setdefault(g.key, None)
    return list(seen)


def _graph_map(rank: Rank) -> dict[tuple[str, int], Graph]:
    return {g.key: g for g in rank.graphs}


def _majority(groups: dict[str, list[int | None]]) -> str:
    """The value key held by most ranks; ties go to the group with the lowest rank."""
    return max(groups, key=lambda k: (len(groups[k]), -min(_rank_order(r) for r in groups[k])))


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
        pairs = [(w, [x for x in a if x.type == only_type], [y for y in b if y.type == only_type])
                 for w, a, b in pairs]
    for which, a, b in pairs:
        i = first_mismatch(a, b)
        if i is not None:
            x = a[i] if i < len(a) else None
            y = b[i] if i < len(b) else None
            return {
                "index": i,
                "type": (x or y).type if (x is None or y is None or x.type == y.type) else f"{x.type}/{y.type}",
                "majority_size_mb": None if x is None else x.size_mb,
                "size_mb": None if y is None else y.size_mb,
                "list": which,
            }
    return None


def first_mismatch(a: list[CollectiveSize], b: list[CollectiveSize]) -> int | None:
    """Index of the first collective whose type or size differs (the shorter length when one
    list is a prefix of the other), or None when the lists match."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x.type != y.type or x.size_mb != y.size_mb:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def divergence(run: Run) -> list[dict[str, Any]]:
    """Where ranks differ from the majority, one item per graph, differing group and field.

    Items: ``{compile_id, graph_index, majority_ranks, ranks, field, majority_value, value,
    first_difference}``. ``field`` is ``"presence"`` for a graph some ranks lack (``value``
    ``"absent"``/``"present"``), else one of :data:`FIELDS`. Empty when all ranks agree.
    """
    maps = [(r.rank, _graph_map(r)) for r in run.ranks]
    if len(maps) < 2:
        return []
    items: list[dict[str, Any]] = []
    for key in graph_keys(run):
        cid, gi = key
        present = [rk for rk, m in maps if key in m]
        absent = [rk for rk, m in maps if key not in m]
        if absent:
            groups = {"present": present, "absent": absent}
            maj = _majority(groups)
            minority = "absent" if maj == "present" else "present"
            items.append(
                {
                    "compile_id": cid,
                    "graph_index": gi,
                    "majority_ranks": groups[maj],
                    "ranks": groups[minority],
                    "field": "presence",
                    "majority_value": maj,
                    "value": minority,
                    "first_difference": None,
                }
            )
        holders = [(rk, m[key]) for rk, m in maps if key in m]
        if len(holders) < 2:
            continue
        for fname, get in FIELDS.items():
            groups: dict[str, list[int | None]] = {}
            values: dict[str, Any] = {}
            graphs: dict[str, Graph] = {}
            for rk, g in holders:
                v = get(g)
                c = _canon(v)
                groups.setdefault(c, []).append(rk)
                values.setdefault(c, v)
                graphs.setdefault(c, g)
            if len(groups) < 2:
                continue
            maj = _majority(groups)
            for c, rks in groups.items():
                if c == maj:
                    continue
                items.append(
                    {
                        "compile_id": cid,
                        "graph_index": gi,
                        "majority_ranks": groups[maj],
                        "ranks": rks,
                        "field": fname,
                        "majority_value": values[maj],
                        "value": values[c],
                        "first_difference": first_difference(
                            graphs[maj], graphs[c], after_first=fname == "sizes_mb.after",
                            only_type=SHORT_NAMES.get(fname),
                        ),
                    }
                )
    return items


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
    """Counts over every rank: graphs, collectives before/after, MB before/after, counters."""
    graphs = [g for r in run.ranks for g in r.graphs]
    return {
        "ranks": len(run.ranks),
        "graphs": len(graphs),
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
    }


def did_nothing(run: Run) -> list[dict[str, Any]]:
    """Graphs where bucketing merged nothing (N -> N with N > 1), grouped across ranks.

    Items: ``{compile_id, graph_index, types: [...], counts: {type: N}, ranks: [...], explain}``,
    ``explain`` the command that tells why (:func:`explain_command`)."""
    found: dict[tuple[str, int, str], dict[str, Any]] = {}
    for r in run.ranks:
        for g in r.graphs:
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
            item["ranks"].append(r.rank)
    for item in found.values():
        item["explain"] = explain_command(run.paths, item["ranks"], item["compile_id"], item["graph_index"])
    return list(found.values())


def explain_command(paths: list[str], ranks: list[int | None], compile_id: str, graph_index: int) -> str:
    """The ``tracekit explain`` command that says why a graph's collectives were not merged."""
    import shlex

    named = [r for r in ranks if r is not None]
    rank = f" --rank {min(named)}" if named else ""
    return f"tracekit explain {' '.join(shlex.quote(p) for p in paths)}{rank} --graph {compile_id}:{graph_index}"


def notes(run: Run, t: dict[str, Any] | None = None) -> list[str]:
    """Plain-language remarks: e.g. why a run has no bucketing outcome at all (``t``: the run's
    :func:`totals`, when the caller has them already)."""
    out: list[str] = []
    if t is None:
        t = totals(run)
    if not run.ranks:
        out.append("no log entries read")
    elif t["graphs"] == 0:
        if t["cache_hits"]:
            out.append(
                f"no bucketing recorded: {t['cache_hits']} graphs were inductor cache hits "
                "(the cache skips the post-grad passes); re-run with caches disabled "
                "(torch._inductor.config.force_disable_caches = True)"
            )
        elif t["compiled_graphs"]:
            out.append(
                f"no bucketing recorded: {t['compiled_graphs']} graphs went through the post-grad "
                "passes without FSDP collectives pre-bucketing (is "
                "aten_distributed_optimizations.enable_overlap_scheduling on, and are the "
                "all-gathers FSDP ones?)"
            )
        else:
            out.append("no bucketing recorded: no compiled graph found in the logs")
    elif t["cache_hits"]:
        out.append(
            f"{t['cache_hits']} graphs were inductor cache hits and have no bucketing record; "
            "re-run with caches disabled to see them"
        )
    return out


def summary_document(run: Run, *, with_ranks: bool = True) -> dict[str, Any]:
    """The ``tracekit.summary/1`` JSON document of a Run (``with_ranks=False``: without the
    ``ranks`` key, for :func:`write_summary_json`)."""
    t = totals(run)
    doc = {
        "schema": SCHEMA,
        "paths": list(run.paths),
        "ranks": [rank_to_dict(r) for r in run.ranks] if with_ranks else None,
        "totals": t,
        "divergence": divergence(run),
        "did_nothing": did_nothing(run),
        "notes": notes(run, t),
        "diagnostics": run.diagnostics.to_dict(),
    }
    if not with_ranks:
        del doc["ranks"]
    return doc


def write_summary_json(run: Run, write: Callable[[bytes], Any]) -> None:
    """Write :func:`summary_document` as pretty JSON (sorted keys, 2-space indent, trailing
    newline: the same text as ``render.dumps_json(summary_document(run))``), one graph at a
    time, so memory stays that of the Run, not of the Run plus its whole document."""
    opt = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS

    def dump(value: Any, indent: int) -> bytes:
        return orjson.dumps(value, option=opt).replace(b"\n", b"\n" + b" " * indent)

    head = {k: v for k, v in summary_document(run, with_ranks=False).items()}
    keys = sorted([*head, "ranks"])
    write(b"{\n")
    for i, key in enumerate(keys):
        comma = b"," if i < len(keys) - 1 else b""
        write(b'  "' + key.encode() + b'": ')
        if key != "ranks":
            write(dump(head[key], 2) + comma + b"\n")
            continue
        if not run.ranks:
            write(b"[]" + comma + b"\n")
            continue
        write(b"[\n")
        for j, r in enumerate(run.ranks):
            rd = rank_to_dict(Rank(r.rank, r.files, [], r.compiled_graphs, r.cache_hits))
            rkeys = sorted(rd)
            write(b"    {\n")
            for k, rk in enumerate(rkeys):
                rcomma = b"," if k < len(rkeys) - 1 else b""
                write(b'      "' + rk.encode() + b'": ')
                if rk != "graphs" or not r.graphs:
                    write(dump(rd[rk], 6) + rcomma + b"\n")
                    continue
                write(b"[\n")
                for n, g in enumerate(r.graphs):
                    gcomma = b"," if n < len(r.graphs) - 1 else b""
                    write(b"        " + dump(graph_to_dict(g), 8) + gcomma + b"\n")
                write(b"      ]" + rcomma + b"\n")
            write(b"    }" + (b"," if j < len(run.ranks) - 1 else b"") + b"\n")
        write(b"  ]" + comma + b"\n")
    write(b"}\n")


class DocumentError(ValueError):
    """A JSON document that is not a ``tracekit.summary/1`` summary."""


def run_from_document(doc: Any) -> Run:
    """A Run back from a ``tracekit.summary/1`` document (graphs, counters, diagnostics)."""
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith("tracekit.summary/"):
        raise DocumentError("not a tracekit.summary document (no 'schema': 'tracekit.summary/1')")
    try:
        ranks = [rank_from_dict(r) for r in doc.get("ranks", [])]
        diag = Diagnostics()
        d = doc.get("diagnostics") or {}
        diag.counts = {str(k): int(v) for k, v in (d.get("counts") or {}).items()}
        diag.examples = list(d.get("examples") or [])
    except (KeyError, TypeError, ValueError) as e:
        raise DocumentError(f"malformed summary document: {e}") from None
    return Run(paths=list(doc.get("paths", [])), ranks=ranks, diagnostics=diag)
