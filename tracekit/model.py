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


# --- JSON round trip -----------------------------------------------------------------------------


def graph_to_dict(g: Graph) -> dict[str, Any]:
    """The JSON form of a Graph: its fields, the nested values as plain dicts and lists (what
    ``dataclasses.asdict`` gives, built directly: ~5x faster on graphs with size lists)."""
    sizes = g.sizes_mb
    return {
        "compile_id": g.compile_id,
        "graph_index": g.graph_index,
        "fsdp_groups": list(g.fsdp_groups),
        "group_size": g.group_size,
        "n_nodes": g.n_nodes,
        "bucket_cap_mb": g.bucket_cap_mb,
        "collectives": {t: {"before": c.before, "after": c.after} for t, c in g.collectives.items()},
        "sizes_mb": None if sizes is None else {
            "before": [_size_to_dict(s) for s in sizes.before],
            "after": None if sizes.after is None else [_size_to_dict(s) for s in sizes.after],
        },
        "source": g.source,
        "file": g.file,
        "line": g.line,
    }


def _size_to_dict(s: CollectiveSize) -> dict[str, Any]:
    return {"type": s.type, "size_mb": s.size_mb, "name": s.name}


def graph_from_dict(d: dict[str, Any]) -> Graph:
    sizes = d.get("sizes_mb")
    return Graph(
        compile_id=str(d["compile_id"]),
        graph_index=int(d["graph_index"]),
        fsdp_groups=[str(x) for x in d.get("fsdp_groups", [])],
        group_size=d.get("group_size"),
        n_nodes=int(d.get("n_nodes", 1)),
        bucket_cap_mb=float(d["bucket_cap_mb"]),
        collectives={
            t: Counts(int(c["before"]), int(c["after"]))
            for t, c in d.get("collectives", {}).items()
        },
        sizes_mb=None
        if sizes is None
        else Sizes(
            before=[_size_from_dict(s) for s in sizes.get("before") or []],
            after=None
            if sizes.get("after") is None
            else [_size_from_dict(s) for s in sizes["after"]],
        ),
        source=d.get("source", "torch"),
        file=d.get("file", ""),
        line=int(d.get("line", 0)),
    )


def _size_from_dict(d: dict[str, Any]) -> CollectiveSize:
    # Newer documents may add keys to size entries: take the ones this version knows.
    try:
        size_mb = d["size_mb"]
        if isinstance(size_mb, bool) or not isinstance(size_mb, (int, float)):
            raise TypeError
        return CollectiveSize(type=str(d["type"]), size_mb=float(size_mb), name=str(d.get("name", "")))
    except (KeyError, TypeError):
        raise ValueError(f"bad size entry {d!r}") from None


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
