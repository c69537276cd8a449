"""The whole step at each cap with each mesh what-if, from a replay document (torch-free).

On a mesh, some graphs carry collectives pre-bucketing never handles and the what-ifs run on
them (``graphs[].not_prebucketed_on_mesh``, :mod:`tracekit.replay.mesh_what_ifs`): at the
recorded cap (``as_run``, ``what_ifs``) and at other caps (``at_caps``, one entry per cap, its
``cap`` the step's cap label). Here each ``totals.step`` entry whose every such graph has the
what-ifs at that cap gets ``mesh_what_ifs``: the step with each what-if applied to those graphs
(the other graphs as run), so the step at each cap shows them. A cap where they did not run
(``--recommend``'s grid) gets none. ``totals.step_mesh_what_ifs`` stays the recorded cap's.

For hsdp_overlap at 1 MB (the step's est 0.3064 ms; the backward 0.2021 as run, 0.1948 with our
pass given replicate group '1')::

    step entry before: {"cap": "1", "exposed_ms": 0.0744, "est_ms": 0.3064, ...}
    step entry after:  {..., "mesh_what_ifs": [{"name": "our_pass_with_groups",
                        "exposed_ms": 0.0671, "est_ms": 0.2991, "est_ms_vs_as_run": -0.0073,
                        ...}, {"name": "overlap_bucketing", ...}]}
"""

from __future__ import annotations

from typing import Any

from tracekit.model.rankset import rank_members

OUR_PASS = "our_pass_with_groups"
OVERLAP_BUCKETING = "overlap_bucketing"


def _ms(x: float) -> float:
    return round(x, 4)


def _at(m: dict[str, Any], cap: str) -> dict[str, Any] | None:
    """A graph's what-ifs at the step's cap (``as_run`` and ``what_ifs``), None when they did
    not run there."""
    if cap == "recorded":
        return m
    return next((e for e in m.get("at_caps") or [] if isinstance(e, dict) and e.get("cap") == cap), None)


def step_what_ifs(graphs: list[dict[str, Any]], step: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The step entry ``step`` (one cap, one rank's graphs) with each what-if applied to every
    graph of that rank that has one (the others as run): collectives, exposed and estimated ms, against the recorded cap's step and this cap's as run. None when no graph of
    the step has what-ifs, or one has none at this cap, or the step has no figures."""
    rank = step.get("rank")
    earlier = set(step.get("graphs_earlier_compiles") or [])  # not in the step (a recompile's older graphs)
    mesh = [
        g["not_prebucketed_on_mesh"]
        for g in graphs
        if g.get("not_prebucketed_on_mesh")
        and (rank is None or rank in rank_members(str(g.get("ranks"))))
        and f"{g.get('compile_id')}:{g.get('graph_index')}" not in earlier
    ]
    if not mesh or step.get("exposed_ms") is None or step.get("est_ms") is None:
        return None
    entries = [_at(m, str(step.get("cap"))) for m in mesh]
    if any(e is None for e in entries):
        return None  # the what-ifs did not run at this cap on every graph (--recommend's grid)
    recorded_est = step["est_ms"] - (step.get("est_ms_vs_recorded") or 0.0)
    out = []
    for name in (OUR_PASS, OVERLAP_BUCKETING):
        runs = [(e["as_run"], next(w for w in e["what_ifs"] if w["name"] == name)) for e in entries if e]
        if not all(w["ok"] and a["exposed_ms"] is not None for a, w in runs):
            continue
        exposed = step["exposed_ms"] + sum(w["exposed_ms"] - a["exposed_ms"] for a, w in runs)
        est = step["est_ms"] + sum(w["est_ms"] - a["est_ms"] for a, w in runs)
        entry = {
            "name": name,
            "rank": rank,
            "graphs_changed": len(runs),
            "exposed_ms": _ms(exposed),
            "est_ms": _ms(est),
            "est_ms_vs_recorded": _ms(est - recorded_est),
            "est_ms_vs_as_run": _ms(est - step["est_ms"]),
        }
        counts = (step.get("final") or {}).get("collectives")
        if counts is not None and all(a["left"] is not None for a, _w in runs):
            entry["collectives"] = counts + sum(w["left"] - a["left"] for a, w in runs)
        out.append(entry)
    return out or None


def add_step_what_ifs(doc: dict[str, Any]) -> None:
    """Each ``totals.step`` entry's ``mesh_what_ifs`` (:func:`step_what_ifs`), in place, from
    the step's figures as they stand (run again after graphs are added to the step); the
    recorded cap's also as ``totals.step_mesh_what_ifs``. A document without mesh what-ifs is
    left as it is."""
    totals = doc.get("totals") or {}
    steps = totals.get("step") or []
    graphs = [g for g in doc.get("graphs") or [] if isinstance(g, dict)]
    if not steps or not any(g.get("not_prebucketed_on_mesh") for g in graphs):
        return
    for s in steps:
        whole = step_what_ifs(graphs, s)
        if whole:
            s["mesh_what_ifs"] = whole
        else:
            s.pop("mesh_what_ifs", None)
    recorded = steps[0].get("mesh_what_ifs")
    if recorded:  # a mesh whose graphs have what-ifs: the whole step with each
        totals["step_mesh_what_ifs"] = [
            {k: v for k, v in w.items() if k not in ("est_ms_vs_as_run", "collectives")} for w in recorded
        ]


__all__ = ["add_step_what_ifs", "step_what_ifs"]
