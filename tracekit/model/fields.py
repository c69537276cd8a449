"""The graph's fields, declared once (:data:`GRAPH_FIELDS`), and what derives from them: a
graph's and a rank's JSON documents (``graph_to_dict`` / ``graph_from_dict``, ``rank_to_dict`` /
``rank_from_dict``), the values compared across ranks (summarize) and runs (diff), and the
cheap keys that tell equal graphs apart fast.

Three ways to look at a graph's compared fields, each for its job:

- :func:`compared_values`: the compared values by name, JSON-able (what a report shows);
- :func:`stand_ins`: a hashable stand-in per compared field (an id for a value shared between
  ranks): equal stand-ins, equal values; :func:`stand_ins_without_groups` leaves out the fields
  that name process groups (a mesh's shard groups differ there only);
- :func:`fields_equal`: whether two graphs' compared fields hold equal values, the fast test
  before the value-by-value comparison.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tracekit.model import COLLECTIVE_TYPES, CollectiveSize, Counts, FinalSchedule, Graph, Rank, Sizes
from tracekit.model.json_forms import (
    DumpMemo,
    counts_dump,
    counts_load,
    final_from_dict,
    final_to_dict,
    sizes_dump,
    sizes_load,
)


@dataclass(frozen=True)
class GraphField:
    """One field of :class:`Graph`: how it is written to JSON and read back, and how it is
    compared across ranks (summarize) and runs (diff). Everything that serialises or compares
    graphs derives from :data:`GRAPH_FIELDS`; a new field is declared here once.

    ``kind``: ``"key"`` (identifies the graph), ``"where"`` (where it was read: never compared),
    ``"scalar"`` (compared as one value), ``"counts"`` (compared per collective type),
    ``"sizes"`` (compared per list, first differing collective), ``"final"`` (the collectives
    that run, compared as one sequence: :mod:`tracekit.analyze.schedule`). ``compare(value)`` gives the
    compared values by name (JSON-able)."""

    name: str
    kind: str
    dump: Callable[[Any], Any]
    load: Callable[[Any], Any]
    default: Any = None  # when a document lacks the field; _REQUIRED: it must be there
    compare: Callable[[Any], dict[str, Any]] | None = None
    #: a cheap hashable stand-in for the value: equal stand-ins mean equal values (default: the
    #: value itself when it is a scalar, else the object's identity, for values shared between
    #: ranks, such as interned size lists)
    stand_in: Callable[[Any], Any] | None = None


_REQUIRED = object()


def _same(v: Any) -> Any:
    return v


def _counts_compare(c: dict[str, Counts]) -> dict[str, Any]:
    return {t: {"before": c[t].before, "after": c[t].after} if t in c else None for t in COLLECTIVE_TYPES}


def _size_values(sizes: list[CollectiveSize] | None) -> list[list[Any]] | None:
    """A size list as compared: types and sizes, not node names (labels, not behaviour)."""
    return None if sizes is None else [[x.type, x.size_mb] for x in sizes]


def _sizes_compare(s: Sizes | None) -> dict[str, Any]:
    return {
        "sizes_mb.before": None if s is None else _size_values(s.before),
        "sizes_mb.after": None if s is None else _size_values(s.after),
    }


def _final_compare(f: FinalSchedule | None) -> dict[str, Any]:
    """Compared: the (kind, group, bytes) sequence; estimates are a model, not behaviour."""
    return {"final": None if f is None else f.sequence()}


def _scalar(
    name: str, load: Callable[[Any], Any], default: Any = _REQUIRED, dump: Callable[[Any], Any] = _same
) -> GraphField:
    def compare(v: Any) -> dict[str, Any]:
        return {name: dump(v)}

    return GraphField(
        name,
        "scalar",
        dump,
        load,
        default,
        compare,
        stand_in=lambda v: tuple(v) if isinstance(v, list) else v,
    )


def _counts_stand_in(c: dict[str, Counts]) -> tuple:
    return tuple((t, x.before, x.after) for t, x in c.items())


#: The fields of :class:`Graph`, in the order comparisons are reported.
GRAPH_FIELDS: tuple[GraphField, ...] = (
    GraphField("compile_id", "key", _same, str, _REQUIRED),
    GraphField("graph_index", "key", _same, int, _REQUIRED),
    _scalar("fsdp_groups", lambda v: [str(x) for x in v], [], dump=list),
    _scalar("group_size", _same, None),
    _scalar("n_nodes", int, 1),
    _scalar("bucket_cap_mb", float),
    GraphField("collectives", "counts", counts_dump, counts_load, {}, _counts_compare, _counts_stand_in),
    GraphField("sizes_mb", "sizes", sizes_dump, sizes_load, None, _sizes_compare),
    _scalar("source", str, "torch"),
    GraphField("file", "where", _same, str, ""),
    GraphField("line", "where", _same, int, 0),
    GraphField(
        "final",
        "final",
        final_to_dict,
        final_from_dict,
        None,
        _final_compare,
        # the collectives list is shared between graphs that run the same (interned)
        lambda f: None if f is None else ("final", id(f.collectives)),
    ),
)

_COMPARED = tuple(f for f in GRAPH_FIELDS if f.compare is not None)


def compared_values(g: Graph) -> dict[str, Any]:
    """Every compared value of a graph by name (``fsdp_groups``, ``all_gather``,
    ``sizes_mb.before``, ...), in report order."""
    out: dict[str, Any] = {}
    for f in _COMPARED:
        if f.compare is not None:  # always (_COMPARED): said for the type checker
            out.update(f.compare(getattr(g, f.name)))
    return out


def stand_ins(g: Graph) -> tuple:
    """The stand-ins of a graph's compared values (:attr:`GraphField.stand_in`), as one
    hashable key, cheap to make: graphs with equal keys have equal compared values."""
    return tuple(_stand_in(f, getattr(g, f.name)) for f in _COMPARED)


#: The compared fields that name process groups (their stand-ins differ between the shard
#: groups of a mesh while the graphs are alike up to the groups' roles).
GROUP_FIELDS = ("fsdp_groups", "final")
_WITHOUT_GROUPS = tuple(f for f in _COMPARED if f.name not in GROUP_FIELDS)


def stand_ins_without_groups(g: Graph) -> tuple:
    """:func:`stand_ins` of the compared fields that name no process group
    (:data:`GROUP_FIELDS` apart): a mesh's role-invariant key adds those two mapped to roles."""
    return tuple(_stand_in(f, getattr(g, f.name)) for f in _WITHOUT_GROUPS)


def _stand_in(f: GraphField, v: Any) -> Any:
    if f.stand_in is not None:
        return f.stand_in(v)
    return v if v is None or isinstance(v, (str, int, float)) else id(v)


def fields_equal(a: Graph, b: Graph) -> bool:
    """True when every compared field of two graphs holds equal values (size-node names
    included): then their compared values are equal too. A fast test before comparing
    :func:`compared_values` one by one."""
    return tuple(getattr(a, f.name) for f in _COMPARED) == tuple(getattr(b, f.name) for f in _COMPARED)


# --- the JSON documents of a graph and a rank ----------------------------------------------------


def graph_to_dict(g: Graph, memo: DumpMemo | None = None) -> dict[str, Any]:
    """The JSON form of a Graph: every field of :data:`GRAPH_FIELDS`, nested values as plain
    dicts and lists (what ``dataclasses.asdict`` gives, built directly: faster). With a
    :class:`DumpMemo`, values shared between graphs are dumped once and their JSON forms
    shared too (read-only)."""
    if memo is None:
        return {f.name: f.dump(getattr(g, f.name)) for f in GRAPH_FIELDS}
    out: dict[str, Any] = {}
    shared = memo.shared
    for f in GRAPH_FIELDS:
        v = getattr(g, f.name)
        if f.name == "final":
            out["final"] = final_to_dict(v, memo)
        elif isinstance(v, (list, dict, Sizes)):
            out[f.name] = shared(v, f.dump)
        else:
            out[f.name] = f.dump(v)
    return out


def graph_from_dict(d: dict[str, Any]) -> Graph:
    """A Graph from its JSON form; fields a document lacks take their defaults."""
    kw: dict[str, Any] = {}
    for f in GRAPH_FIELDS:
        if f.name in d and d[f.name] is not None:
            kw[f.name] = f.load(d[f.name])
        elif f.default is _REQUIRED:
            raise KeyError(f.name)
        else:
            kw[f.name] = f.default if not isinstance(f.default, (list, dict)) else type(f.default)(f.default)
    return Graph(**kw)


def rank_to_dict(r: Rank) -> dict[str, Any]:
    return {
        "rank": r.rank,
        "files": list(r.files),
        "compiled_graphs": r.compiled_graphs,
        "cache_hits": r.cache_hits,
        "compiles": r.compiles,
        "torch_version": r.torch_version,
        "graphs": [graph_to_dict(g) for g in r.graphs],
        "schedules_without_outcome": [final_to_dict(f) for f in r.schedules_without_outcome],
        "compile_ids": list(r.compile_ids),
        "cache_events": [list(e) for e in r.cache_events],
    }


def rank_from_dict(d: dict[str, Any]) -> Rank:
    return Rank(
        rank=d.get("rank"),
        files=list(d.get("files", [])),
        graphs=[graph_from_dict(g) for g in d.get("graphs", [])],
        compiled_graphs=int(d.get("compiled_graphs", 0)),
        cache_hits=int(d.get("cache_hits", 0)),
        compiles=int(d.get("compiles", 0)),
        torch_version=d.get("torch_version"),
        schedules_without_outcome=[final_from_dict(f) for f in d.get("schedules_without_outcome") or []],
        compile_ids=[str(c) for c in d.get("compile_ids") or []],
        cache_events=[[str(c), str(s)] for c, s in d.get("cache_events") or []],
    )
