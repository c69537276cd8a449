"""Why each collective is, or is not, in a bucket: the planner's own decisions, in words.

:class:`bucketing.plan.FsdpPlanner` notes, while it plans, what left each candidate out of
every bucket (a key that differs from its neighbours', a bucket that would pass the cap, an
input derived from the open bucket, ...) and, once per graph, why a collective is no candidate
at all (an all-gather that is not an FSDP one, a reduce-scatter whose result does not flow
straight to the output, ...). :class:`DecisionMaker` turns those notes into one
:class:`bucketing.report.Decision` per collective of the graph, in torch's artifact order (all-
gathers, reduce-scatters, all-reduces; graph order within a kind)::

    all_gather_into_tensor_2  AG  0.125 MB  over_cap  the open bucket (all_gather_into_tensor,
        all_gather_into_tensor_1: 0.031 MB) plus this (0.125 MB) is 0.156 MB, over the 0.1 MB
        cap by 0.056 MB

Reasons are listed in :data:`bucketing.report.REASONS`.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx as fx
from torch.fx.graph import dtype_abbrs

from bucketing.dedup import same_collective, summed_reduce_scatter
from bucketing.groups import find_collectives
from bucketing.predicates import (
    ALL_GATHER_TARGETS,
    ALL_REDUCE_TARGET,
    KINDS,
    REDUCE_SCATTER_TARGET,
    group_name_of,
    reduce_op_of,
)
from bucketing.report import Decision
from bucketing.sizes import MB, reported_bytes, shown_mb

_TARGETS = {"AG": ALL_GATHER_TARGETS, "RS": (REDUCE_SCATTER_TARGET,), "AR": (ALL_REDUCE_TARGET,)}
_NAMES = {"AG": "all-gather", "RS": "reduce-scatter", "AR": "all-reduce"}
_aten_add = torch.ops.aten.add.Tensor


def mb_text(n_bytes: float) -> str:
    """Bytes as MB with at most 3 decimals, no trailing zeros: ``0.125``, ``27.38``; a size too
    small for three decimals keeps three significant digits (``1e-07``), never ``0``."""
    text = f"{round(n_bytes / MB, 3):.3f}".rstrip("0").rstrip(".")
    return f"{n_bytes / MB:.3g}" if n_bytes and text in ("0", "-0") else text


def _names(nodes: list[fx.Node], limit: int = 4) -> str:
    shown = ", ".join(n.name for n in nodes[:limit])
    return shown + (f" and {len(nodes) - limit} more" if len(nodes) > limit else "")


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.bfloat16`` -> ``bf16``, as in graph annotations."""
    return dtype_abbrs.get(dtype, str(dtype).removeprefix("torch."))


# -- collectives that are no candidate at all (cap-independent) -----------------------------------


def rejection_all_gather(sources: list[fx.Node]) -> tuple[str, str]:
    """``not_fsdp`` for an all-gather whose inputs derive from ``sources`` (found with a limit
    of 3 placeholders, see :func:`bucketing.predicates.placeholder_ancestors`), not exactly one."""
    if not sources:
        return (
            "not_fsdp",
            "derives from no placeholder (a constant or a value made in the graph), not from one parameter shard",
        )
    many = "3 or more placeholders" if len(sources) >= 3 else f"{len(sources)} placeholders"
    return "not_fsdp", f"derives from {many} ({_names(sources)}), not exactly one: not a parameter shard"


def _summed_tree(node: Any) -> list[fx.Node] | None:
    """The reduce-scatters summed by ``node`` (a wait of one, or ``add`` of such sums), else None."""
    rs = summed_reduce_scatter(node)
    if rs is not None:
        return [rs]
    if isinstance(node, fx.Node) and node.target is _aten_add and len(node.args) == 2 and not node.kwargs:
        left, right = _summed_tree(node.args[0]), _summed_tree(node.args[1])
        if left is not None and right is not None:
            return left + right
    return None


def rejection_reduce_scatter(wait: fx.Node, breaker: fx.Node | None) -> tuple[str, str]:
    """``summed_rs`` or ``rs_not_to_output`` for a reduce-scatter whose wait's path to the output
    is broken by ``breaker`` (None: the wait has no users)."""
    if breaker is None:
        return "rs_not_to_output", f"its wait {wait.name} has no users"
    rs = wait.args[0]
    summed = _summed_tree(breaker)
    if summed is not None and rs in summed and all(same_collective(rs, other) for other in summed):
        others = [n for n in summed if n is not rs]
        return "summed_rs", (
            f"its result is summed with {_names(others)} by {breaker.name}: left to dedup_fsdp_reduce_scatter, "
            "which folds the sum into one reduce-scatter"
        )
    inputs = len(breaker.all_input_nodes)
    return "rs_not_to_output", (
        f"{breaker.name} ({getattr(breaker.target, '__name__', breaker.target)}, {inputs} inputs) is on the path from "
        f"its wait to the output, where only single-input nodes (views, casts) may stand"
    )


# -- decisions of one plan ------------------------------------------------------------------------


class DecisionMaker:
    """One :class:`Decision` per collective of a planner's graph, for one plan (None: the
    graph has no FSDP group and the pass leaves it)."""

    def __init__(self, planner: Any, plan: Any):
        self.planner = planner
        self.plan = plan
        self.nodes: list[fx.Node] = planner.nodes
        self.cap_bytes = plan.cap_bytes if plan is not None else 0
        self.bytes = {c.coll: c.n_bytes for cands in planner.candidates.values() for c in cands}
        self._bucket_text: dict[int, str] = {}  # id(bucket) -> its detail, made once per bucket

    def decisions(self) -> list[Decision]:
        bucket_of: dict[fx.Node, tuple[int, list[fx.Node]]] = {}
        if self.plan is not None:
            for buckets in self.plan.buckets.values():
                for i, bucket in enumerate(buckets):
                    for n in bucket:
                        bucket_of[n] = (i, bucket)
        out = []
        for kind in KINDS:
            for node in find_collectives(self.planner.gm.graph, _TARGETS[kind]):
                out.append(self._one(kind, node, bucket_of.get(node)))
        return out

    def _one(self, kind: str, node: fx.Node, in_bucket: tuple[int, list[fx.Node]] | None) -> Decision:
        holder = node if kind == "AG" else (node.all_input_nodes or [node])[0]
        val = holder.meta.get("val")
        d = Decision(
            name=node.name,
            kind=kind,
            size_mb=shown_mb(reported_bytes(kind, node)) if val is not None else 0.0,
            dtype=dtype_name(val.dtype) if val is not None else "?",
            group=group_name_of(node),
            reason="",
            detail="",
        )
        cid = self.planner.ids[node]
        if in_bucket is not None:
            index, bucket = in_bucket
            d.reason, d.bucket = "bucketed", index
            d.detail = self._bucket_text.get(id(bucket)) or self._bucket_detail(kind, index, bucket)
        elif self.plan is None:
            d.reason = "no_fsdp_group"
            d.detail = (
                f"{_NAMES[kind]} on group {d.group!r}: no FSDP group identified in this graph (it has no "
                "FSDP all-gather), so the pass leaves it"
            )
            if cid in self.planner.rejected:
                d.detail += f"; even with a group it would be no candidate ({self.planner.rejected[cid][1]})"
        elif cid in self.planner.rejected:
            d.reason, d.detail = self.planner.rejected[cid]
        elif cid in self.plan.notes:
            self._from_note(d, cid, self.plan.notes[cid])
        else:
            d.reason, d.detail = "no_single_wait", "no wait_tensor uses it"
        return d

    def _bucket_detail(self, kind: str, index: int, bucket: list[fx.Node]) -> str:
        total = sum(self.plan.member_bytes[n] for n in bucket)
        text = self._bucket_text[id(bucket)] = (
            f"{kind} bucket {index}: {len(bucket)} collectives ({_names(bucket)}), "
            f"{mb_text(total)} MB within the {mb_text(self.cap_bytes)} MB cap"
        )
        return text

    def _from_note(self, d: Decision, cid: int, note: tuple) -> None:
        what = note[0]
        if what == "key_break":
            self._key_break(d, cid, note[1], note[2])
        elif what == "depends":
            d.reason = "depends_on_bucket"
            bucket = [self.nodes[c.coll] for c in note[1]]
            member = self._ancestor_in(cid, {c.coll for c in note[1]})
            how = (
                f"an input derives from {member.name}"
                if member is not None
                else "it derives (through a merged bucket) from it"
            )
            d.detail = (
                f"{how}, in the open {d.kind} bucket ({_names(bucket)}): torch leaves it out of bucketing"
            )
        elif what == "single":
            self._single(d, cid, *note[1:])
        else:  # "ag_merged"
            d.reason = "rs_not_to_output"
            d.detail = (
                f"its path to the output crosses {_names(note[1])}, merged into an all-gather bucket "
                "just before: after that merge the path is no longer one of single-input nodes"
            )

    def _key_break(self, d: Decision, cid: int, prev: Any, nxt: Any) -> None:
        neighbours = [c for c in (prev, nxt) if c is not None]
        if not neighbours:
            d.reason = "only_one"
            d.detail = f"the only {_NAMES[d.kind]} candidate of the graph: nothing to merge with"
            return
        node = self.nodes[cid]
        parts, differs = [], set()
        for label, c in (("previous", prev), ("next", nxt)):
            if c is None:
                continue
            other = self.nodes[c.coll]
            field, mine, theirs = self._difference(d.kind, node, other)
            differs.add(field)
            parts.append(f"the {label} candidate, {other.name}, has {field} {theirs} (this: {mine})")
        if "dtype" in differs:
            d.reason = "dtype_break"
            keyed = "(group, dtype)" if d.kind == "AG" else "(group, reduce op, dtype)"
            rule = f"bucket mode {self.planner.bucket_mode!r} keys {_NAMES[d.kind]}s by {keyed}"
        elif "reduce op" in differs:
            d.reason = "reduce_op_break"
            rule = f"{_NAMES[d.kind]}s are keyed by (group, reduce op, dtype)"
        else:
            d.reason = "other_group"
            rule = f"{_NAMES[d.kind]}s of different groups never bucket together"
        d.detail = "; ".join(parts) + f": only adjacent candidates with one key bucket, and {rule}"

    @staticmethod
    def _difference(kind: str, node: fx.Node, other: fx.Node) -> tuple[str, str, str]:
        if group_name_of(node) != group_name_of(other):
            return "group", repr(group_name_of(node)), repr(group_name_of(other))
        if kind != "AG" and reduce_op_of(node) != reduce_op_of(other):
            return "reduce op", reduce_op_of(node), reduce_op_of(other)
        return "dtype", dtype_name(node.meta["val"].dtype), dtype_name(other.meta["val"].dtype)

    def _single(
        self, d: Decision, cid: int, bucket: Any, size: int, closed_by: Any, left_out: list | None
    ) -> None:
        mine = self.bytes[cid]
        cap = self.cap_bytes
        parts, needed = [], []
        if bucket is not None:
            total = size + mine
            needed.append(total)
            parts.append(
                f"the open bucket ({_names([self.nodes[c.coll] for c in bucket])}: {mb_text(size)} MB) "
                f"plus this ({mb_text(mine)} MB) is {mb_text(total)} MB, over the {mb_text(cap)} MB cap "
                f"by {mb_text(total - cap)} MB"
            )
        if closed_by is not None:
            total = mine + closed_by.n_bytes
            needed.append(total)
            parts.append(
                f"with the next, {self.nodes[closed_by.coll].name} ({mb_text(closed_by.n_bytes)} MB), "
                f"it would be {mb_text(total)} MB, over the cap by {mb_text(total - cap)} MB"
            )
        if needed:
            d.reason, d.detail, d.needed_mb = "over_cap", "; ".join(parts), shown_mb(min(needed))
        else:
            d.reason = "depends_on_bucket"
            d.detail = (
                f"the rest of its run ({_names([self.nodes[c.coll] for c in left_out or []])}) derives from it, "
                "so torch left those out of its bucket and it stays alone"
            )

    def _ancestor_in(self, cid: int, members: set[int]) -> fx.Node | None:
        """The first of ``members`` found among the graph ancestors of node ``cid`` (the walk
        stops below the earliest member), or None when the dependence is only through a
        merged bucket."""
        ids = self.planner.ids
        floor = min(members)
        seen: set[fx.Node] = set()
        stack = list(self.nodes[cid].all_input_nodes)
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            i = ids[n]
            if i in members:
                return n
            if i > floor:
                stack.extend(n.all_input_nodes)
        return None
