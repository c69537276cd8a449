"""explain on a mesh: the reason and a verified what-if for each collective on a group torch's
pre-bucketing never saw (HSDP's replicate all-reduces).

The planner's reason for such a collective is ``other_group`` (on a group that is no FSDP
group). On a mesh the group is known (:mod:`tracekit.replay.process_groups`: its role and
members, read from every rank's logs), so the detail says what the group is and why the pass
leaves it: it has no FSDP all-gather, and torch buckets all-reduces only on the groups of its
FSDP all-gathers. The what-if plans again with our pass given those groups as well as the FSDP
ones (``bucketing.FsdpPlanner(gm, fsdp_groups=...)``, whose plans equal the rewrite's), and
names the bucket each collective joins. Only kinds that run more than once on such a group
count (one collective has nothing to bucket with). For the hsdp fixture's backward::

    all_reduce_3   AR   0.062   f32   -   other_group   groups '3', '1': AR 0
    all_reduce_3: other_group: replicate group '1' (ranks 0,2) has no FSDP all-gather: ...
"""

from __future__ import annotations

from typing import Any

from tracekit.model.rankset import format_ranks
from tracekit.replay.mesh_what_ifs import reason


def add_mesh_reasons(gr: Any, cap_mb: float, collectives: list[dict[str, Any]]) -> None:
    """Give each ``other_group`` collective of a replayed graph (``gr``, a GraphReplay) on a
    group the pass never saw its mesh reason and what-if, in place."""
    from bucketing import FsdpPlanner

    planner = gr.replayer.planner
    fsdp = list(planner.fsdp_groups)
    counts: dict[tuple[str, str], int] = {}
    for c in collectives:
        if c["reason"] == "other_group" and c["group"] not in fsdp:
            counts[(c["group"], c["kind"])] = counts.get((c["group"], c["kind"]), 0) + 1
    groups = list(dict.fromkeys(g for (g, _), n in counts.items() if n > 1))
    known = {g.name: g for g in gr.groups}
    if fsdp and len(gr.groups) > 1:  # a mesh: a kind that runs once on such a group, no what-if
        _add_run_once(gr, fsdp, known, collectives, {k for k, n in counts.items() if n == 1})
    if not fsdp or not groups:
        return
    given = fsdp + groups
    plan = FsdpPlanner(
        gr.replayer.gm, planner.mode, planner.bucket_mode, fsdp_groups=given, group_size=planner.group_size
    ).plan(cap_mb)
    bucket_of = {
        m.name: (kind, i, len(b)) for kind, bs in plan.buckets.items() for i, b in enumerate(bs) for m in b
    }
    long = {"AG": "all_gather", "RS": "reduce_scatter", "AR": "all_reduce"}
    from tracekit.replay.collective_context import chained

    chains = {
        key: chained(
            gr.replayer.gm,
            [
                c["name"]
                for c in collectives
                if c["reason"] == "other_group" and (c["group"], c["kind"]) == key
            ],
        )
        for key, n in counts.items()
        if n > 1
    }
    for c in collectives:
        if c["reason"] != "other_group" or c["group"] not in groups:
            continue
        g = known.get(c["group"])
        c["detail"] = reason(
            c["group"],
            None if g is None else g.role,
            () if g is None else g.members,
            long.get(c["kind"], c["kind"]),
            fsdp,
        )
        where = bucket_of.get(c["name"])
        links = [(a, b) for a, b in chains.get((c["group"], c["kind"]), []) if c["name"] in (a, b)]
        if where is None and links:  # read off the graph: why our pass buckets it with none
            c["detail"] += (
                "; read off the graph: "
                + ", ".join(f"{b} needs {a} (its input is computed from its result)" for a, b in links)
                + ": a chain, no bucket can hold both, so our pass given the group leaves it alone"
            )
        if where is not None:
            kind, i, n = where
            c["what_if"] = {
                "fsdp_groups": given,
                "bucket": i,
                "verified": True,
                "text": f"our pass given group {c['group']!r} as well buckets it ({kind} bucket {i}, of {n})",
            }


def _add_run_once(
    gr: Any,
    fsdp: list[str],
    known: dict[str, Any],
    collectives: list[dict[str, Any]],
    once: set[tuple[str, str]],
) -> None:
    """The detail of each ``other_group`` collective that is the only one of its kind on its
    group in the graph (tensor parallelism's all-reduce of activations): what the group is, why
    there is no what-if (nothing to bucket it with), and what it carries, read off the graph
    (:func:`tracekit.replay.collective_context.context`)."""
    from tracekit.replay.collective_context import context

    long = {"AG": "all_gather", "RS": "reduce_scatter", "AR": "all_reduce"}
    for c in collectives:
        if c["reason"] != "other_group" or (c["group"], c["kind"]) not in once:
            continue
        g = known.get(c["group"])
        role = None if g is None else g.role
        what = f"{role} group {c['group']!r}" if role and role != "unknown" else f"group {c['group']!r}"
        if g is not None and g.members:
            what += f" (ranks {format_ranks(g.members)})"
        ctx = context(gr.replayer.gm, c["name"], fsdp)
        c["detail"] = (
            f"{what} is no FSDP group ({', '.join(map(repr, fsdp))}) and runs one "
            f"{long.get(c['kind'], c['kind'])} in this graph: nothing to bucket it with, no what-if"
            + ("" if ctx is None else f"; read off the graph: {ctx['text']}")
        )


__all__ = ["add_mesh_reasons"]
