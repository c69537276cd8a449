"""The whole step is the whole step: graphs torch never pre-bucketed are part of it.

Such a graph (a backward that keeps the forward's gathered parameters and holds reduce-scatters
only) is replayed apart (``not_prebucketed``, :mod:`tracekit.replay.not_prebucketed_graphs`).
Pre-bucketing merges nothing in it at any cap, so its overlap schedule is the same at every
cap: its figures (``schedule``, or ``schedule_what_if`` for the caps replayed with the
scheduler's what-if settings) are added to each ``totals.step`` entry of its rank. A graph of
the step without figures (the scheduler refused it, or was not run on it) is left out, and the
entry says so in ``partial``, as does the recommendation drawn from it.

    step entry before: {"cap": "1", "graphs": 1, "est_ms": 0.0519, "partial": None, ...}
    step entry after:  {"cap": "1", "graphs": 2, "graphs_never_prebucketed": 1,
                        "est_ms": 0.1221, "partial": None, ...}
    or, not scheduled: {"cap": "1", "graphs": 1, "graphs_never_prebucketed": 0,
                        "partial": "partial: 1 of 2 graphs (left out: 0/0:1, never
                        pre-bucketed: not scheduled)", ...}
"""

from __future__ import annotations

from typing import Any

from tracekit.model.rankset import rank_members
from tracekit.read.merge import CUT_KINDS
from tracekit.replay.mesh_whole_step import add_step_what_ifs
from tracekit.replay.schedule_figures import with_versus_recorded
from tracekit.replay.step_graphs import compiles_taken, in_compile_order, step_labels

_SUMMED = ("comm_ms", "exposed_ms", "compute_ms", "est_ms")


def _label(e: dict[str, Any]) -> str:
    return f"{e['compile_id']}:{e['graph_index']}"


def _runs_on(e: Any, rank: int | None) -> bool:
    """A document's graph entry is one of ``rank``'s (any rank's when ``rank`` is None)."""
    return isinstance(e, dict) and (rank is None or rank in rank_members(str(e.get("ranks"))))


def _of_rank(doc: dict[str, Any], rank: int | None) -> tuple[list[dict[str, Any]], list[str], set[str]]:
    """The graphs never pre-bucketed that the step of ``rank`` runs (one per frame and pass,
    the latest compile's, among the rank's graphs pre-bucketed or not:
    :mod:`tracekit.replay.step_graphs`), the labels of those of earlier compiles, and the labels
    of every graph the step runs."""
    never = [e for e in doc.get("not_prebucketed") or [] if _runs_on(e, rank)]
    others = [_label(g) for g in doc.get("graphs") or [] if _runs_on(g, rank)]
    taken = step_labels([*others, *(_label(e) for e in never)])
    return (
        [e for e in never if _label(e) in taken],
        [_label(e) for e in never if _label(e) not in taken],
        taken,
    )


def _figures(
    entry: dict[str, Any], cap_index: int, what_if: bool, hw_what_if: bool = False
) -> dict[str, Any] | None:
    """The graph's schedule at a step's cap (the what-ifs' for the other caps, and for the
    recorded one too on what-if hardware)."""
    sc = entry.get("schedule_what_if") if what_if and (cap_index > 0 or hw_what_if) else None
    sc = sc or entry.get("schedule")
    return sc if sc and sc.get("est_ms") is not None else None


def include_never_prebucketed(doc: dict[str, Any]) -> None:
    """Add the graphs never pre-bucketed to every ``totals.step`` entry (in place): counts,
    times and peak memory, and ``partial`` when a graph of the step has no figures. Then the
    ``est_ms_vs_recorded`` of each entry again (after minus recorded)."""
    steps = (doc.get("totals") or {}).get("step") or []
    # the caps of the step run with the what-ifs (settings, hardware), the recorded row too
    # when the hardware is a what-if (results.GraphReplay.recorded_base)
    hw_what_if = any(v is not None for v in (doc.get("hardware") or {}).values())
    what_if = bool((doc.get("scheduler") or {}).get("overrides")) or hw_what_if
    for i, s in enumerate(steps):
        never, earlier, taken = _of_rank(doc, s.get("rank"))
        if earlier:  # graphs of a frame's earlier compiles: not in the step either
            s["graphs_earlier_compiles"] = in_compile_order(
                [*(s.get("graphs_earlier_compiles") or []), *earlier]
            )
            s["compiles"] = compiles_taken(taken)
        added = [(e, _figures(e, i, what_if, hw_what_if)) for e in never]
        with_figures = [(e, f) for e, f in added if f is not None]
        if with_figures and s.get("est_ms") is None and s.get("graphs", 0) == 0:
            # the pre-bucketed graphs were not scheduled (overlap off): a step of the others
            # alone would pass for the whole one
            with_figures = []
        for _e, f in with_figures:
            for k, v in ((f.get("final") or {}).get("counts") or {}).items():
                s["final"]["counts"][k] = s["final"]["counts"].get(k, 0) + v
            s["final"]["collectives"] = sum(s["final"]["counts"].values())
            for k in _SUMMED:
                s[k] = round((s.get(k) or 0.0) + f[k], 4)
            peaks = [p for p in (s.get("peak_memory_bytes"), f.get("peak_memory_bytes")) if p is not None]
            s["peak_memory_bytes"] = max(peaks) if peaks else None
            s["fallback_nodes"] = s.get("fallback_nodes", 0) + (
                (f.get("estimates") or {}).get("fallback_nodes") or 0
            )
        s["graphs"] = s.get("graphs", 0) + len(with_figures)
        if never:  # (only where there are some: the other documents keep their fields)
            s["graphs_never_prebucketed"] = len(with_figures)
        left = [e for e, f in added if all(f is not g for _e, g in with_figures)]
        s["partial"] = _partial(s, left, i, what_if)
        cut = _cut(doc, s.get("rank"))
        if cut:  # the rank's log ends inside an entry: what it compiled after is missing
            s["cut"] = cut
            why = (
                f"rank {cut['rank']}'s log is cut (ends inside an entry at line {cut['line']} of "
                f"{cut['file']}): the graphs it logged after the cut are missing"
            )
            s["partial"] = f"{s['partial']}; {why}" if s["partial"] else f"partial: {why}"
    with_versus_recorded(steps)


def _cut(doc: dict[str, Any], rank: int | None) -> dict[str, Any] | None:
    """Where the log of the step's rank is cut short (a ``truncated_entry`` or ``bad_gzip``
    diagnostic on a file its graphs were read from): ``{"rank", "file", "line", "kind"}``."""
    files = {
        e.get("file")
        for e in [*(doc.get("graphs") or []), *(doc.get("not_prebucketed") or [])]
        if _runs_on(e, rank)
    }
    for ex in (doc.get("diagnostics") or {}).get("examples") or []:
        if ex.get("kind") in CUT_KINDS and ex.get("file") in files:
            return {"rank": rank, "file": ex["file"], "line": ex["line"], "kind": ex["kind"]}
    return None


def _partial(s: dict[str, Any], left: list[dict[str, Any]], i: int, what_if: bool) -> str | None:
    """``partial: 1 of 2 graphs (...)`` when the step's figures leave graphs out, else None."""
    failed = s.get("graphs_scheduler_failed", 0)
    # pre-bucketed graphs not scheduled by default because their log shows no overlap scheduling
    unscheduled = max(0, s.get("graphs_without_schedule", 0) - failed)
    if s.get("est_ms") is None and not failed:
        return None  # no figure shown: nothing to call partial
    if not left and not failed and not unscheduled:
        return None
    shown = s.get("graphs", 0)
    why = []
    if failed:
        why.append(f"the overlap scheduler failed on {failed}")
    if unscheduled:
        why.append(
            f"{unscheduled} not scheduled (no overlap scheduling in {'its' if unscheduled == 1 else 'their'} log)"
        )
    if left:
        reasons = []
        for e in left:
            sc = (e.get("schedule_what_if") if what_if and i > 0 else None) or e.get("schedule") or {}
            err = sc.get("schedule_error") or e.get("error") or (None if sc else "not scheduled")
            reasons.append(f"{e['compile_id']}:{e['graph_index']}" + (f": {err}" if err else ""))
        why.append("never pre-bucketed, left out: " + "; ".join(reasons))
    total = shown + failed + unscheduled + len(left)
    return f"partial: {shown} of {total} graph{'s' if total != 1 else ''} ({'; '.join(why)})"


def mark_recommendation(doc: dict[str, Any]) -> None:
    """The recommendation says when the step it was drawn from is partial (in place): its
    ``partial`` is that step's; and, when the ranks differ, whose step it is (``ranks``, the
    slowest group's) beside every group's (``rank_groups``)."""
    rec = doc.get("recommendation")
    if not isinstance(rec, dict):
        return
    steps = (doc.get("totals") or {}).get("step") or []
    step = next((s for s in steps if s.get("cap") == rec.get("cap")), None)
    if step is not None and step.get("partial"):
        rec["partial"] = step["partial"]
    if step is not None and step.get("rank_groups"):  # ranks that differ: the slowest's step
        rec["ranks"] = step["ranks"]
        rec["rank_groups"] = step["rank_groups"]


def finish_document(
    doc: dict[str, Any],
    not_prebucketed: list[dict[str, Any]],
    recommend: bool,
    memory_budget_gb: float | None,
) -> None:
    """The graphs never pre-bucketed added to a replay document and to its whole step, then,
    with ``recommend``, the Pareto front and the recommendation drawn from that step (in place;
    ``replay`` and :func:`tracekit.replay_run` alike)."""
    from tracekit.replay.recommend import pareto_front
    from tracekit.replay.recommend import recommend as pick

    if not_prebucketed:
        doc["not_prebucketed"] = not_prebucketed
        doc["totals"]["not_prebucketed"] = len(not_prebucketed)
    include_never_prebucketed(doc)
    add_step_what_ifs(doc)  # a mesh's what-ifs over the whole step, the graphs just added in it
    if recommend:
        doc["pareto_front"] = pareto_front(doc["totals"]["step"])
        doc["recommendation"] = pick(doc["totals"]["step"], memory_budget_gb)
        mark_recommendation(doc)


__all__ = ["finish_document", "include_never_prebucketed", "mark_recommendation"]
