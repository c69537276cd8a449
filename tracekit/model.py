"""The per-rank model of a run: what the reader builds and every analysis consumes.

Plain dataclasses, the same objects the Python API hands out and the JSON documents are made
from (``to_dict`` / ``from_dict``). Nothing here reads files or imports torch.

    Run
     ├─ ranks: [Rank]                one per rank seen in the logs (rank None: no rank written)
     │    └─ graphs: [Graph]         one per recorded ``pre_bucketing_fsdp_collectives`` outcome,
     │                               in log order; identified by (compile_id, graph_index)
     └─ diagnostics: Diagnostics     every bad line, counted by kind, first few with file:line
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Collective types, in the order torch reports them, with the short names of its size artifacts.
COLLECTIVE_TYPES: tuple[str, ...] = ("all_gather", "reduce_scatter", "all_reduce")
SHORT_NAMES: dict[str, str] = {"all_gather": "AG", "reduce_scatter": "RS", "all_reduce": "AR"}
LONG_NAMES: dict[str, str] = {v: k for k, v in SHORT_NAMES.items()}


@dataclass
class Counts:
    """How many collectives of one type a graph had before and after bucketing."""

    before: int
    after: int


@dataclass
class CollectiveSize:
    """One entry of a ``pre_bucketing_collective_sizes[_after]`` artifact."""

    type: str  # "AG" | "RS" | "AR"
    size_mb: float
    name: str


@dataclass
class Sizes:
    """Per-collective sizes in MB, graph order by type, before and after bucketing."""

    before: list[CollectiveSize]
    after: list[CollectiveSize] | None  # None when only the "before" artifact was logged


@dataclass
class Graph:
    """One bucketing outcome: one compiled graph (forward or backward) of one rank."""

    compile_id: str  # "0/0", "1/0", "0/0_1", "!0/0/0"
    graph_index: int  # position among this compile id's outcomes: 0 forward, 1 backward, ...
    fsdp_groups: list[str]
    group_size: int | None
    n_nodes: int  # nNodes: machines the FSDP group spans
    bucket_cap_mb: float
    collectives: dict[str, Counts]  # keys: COLLECTIVE_TYPES
    sizes_mb: Sizes | None = None  # None unless pre_bucketing_fsdp_collectives_verbose was on
    source: str = "torch"  # "torch": stock pass; "tracekit": our pass (bucketing.install())
    file: str = ""  # where the outcome artifact was read
    line: int = 0

    @property
    def key(self) -> tuple[str, int]:
        return (self.compile_id, self.graph_index)

    @property
    def label(self) -> str:
        return f"{self.compile_id}:{self.graph_index}"

    def did_nothing(self) -> list[str]:
        """Collective types that had more than one collective and were not merged at all."""
        return [t for t, c in self.collectives.items() if c.before > 1 and c.after == c.before]


@dataclass
class Rank:
    rank: int | None
    files: list[str] = field(default_factory=list)
    graphs: list[Graph] = field(default_factory=list)
    compiled_graphs: int = 0  # before_post_grad_graph artifacts seen (graphs that ran post-grad)
    cache_hits: int = 0  # fx_graph_cache_hit artifacts seen (graphs that skipped the passes)

    def graph(self, compile_id: str, graph_index: int = 0) -> Graph | None:
        for g in self.graphs:
            if g.compile_id == compile_id and g.graph_index == graph_index:
                return g
        return None


@dataclass
class Diagnostics:
    """Failure is data: every kind of bad input, counted, with the first few places."""

    counts: dict[str, int] = field(default_factory=dict)
    examples: list[dict[str, Any]] = field(default_factory=list)  # {kind, file, line, detail}
    max_examples_per_kind: int = 5

    def add(self, kind: str, file: str, line: int, detail: str = "") -> None:
        n = self.counts.get(kind, 0)
        self.counts[kind] = n + 1
        if n < self.max_examples_per_kind:
            self.examples.append({"kind": kind, "file": file, "line": line, "detail": detail})

    def merge(self, other: Diagnostics) -> None:
        for ex in other.examples:
            if sum(1 for e in self.examples if e["kind"] == ex["kind"]) < self.max_examples_per_kind:
                self.examples.append(ex)
        for kind, n in other.counts.items():
            self.counts[kind] = self.counts.get(kind, 0) + n

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_dict(self) -> dict[str, Any]:
        return {"counts": dict(sorted(self.counts.items())), "examples": list(self.examples)}


@dataclass
class Run:
    paths: list[str]
    ranks: list[Rank] = field(default_factory=list)
    diagnostics: Diagnostics = field(default_factory=Diagnostics)

    def rank(self, rank: int | None) -> Rank | None:
        for r in self.ranks:
            if r.rank == rank:
                return r
        return None


# --- the graph's fields, declared once -----------------------------------------------------------


@dataclass(frozen=True)
class GraphField:
    """One field of :class:`Graph`: how it is written to JSON and read back, and how it is
    compared across ranks (summarize) and runs (diff). Everything that serialises or compares
    graphs derives from :data:`GRAPH_FIELDS`; a new field is declared here once.

    ``kind``: ``"key"`` (identifies the graph), ``"where"`` (where it was read: never compared),
    ``"scalar"`` (compared as one value), ``"counts"`` (compared per collective type),
    ``"sizes"`` (compared per list, first differing collective). ``compare(value)`` gives the
    compared values by name (JSON-able)."""

    name: str
    kind: str
    dump: Callable[[Any], Any]
    load: Callable[[Any], Any]
    default: Any = None  # when a document lacks the field; _REQUIRED: it must be there
    compare: Callable[[Any], dict[str, Any]] | None = None


_REQUIRED = object()


def _same(v: Any) -> Any:
    return v


def _counts_dump(c: dict[str, Counts]) -> dict[str, Any]:
    return {t: {"before": x.before, "after": x.after} for t, x in c.items()}


def _counts_load(d: dict[str, Any]) -> dict[str, Counts]:
    return {t: Counts(int(c["before"]), int(c["after"])) for t, c in d.items()}


def _counts_compare(c: dict[str, Counts]) -> dict[str, Any]:
    return {t: {"before": c[t].before, "after": c[t].after} if t in c else None for t in COLLECTIVE_TYPES}


def _size_to_dict(s: CollectiveSize) -> dict[str, Any]:
    return {"type": s.type, "size_mb": s.size_mb, "name": s.name}


def _size_from_dict(d: dict[str, Any]) -> CollectiveSize:
    # Newer documents may add keys to size entries: take the ones this version knows.
    try:
        size_mb = d["size_mb"]
        if isinstance(size_mb, bool) or not isinstance(size_mb, (int, float)):
            raise TypeError
        return CollectiveSize(type=str(d["type"]), size_mb=float(size_mb), name=str(d.get("name", "")))
    except (KeyError, TypeError):
        raise ValueError(f"bad size entry {d!r}") from None


def _sizes_dump(s: Sizes | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {"before": [_size_to_dict(x) for x in s.before],
            "after": None if s.after is None else [_size_to_dict(x) for x in s.after]}


def _sizes_load(d: dict[str, Any] | None) -> Sizes | None:
    if d is None:
        return None
    return Sizes(before=[_size_from_dict(x) for x in d.get("before") or []],
                 after=None if d.get("after") is None else [_size_from_dict(x) for x in d["after"]])


def _size_values(sizes: list[CollectiveSize] | None) -> list[list[Any]] | None:
    """A size list as compared: types and sizes, not node names (labels, not behaviour)."""
    return None if sizes is None else [[x.type, x.size_mb] for x in sizes]


def _sizes_compare(s: Sizes | None) -> dict[str, Any]:
    return {"sizes_mb.before": None if s is None else _size_values(s.before),
            "sizes_mb.after": None if s is None else _size_values(s.after)}


def _scalar(name: str, load: Callable[[Any], Any], default: Any = _REQUIRED, dump: Callable[[Any], Any] = _same) -> GraphField:
    return GraphField(name, "scalar", dump, load, default, lambda v, n=name: {n: dump(v)})


#: The fields of :class:`Graph`, in the order comparisons are reported.
GRAPH_FIELDS: tuple[GraphField, ...] = (
    GraphField("compile_id", "key", _same, str, _REQUIRED),
    GraphField("graph_index", "key", _same, int, _REQUIRED),
    _scalar("fsdp_groups", lambda v: [str(x) for x in v], [], dump=list),
    _scalar("group_size", _same, None),
    _scalar("n_nodes", int, 1),
    _scalar("bucket_cap_mb", float),
    GraphField("collectives", "counts", _counts_dump, _counts_load, {}, _counts_compare),
    GraphField("sizes_mb", "sizes", _sizes_dump, _sizes_load, None, _sizes_compare),
    _scalar("source", str, "torch"),
    GraphField("file", "where", _same, str, ""),
    GraphField("line", "where", _same, int, 0),
)

_COMPARED = tuple(f for f in GRAPH_FIELDS if f.compare is not None)


def compared_values(g: Graph) -> dict[str, Any]:
    """Every compared value of a graph by name (``fsdp_groups``, ``all_gather``,
    ``sizes_mb.before``, ...), in report order."""
    out: dict[str, Any] = {}
    for f in _COMPARED:
        out.update(f.compare(getattr(g, f.name)))
    return out


def compared_names() -> list[str]:
    """The names :func:`compared_values` gives, in order (without needing a graph)."""
    names: list[str] = []
    for f in _COMPARED:
        names += list(f.compare(f.load(f.default)) if f.default is not _REQUIRED else [f.name])
    return names


def outcome_facts(g: Graph) -> tuple:
    """Everything compared about a graph (size-node names included), as one hashable-free
    comparable value: a fast equality test before a field-by-field comparison."""
    return tuple(getattr(g, f.name) for f in _COMPARED)


# --- JSON round trip -----------------------------------------------------------------------------


def graph_to_dict(g: Graph) -> dict[str, Any]:
    """The JSON form of a Graph: every field of :data:`GRAPH_FIELDS`, nested values as plain
    dicts and lists (what ``dataclasses.asdict`` gives, built directly: faster)."""
    return {f.name: f.dump(getattr(g, f.name)) for f in GRAPH_FIELDS}


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
        "graphs": [graph_to_dict(g) for g in r.graphs],
    }


def rank_from_dict(d: dict[str, Any]) -> Rank:
    return Rank(
        rank=d.get("rank"),
        files=list(d.get("files", [])),
        graphs=[graph_from_dict(g) for g in d.get("graphs", [])],
        compiled_graphs=int(d.get("compiled_graphs", 0)),
        cache_hits=int(d.get("cache_hits", 0)),
    )
