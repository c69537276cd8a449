"""Graphs torch never pre-bucketed: collectives that run one by one, with no outcome logged.

Pure functions of a :class:`tracekit.model.Run`; nothing here reads a file, formats a table or
imports torch.

torch's FSDP pre-bucketing finds its FSDP groups from the all-gathers of each graph alone. A
backward that keeps the forward's gathered parameters (no activation checkpointing, so no
recomputed all-gather) holds reduce-scatters only: torch finds no FSDP group there, merges
nothing and logs no ``pre_bucketing_*`` artifact. Its collectives still show in the graph's
``inductor_collective_schedule`` (a :class:`tracekit.model.FinalSchedule` of
``Rank.schedules_without_outcome``). A schedule without outcome that runs more than one
collective of a kind pre-bucketing merges (all-gather, reduce-scatter, all-reduce) is a
finding: :func:`not_prebucketed` lists them, grouped across ranks, each with the reason that
can be read off the logs (:data:`REASONS`):

- ``no_fsdp_all_gather``: the graph runs no all-gather, so no FSDP group is found in it,
  while another graph of the rank (the forward of the same compile id, when there is one) has
  one: ``forward_groups`` names it;
- ``no_fsdp_group``: no all-gather in the graph and no FSDP group in any graph of the rank;
- ``not_fsdp_all_gathers``: it runs all-gathers, yet pre-bucketing found no FSDP one there
  while other graphs of the rank were pre-bucketed;
- ``pre_bucketing_off``: no graph of the rank has a pre-bucketing outcome (and, when no
  collective estimate was logged either, overlap scheduling, which runs pre-bucketing, is off);

``also`` adds ``cache_hit`` when graphs of the compile id were FX graph cache hits (they
skip the post-grad passes and log neither outcome nor schedule).
"""

from __future__ import annotations

from typing import Any

from tracekit.model import COLLECTIVE_TYPES, FinalSchedule, Graph, Rank

#: The outcome a not-pre-bucketed graph has in the summary (bucketing table, did-nothing list).
OUTCOME = "not pre-bucketed"

#: Reason codes and their text (the summary's ``reason`` and ``reason_text``).
REASONS: dict[str, str] = {
    "no_fsdp_all_gather": "no FSDP all-gather in this graph, so no FSDP group was found",
    "no_fsdp_group": "no FSDP group at all: no graph of this rank has an FSDP all-gather",
    "not_fsdp_all_gathers": "its all-gathers are not FSDP ones (each must derive from one parameter "
    "shard), so no FSDP group was found",
    "pre_bucketing_off": "no graph of this rank has a pre-bucketing outcome: pre-bucketing is turned "
    "off, or no all-gather of the run is an FSDP one",
    "cache_hit": "graphs of this compile id were FX graph cache hits: they skip pre-bucketing and log "
    "no outcome (re-run with torch._inductor.config.force_disable_caches = True)",
}


def unmerged_kinds(final: FinalSchedule) -> list[str]:
    """The kinds pre-bucketing merges of which ``final`` runs more than one."""
    return [t for t in COLLECTIVE_TYPES if final.counts.get(t, 0) > 1]


def _sum(values: list[Any], digits: int | None = None) -> Any:
    if any(v is None for v in values):
        return None
    total = sum(values)
    return total if digits is None else round(total, digits)


def forward_of(graphs: list[Graph], final: FinalSchedule) -> Graph | None:
    """The pre-bucketed graph of the same compile id that identifies FSDP groups (the forward:
    the first one, at another post-grad position), or None."""
    for g in graphs:
        if (
            g.compile_id == final.compile_id
            and g.fsdp_groups
            and (g.final is None or g.final.position != final.position)
        ):
            return g
    return None


def reason_of(rank: Rank, graphs: list[Graph], final: FinalSchedule) -> tuple[str, list[str], Graph | None]:
    """``(reason, also, forward)`` for one schedule without outcome (see the module docstring)."""
    forward = forward_of(graphs, final)
    has_groups = any(g.fsdp_groups for g in graphs)
    if final.counts.get("all_gather", 0) == 0:
        reason = "no_fsdp_all_gather" if has_groups else "no_fsdp_group"
    else:
        reason = "not_fsdp_all_gathers" if graphs else "pre_bucketing_off"
    also = ["cache_hit"] if [final.compile_id, "hit"] in rank.cache_events else []
    return reason, also, forward


def reason_text(reason: str, final: FinalSchedule, forward: Graph | None, also: list[str]) -> str:
    """The reason of a finding as one sentence, with what the logs add to it."""
    text = REASONS[reason]
    if reason == "no_fsdp_all_gather" and forward is not None:
        groups = ", ".join(repr(str(n)) for n in forward.fsdp_groups)
        text += (
            f" (the {'forward' if forward.graph_index == 0 else 'graph ' + forward.label} of "
            f"{final.compile_id} has FSDP group {groups}; torch looks for groups in each graph alone)"
        )
    if reason == "pre_bucketing_off" and final.sizes == "not_logged":
        text += " (no collective estimate was logged either: overlap scheduling, which runs pre-bucketing, is off)"
    for a in also:
        text += "; also: " + REASONS[a]
    return text


def finding(rank: Rank, graphs: list[Graph], final: FinalSchedule) -> dict[str, Any] | None:
    """The finding of one schedule without outcome, or None when it runs no kind more than
    once. Keys: ``compile_id``, ``graph_index`` (the post-grad position: 0 forward, 1
    backward), ``outcome`` (:data:`OUTCOME`), ``types`` (kinds with more than one), ``counts``,
    ``bytes`` and ``est_ms`` (by kind, of every pre-bucketing kind it runs; None where the
    estimation was not matched), ``total_bytes``, ``total_est_ms``, ``groups``, ``group_size``,
    ``reason``, ``reason_text``, ``also``, ``forward_groups`` and ``forward_group_size`` (of
    the graph that identifies groups, else None), ``bucket_cap_mb`` (None: no cap was chosen)."""
    types = unmerged_kinds(final)
    if not types:
        return None
    kinds = [t for t in COLLECTIVE_TYPES if final.counts.get(t, 0)]
    colls = [c for c in final.collectives if c.kind in kinds]
    reason, also, forward = reason_of(rank, graphs, final)
    return {
        "compile_id": final.compile_id,
        "graph_index": final.position,
        "outcome": OUTCOME,
        "types": types,
        "counts": {t: final.counts[t] for t in kinds},
        "bytes": {t: _sum([c.bytes for c in colls if c.kind == t]) for t in kinds},
        "est_ms": {t: _sum([c.est_ms for c in colls if c.kind == t], 4) for t in kinds},
        "total_bytes": _sum([c.bytes for c in colls]),
        "total_est_ms": _sum([c.est_ms for c in colls], 4),
        "groups": list(dict.fromkeys(c.group for c in colls if c.group is not None)),
        "group_size": next((c.group_size for c in colls if c.group_size is not None), None),
        "reason": reason,
        "reason_text": reason_text(reason, final, forward, also),
        "also": also,
        "forward_groups": None if forward is None else list(forward.fsdp_groups),
        "forward_group_size": None if forward is None else forward.group_size,
        "bucket_cap_mb": None,
    }


def not_prebucketed(groups: list[Any]) -> list[dict[str, Any]]:
    """Findings of every rank group (:class:`tracekit.analyze.summarize.RankGroup`), graphs with the
    same finding on several groups merged: each item of :func:`finding` with ``ranks`` (a
    sorted list; the caller adds the ``explain`` command)."""
    found: dict[tuple, dict[str, Any]] = {}
    for grp in groups:
        for final in grp.rank.schedules_without_outcome:
            item = finding(grp.rank, grp.graphs, final)
            if item is None:
                continue
            key = (item["compile_id"], item["graph_index"], repr(sorted(item.items())))
            slot = found.get(key)
            if slot is None:
                slot = found[key] = {**item, "ranks": []}
            slot["ranks"] += grp.ranks
    for item in found.values():
        item["ranks"].sort(key=lambda r: -1 if r is None else r)
    return list(found.values())


def table_totals(t: dict[str, Any], items: list[dict[str, Any]]) -> dict[str, Any]:
    """The run's totals as the outcome table totals them: ``t`` (:func:`tracekit.analyze.totals.totals`,
    the pre-bucketing outcomes) plus the graphs never pre-bucketed (``items``: the did-nothing
    list, those with an ``outcome``), each counted once per rank. Their collectives run one by
    one, so each adds its counts to both ``before`` and ``after`` and its bytes (as MB) to both
    ``mb_before`` and ``mb_after``; ``did_nothing`` counts every rank's graph of the list.
    saved_params: AG 32->4, RS 0->0 and 1.14 -> 1.136 MB outcomes, plus 4 backwards of 8
    reduce-scatters (298,144 B each) give RS 32->32 and 2.277 -> 2.273 MB, did_nothing 4. The
    JSON, CSV, text and HTML totals all come from here."""
    graphs, mb = 0, 0.0
    extra = {c: 0 for c in COLLECTIVE_TYPES}
    for d in items:
        if not d.get("outcome"):
            continue
        n = len(d["ranks"])
        graphs += n
        mb += n * (d.get("total_bytes") or 0) / 2**20
        for c in COLLECTIVE_TYPES:
            extra[c] += n * d["counts"].get(c, 0)
    if not graphs:
        return t
    return {
        **t,
        "collectives": {
            c: {k: v[k] + extra[c] for k in ("before", "after")} for c, v in t["collectives"].items()
        },
        **{k: None if t[k] is None else round(t[k] + mb, 3) for k in ("mb_before", "mb_after")},
        "did_nothing": t["did_nothing"] + graphs,
    }
