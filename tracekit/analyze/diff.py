"""Compare the bucketing outcomes of two runs: what changed between run A and run B.

Pure analysis on two :class:`~tracekit.model.Run` objects; it reads no file and formats no text
(``tracekit/commands/diff_cmd.py`` does both). The result is a :class:`Diff`, and
:meth:`Diff.to_dict` is the ``tracekit.diff/1`` JSON document.

Matching: ranks by rank number; graphs of a matched rank by ``(compile_id, graph_index)`` (a key
logged twice on one rank is matched by occurrence). Compared per graph: FSDP groups, group size,
nNodes, bucket cap, which pass ran (``source``), the before/after counts of each collective type,
the collectives that run (``final``: kind, group and bytes in order) when both runs logged them,
and the per-collective sizes when both runs logged them (the first differing collective, with its
index, type and size in A and in B, and the list lengths). Node names in the size lists are shown
but never compared: they are labels, not behaviour.

Ranks that changed in exactly the same way (same set of graph changes) are reported once, as one
group with the list of ranks. Diagnostics (bad lines) of either run are counted in the document
but never make two runs differ.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from tracekit.analyze.summarize import first_mismatch
from tracekit.model import CollectiveSize, FinalSchedule, Graph, Rank, Run
from tracekit.model.fields import GRAPH_FIELDS, compared_values, fields_equal, graph_to_dict
from tracekit.model.json_forms import final_to_dict
from tracekit.model.rankset import format_ranks

SCHEMA = "tracekit.diff/1"

# --- the result ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldChange:
    """One compared value that differs. Collective counts have ``field`` = the collective type
    and ``a``/``b`` = ``{"before": n, "after": m}`` (``None`` when the type is absent)."""

    field: str
    a: Any
    b: Any


@dataclass(frozen=True)
class SizesChange:
    """How a per-collective size list (``which`` = "before" or "after" bucketing) differs.

    ``index`` is the first position where the lists differ by type or size (when one list is a
    prefix of the other, the length of the shorter one); ``a``/``b`` are the entries there
    (``None`` past the end of a list)."""

    which: str
    length_a: int
    length_b: int
    index: int
    a: CollectiveSize | None
    b: CollectiveSize | None


@dataclass(frozen=True)
class GraphChange:
    """A graph of one rank that differs: ``kind`` is "changed", "only_in_a" or "only_in_b", or
    "not_prebucketed_in_a" / "not_prebucketed_in_b" when the other run ran the graph (its
    schedule was logged: ``final``) but never pre-bucketed it. For all but "changed", ``graph``
    is the outcome of the run that pre-bucketed it."""

    compile_id: str
    graph_index: int
    kind: str
    fields: tuple[FieldChange, ...] = ()
    sizes: tuple[SizesChange, ...] = ()
    graph: Graph | None = None
    final: FinalSchedule | None = None
    #: ``(A, B)``: torch's estimates of the collectives each run's final schedule runs, summed
    #: (ms), for a changed graph whose estimates differ (None where one is not logged)
    est_ms: tuple[float | None, float | None] | None = None

    @property
    def label(self) -> str:
        return f"{self.compile_id}:{self.graph_index}"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "kind": self.kind,
            "graph": self.label,
            "compile_id": self.compile_id,
            "graph_index": self.graph_index,
        }
        if self.kind == "changed":
            d["fields"] = [{"field": f.field, "a": f.a, "b": f.b} for f in self.fields]
            d["sizes"] = [_sizes_change_to_dict(s) for s in self.sizes]
            if self.est_ms is not None:
                d["est_ms"] = {"a": self.est_ms[0], "b": self.est_ms[1]}
        elif self.graph is not None:
            d["outcome"] = graph_outcome(self.graph)
        if self.final is not None:  # what the run that never pre-bucketed the graph ran
            d["ran_not_prebucketed"] = final_to_dict(self.final)
        return d


@dataclass(frozen=True)
class RankGroup:
    """Ranks whose graphs changed in exactly the same way, and those changes."""

    ranks: tuple[int | None, ...]
    changes: tuple[GraphChange, ...]


@dataclass(frozen=True)
class RunInfo:
    """What the report says about one input."""

    label: str  # the path given on the command line (or "A"/"B")
    kind: str  # "logs" | "summary" | "run"
    paths: tuple[str, ...]
    ranks: tuple[int | None, ...]
    graphs: int
    compiled_graphs: int
    cache_hits: int
    diagnostics: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.label,
            "kind": self.kind,
            "paths": list(self.paths),
            "ranks": list(self.ranks),
            "graphs": self.graphs,
            "compiled_graphs": self.compiled_graphs,
            "cache_hits": self.cache_hits,
            "diagnostics": dict(sorted(self.diagnostics.items())),
            "diagnostics_total": sum(self.diagnostics.values()),
        }


@dataclass(frozen=True)
class Estimates:
    """Which run torch estimated faster: the estimates (ms) of the collectives the final
    schedules run, summed per rank over the graphs both runs logged with every estimate
    (``graphs``), on the rank where each run's sum is largest (the slowest rank sets the step).
    Estimates of the collectives alone, as summarize's "est ms": exposed ms is not in a log
    (``tracekit replay`` gives it)."""

    a: float
    b: float
    graphs: int

    @property
    def faster(self) -> str | None:
        """ "A", "B", or None when the sums are equal."""
        return None if self.a == self.b else ("A" if self.a < self.b else "B")

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "graphs": self.graphs, "faster": self.faster, "exposed_ms": None}


@dataclass(frozen=True)
class Diff:
    """Everything that differs between run A and run B, plus context that does not count."""

    a: RunInfo
    b: RunInfo
    groups: tuple[RankGroup, ...]
    ranks_only_in_a: tuple[int | None, ...]
    ranks_only_in_b: tuple[int | None, ...]
    graphs_compared: int  # graphs present in both runs, on ranks present in both runs
    notes: tuple[str, ...] = field(default=())
    estimates: Estimates | None = None  # which run's collectives torch estimated faster

    @property
    def identical(self) -> bool:
        return not (self.groups or self.ranks_only_in_a or self.ranks_only_in_b)

    @property
    def changed_ranks(self) -> list[int | None]:
        return sort_ranks([r for g in self.groups for r in g.ranks])

    @property
    def changed_graphs(self) -> list[str]:
        """Distinct graph labels (``compile_id:graph_index``) that differ on some rank."""
        seen: dict[str, None] = {}
        for g in self.groups:
            for c in g.changes:
                seen.setdefault(c.label, None)
        return list(seen)

    @property
    def graph_changes(self) -> int:
        """(rank, graph) pairs that differ."""
        return sum(len(g.ranks) * len(g.changes) for g in self.groups)

    @property
    def verdict(self) -> str:
        """One line: "identical", or "N graphs changed on M ranks (list)" and ranks only in one
        run; a rank list too long for one line is left to the details."""
        if self.identical:
            return "identical"
        parts = []
        if self.groups:
            n = len(self.changed_graphs)
            parts.append(f"{n} graph{'s' if n != 1 else ''} changed on {_counted_ranks(self.changed_ranks)}")
        for side, ranks in (("A", self.ranks_only_in_a), ("B", self.ranks_only_in_b)):
            if ranks:
                parts.append(f"{_counted_ranks(ranks)} only in {side}")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """The ``tracekit.diff/1`` document. ``changes`` is flat, one entry per change of a rank
        group, each naming its ranks; ranks only in one run are entries of kind
        "rank_only_in_a" / "rank_only_in_b"."""
        changes: list[dict[str, Any]] = []
        for i, g in enumerate(self.groups):
            for c in g.changes:
                changes.append(
                    {"group": i, "ranks": list(g.ranks), "ranks_text": format_ranks(g.ranks)} | c.to_dict()
                )
        for kind, ranks in (
            ("rank_only_in_a", self.ranks_only_in_a),
            ("rank_only_in_b", self.ranks_only_in_b),
        ):
            if ranks:
                changes.append({"kind": kind, "ranks": list(ranks), "ranks_text": format_ranks(ranks)})
        return {
            "schema": SCHEMA,
            "identical": self.identical,
            "verdict": self.verdict,
            "a": self.a.to_dict(),
            "b": self.b.to_dict(),
            "graphs_compared": self.graphs_compared,
            "graphs_changed": self.changed_graphs,
            "graph_changes": self.graph_changes,
            "ranks_changed": self.changed_ranks,
            "ranks_only_in_a": list(self.ranks_only_in_a),
            "ranks_only_in_b": list(self.ranks_only_in_b),
            "changes": changes,
            "notes": list(self.notes),
            **({"est_ms": self.estimates.to_dict()} if self.estimates is not None else {}),
        }


# --- the comparison ------------------------------------------------------------------------------


def diff_runs(
    a: Run,
    b: Run,
    *,
    a_label: str = "A",
    b_label: str = "B",
    a_kind: str = "run",
    b_kind: str = "run",
) -> Diff:
    """Compare run A with run B (see the module docstring for what is compared)."""
    ranks_a = {r.rank: r for r in a.ranks}
    ranks_b = {r.rank: r for r in b.ranks}
    shared = sort_ranks([r for r in ranks_a if r in ranks_b])

    per_rank: dict[int | None, tuple[GraphChange, ...]] = {}
    compared = 0
    for rank in shared:
        changes, n = diff_rank(ranks_a[rank], ranks_b[rank])
        compared += n
        if changes:
            per_rank[rank] = tuple(changes)

    return Diff(
        a=run_info(a, a_label, a_kind),
        b=run_info(b, b_label, b_kind),
        groups=group_ranks(per_rank),
        ranks_only_in_a=tuple(sort_ranks([r for r in ranks_a if r not in ranks_b])),
        ranks_only_in_b=tuple(sort_ranks([r for r in ranks_b if r not in ranks_a])),
        graphs_compared=compared,
        notes=tuple(context_notes(a, b, shared, ranks_a, ranks_b)),
        estimates=estimates([(ranks_a[r], ranks_b[r]) for r in shared]),
    )


def final_est_ms(f: FinalSchedule | None) -> float | None:
    """The estimates (ms) of a final schedule's collectives, summed (4 decimals, as summarize
    prints them); None without a schedule or where one collective has no estimate."""
    if f is None or any(c.est_ms is None for c in f.collectives):
        return None
    return round(sum(c.est_ms or 0.0 for c in f.collectives), 4)


def _finals_by_key(rank: Rank) -> dict[tuple[str, int], FinalSchedule]:
    """A rank's final schedules by graph, outcome-less ones included (the first of a key)."""
    out: dict[tuple[str, int], FinalSchedule] = {}
    for g in rank.graphs:
        if g.final is not None:
            out.setdefault(g.key, g.final)
    for f in rank.schedules_without_outcome:
        out.setdefault((f.compile_id, f.position), f)
    return out


def estimates(pairs: list[tuple[Rank, Rank]]) -> Estimates | None:
    """:class:`Estimates` of the ranks both runs have (``(A's, B's)`` per rank), or None when no
    graph of theirs has every estimate in both runs."""
    best: tuple[float, float, int] | None = None
    for ra, rb in pairs:
        fa, fb = _finals_by_key(ra), _finals_by_key(rb)
        sums = [(final_est_ms(fa[k]), final_est_ms(fb[k])) for k in fa if k in fb]
        known = [(x, y) for x, y in sums if x is not None and y is not None]
        if not known:
            continue
        a, b = round(sum(x for x, _ in known), 4), round(sum(y for _, y in known), 4)
        best = (
            (a, b, len(known))
            if best is None
            else (max(best[0], a), max(best[1], b), max(best[2], len(known)))
        )
    return None if best is None else Estimates(*best)


def diff_rank(a: Rank, b: Rank) -> tuple[list[GraphChange], int]:
    """The graph changes between two logs of one rank, in log order (A's graphs, then graphs only
    in B), and how many graphs were present in both."""
    graphs_b = dict(zip(occurrence_keys(b.graphs), b.graphs, strict=False))
    changes: list[GraphChange] = []
    matched: set[tuple[str, int, int]] = set()
    for key, ga in zip(occurrence_keys(a.graphs), a.graphs, strict=False):
        gb = graphs_b.get(key)
        if gb is None:
            changes.append(one_side(ga, b, "a"))
            continue
        matched.add(key)
        change = diff_graph(ga, gb)
        if change is not None:
            changes.append(change)
    for key, gb in graphs_b.items():
        if key not in matched:
            changes.append(one_side(gb, a, "b"))
    return changes, len(matched)


def one_side(g: Graph, other: Rank, side: str) -> GraphChange:
    """A graph only run ``side`` ("a" or "b") pre-bucketed: "not_prebucketed_in_<other>" when
    the other rank's log has the graph's schedule without an outcome (it ran the graph, and
    pre-bucketing never saw it), else "only_in_<side>"."""
    ran = next(
        (f for f in other.schedules_without_outcome if (f.compile_id, f.position) == g.key),
        None,
    )
    if ran is not None:
        return GraphChange(
            g.compile_id,
            g.graph_index,
            f"not_prebucketed_in_{'b' if side == 'a' else 'a'}",
            graph=g,
            final=ran,
        )
    return GraphChange(g.compile_id, g.graph_index, f"only_in_{side}", graph=g)


def occurrence_keys(graphs: list[Graph]) -> list[tuple[str, int, int]]:
    """``(compile_id, graph_index, n)`` per graph, n counting earlier graphs with the same key
    (0 unless a log repeats a key, e.g. two processes writing one file)."""
    seen: dict[tuple[str, int], int] = {}
    keys = []
    for g in graphs:
        n = seen.get(g.key, 0)
        seen[g.key] = n + 1
        keys.append((g.compile_id, g.graph_index, n))
    return keys


def diff_graph(a: Graph, b: Graph) -> GraphChange | None:
    """What differs between two outcomes of the same graph, or None when nothing does."""
    if fields_equal(a, b):  # fast path: the common case of runs that agree
        return None
    va, vb = compared_values(a), compared_values(b)
    fields = [
        FieldChange(name, va[name], vb[name])
        for name in va
        if name not in _SIZE_VALUES
        and va[name] != vb[name]
        and not (name in _LOGGED_VALUES and (va[name] is None or vb[name] is None))
    ]
    sizes = []
    if a.sizes_mb is not None and b.sizes_mb is not None:
        for which in ("before", "after"):
            la, lb = getattr(a.sizes_mb, which), getattr(b.sizes_mb, which)
            if la is not None and lb is not None:
                s = diff_sizes(which, la, lb)
                if s is not None:
                    sizes.append(s)
    if not fields and not sizes:
        return None
    est = (final_est_ms(a.final), final_est_ms(b.final))
    shown = est if est[0] != est[1] else None
    return GraphChange(a.compile_id, a.graph_index, "changed", tuple(fields), tuple(sizes), est_ms=shown)


#: Compared values reported as a :class:`SizesChange` (first differing collective), not as values.
_SIZE_VALUES = frozenset({"sizes_mb.before", "sizes_mb.after"})
#: Compared values that only some logs have (a schedule needs overlap scheduling, older summaries
#: lack it): compared only when both runs have them, like the sizes.
_LOGGED_VALUES = frozenset({"final"})


def diff_sizes(which: str, a: list[CollectiveSize], b: list[CollectiveSize]) -> SizesChange | None:
    """The first collective whose type or size differs, or None when the lists match."""
    i = first_mismatch(a, b)
    if i is None:
        return None
    return SizesChange(which, len(a), len(b), i, a[i] if i < len(a) else None, b[i] if i < len(b) else None)


def group_ranks(per_rank: dict[int | None, tuple[GraphChange, ...]]) -> tuple[RankGroup, ...]:
    """Ranks with the same change set (compared on what is reported, not on file names) become one
    group; groups are ordered by their first rank."""
    groups: dict[Any, list[int | None]] = {}
    first: dict[Any, tuple[GraphChange, ...]] = {}
    for rank in sort_ranks(list(per_rank)):
        sig = _signature(per_rank[rank])
        groups.setdefault(sig, []).append(rank)
        first.setdefault(sig, per_rank[rank])
    return tuple(RankGroup(tuple(ranks), first[sig]) for sig, ranks in groups.items())


def context_notes(a: Run, b: Run, shared: list[int | None], ranks_a: dict, ranks_b: dict) -> list[str]:
    """Things worth saying that do not make the runs differ."""
    notes = []
    for side, run in (("A", a), ("B", b)):
        if run.ranks and not any(r.graphs for r in run.ranks):
            hits = sum(r.cache_hits for r in run.ranks)
            why = f" ({hits} inductor cache hits: warm cache?)" if hits else ""
            notes.append(f"{side} logged no bucketing outcome{why}")
        if run.diagnostics.total:
            n = run.diagnostics.total
            notes.append(
                f"{side} has {n} diagnostic{'s' if n != 1 else ''} (bad input lines, see "
                "`tracekit summarize`); they do not make the runs differ"
            )
    notes += release_notes(shared, ranks_a, ranks_b)
    for attr, what in (("compiled_graphs", "graphs compiled"), ("cache_hits", "cache hits")):
        by_values: dict[tuple[int, int], list[int | None]] = {}
        for rank in shared:
            va, vb = getattr(ranks_a[rank], attr), getattr(ranks_b[rank], attr)
            if va != vb:
                by_values.setdefault((va, vb), []).append(rank)
        for (va, vb), ranks in by_values.items():
            notes.append(f"{what}: {va} in A, {vb} in B on {_ranks_text(ranks)}")
    no_sizes = []
    for rank in shared:
        has_sizes_b = {g.key: g.sizes_mb is not None for g in ranks_b[rank].graphs}
        if any(
            g.key in has_sizes_b and has_sizes_b[g.key] != (g.sizes_mb is not None)
            for g in ranks_a[rank].graphs
        ):
            no_sizes.append(rank)
    if no_sizes:
        notes.append(
            f"per-collective sizes logged by only one run on {_ranks_text(no_sizes)}: "
            "sizes not compared there"
        )
    no_final = [rank for rank in shared if _final_keys(ranks_a[rank]) != _final_keys(ranks_b[rank])]
    if no_final:
        notes.append(
            f"collective schedules (final) logged by only one run for some graphs on "
            f"{_ranks_text(no_final)}: not compared there"
        )
    return notes


def release_notes(shared: list[int | None], ranks_a: dict, ranks_b: dict) -> list[str]:
    """A note per torch release change between A and B on the shared ranks (issue 50, item
    17): ``torch release changed: 2.13.0+cpu in A, 2.15.0+cu132 in B on rank 1; ...``. A new
    release changes what inductor emits (2.14 moves waits later, 2.15 groups all-gathers by
    contiguity), so the changes below may be the release's."""
    by_values: dict[tuple[str, str], list[int | None]] = {}
    for rank in shared:
        va, vb = ranks_a[rank].torch_version, ranks_b[rank].torch_version
        if va and vb and va != vb:
            by_values.setdefault((va, vb), []).append(rank)
    return [
        f"torch release changed: {va} in A, {vb} in B on {_ranks_text(ranks)}; a release changes what "
        "inductor emits (its order of collectives and waits, its buckets), so what differs may be the release's"
        for (va, vb), ranks in by_values.items()
    ]


# --- small helpers -------------------------------------------------------------------------------


def _final_keys(rank: Rank) -> set[tuple[str, int]]:
    """The graphs of a rank whose final schedule was logged (with an outcome or without)."""
    return set(_finals_by_key(rank))


def run_info(run: Run, label: str, kind: str) -> RunInfo:
    return RunInfo(
        label=label,
        kind=kind,
        paths=tuple(run.paths),
        ranks=tuple(sort_ranks([r.rank for r in run.ranks])),
        graphs=sum(len(r.graphs) for r in run.ranks),
        compiled_graphs=sum(r.compiled_graphs for r in run.ranks),
        cache_hits=sum(r.cache_hits for r in run.ranks),
        diagnostics=dict(run.diagnostics.counts),
    )


def graph_outcome(g: Graph) -> dict[str, Any]:
    """The comparable facts of one graph (no file or line, no size lists), for graphs present
    on one side."""
    d = graph_to_dict(g)
    return {f.name: d[f.name] for f in GRAPH_FIELDS if f.kind in ("scalar", "counts")}


def sort_ranks(ranks) -> list[int | None]:
    """Ranks in order, the rank-less log (None) last."""
    return sorted(set(ranks), key=lambda r: (r is None, r if r is not None else 0))


#: Rank lists longer than this are not spelled out in the verdict.
MAX_VERDICT_RANKS = 40


def _counted_ranks(ranks) -> str:
    """ "1 rank (3)", "4 ranks (0-3)"; just "171 ranks" when the list is long."""
    n, listed = len(ranks), _listed(ranks)
    text = f"{n} rank{'s' if n != 1 else ''}"
    return text if len(listed) > MAX_VERDICT_RANKS else f"{text} ({listed})"


def _listed(ranks) -> str:
    """The ranks as ranges, the rank-less log as ``rank not logged`` (never ``-``)."""
    if set(ranks) == {None}:
        return "rank not logged"
    return format_ranks(ranks).replace(",-", ", rank not logged")


def _ranks_text(ranks) -> str:
    """ "rank 3" or "ranks 0-2,5" ("rank not logged" for a rank-less log, never "rank -")."""
    if set(ranks) == {None}:
        return "rank not logged"
    return f"rank{'s' if len(set(ranks)) != 1 else ''} {_listed(ranks)}"


def _sizes_change_to_dict(s: SizesChange) -> dict[str, Any]:
    def entry(c: CollectiveSize | None) -> dict[str, Any] | None:
        return None if c is None else {"type": c.type, "size_mb": c.size_mb, "name": c.name}

    return {
        "which": s.which,
        "length_a": s.length_a,
        "length_b": s.length_b,
        "index": s.index,
        "a": entry(s.a),
        "b": entry(s.b),
    }


def _signature(changes: tuple[GraphChange, ...]) -> tuple:
    """A hashable form of a change set that ignores where each graph was read, and size-node
    names (labels only)."""
    out = []
    for c in changes:
        d = c.to_dict()
        for s in d.get("sizes", []):
            for side in ("a", "b"):
                if s[side] is not None:
                    s[side] = {k: v for k, v in s[side].items() if k != "name"}
        out.append(orjson.dumps(d, option=orjson.OPT_SORT_KEYS))
    return tuple(out)
