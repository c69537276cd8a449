"""Rebuild and replay a graph torch never pre-bucketed, and what the forward's FSDP groups
would have done to it.

A backward that keeps the forward's gathered parameters runs reduce-scatters only; torch's
pre-bucketing finds its FSDP groups from all-gathers, so it finds none there, logs nothing
and every reduce-scatter runs on its own (:class:`tracekit.pairing.UnbucketedSource`: the
graph's ``before_post_grad_graph`` and its collective schedule, with the forward outcome of the
same compile id). Here:

- :meth:`UnbucketedReplayer.reproduce`: the rebuilt graph planned as torch would (groups
  identified in the graph itself): it must find no FSDP group, so nothing is merged, as
  recorded ("not pre-bucketed"); the collectives the rebuilt graph holds are checked against
  the logged schedule's counts;
- :meth:`UnbucketedReplayer.with_groups`: the what-if ``forward_groups``: the pass given the
  forward's FSDP groups and group size (``bucketing.FsdpPlanner(gm, fsdp_groups=...)``), at a
  cap, with the NCCL-model time before and after (:mod:`tracekit.replay.comm_estimate`);
  ``verify=True`` also runs our rewrite (``bucketing.pre_bucket_fsdp_collectives`` given those
  groups) on a fresh rebuild, lints it and checks its counts equal the plan's.

The overlap scheduler's own bucketing (``collective_bucketing=True``) is not replayed here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch.fx as fx

from tracekit.model import COLLECTIVE_TYPES, SHORT_NAMES
from tracekit.replay import comm_estimate as ce
from tracekit.replay.graph_text import parse_graph_text

#: The recorded outcome of such a graph, as summarize names it.
OUTCOME = "not pre-bucketed"
#: The what-if's name (replay's ``--what-if forward-groups``).
FORWARD_GROUPS = "forward_groups"
KINDS = ("AG", "RS", "AR")
_TARGET_KIND = {"all_gather_into_tensor": "AG", "all_gather_into_tensor_out": "AG",
                "reduce_scatter_tensor": "RS", "all_reduce": "AR"}


def collective_kind(node: fx.Node) -> str | None:
    """``AG`` / ``RS`` / ``AR`` for a functional collective node, else None."""
    if node.op != "call_function":
        return None
    name = getattr(node.target, "__name__", str(node.target)).split(".")[0]
    return _TARGET_KIND.get(name) if "_c10d_functional" in str(node.target) else None


@dataclass
class GroupsWhatIf:
    """The pass given FSDP groups found elsewhere, at one cap."""

    fsdp_groups: list[str]
    group_size: int | None
    bucket_cap_mb: float
    cap_source: str  # "forward" (the forward's recorded cap), "auto" (exact automatic cap), "override"
    collectives: dict[str, dict[str, int]]  # long kind -> {"before", "after"}
    buckets: dict[str, list[list[str]]]
    estimated_comm_ms: float | None
    comm_ms_before: float | None  # every collective on its own, as it runs
    applied: dict[str, Any] | None = None
    report: Any = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": FORWARD_GROUPS,
            "fsdp_groups": list(self.fsdp_groups),
            "group_size": self.group_size,
            "bucket_cap_mb": self.bucket_cap_mb,
            "cap_source": self.cap_source,
            "collectives": self.collectives,
            "buckets": self.buckets,
            "estimated_comm_ms": _ms(self.estimated_comm_ms),
            "comm_ms_before": _ms(self.comm_ms_before),
            "comm_ms_saved": None if self.estimated_comm_ms is None or self.comm_ms_before is None
            else _ms(self.comm_ms_before - self.estimated_comm_ms),
            "applied": self.applied,
        }


def _ms(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


class UnbucketedReplayer:
    """One rebuilt graph never pre-bucketed, with planners asked as torch and with groups."""

    def __init__(self, src: Any, symbols: dict[str, int] | None = None):
        from bucketing import FsdpPlanner

        self.src = src
        self.symbols = {**(getattr(src, "symbol_hints", None) or {}), **(symbols or {})}
        self.gm = parse_graph_text(src.text, self.symbols)
        self.planner = FsdpPlanner(self.gm)
        self.collectives = [n for n in self.gm.graph.nodes if collective_kind(n)]
        self._with_groups: dict[tuple, Any] = {}

    # -- as torch ran it -------------------------------------------------------------------
    def reproduce(self) -> tuple[bool, list[str]]:
        """``(reproduced, mismatches)``: torch's outcome is "nothing merged, no group": the
        rebuilt graph must have no FSDP group, and the collectives the logged schedule runs."""
        out = []
        if self.planner.fsdp_groups:
            out.append(f"the rebuilt graph has FSDP groups {self.planner.fsdp_groups}: torch would have "
                       "pre-bucketed it and logged an outcome")
        have = {k: sum(1 for n in self.collectives if collective_kind(n) == k) for k in KINDS}
        want = {SHORT_NAMES[t]: self.src.final.counts.get(t, 0) for t in COLLECTIVE_TYPES}
        for k in KINDS:
            if have[k] != want[k]:
                out.append(f"{k}: the schedule runs {want[k]}, the rebuilt graph has {have[k]}")
        return not out, out

    def decisions(self) -> list[Any]:
        """The planner's reason for each collective, as torch ran it (no group: the pass leaves
        every one: ``no_fsdp_group``)."""
        return self.planner.plan(None, explain=True).decisions

    def comm_ms(self, buckets: dict[str, list[list[str]]], group_size: int | None,
                hw: ce.Hardware | None = None) -> float | None:
        """NCCL-model time of every collective of the graph, members of ``buckets`` costed as
        one collective each bucket (torch's fx sizes: input plus output bytes)."""
        hw = hw or ce.Hardware()
        group_size = hw.group_size or group_size or self.group_size_in_graph()
        if not group_size:
            return None
        bucket_of = {m: (k, i) for k, bs in buckets.items() for i, b in enumerate(bs) for m in b}
        units: list[tuple[str, int]] = []
        merged: dict[tuple[str, int], int] = {}
        for n in self.collectives:
            kind = collective_kind(n)
            n_bytes = ce.collective_bytes(n)
            if n.name in bucket_of:
                merged[bucket_of[n.name]] = merged.get(bucket_of[n.name], 0) + n_bytes
            else:
                units.append((kind, n_bytes))
        units += [(k, b) for (k, _), b in merged.items()]
        return ce.comm_ms(units, group_size, hw)

    def group_size_in_graph(self) -> int | None:
        """The group size of the graph's first collective (its ``group_size`` argument)."""
        from bucketing.predicates import group_size_of

        for n in self.collectives:
            try:
                return int(group_size_of(n))
            except Exception:  # noqa: BLE001 - a collective without the argument: try the next
                continue
        return None

    # -- the what-if ----------------------------------------------------------------------
    def forward_cap(self) -> tuple[float, str] | None:
        """The cap the what-if uses: the forward's recorded one (its config holds for the
        backward too), the exact automatic cap when the log's rounded cap is that; None when
        no forward identified groups."""
        fwd = self.src.forward
        if fwd is None:
            return None
        if fwd.group_size:
            exact = ce.auto_cap(fwd.group_size, ce.Hardware())
            if round(exact.cap_mb, 1) == round(fwd.bucket_cap_mb, 1):
                return exact.cap_mb, "auto"
        return fwd.bucket_cap_mb, "forward"

    def with_groups(self, cap_mb: float | None = None, *, verify: bool = False,
                    hw: ce.Hardware | None = None) -> GroupsWhatIf | None:
        """The what-if ``forward_groups`` at ``cap_mb`` (None: :meth:`forward_cap`); None when
        the compile id has no forward outcome with groups."""
        from bucketing import FsdpPlanner

        fwd = self.src.forward
        if fwd is None:
            return None
        if cap_mb is None:
            cap_mb, source = self.forward_cap()
        else:
            source = "override"
        key = tuple(fwd.fsdp_groups), fwd.group_size
        planner = self._with_groups.get(key)
        if planner is None:
            planner = self._with_groups[key] = FsdpPlanner(self.gm, fsdp_groups=list(fwd.fsdp_groups),
                                                           group_size=fwd.group_size)
        report = planner.plan(cap_mb)
        buckets = {k: [[m.name for m in b] for b in report.buckets.get(k, [])] for k in KINDS}
        counts = {t: {"before": report.counts_before.get(SHORT_NAMES[t], 0),
                      "after": report.counts_after.get(SHORT_NAMES[t], 0)} for t in COLLECTIVE_TYPES}
        out = GroupsWhatIf(list(fwd.fsdp_groups), fwd.group_size, float(cap_mb), source, counts, buckets,
                           self.comm_ms(buckets, fwd.group_size, hw), self.comm_ms({}, fwd.group_size, hw),
                           report=report)
        if verify:
            out.applied = self.apply_with_groups(cap_mb, counts)
        return out

    def apply_with_groups(self, cap_mb: float, planned: dict[str, dict[str, int]]) -> dict[str, Any]:
        """Our rewrite given the forward's groups, on a fresh rebuild: its counts, whether they
        match the plan, lint (a failure is reported, never raised)."""
        from bucketing import pre_bucket_fsdp_collectives, register_fake_process_groups

        fwd = self.src.forward
        try:
            gm = parse_graph_text(self.src.text, self.symbols)
            if fwd.group_size:
                register_fake_process_groups(fwd.fsdp_groups, fwd.group_size)
            report = pre_bucket_fsdp_collectives(gm, bucket_cap_mb=cap_mb, fsdp_groups=list(fwd.fsdp_groups),
                                                 group_size=fwd.group_size)
            gm.graph.lint()
        except Exception as e:  # noqa: BLE001 - any failure of the rewrite is a reported result
            return {"ok": False, "error": f"{type(e).__name__}: {str(e)[:300]}"}
        counts = {t: {"before": report.counts_before.get(SHORT_NAMES[t], 0),
                      "after": report.counts_after.get(SHORT_NAMES[t], 0)} for t in COLLECTIVE_TYPES}
        return {"ok": True, "lint": "ok", "rewritten": report.rewritten, "collectives": counts,
                "matches_plan": counts == planned, "nodes_after": len(gm.graph.nodes)}
