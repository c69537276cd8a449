"""``tracekit explain`` for a graph torch never pre-bucketed: why, per collective, and what the
forward's FSDP groups would have done (one entry of the ``tracekit.explain/1`` document).

A :class:`tracekit.read.pairing.NotPrebucketedSource` (a graph with a collective schedule and no
pre-bucketing outcome, e.g. a backward that keeps the forward's gathered parameters) is rebuilt
from its ``before_post_grad_graph`` (:class:`tracekit.replay.not_prebucketed_graphs.NotPrebucketedReplayer`);
then:

1. reproduce: planned as torch runs it, the graph has no FSDP group, so nothing is merged (the
   recorded outcome, "not pre-bucketed"); the rebuilt collectives are checked against the
   logged schedule;
2. each collective gets the planner's reason (``no_fsdp_group``: "reduce-scatter on group '0':
   no FSDP group identified in this graph (it has no FSDP all-gather), so the pass leaves it");
3. the what-if ``forward_groups``: the pass given the FSDP groups the forward of the same
   compile id identified, at the forward's cap, planned and verified by running our rewrite on
   a fresh rebuild (``bucketing.pre_bucket_fsdp_collectives(gm, fsdp_groups=...)``); each
   collective gets what the pass would then decide for it, and the graph the counts and the
   NCCL-model time before and after.

4. the what-if ``overlap_bucketing``: torch's overlap scheduler run on the rebuilt graph (the
   graph's recorded compute estimates) with ``collective_bucketing`` True, against False (as
   torch ran it): what it buckets, comm, exposed and estimated ms of each; a graph the
   scheduler refuses gives a note.

Entry (besides the keys every explain graph has: ``rank``, ``compile_id``, ``graph_index``,
``file``, ``line``, ``reproduced``, ``mismatches``, ``error``, ``collectives``, ``buckets``)::

    {"outcome": "not pre-bucketed", "cap_mb": null, "recorded": {"outcome": "not pre-bucketed",
     "schedule": {"RS": 8}}, "reason": "no_fsdp_all_gather", "reason_text": "...",
     "what_ifs": [{"name": "forward_groups", "fsdp_groups": ["0"], "collectives": {...},
                   "estimated_comm_ms": 0.0116, "comm_ms_before": 0.0704, "applied": {...},
                   "text": "...", "verified": true}]}
"""

from __future__ import annotations

from typing import Any

from tracekit.model import COLLECTIVE_TYPES, SHORT_NAMES

OUTCOME = "not pre-bucketed"
OVERLAP_NOTE = None
_NAMES = {"AG": "all-gather", "RS": "reduce-scatter", "AR": "all-reduce"}


def _groups_text(groups: list[str]) -> str:
    return ", ".join(repr(str(g)) for g in groups)


def graph_reason(src: Any, has_all_gather: bool) -> tuple[str, str]:
    """``(reason, text)`` of the whole graph (the codes of :mod:`tracekit.analyze.not_prebucketed`)."""
    from tracekit.analyze.not_prebucketed import REASONS

    fwd = src.forward
    if has_all_gather:
        code = "not_fsdp_all_gathers" if fwd is not None else "pre_bucketing_off"
        return code, REASONS[code]
    if fwd is None:
        return "no_fsdp_group", REASONS["no_fsdp_group"]
    return "no_fsdp_all_gather", (
        f"{REASONS['no_fsdp_all_gather']} (the forward of {src.compile_id} has FSDP "
        f"group {_groups_text(fwd.fsdp_groups)}; torch looks for groups in each graph alone)"
    )


def cap_text(mb: float) -> str:
    """A cap in MB at 2 decimals (``27.38``); one too small for them keeps three significant
    digits (``1e-07``), never ``0.00``."""
    text = f"{mb:.2f}"
    return f"{mb:.3g}" if mb and text in ("0.00", "-0.00") else text


def what_if_text(w: Any) -> str:
    """The what-if in a sentence: ``given the forward's FSDP group '0' (group size 4, cap 27.38
    MB), the pass merges RS 8->1: 0.0704 -> 0.0116 ms estimated``."""
    merged = ", ".join(
        f"{SHORT_NAMES[t]} {c['before']}->{c['after']}" for t, c in w.collectives.items() if c["before"]
    )
    ms = ""
    if w.comm_ms_before is not None and w.estimated_comm_ms is not None:
        ms = f": {w.comm_ms_before:.4f} -> {w.estimated_comm_ms:.4f} ms estimated"
    return (
        f"given the forward's FSDP group {_groups_text(w.fsdp_groups)} (group size {w.group_size}, "
        f"cap {cap_text(w.bucket_cap_mb)} MB), the pass merges {merged or 'nothing'}{ms}"
    )


def overlap_text(o: dict[str, Any]) -> str:
    """The overlap what-if in a sentence: ``with aten_distributed_optimizations.collective_bucketing
    = True torch's overlap scheduler merges nothing (RS 8->8): comm 0.0704 -> 0.0704 ms, ...
    (torch's estimates)``; ``buckets RS 45->8: ...`` when it merges some."""
    if not o["ok"]:
        return o["error"]
    a, b = o["as_run"], o["bucketed"]
    kinds = ", ".join(
        f"{SHORT_NAMES[t]} {a['counts'].get(t, 0)}->{b['counts'].get(t, 0)}"
        for t in COLLECTIVE_TYPES
        if a["counts"].get(t, 0)
    )
    merged = any(b["counts"].get(t, 0) < a["counts"].get(t, 0) for t in COLLECTIVE_TYPES)
    does = f"buckets {kinds}" if merged else f"merges nothing ({kinds})" if kinds else "merges nothing"
    return (
        f"with aten_distributed_optimizations.collective_bucketing = True torch's overlap scheduler "
        f"{does}: comm {a['comm_ms']:.4f} -> {b['comm_ms']:.4f} ms, exposed {a['exposed_ms']:.4f} -> "
        f"{b['exposed_ms']:.4f} ms, est {a['est_ms']:.4f} -> {b['est_ms']:.4f} ms (torch's estimates)"
    )


def explain_not_prebucketed(src: Any, symbols: dict[str, int] | None = None) -> dict[str, Any]:
    """One graph entry of the explain document for ``src`` (see the module docstring); a graph
    that cannot be rebuilt has ``error`` set and the rest empty."""
    from tracekit.replay.not_prebucketed_graphs import rebuild

    out: dict[str, Any] = {
        "rank": src.rank,
        "compile_id": src.compile_id,
        "graph_index": src.graph_index,
        "file": src.file,
        "log_torch": getattr(src, "torch_version", None),
        "line": src.line,
        "outcome": OUTCOME,
        "cap_mb": None,
        "recorded": {
            "outcome": OUTCOME,
            "schedule": {
                SHORT_NAMES[t]: src.final.counts.get(t, 0)
                for t in COLLECTIVE_TYPES
                if src.final.counts.get(t, 0)
            },
        },
        "reproduced": None,
        "buckets_checked": "counts",
        "mismatches": [],
        "note": OVERLAP_NOTE,
        "error": None,
        "bucket_mode": None,
        "buckets": {},
        "reason": None,
        "reason_text": None,
        "what_ifs": [],
        "collectives": [],
    }
    rp, out["error"] = rebuild(src, symbols)
    if rp is None:
        return out
    reproduced, mismatches = rp.reproduce()
    has_ag = any(d.kind == "AG" for d in rp.decisions())
    out["reason"], out["reason_text"] = graph_reason(src, has_ag)
    w = rp.with_groups(verify=True)
    after: dict[str, Any] = {}
    if w is not None:
        out["what_ifs"].append(
            {
                **w.to_dict(),
                "text": what_if_text(w),
                "verified": bool(w.applied and w.applied.get("ok") and w.applied.get("matches_plan")),
            }
        )
        planner = rp._with_groups[(tuple(w.fsdp_groups), w.group_size)]
        after = {d.name: d for d in planner.plan(w.bucket_cap_mb, explain=True).decisions}
    o = rp.overlap_bucketing()
    out["what_ifs"].append({**o, "text": overlap_text(o), "verified": o["ok"]})
    if not o["ok"]:
        out["note"] = f"what-if overlap_bucketing: {o['error']}"
    collectives = []
    for d in rp.decisions():
        item = {**d.to_dict(), "what_if": None}
        d2 = after.get(d.name)
        if d2 is not None:
            item["what_if"] = {
                "name": "forward_groups",
                "reason": d2.reason,
                "bucket": d2.bucket,
                "verified": out["what_ifs"][0]["verified"],
                # after is empty without the what-if: w is there
                "text": f"given the forward's FSDP group {_groups_text(w.fsdp_groups)}: "  # type: ignore[union-attr]
                f"{d2.reason}: {d2.detail}",
            }
        collectives.append(item)
    out.update(
        reproduced=reproduced,
        not_compared=reproduced is None,  # pre-bucketing never ran in the log: no evidence either way
        mismatches=mismatches,
        bucket_mode=rp.planner.bucket_mode,
        buckets={k: [] for k in ("AG", "RS", "AR")},
        collectives=collectives,
    )
    return out


__all__ = ["OUTCOME", "explain_not_prebucketed", "graph_reason", "overlap_text", "what_if_text"]
