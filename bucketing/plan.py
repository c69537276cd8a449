"""Which collectives the FSDP pre-bucketing pass merges, computed without touching the graph.

The plan reproduces torch 2.13's ``greedy_bucket_collective_by_mb`` as used by its FSDP pass,
quirks included:

- kinds are handled in order all-gather, reduce-scatter, all-reduce, each on the graph the
  previous kind's merges left (the plan models a merged bucket as one node joining all its
  members' inputs to all their outputs);
- candidates are the waits of FSDP collectives in graph order; only *adjacent* runs of candidate
  waits with the same key (group, dtype; reduce op too for RS/AR) are bucketed, so alternating
  bf16/f32 all-gathers bucket nothing;
- within a run, buckets fill greedily up to the cap (bytes = max(input, output)); a candidate
  that depends on a member of the open bucket is dropped (not bucketed at all);
- the cap callback is asked for bucket index 0 only; buckets of one collective are not merged.

While it plans, the planner notes what leaves each candidate out of every bucket (its key
differs from its neighbours', the open bucket would pass the cap, it depends on the open bucket);
``plan(cap, explain=True)`` turns those notes into one reason per collective
(:mod:`bucketing.decisions`).

Unlike torch, the dependency check is lazy: descendants of the open bucket are only explored up
to the candidate's topological position, so the plan costs about one walk of the graph per kind
(torch re-walks all descendants for every bucket).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import torch
import torch.fx as fx

from bucketing.cap import PreBucketCap, compute_pre_bucket_cap_mb
from bucketing.decisions import DecisionMaker, rejection_all_gather, rejection_reduce_scatter
from bucketing.gc_pause import gc_paused
from bucketing.groups import find_collectives, identify_fsdp_groups
from bucketing.predicates import (
    ALL_GATHER_TARGETS,
    ALL_REDUCE_TARGET,
    KINDS,
    REDUCE_SCATTER_TARGET,
    collective_kind,
    group_name_of,
    is_all_gather,
    placeholder_ancestors,
    reduce_op_of,
    reduce_scatter_chain,
    waited_collective,
)
from bucketing.report import BucketingReport, BucketMember
from bucketing.sizes import MB, bucket_bytes, reported_bytes, round_mb

if TYPE_CHECKING:
    from bucketing.copy_rewrite import WaitUsers

BUCKET_MODES = ("default", "custom_ops", "custom_ops_multidtype", "coalesced")


def configured_bucket_mode() -> str:
    """Inductor's ``aten_distributed_optimizations.bucket_mode`` (torch's all-gather grouping)."""
    import torch._inductor.config as inductor_config

    return inductor_config.aten_distributed_optimizations.bucket_mode or "default"


def resolve_mode(mode: str | None) -> str:
    """``None`` means "default", as in torch's FSDP pass."""
    mode = mode or "default"
    if mode not in BUCKET_MODES:
        raise ValueError(f"unknown bucket mode {mode!r}; expected one of {BUCKET_MODES}")
    return mode


@dataclass
class _Candidate:
    coll: int  # node id of the collective
    key: tuple
    n_bytes: int


@dataclass
class FsdpPlan:
    """Buckets per kind, as lists of collective nodes of the planned graph."""

    buckets: dict[str, list[list[fx.Node]]] = field(default_factory=dict)
    member_bytes: dict[fx.Node, int] = field(default_factory=dict)
    # collective id -> what the planner noted when it left a candidate out of every bucket:
    # ("key_break", prev, next) | ("depends", open bucket) | ("single", bucket it did not fit,
    # its bytes, next that did not fit, dependents) | ("ag_merged", merged all-gathers crossed)
    notes: dict[int, tuple] = field(default_factory=dict)
    cap_bytes: int = 0


class _Dag:
    """The graph as integer ids, with merged buckets overlaid as extra nodes."""

    def __init__(self, nodes: list[fx.Node], ids: dict[fx.Node, int]):
        self.base: list[list[int]] = [[] for _ in nodes]
        for i, node in enumerate(nodes):
            for inp in node._input_nodes:
                self.base[ids[inp]].append(i)
        self.overlay: dict[int, list[int]] = {}
        self.extra: list[list[int]] = []
        self.topo: list[int] = list(range(len(nodes)))  # graph order is topological

    def children(self, v: int) -> list[int]:
        if v in self.overlay:
            return self.overlay[v]
        if v < len(self.base):
            return self.base[v]
        return self.extra[v - len(self.base)]

    def merge(self, members: list[int], waits: list[int]) -> None:
        """Model a merged bucket: every member's input now reaches every member's wait."""
        joint = len(self.base) + len(self.extra)
        self.extra.append(list(waits))
        for member in members:
            self.overlay[member] = [joint]

    def renumber(self) -> None:
        """Recompute a topological numbering after merges (Kahn's algorithm). Each node's
        children are listed once (:meth:`children` without a call per visit)."""
        overlay, base, extra = self.overlay, self.base, self.extra
        kids = [overlay[v] if v in overlay else c for v, c in enumerate(base + extra)]
        total = len(kids)
        indegree = [0] * total
        for cs in kids:
            for c in cs:
                indegree[c] += 1
        ready = [v for v in range(total) if indegree[v] == 0]
        topo = [0] * total
        position = 0
        while ready:
            v = ready.pop()
            topo[v] = position
            position += 1
            for c in kids[v]:
                indegree[c] -= 1
                if indegree[c] == 0:
                    ready.append(c)
        if position != total:
            raise ValueError("graph has a cycle after modelling merged buckets")
        self.topo = topo


class _OpenBucketDescendants:
    """Descendants of the open bucket's members, explored lazily in topological order."""

    def __init__(self, dag: _Dag):
        self.dag = dag
        self.found: set[int] = set()
        self.frontier: list[tuple[int, int]] = []

    def _discover(self, v: int) -> None:
        topo = self.dag.topo
        for c in self.dag.children(v):
            if c not in self.found:
                self.found.add(c)
                heapq.heappush(self.frontier, (topo[c], c))

    def add(self, member: int) -> None:
        self._discover(member)

    def contains(self, v: int) -> bool:
        limit = self.dag.topo[v]
        frontier = self.frontier
        while frontier and frontier[0][0] <= limit:
            _, u = heapq.heappop(frontier)
            self._discover(u)
        return v in self.found


class FsdpPlanner:
    """Prepared once per graph, then asked for plans at many caps (replay sweeps).

    Everything that does not depend on the cap (FSDP groups, candidates, sizes, the integer
    graph) is computed here; :meth:`plan` then costs about one walk of the graph per kind.
    """

    def __init__(
        self,
        gm: fx.GraphModule,
        mode: str | None = None,
        bucket_mode: str | None = None,
        *,
        fsdp_groups: list[str] | None = None,
        group_size: int | None = None,
    ):
        """``fsdp_groups`` / ``group_size``: FSDP groups found elsewhere (e.g. by the forward of
        the same compile id), used instead of those identified in ``gm``: a what-if for a graph
        without FSDP all-gather, where torch finds none (``group_size`` None: identified)."""
        self.gm = gm
        self.mode = resolve_mode(mode)
        # torch's FSDP pass does not hand its mode to the all-gather bucketer, which then keys
        # on inductor's configured bucket_mode: only that one can drop dtype from the key.
        self.bucket_mode = resolve_mode(bucket_mode or configured_bucket_mode())
        self.fsdp_groups, self.group_size = identify_fsdp_groups(gm)
        self.groups_given = fsdp_groups is not None
        if fsdp_groups is not None:
            self.fsdp_groups = list(fsdp_groups)
            self.group_size = group_size if group_size is not None else self.group_size
        self.nodes: list[fx.Node] = list(gm.graph.nodes)
        self.ids: dict[fx.Node, int] = {n: i for i, n in enumerate(self.nodes)}
        self._dag_base = _Dag(self.nodes, self.ids)
        #: fake values of the members' input views made by rewrites of copies of ``gm`` given
        #: this planner (:func:`bucketing.pre_bucket_fsdp_collectives`), kept for the next copy
        self.input_views: dict[tuple, tuple] = {}
        #: and of the clones of the members' outputs (:meth:`bucketing.merge._Builder.output_reshape`)
        self.output_clones: dict[tuple, tuple] = {}
        #: the waits' users in graph order, and the nodes that use several waits: what a copy
        #: made rewritten asks of ``gm`` at every cap (:class:`bucketing.copy_rewrite.WaitUsers`)
        self.wait_users: WaitUsers | None = None
        #: each collective's own part of ``bucketing.merge.needs_torch_merge``, asked per cap
        self.merge_checks: dict[fx.Node, str | None] = {}
        self._plans: dict[float, FsdpPlan] = {}  # plan_at's, by cap
        self._collect_candidates()
        self._collect_sizes()
        #: a cap of at least this many bytes never closes a bucket (each kind's candidates fit
        #: in it together): every such cap has one plan, :meth:`plan_at` makes it once
        self.unbinding_bytes = max((sum(c.n_bytes for c in cs) for cs in self.candidates.values()), default=0)
        self._unbound: FsdpPlan | None = None

    # -- cap-independent facts -------------------------------------------------------------
    def _collect_candidates(self) -> None:
        multidtype = "multidtype" in self.bucket_mode
        self.candidates: dict[str, list[_Candidate]] = {kind: [] for kind in KINDS}
        self.waits: dict[int, int] = {}  # collective id -> wait id
        # RS waits' unary walk result before merges, and the all-gathers the walk crossed.
        self.rs_touches: dict[int, list[fx.Node]] = {}
        # collective id -> (reason, detail) of the collectives that are no candidate at all
        self.rejected: dict[int, tuple[str, str]] = {}
        groups = set(self.fsdp_groups)
        for node in self.nodes:
            coll = waited_collective(node)
            if coll is None:
                continue
            if len(coll.users) != 1:
                users = ", ".join(u.name for u in coll.users)
                self.rejected[self.ids[coll]] = (
                    "no_single_wait",
                    f"{len(coll.users)} users ({users}), not one wait",
                )
                continue
            kind = collective_kind(coll)
            if "val" not in coll.meta:
                raise ValueError(f"{coll.name}: collective without meta['val']; cannot size or key it")
            if kind == "AG":
                sources = placeholder_ancestors(coll, 3)
                if len(sources) != 1:
                    self.rejected[self.ids[coll]] = rejection_all_gather(sources)
                    continue
                group = group_name_of(coll)
                key: tuple[Any, ...] = (group,) if multidtype else (group, coll.meta["val"].dtype)
            elif kind == "RS":
                reached, breaker = reduce_scatter_chain(node)
                if reached is None:
                    self.rejected[self.ids[coll]] = rejection_reduce_scatter(node, breaker)
                    continue
                self.rs_touches[self.ids[coll]] = [n for n in reached if is_all_gather(n)]
                key = (group_name_of(coll), reduce_op_of(coll), coll.meta["val"].dtype)
            else:
                if group_name_of(coll) not in groups:
                    self.rejected[self.ids[coll]] = (
                        "other_group",
                        f"on group {group_name_of(coll)!r}, not an FSDP group ({', '.join(map(repr, self.fsdp_groups))})",
                    )
                    continue
                key = (group_name_of(coll), reduce_op_of(coll), coll.meta["val"].dtype)
            cid = self.ids[coll]
            self.waits[cid] = self.ids[node]
            self.candidates[kind].append(  # type: ignore[index]  # a waited collective has a kind
                _Candidate(cid, key, bucket_bytes(coll))
            )

    def _collect_sizes(self) -> None:
        # (kind, section, position, node, reported bytes) of every collective on an FSDP group,
        # in torch's artifact order: by kind, all-gathers before "_out" ones, graph order.
        self._sized: list[tuple[str, int, int, fx.Node, int]] = [
            (
                kind,
                1 if node.target is ALL_GATHER_TARGETS[1] else 0,
                self.ids[node],
                node,
                reported_bytes(kind, node),
            )
            for kind, node in fsdp_collectives(self.gm.graph, self.fsdp_groups)
        ]
        self.sizes_before = [
            {"type": kind, "size_mb": round_mb(n_bytes), "name": node.name}
            for kind, _, _, node, n_bytes in self._sized
        ]
        self.counts_before = count_kinds(self.sizes_before)

    def cap_for(self, bucket_cap_mb: float | None) -> PreBucketCap:
        """The cap the pass would use (see :func:`bucketing.compute_pre_bucket_cap_mb`)."""
        return compute_pre_bucket_cap_mb(self.group_size, bucket_cap_mb)

    # -- the plan ---------------------------------------------------------------------------
    def plan_at(self, cap_mb: float) -> FsdpPlan:
        """:meth:`plan_nodes` at one cap for every bucket, kept by cap: a replay asks for the
        plan of a cap (:meth:`plan`), then the rewrite of a copy at that cap asks again, and a
        sweep in several processes plans every cap first (to schedule each distinct plan once)
        and then each again as it replays it. A plan is of the graph as it was planned: a
        planner is not asked again after rewriting its own graph."""
        plan = self._plans.get(cap_mb)
        if plan is None:
            plan = self._plans[cap_mb] = self._plan_at(cap_mb)
        return plan

    def _plan_at(self, cap_mb: float) -> FsdpPlan:
        """:meth:`plan_nodes` at ``cap_mb``; a cap no bucket reaches (``unbinding_bytes``) has
        the buckets and notes of every other such cap, planned once: the greedy fill closes a
        bucket only when the next candidate would take it past the cap, and all of a kind's
        candidates together stay within it. On a 723-node graph, the caps from 4 MB to 2 GB
        of a sweep planned once instead of 12 times::

            plan_at(4)    -> plan_nodes(4 MB)                     # buckets, notes; cap 4 MB
            plan_at(2048) -> the same buckets and notes; cap 2,048 MB
        """
        cap_bytes = int(cap_mb * MB)
        if cap_bytes < self.unbinding_bytes:
            return self.plan_nodes(lambda _index: cap_mb)
        if self._unbound is None:
            self._unbound = self.plan_nodes(lambda _index: cap_mb)
        return replace(self._unbound, cap_bytes=cap_bytes)

    def plan_nodes(self, cap_mb_by_index: Callable[[int], float]) -> FsdpPlan:
        """Buckets per kind for a cap callback (asked for index 0 only, as torch does)."""
        base = self._dag_base
        dag = _Dag.__new__(_Dag)
        dag.base, dag.overlay, dag.extra, dag.topo = base.base, {}, [], base.topo
        plan = FsdpPlan(cap_bytes=int(cap_mb_by_index(0) * MB))
        notes = plan.notes
        merged_ags: set[fx.Node] = set()
        for kind in KINDS:
            cands = self.candidates[kind]
            if kind != "AG" and dag.extra and cands:  # no candidates: no bucket, numbering unused
                dag.renumber()
            if kind == "RS" and merged_ags:
                kept = []
                for c in cands:
                    crossed = [t for t in self.rs_touches[c.coll] if t in merged_ags]
                    if crossed:
                        notes[c.coll] = ("ag_merged", crossed)
                    else:
                        kept.append(c)
                cands = kept
            buckets = _greedy_buckets(dag, _adjacent_runs(cands, notes), cap_mb_by_index, notes)
            plan.buckets[kind] = []
            for bucket in buckets:
                nodes = [self.nodes[c.coll] for c in bucket]
                plan.buckets[kind].append(nodes)
                for c, n in zip(bucket, nodes, strict=False):
                    plan.member_bytes[n] = c.n_bytes
                if kind == "AG":
                    merged_ags.update(nodes)
                dag.merge([c.coll for c in bucket], [self.waits[c.coll] for c in bucket])
        return plan

    def partition(self, bucket_cap_mb: float | None = None) -> tuple:
        """The plan's buckets at ``bucket_cap_mb`` (None: automatic cap) as member names, per
        kind in name order: what a rewrite at that cap makes (``()`` without FSDP groups). The
        plan without its report (:meth:`plan`), for a caller that keys rewrites by it."""
        if not self.fsdp_groups:
            return ()
        plan = self.plan_at(self.cap_for(bucket_cap_mb).cap_mb)
        return tuple(
            (kind, tuple(tuple(m.name for m in b) for b in buckets))
            for kind, buckets in sorted(plan.buckets.items())
        )

    def plan(self, bucket_cap_mb: float | None = None, *, explain: bool = False) -> BucketingReport:
        """A report of what the pass would do at ``bucket_cap_mb`` (None: automatic cap);
        ``explain``: with the planner's decision for every collective (``report.decisions``)."""
        report = self.base_report()
        if not self.fsdp_groups:
            report.skipped_reason = "no FSDP all-gather in the graph"
            if explain:
                report.decisions = DecisionMaker(self, None).decisions()
            return report
        cap = self.cap_for(bucket_cap_mb)
        report.cap_mb, report.cap_source = cap.cap_mb, cap.source
        plan = self.plan_at(cap.cap_mb)
        fill_buckets(report, plan)
        if explain:
            report.decisions = DecisionMaker(self, plan).decisions()
        report.sizes_after = self._predicted_sizes_after(plan)
        groups = set(self.fsdp_groups)
        for kind in KINDS:
            saved = sum(len(b) - 1 for b in plan.buckets[kind] if group_name_of(b[0]) in groups)
            report.counts_after[kind] = report.counts_before[kind] - saved
        return report

    def base_report(self) -> BucketingReport:
        """Groups, node count and the "before" counts and sizes of the graph as it is now."""
        report = BucketingReport(
            fsdp_groups=list(self.fsdp_groups),
            group_size=self.group_size,
            n_nodes=nodes_count(self.group_size),
            mode=self.mode,
            bucket_mode=self.bucket_mode,
        )
        report.sizes_before = [dict(e) for e in self.sizes_before]
        report.counts_before = dict(self.counts_before)
        return report

    def _predicted_sizes_after(self, plan: FsdpPlan) -> list[dict]:
        bucket_of: dict[fx.Node, list[fx.Node]] = {}
        for buckets in plan.buckets.values():
            for bucket in buckets:
                for n in bucket:
                    bucket_of[n] = bucket
        reported = {node: n_bytes for _, _, _, node, n_bytes in self._sized}
        out: list[dict] = []
        for kind in KINDS:
            entries: list[tuple[int, float, dict]] = []
            for k, section, position, node, n_bytes in self._sized:
                if k != kind:
                    continue
                members = bucket_of.get(node)
                if members is None:
                    entry = {"type": kind, "size_mb": round_mb(n_bytes), "name": node.name}
                    entries.append((section, position, entry))
                elif node is members[-1]:
                    # a merged all-gather is an "_out" one; merged nodes sit after the last member
                    total = sum(reported[n] for n in members)
                    entry = {
                        "type": kind,
                        "size_mb": round_mb(total),
                        "name": f"{members[0].name}+{len(members) - 1}",
                    }
                    entries.append((1 if kind == "AG" else 0, position + 0.5, entry))
            out.extend(e for _, _, e in sorted(entries, key=lambda t: (t[0], t[1])))
        return out


def _adjacent_runs(cands: list[_Candidate], notes: dict[int, tuple]) -> list[list[_Candidate]]:
    """Maximal runs of candidates with one key; a candidate alone in its run is noted
    ``("key_break", previous candidate, next candidate)``."""
    runs: list[list[_Candidate]] = []
    current: list[_Candidate] = []
    for i, cand in enumerate(cands):
        if current and cand.key == current[0].key:
            current.append(cand)
        else:
            if len(current) > 1:
                runs.append(current)
            elif current:
                notes[current[0].coll] = ("key_break", cands[i - 2] if i > 1 else None, cand)
            current = [cand]
    if len(current) > 1:
        runs.append(current)
    elif current:
        notes[current[0].coll] = ("key_break", cands[-2] if len(cands) > 1 else None, None)
    return runs


def _greedy_buckets(
    dag: _Dag, runs: list[list[_Candidate]], cap_mb_by_index: Callable[[int], float], notes: dict[int, tuple]
) -> list[list[_Candidate]]:
    """Fill buckets greedily in each run; what leaves a candidate alone goes into ``notes``:
    ``("depends", open bucket)`` for one left out, ``("single", the bucket it did not fit or
    None, that bucket's bytes, the next candidate that did not fit or None, dependents left out
    or None)`` for one alone in its bucket."""
    buckets: list[list[_Candidate]] = []
    for run in runs:
        cap_bytes = int(cap_mb_by_index(0) * MB)
        bucket: list[_Candidate] = []
        size = 0
        closed: list[_Candidate] | None = None  # the bucket whose overflow opened this one
        closed_size = 0
        left_out: list[_Candidate] | None = None  # candidates left out for depending on it
        descendants = _OpenBucketDescendants(dag)
        for cand in run:
            if bucket and descendants.contains(cand.coll):
                notes[cand.coll] = ("depends", list(bucket))
                if left_out is None:
                    left_out = []
                left_out.append(cand)
                continue  # depends on the open bucket: torch leaves it out of bucketing
            if bucket and size + cand.n_bytes > cap_bytes:
                if len(bucket) > 1:
                    buckets.append(bucket)
                else:
                    notes[bucket[0].coll] = ("single", closed, closed_size, cand, left_out)
                closed, closed_size = bucket, size
                bucket, size, left_out = [], 0, None
                descendants = _OpenBucketDescendants(dag)
            size += cand.n_bytes
            bucket.append(cand)
            descendants.add(cand.coll)
        if len(bucket) > 1:
            buckets.append(bucket)
        elif bucket:
            notes[bucket[0].coll] = ("single", closed, closed_size, None, left_out)
    return buckets


def _kind_nodes(graph: fx.Graph, kind: str) -> list[fx.Node]:
    targets = {"AG": ALL_GATHER_TARGETS, "RS": (REDUCE_SCATTER_TARGET,), "AR": (ALL_REDUCE_TARGET,)}[kind]
    return find_collectives(graph, targets)


def fsdp_collectives(graph: fx.Graph, fsdp_groups) -> Iterator[tuple[str, fx.Node]]:
    """(kind, node) of every collective on an FSDP group, in torch's artifact order: by kind
    (AG, RS, AR), graph order within a kind (all-gathers before ``_out`` ones)."""
    groups = set(fsdp_groups)
    for kind in KINDS:
        for node in _kind_nodes(graph, kind):
            if group_name_of(node) in groups:
                yield kind, node


def collective_sizes(graph: fx.Graph, fsdp_groups: list[str]) -> list[dict]:
    """Torch's ``pre_bucketing_collective_sizes`` payload for ``graph``, as a list of dicts."""
    return [
        {"type": kind, "size_mb": round_mb(reported_bytes(kind, node)), "name": node.name}
        for kind, node in fsdp_collectives(graph, fsdp_groups)
    ]


def count_kinds(sizes: list[dict]) -> dict[str, int]:
    """Collectives per kind in a sizes list."""
    counts = {kind: 0 for kind in KINDS}
    for entry in sizes:
        counts[entry["type"]] += 1
    return counts


def nodes_count(group_size: int | None) -> int:
    """Torch's ``nNodes``: hosts spanned by the group at 8 GPUs per host (or the visible count)."""
    if group_size is None:
        return 1
    per_node = torch.cuda.device_count() if torch.cuda.is_available() else 8
    return math.ceil(group_size / per_node)


def fill_buckets(report: BucketingReport, plan: FsdpPlan) -> None:
    """Put a plan's buckets into a report, by name and size."""
    report.buckets = {
        kind: [
            [BucketMember(n.name, round_mb(plan.member_bytes[n]), plan.member_bytes[n]) for n in bucket]
            for bucket in buckets
        ]
        for kind, buckets in plan.buckets.items()
    }


def plan_fsdp_buckets(
    gm: fx.GraphModule, bucket_cap_mb: float | None = None, mode: str | None = None
) -> BucketingReport:
    """What :func:`bucketing.pre_bucket_fsdp_collectives` would do to ``gm``, without changing it.

    Returns a :class:`BucketingReport` with ``rewritten=False``. For sweeps over many caps,
    build one :class:`FsdpPlanner` and call its ``plan`` per cap.
    """
    with gc_paused():
        return FsdpPlanner(gm, mode).plan(bucket_cap_mb)
