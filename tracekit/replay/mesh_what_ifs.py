"""Collectives pre-bucketing never handles on a mesh, and what would bucket them, each what-if
verified by running the code on the rebuilt graph.

torch's FSDP pre-bucketing finds its groups from FSDP all-gathers and buckets only collectives
on them. On a mesh, HSDP's backward all-reduces every gradient on the replicate group, which
has no all-gather: those all-reduces run one by one. Here, for a graph replayed at its recorded
cap (:class:`tracekit.replay.replayer.GraphReplayer`), the collectives of a kind that runs more
than once on a group the pass never saw are counted (count, bytes, torch's NCCL estimate, the
reason), then two what-ifs run at the recorded cap, and at each other cap replayed
(``--cap-mb``, ``--cap auto``: :func:`add_at_caps`, on the what-if hardware):

- ``our_pass_with_groups``: our pass (:func:`bucketing.pre_bucket_fsdp_collectives`) given
  those groups as well as the FSDP ones, the rewritten graph linted, then torch's overlap
  scheduler with the run's settings: the collectives left on those groups, their estimate, and
  the graph's exposed and estimated ms;
- ``overlap_bucketing``: the recorded pre-bucketing, then torch's overlap scheduler with
  ``collective_bucketing=True`` (torch 2.14's notes: it buckets DDP/HSDP all-reduces): what it
  leaves, and its own exposed figure. torch computes that figure from the estimates of the
  collectives before its own bucketing, so it does not move; the NCCL estimate of what is left
  is given beside it.

Our pass's what-if keeps the scheduler's ``timeline`` (as a cap's), so ``--trace-out`` draws it
beside the recorded cap (:mod:`tracekit.render.perfetto`); the report's Cap sweep shows the
what-ifs' table (:mod:`tracekit.render.mesh_what_ifs_html`).

For the hsdp fixture's backward (8 all-reduces on replicate group '1', 148,552 B, 0.0658 ms)::

    our_pass_with_groups   AR 8->1   0.0112 ms   exposed 0.0305 (as run 0.0851)
    overlap_bucketing      AR 8->1   0.0112 ms   exposed 0.0851 (torch's figure)
"""

from __future__ import annotations

from typing import Any

OUR_PASS = "our_pass_with_groups"
OVERLAP_BUCKETING = "overlap_bucketing"


def _ms(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _on_other_groups(rp: Any, fsdp: list[str]) -> dict[tuple[str, str], list[Any]]:
    """The graph's final collectives on groups other than ``fsdp`` (the groups the pass saw),
    by (group, kind), in graph order."""
    from tracekit.replay import overlap_schedule as osch

    acc: dict[tuple[str, str], list[Any]] = {}
    for c in osch.final_collectives(rp.gm, _estimates(rp, None)):
        if c.group is not None and c.group not in fsdp:
            acc.setdefault((c.group, c.kind), []).append(c)
    return acc


def unhandled(rp: Any) -> list[dict[str, Any]]:
    """Per group the pass never saw and kind that runs more than once on it: ``{"group",
    "role", "members", "kind", "count", "bytes", "est_ms", "reason"}`` (bytes: the inputs, as
    torch's estimation CSV; est_ms: the sum of torch's NCCL estimates). Needs the graph's groups
    registered (:meth:`GraphReplayer.register_groups`)."""
    from tracekit.replay.collective_context import chained

    fsdp = list(rp.planner.fsdp_groups)
    if not fsdp:
        return []  # a graph torch never pre-bucketed: tracekit.replay.not_prebucketed_graphs
    by_name = {g.name: g for g in rp.groups}
    out = []
    for (group, kind), cs in _on_other_groups(rp, fsdp).items():
        if len(cs) < 2:
            continue
        g = by_name.get(group)
        role = g.role if g is not None else None
        members = g.members if g is not None else ()
        why = reason(group, role, members, kind, fsdp)
        chain = chained(rp.gm, [c.name for c in cs])
        if chain:  # read off the graph: what keeps any bucketing from merging them
            why += (
                f"; read off the graph: {', '.join(f'{b} needs {a} (its input is computed from its result)' for a, b in chain[:3])}"
                f"{' ...' if len(chain) > 3 else ''}: a chain, no bucket can hold both"
            )
        out.append(
            {
                "group": group,
                "role": role,
                "members": _ranks(members),
                "kind": kind,
                "count": len(cs),
                "bytes": sum(c.bytes or 0 for c in cs),
                "est_ms": _ms(sum(c.est_ms for c in cs)),
                "reason": why,
                **({"chained": [list(p) for p in chain]} if chain else {}),
            }
        )
    return out


def run_once(rp: Any) -> list[dict[str, Any]]:
    """The other side of :func:`unhandled`: per group the pass never saw and kind that runs
    once in the graph (a tensor-parallel all-reduce of activations, one per graph): no finding
    and no what-if (one collective has nothing to be bucketed with), but said, with what the
    collective carries read off the graph (:func:`tracekit.replay.collective_context.context`):
    ``{"group", "role", "members", "kind", "count", "collective", "bytes", "est_ms", "reason",
    "context"}``."""
    from tracekit.replay.collective_context import context

    fsdp = list(rp.planner.fsdp_groups)
    if not fsdp:
        return []
    by_name = {g.name: g for g in rp.groups}
    out = []
    for (group, kind), cs in _on_other_groups(rp, fsdp).items():
        if len(cs) != 1:
            continue
        (c,) = cs
        g = by_name.get(group)
        role = g.role if g is not None else None
        members = g.members if g is not None else ()
        what = f"{role} group {group!r}" if role and role != "unknown" else f"group {group!r}"
        if members:
            what += f" (ranks {_ranks(members)})"
        ctx = context(rp.gm, c.name, fsdp)
        out.append(
            {
                "group": group,
                "role": role,
                "members": _ranks(members),
                "kind": kind,
                "count": 1,
                "collective": c.name,
                "bytes": c.bytes,
                "est_ms": _ms(c.est_ms),
                "reason": (
                    f"{what} runs one {kind} in this graph: nothing to bucket it with (bucketing "
                    "merges collectives of one kind on one group), so no what-if runs"
                ),
                "context": ctx,
            }
        )
    return out


def _ranks(members: tuple[int, ...]) -> str | None:
    from tracekit.model.rankset import format_ranks

    return format_ranks(members) if members else None


def reason(group: str, role: str | None, members: tuple[int, ...], kind: str, fsdp: list[str]) -> str:
    """Why the pass leaves a collective on ``group``: it has no FSDP all-gather."""
    what = f"{role} group {group!r}" if role and role != "unknown" else f"group {group!r}"
    if members:
        what += f" (ranks {_ranks(members)})"
    kinds = {"all_reduce": "all-reduces", "all_gather": "all-gathers", "reduce_scatter": "reduce-scatters"}
    return (
        f"{what} has no FSDP all-gather: torch's pre-bucketing buckets {kinds.get(kind, kind)} only on "
        f"the groups of its FSDP all-gathers ({', '.join(map(repr, fsdp))})"
    )


def _left(sched: Any, groups: set[str]) -> tuple[int, float]:
    """The collectives left on ``groups`` after the scheduler, and their NCCL estimate."""
    cs = [c for c in sched.final if c.group in groups]
    return len(cs), sum(c.est_ms for c in cs)


def _estimates(rp: Any, hw: Any) -> dict[tuple, float]:
    """The replayer's NCCL estimates on ``hw`` (None: the hardware torch detects, as logged)."""
    from tracekit.replay import comm_estimate as ce

    return rp._estimates.setdefault(ce.Hardware() if hw is None else hw, {})


def what_ifs(
    rp: Any, cap_mb: float, compute_us: dict[str, float] | None, found: list[dict[str, Any]], hw: Any = None
) -> list[dict]:
    """The two what-ifs (see the module docstring) at ``cap_mb``; a failure is an entry with
    ``ok`` False and its ``error``, never raised. ``hw``: the what-if hardware torch's NCCL
    model answers for (``--interconnect`` ...; None: the hardware as logged)."""
    import torch._inductor.config as inductor_config

    from bucketing import pre_bucket_fsdp_collectives
    from tracekit.replay import comm_estimate as ce
    from tracekit.replay import overlap_schedule as osch

    model = (
        None
        if hw is None or hw == ce.Hardware()
        else (lambda: ce.scheduler_model(hw, rp.planner.fsdp_groups))
    )

    groups = list(dict.fromkeys(f["group"] for f in found))
    fsdp = list(rp.planner.fsdp_groups)
    gpu = osch.GPUS[rp.options.gpu]
    mode = {"aten_distributed_optimizations.bucket_mode": rp.planner.bucket_mode}
    out = []
    for name in (OUR_PASS, OVERLAP_BUCKETING):
        entry: dict[str, Any] = {"name": name, "ok": False, "error": None, "bucket_cap_mb": cap_mb}
        try:
            rp.register_groups()
            gm = osch.copy_graph(rp.gm)
            given = fsdp + groups if name == OUR_PASS else None
            with inductor_config.patch(mode):
                pre_bucket_fsdp_collectives(
                    gm,
                    mode=rp.options.mode,
                    bucket_cap_mb=cap_mb,
                    recompile=False,
                    fsdp_groups=given,
                    group_size=rp.group_size if given else None,
                    torch_order=rp.torch_order,
                )
            # as the run scheduled, bar the what-if itself
            asked = {"collective_bucketing": True} if name == OVERLAP_BUCKETING else {}
            settings = osch.scheduler_settings({**rp.run_overrides, **asked})
            with inductor_config.patch(mode):
                sched = osch.schedule(
                    gm,
                    compute_us,
                    gpu,
                    settings,
                    None,
                    _estimates(rp, hw),
                    model,
                    roofline_rest=rp.stock_estimates,
                )
            n, ms = _left(sched, set(groups))
            entry.update(
                ok=True,
                fsdp_groups=given,
                collective_bucketing=bool(settings.get("collective_bucketing")),
                counts=sched.counts(),
                left=n,
                left_est_ms=_ms(ms),
                comm_ms=_ms(_comm_ms(sched)),
                exposed_ms=_ms(sched.exposed_ms),
                est_ms=_ms(sched.est_ms),
            )
            if name == OUR_PASS:
                # its own timeline: a track in --trace-out (tracekit.render.perfetto). torch's
                # scheduler times the graph before its collective bucketing runs: that timeline
                # is the as-run one, not drawn again
                entry["timeline"] = {"nodes": sched.timeline, "memory": sched.memory}
        except Exception as e:  # noqa: BLE001 - a what-if that cannot run is reported, never raised
            entry["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        out.append(entry)
    return out


def mesh_not_prebucketed(rp: Any, cap: Any, compute_us: dict[str, float] | None) -> dict[str, Any] | None:
    """The ``not_prebucketed_on_mesh`` entry of a replayed graph (None when every collective
    is on an FSDP group or runs once): what pre-bucketing leaves and the what-ifs, with the
    replay at the recorded cap (``cap``, a :class:`CapReplay`) as the baseline."""
    found = unhandled(rp)
    if not found:
        return None
    return {
        "collectives": found,
        "as_run": _as_run(cap, {f["group"] for f in found}),
        "what_ifs": what_ifs(rp, cap.bucket_cap_mb, compute_us, found),
    }


def _comm_ms(sched: Any) -> float:
    """A schedule's comm ms, one figure wherever the graph is shown: the scheduler's own sum of
    its collective estimates (``ScheduledGraph.comm_ms``, rounded once), as the scheduler table
    gives it; with the scheduler's collective_bucketing on, which it estimates before bucketing,
    the collectives that run after it (their estimates added)."""
    if sched.settings.get("collective_bucketing"):
        return float(sum(c.est_ms for c in sched.final))
    return float(sched.comm_ms)


def _as_run(cap: Any, groups: set[str]) -> dict[str, Any]:
    """A cap's own figures (its schedule, our pass given the FSDP groups only) beside the
    what-ifs: what is left on ``groups``, comm, exposed and estimated ms."""
    base = cap.schedule
    n, ms = _left(base, groups) if base is not None else (None, None)
    return {
        "bucket_cap_mb": cap.bucket_cap_mb,
        "left": n,
        "left_est_ms": _ms(ms),
        "comm_ms": None if base is None else _ms(base.comm_ms),  # the scheduler table's figure
        "exposed_ms": None if base is None else _ms(base.exposed_ms),
        "est_ms": None if base is None else _ms(base.est_ms),
    }


def at_cap(
    rp: Any,
    cap: Any,
    compute_us: dict[str, float] | None,
    found: list[dict[str, Any]],
    hw: Any,
    label: Any = None,
) -> dict[str, Any]:
    """The what-ifs at another cap than the recorded one (a ``--cap-mb``, ``--cap auto`` or
    ``--recommend`` cap: ``cap``, a scheduled :class:`CapReplay`, on the what-if hardware
    ``hw``): that cap as replayed, then both what-ifs at it. An entry of
    ``not_prebucketed_on_mesh.at_caps``; ``cap``: the step's label of that cap (``label``:
    ``1``, ``auto``), by which the whole step finds it (:mod:`tracekit.replay.mesh_whole_step`)."""
    return {
        "cap": label,
        "bucket_cap_mb": cap.bucket_cap_mb,
        "as_run": _as_run(cap, {f["group"] for f in found}),
        "what_ifs": what_ifs(rp, cap.bucket_cap_mb, compute_us, found, hw),
    }


def add_at_caps(
    results: list[Any], options: Any, labels: list[str], caps: frozenset[str] | None = None
) -> None:
    """Run the what-ifs at every other cap each mesh graph was replayed at (``--cap-mb``,
    ``--cap auto``), after the replay: ``not_prebucketed_on_mesh.at_caps``, one :func:`at_cap`
    entry per scheduled cap, in the order replayed, on the what-if hardware of ``options``;
    ``labels``: the step's labels of the caps replayed (:func:`results.cap_labels` after
    ``recorded``). ``caps``: only the caps of these labels (``--recommend``: those given with ``--cap-mb``, not
    its whole grid, then :func:`add_at_recommended_cap`), None every one."""
    for r in results:
        m, rp = r.mesh_not_prebucketed, r.replayer
        if not m or rp is None:
            continue
        found = m["collectives"]
        have = {e.get("cap") for e in m.get("at_caps") or []}
        entries = list(m.get("at_caps") or [])
        for i, c in enumerate(r.replays):
            label = labels[i] if i < len(labels) else None
            if c.schedule is None or label in have or (caps is not None and label not in caps):
                continue
            entries.append(at_cap(rp, c, r.compute_estimates_us, found, options.hardware, label))
        if entries:  # in the order the caps were replayed
            order = {x: i for i, x in enumerate(labels)}
            m["at_caps"] = sorted(entries, key=lambda e: order.get(e.get("cap"), len(order)))


def add_at_recommended_cap(results: list[Any], options: Any, labels: list[str], doc: dict[str, Any]) -> None:
    """``--recommend``: the what-ifs at the cap it recommends too (two scheduler runs a mesh
    graph, not two a cap of its grid), then the whole step's what-ifs again
    (:func:`tracekit.replay.mesh_whole_step.add_step_what_ifs`) and the recommendation's own
    (``recommendation.mesh_what_ifs``: the step at that cap with each what-if). In place."""
    from tracekit.replay.mesh_whole_step import add_step_what_ifs

    rec = doc.get("recommendation")
    if not isinstance(rec, dict) or not any(r.mesh_not_prebucketed for r in results):
        return
    if rec.get("cap") != "recorded":
        add_at_caps(results, options, labels, frozenset({rec["cap"]}))
        for r, g in zip(results, doc["graphs"], strict=True):
            if r.mesh_not_prebucketed:
                g["not_prebucketed_on_mesh"] = r.mesh_not_prebucketed
    add_step_what_ifs(doc)
    step = next((s for s in doc["totals"]["step"] if s.get("cap") == rec.get("cap")), None)
    if step is not None and step.get("mesh_what_ifs"):
        rec["mesh_what_ifs"] = step["mesh_what_ifs"]


__all__ = [
    "OUR_PASS",
    "add_at_caps",
    "add_at_recommended_cap",
    "at_cap",
    "OVERLAP_BUCKETING",
    "mesh_not_prebucketed",
    "reason",
    "run_once",
    "unhandled",
    "what_ifs",
]
