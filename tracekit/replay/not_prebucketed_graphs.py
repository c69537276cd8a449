"""Rebuild and replay a graph torch never pre-bucketed, and what the forward's FSDP groups
would have done to it.

A backward that keeps the forward's gathered parameters runs reduce-scatters only; torch's
pre-bucketing finds its FSDP groups from all-gathers, so it finds none there, logs nothing
and every reduce-scatter runs on its own (:class:`tracekit.read.pairing.NotPrebucketedSource`: the
graph's ``before_post_grad_graph`` and its collective schedule, with the forward outcome of the
same compile id). Here:

- :meth:`NotPrebucketedReplayer.reproduce`: the rebuilt graph planned as torch would (groups
  identified in the graph itself): it must find no FSDP group, so nothing is merged, as
  recorded ("not pre-bucketed"); the collectives the rebuilt graph holds are checked against
  the logged schedule's counts;
- :meth:`NotPrebucketedReplayer.with_groups`: the what-if ``forward_groups``: the pass given the
  forward's FSDP groups and group size (``bucketing.FsdpPlanner(gm, fsdp_groups=...)``), at a
  cap, with the NCCL-model time before and after (:mod:`tracekit.replay.comm_estimate`);
  ``verify=True`` also runs our rewrite (``bucketing.pre_bucket_fsdp_collectives`` given those
  groups) on a fresh rebuild, lints it and checks its counts equal the plan's.

- :meth:`NotPrebucketedReplayer.overlap_bucketing`: the what-if ``overlap_bucketing``: torch's
  overlap scheduler (:mod:`tracekit.replay.overlap_schedule`, the graph's recorded compute
  estimates) run on the rebuilt graph with ``collective_bucketing`` True and False (as torch
  ran it): the final collectives, comm, exposed and estimated ms of each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch.fx as fx

from tracekit.model import COLLECTIVE_TYPES, SHORT_NAMES
from tracekit.replay import comm_estimate as ce
from tracekit.replay import run_settings
from tracekit.replay.graph_text import GraphTextError
from tracekit.replay.overlap_schedule import SETTING_KEYS
from tracekit.replay.post_grad import how_rebuilt, rebuilt_as_scheduled
from tracekit.replay.rewrite_counts import applied_result, collective_counts
from tracekit.replay.schedule_figures import round_ms, schedule_figures, shown_delta

#: The recorded outcome of such a graph, as summarize names it.
OUTCOME = "not pre-bucketed"
#: Why a graph of a log where pre-bucketing never ran is not compared (reproduced None).
NOT_RUN = (
    "not compared: pre-bucketing never ran in this log (no pre_bucketing_fsdp_collectives outcome in "
    "it: an older torch, the pass off, or overlap scheduling off), so its outcome is no evidence"
)
#: The what-if's name (replay's ``--what-if forward-groups``).
FORWARD_GROUPS = "forward_groups"
#: The what-if of torch's overlap scheduler bucketing (replay's ``--what-if overlap-bucketing``).
OVERLAP_BUCKETING = "overlap_bucketing"
_TARGET_KIND = {
    "all_gather_into_tensor": "AG",
    "all_gather_into_tensor_out": "AG",
    "reduce_scatter_tensor": "RS",
    "all_reduce": "AR",
}


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
            "estimated_comm_ms": round_ms(self.estimated_comm_ms),
            "comm_ms_before": round_ms(self.comm_ms_before),
            "comm_ms_saved": None
            if self.estimated_comm_ms is None or self.comm_ms_before is None
            else round_ms(self.comm_ms_before - self.estimated_comm_ms),
            "applied": self.applied,
        }


class NotPrebucketedReplayer:
    """One rebuilt graph never pre-bucketed, with planners asked as torch and with groups."""

    def __init__(self, src: Any, symbols: dict[str, int] | None = None):
        from bucketing import FsdpPlanner

        self.src = src
        self.symbols = {**(getattr(src, "symbol_hints", None) or {}), **(symbols or {})}
        self._as_scheduled = how_rebuilt(src)
        #: the graph torch's scheduler was given (:mod:`tracekit.replay.post_grad`), and why not
        #: when torch's post-grad passes refused it
        self.gm, self.post_grad_note = rebuilt_as_scheduled(src.text, self.symbols, *self._as_scheduled)
        self.planner = FsdpPlanner(self.gm)
        self.collectives = [n for n in self.gm.graph.nodes if collective_kind(n)]
        #: the run's process groups (process_groups.GroupTable) on a mesh, None on a 1-D run
        self.table: Any = None
        self._with_groups: dict[tuple, Any] = {}
        run = getattr(src, "run_settings", None)
        #: the run's scheduler settings and whether it timed nodes by torch's models alone
        #: (:mod:`tracekit.replay.run_settings`): the scheduler runs as the run's did
        self.run_overrides = run_settings.scheduler_overrides(run, SETTING_KEYS)
        self.stock_estimates = run_settings.stock_estimates(run)

    # -- as torch ran it -------------------------------------------------------------------
    def reproduce(self) -> tuple[bool | None, list[str]]:
        """``(reproduced, mismatches)``: torch's outcome is "nothing merged, no group": the
        rebuilt graph must have no FSDP group, and the collectives the logged schedule runs.

        In a log where pre-bucketing never ran (``src.prebucketing_logged`` False), nothing is
        blamed: ``(None, notes)``, the notes saying why (:data:`NOT_RUN`) and what the rebuilt
        graph holds (its FSDP groups; collectives merged by a pass the log does not record)."""
        have = {k: sum(1 for n in self.collectives if collective_kind(n) == k) for k in SHORT_NAMES.values()}
        want = {SHORT_NAMES[t]: self.src.final.counts.get(t, 0) for t in COLLECTIVE_TYPES}
        if not getattr(self.src, "prebucketing_logged", True):
            notes = [NOT_RUN]
            if self.planner.fsdp_groups:
                notes.append(
                    f"the rebuilt graph has FSDP groups {self.planner.fsdp_groups}: torch's pre-bucketing "
                    "would group its collectives where it runs"
                )
            notes += [
                f"{k}: the schedule runs {want[k]}, the rebuilt graph has {have[k]} (a pass the log "
                "does not record changed them)"
                for k in SHORT_NAMES.values()
                if have[k] != want[k]
            ]
            return None, notes
        out = []
        if self.planner.fsdp_groups:
            out.append(
                f"the rebuilt graph has FSDP groups {self.planner.fsdp_groups}: torch would have "
                "pre-bucketed it and logged an outcome"
            )
        for k in SHORT_NAMES.values():
            if have[k] != want[k]:
                out.append(f"{k}: the schedule runs {want[k]}, the rebuilt graph has {have[k]}")
        if out and self.post_grad_note:  # the graph as logged was used: say why
            out.append(self.post_grad_note)
        return not out, out

    def decisions(self) -> list[Any]:
        """The planner's reason for each collective, as torch ran it (no group: the pass leaves
        every one: ``no_fsdp_group``)."""
        return self.planner.plan(None, explain=True).decisions

    def comm_ms(
        self, buckets: dict[str, list[list[str]]], group_size: int | None, hw: ce.Hardware | None = None
    ) -> float | None:
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
                units.append((kind, n_bytes))  # type: ignore[arg-type]  # a collective has a kind
        units += [(k, b) for (k, _), b in merged.items()]
        return ce.comm_ms(units, group_size, hw)

    def group_size_in_graph(self) -> int | None:
        """The group size of the graph's first collective (its ``group_size`` argument)."""
        from bucketing.predicates import group_size_of

        for n in self.collectives:
            try:
                return int(group_size_of(n))  # type: ignore[arg-type]  # None: TypeError, caught below
            except Exception:  # noqa: BLE001 - a collective without the argument: try the next
                continue
        return None

    # -- the what-ifs ---------------------------------------------------------------------
    def overlap_bucketing(self, gpu: str = "H100", table: Any = None) -> dict[str, Any]:
        """torch's overlap scheduler on copies of the rebuilt graph, with
        ``collective_bucketing`` False (as torch ran it) and True: ``{"name", "ok", "error",
        "as_run": {...}, "bucketed": {...}}``, each with ``counts`` (long kind -> n), ``comm_ms``
        (the NCCL estimates of the collectives left after the scheduler, buckets included),
        ``exposed_ms``, ``compute_ms``, ``est_ms`` and ``fallback`` (compute nodes without a
        recorded estimate). A graph the scheduler refuses gives ``ok`` False and ``error``.
        ``table``: the run's process groups (:class:`tracekit.replay.process_groups.GroupTable`),
        for the sizes of groups the graph names without one (a mesh's all-reduce groups)."""
        from tracekit.replay import overlap_schedule as osch

        out: dict[str, Any] = {"name": OVERLAP_BUCKETING, "ok": False, "error": None}
        try:
            if table is not None:
                self.table = table
            self.register_groups()
            compute = getattr(self.src, "compute_estimates_us", None)
            for key, on in (("as_run", False), ("bucketed", True)):
                s = osch.schedule(
                    osch.copy_graph(self.gm),
                    compute,
                    osch.GPUS[gpu],
                    osch.scheduler_settings({**self.run_overrides, "collective_bucketing": on}),
                    roofline_rest=self.stock_estimates,
                )
                out[key] = {
                    "collective_bucketing": on,
                    "counts": s.counts(),
                    # the collectives that run after the scheduler, each by torch's NCCL model:
                    # the scheduler's collective_info keeps the estimates of the collectives it
                    # started from, the same with bucketing on or off
                    "comm_ms": round_ms(sum(c.est_ms for c in s.final)),
                    "exposed_ms": round_ms(s.exposed_ms),
                    "compute_ms": round_ms(s.compute_ms),
                    "est_ms": round_ms(s.est_ms),
                    "fallback": len(s.fallback),
                }
            out["ok"] = True
        except Exception as e:  # noqa: BLE001 - a graph the scheduler refuses is a note, never a traceback
            out["error"] = (
                f"torch's overlap scheduler could not run on the rebuilt graph: {type(e).__name__}: {str(e)[:300]}"
            )
        return out

    def register_groups(self) -> None:
        """Every process group the graph uses as a fake one of its size (what torch's scheduler
        and its NCCL model look up): sizes from the graph, else from the run's groups
        (``self.table``, :mod:`tracekit.replay.process_groups`: a mesh's all-reduce groups),
        else the forward's group size for a group of the forward's FSDP groups."""
        from tracekit.replay import process_groups

        table = self.table or process_groups.GroupTable.empty()
        groups = process_groups.graph_groups(self.gm, table)
        fwd = self.src.forward
        if fwd is not None and fwd.group_size:  # as before: the forward's size for its groups
            groups = [
                process_groups.GraphGroup(g.name, fwd.group_size, "forward", g.members, g.role, g.kinds)
                if g.size is None and g.name in fwd.fsdp_groups
                else g
                for g in groups
            ]
        process_groups.register(groups, table.world)

    def scheduled(
        self, gpu: str = "H100", overrides: dict[str, Any] | None = None, hw: ce.Hardware | None = None
    ) -> Any:
        """torch's overlap scheduler on a copy of the rebuilt graph as torch ran it (nothing
        pre-bucketed, the same at every cap), with inductor's settings then ``overrides``: an
        :class:`tracekit.replay.overlap_schedule.ScheduledGraph`, the graph's part of the whole
        step. ``hw``: the what-if hardware torch's NCCL model answers for (None: as detected).
        Raises what the scheduler raises."""
        from tracekit.replay import overlap_schedule as osch

        self.register_groups()
        fwd = self.src.forward
        groups = list(fwd.fsdp_groups) if fwd is not None else []
        groups = groups or sorted({g for g in (osch._group_name(n) for n in self.collectives) if g})
        return osch.schedule(
            osch.copy_graph(self.gm),
            getattr(self.src, "compute_estimates_us", None),
            osch.GPUS[gpu],
            osch.scheduler_settings({**self.run_overrides, **(overrides or {})}),
            comm_model=None if hw is None or hw == ce.Hardware() else lambda: ce.scheduler_model(hw, groups),
            roofline_rest=self.stock_estimates,
        )

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

    def with_groups(
        self, cap_mb: float | None = None, *, verify: bool = False, hw: ce.Hardware | None = None
    ) -> GroupsWhatIf | None:
        """The what-if ``forward_groups`` at ``cap_mb`` (None: :meth:`forward_cap`); None when
        the compile id has no forward outcome with groups."""
        from bucketing import FsdpPlanner

        fwd = self.src.forward
        if fwd is None:
            return None
        if cap_mb is None:
            cap_mb, source = self.forward_cap()  # type: ignore[misc]  # a forward with groups has its cap
        else:
            source = "override"
        key = tuple(fwd.fsdp_groups), fwd.group_size
        planner = self._with_groups.get(key)
        if planner is None:
            planner = self._with_groups[key] = FsdpPlanner(
                self.gm, fsdp_groups=list(fwd.fsdp_groups), group_size=fwd.group_size
            )
        report = planner.plan(cap_mb)
        buckets = {k: [[m.name for m in b] for b in report.buckets.get(k, [])] for k in SHORT_NAMES.values()}
        counts = collective_counts(report)
        out = GroupsWhatIf(
            list(fwd.fsdp_groups),
            fwd.group_size,
            float(cap_mb),
            source,
            counts,
            buckets,
            self.comm_ms(buckets, fwd.group_size, hw),
            self.comm_ms({}, fwd.group_size, hw),
            report=report,
        )
        if verify:
            out.applied = self.apply_with_groups(cap_mb, counts)
        return out

    def apply_with_groups(self, cap_mb: float, planned: dict[str, dict[str, int]]) -> dict[str, Any]:
        """Our rewrite given the forward's groups, on a fresh rebuild: its counts, whether they
        match the plan, lint (a failure is reported, never raised)."""
        from bucketing import pre_bucket_fsdp_collectives, register_fake_process_groups

        fwd = self.src.forward

        def rewrite() -> tuple[Any, fx.GraphModule]:
            gm, _ = rebuilt_as_scheduled(self.src.text, self.symbols, *self._as_scheduled)
            if fwd.group_size:
                register_fake_process_groups(fwd.fsdp_groups, fwd.group_size)
            report = pre_bucket_fsdp_collectives(
                gm, bucket_cap_mb=cap_mb, fsdp_groups=list(fwd.fsdp_groups), group_size=fwd.group_size
            )
            return report, gm

        return applied_result(rewrite, planned)


# --- replay: many graphs, at each cap ------------------------------------------------------------


def _torch_counts(rp: NotPrebucketedReplayer) -> dict[str, dict[str, int]]:
    """As torch runs it: no FSDP group, so every collective stays (N->N)."""
    return {
        t: {"before": n, "after": n}
        for t, n in (
            (t, sum(1 for c in rp.collectives if collective_kind(c) == SHORT_NAMES[t]))
            for t in COLLECTIVE_TYPES
        )
    }


def rebuild(
    src: Any, symbols: dict[str, int] | None = None
) -> tuple[NotPrebucketedReplayer | None, str | None]:
    """``(replayer, None)`` for ``src`` rebuilt from its ``before_post_grad_graph``, or
    ``(None, why)`` when it cannot be (no text, a refused text, a planner failure): one graph's
    failure never stops the others (replay and explain)."""
    if src.text is None:
        return None, "no before_post_grad_graph logged for this graph"
    try:
        return NotPrebucketedReplayer(src, symbols), None
    except GraphTextError as e:
        return None, f"cannot rebuild the graph from before_post_grad_graph: {e}"
    except Exception as e:  # noqa: BLE001 - a planner failure on one graph must not stop the others
        return None, f"cannot plan the rebuilt graph: {type(e).__name__}: {str(e)[:300]}"


def _in_step(src: Any, options: Any) -> bool:
    """Whether the graph's overlap schedule is wanted (as for a pre-bucketed graph): always with
    ``overlap`` True, never with False, and by default when its log shows the scheduler ran
    (it logged the graph's compute estimates)."""
    overlap = getattr(options, "overlap", None)
    return bool(overlap) or (overlap is None and getattr(src, "compute_estimates_us", None) is not None)


def _schedule_dict(
    rp: NotPrebucketedReplayer, gpu: str, overrides: dict[str, Any] | None, hw: ce.Hardware | None = None
) -> dict[str, Any]:
    """The graph's figures after torch's overlap scheduler, in the shape of a cap's
    (``final``, ``comm_ms``, ``exposed_ms``, ``compute_ms``, ``est_ms``, ``peak_memory_bytes``,
    ``estimates``, ``timeline``, ``schedule_error``); a refusal is ``schedule_error``."""
    try:
        sc = rp.scheduled(gpu, overrides, hw)
    except Exception as e:  # noqa: BLE001 - a graph the scheduler refuses is a note, never a traceback
        return schedule_figures(None, f"overlap scheduler failed: {type(e).__name__}: {str(e)[:300]}")
    return schedule_figures(sc)


def replay_not_prebucketed_source(src: Any, options: Any, what_ifs: tuple[str, ...] = ()) -> dict[str, Any]:
    """One graph never pre-bucketed, replayed (a ``tracekit.replay/2`` document's
    ``not_prebucketed`` entry): rebuilt, torch's outcome reproduced ("not pre-bucketed": no
    group, nothing merged), then at each cap of ``options.caps`` as torch runs it (nothing
    merged) and, with ``"forward_groups"`` in ``what_ifs``, given the forward's FSDP groups
    (at the forward's cap when no cap is asked), ``options.apply`` running our rewrite too."""
    hw = options.hardware
    out: dict[str, Any] = {
        "rank": src.rank,
        "ranks": str(src.rank if src.rank is not None else "-"),
        "compile_id": src.compile_id,
        "graph_index": src.graph_index,
        "file": src.file,
        "line": src.line,
        "outcome": OUTCOME,
        "error": None,
        "nodes": 0,
        "recorded": {
            "outcome": OUTCOME,
            "schedule": {SHORT_NAMES[t]: n for t, n in src.final.counts.items() if n and t in SHORT_NAMES},
            "forward_groups": None if src.forward is None else list(src.forward.fsdp_groups),
            "estimated_comm_ms": None,
            "hardware": None,
        },
        "reproduced": None,
        "mismatches": [],
        "replays": [],
    }
    rp, out["error"] = rebuild(src, dict(options.symbols))
    if rp is None:
        return out
    rp.table = getattr(options, "groups", None)  # a mesh: the sizes of groups the graph names without
    out["nodes"] = len(rp.gm.graph.nodes)
    out["reproduced"], out["mismatches"] = rp.reproduce()
    group_size = src.forward.group_size if src.forward is not None else rp.group_size_in_graph()
    base = rp.comm_ms({}, group_size, hw)
    out["recorded"]["estimated_comm_ms"] = round_ms(base)
    out["recorded"]["hardware"] = ce.describe(hw, group_size)
    caps: list[tuple[float | None, str | None]] = []
    for req in options.caps:
        if req.mb is None:
            cap = ce.auto_cap(group_size, hw)
            caps.append((cap.cap_mb, cap.source))
        else:
            caps.append((req.mb, "override"))
    for cap_mb, source in caps:  # as torch runs it: no group at any cap
        out["replays"].append(
            {
                "bucket_cap_mb": cap_mb,
                "cap_source": source,
                "what_if": None,
                "collectives": _torch_counts(rp),
                "estimated_comm_ms": round_ms(base),
                "comm_ms_vs_recorded": 0.0 if base is not None else None,
                "applied": None,
            }
        )
    if _in_step(src, options):  # the graph's part of the whole step, as torch ran it
        out["schedule"] = _schedule_dict(rp, options.gpu, None)
        if options.scheduler_overrides or hw != ce.Hardware():  # the other caps run with the what-ifs
            out["schedule_what_if"] = _schedule_dict(rp, options.gpu, options.scheduler_overrides, hw)
    if FORWARD_GROUPS in what_ifs and src.forward is not None:
        for cap_mb, source in caps or [(None, None)]:
            w = rp.with_groups(cap_mb, verify=options.apply, hw=hw)
            assert w is not None  # src.forward is there
            ms = w.estimated_comm_ms
            out["replays"].append(
                {
                    "bucket_cap_mb": w.bucket_cap_mb,
                    "cap_source": source or w.cap_source,
                    "what_if": FORWARD_GROUPS,
                    "fsdp_groups": list(w.fsdp_groups),
                    "collectives": w.collectives,
                    "estimated_comm_ms": round_ms(ms),
                    "comm_ms_vs_recorded": shown_delta(ms, base),
                    "applied": w.applied,
                }
            )
    if OVERLAP_BUCKETING in what_ifs:
        o = rp.overlap_bucketing(getattr(options, "gpu", None) or "H100", getattr(options, "groups", None))
        if not o["ok"]:
            out["mismatches"].append(f"what-if {OVERLAP_BUCKETING}: {o['error']}")
        else:
            for key in ("as_run", "bucketed"):
                r = o[key]
                before = _torch_counts(rp)
                colls = {
                    t: {"before": c["before"], "after": r["counts"].get(t, 0)} for t, c in before.items()
                }
                out["replays"].append(
                    {
                        "bucket_cap_mb": None,
                        "cap_source": f"collective_bucketing={r['collective_bucketing']} "
                        f"(exposed {r['exposed_ms']:.4f}, est {r['est_ms']:.4f} ms)",
                        "what_if": OVERLAP_BUCKETING,
                        "collectives": colls,
                        "estimated_comm_ms": r["comm_ms"],
                        "exposed_ms": r["exposed_ms"],
                        "est_ms": r["est_ms"],
                        "compute_ms": r["compute_ms"],
                        "comm_ms_vs_recorded": shown_delta(r["comm_ms"], base),
                        "applied": None,
                    }
                )
    return out


def replay_not_prebucketed(
    sources: list[Any], options: Any, what_ifs: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """:func:`replay_not_prebucketed_source` for each distinct graph (same directory, compile id,
    position, text, hints and forward groups), standing for every rank that shares it
    (``ranks``, as ranges)."""
    import os

    from tracekit.model.rankset import format_ranks

    groups: dict[tuple, tuple[Any, list]] = {}
    for s in sources:
        fwd = (
            None
            if s.forward is None
            else (tuple(s.forward.fsdp_groups), s.forward.group_size, s.forward.bucket_cap_mb)
        )
        key = (
            os.path.dirname(s.file),
            s.compile_id,
            s.graph_index,
            s.text,
            tuple(sorted((s.symbol_hints or {}).items())),
            fwd,
            tuple(s.final.counts.items()),
        )
        if key in groups:
            groups[key][1].append(s.rank)
        else:
            groups[key] = (s, [s.rank])
    out = []
    for s, ranks in groups.values():
        entry = replay_not_prebucketed_source(s, options, what_ifs)
        entry["ranks"] = format_ranks(ranks)
        out.append(entry)
    return out
