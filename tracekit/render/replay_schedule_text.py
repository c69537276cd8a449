"""The overlap-schedule part of ``tracekit replay``'s table / markdown view: per graph and per
cap (a graph torch never pre-bucketed in a row of its own, cap "any"), the final collectives, comm / exposed / compute / estimated ms, peak memory and the
largest bucket; the step per cap; the reproduction of the recorded final sequence; and, with
``--recommend``, the Pareto front and the cap to use."""

from __future__ import annotations

import textwrap
from typing import Any

from tracekit.model.nouns import plural, rank_noun
from tracekit.render.mesh_replay_text import STEP_WHAT_IFS_NOTE, recommendation_what_ifs, step_what_if_rows
from tracekit.render.text import fmt_mb, heading, table

HEADERS = [
    "ranks",
    "graph",
    "cap MB",
    "final AG/RS/AR",
    "comm ms",
    "exposed ms",
    "compute ms",
    "est ms",
    "peak MiB",
    "largest MB",
    "est vs recorded",
]


def _ms(x: Any, signed: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:+.4f}" if signed else f"{x:.4f}"


def _final(f: dict | None) -> str:
    if not f:
        return "-"
    c = f["counts"]
    return "/".join(str(c.get(k, 0)) for k in ("all_gather", "reduce_scatter", "all_reduce"))


def _mib(b: Any) -> str:
    return "-" if b is None else f"{b / 2**20:.2f}"


def _row(ranks: str, label: str, cap: dict[str, Any]) -> list[str]:
    return [
        ranks,
        label,
        fmt_mb(cap["bucket_cap_mb"]),
        _final(cap.get("final")),
        _ms(cap.get("comm_ms")),
        _ms(cap.get("exposed_ms")),
        _ms(cap.get("compute_ms")),
        _ms(cap.get("est_ms")),
        _mib(cap.get("peak_memory_bytes")),
        fmt_mb(cap["largest_bucket_mb"]),
        _ms(cap.get("est_ms_vs_recorded"), signed=True),
    ]


def _ranks_text(ranks: str) -> str:
    """``ranks 0-2`` or ``rank 3``."""
    return f"{rank_noun(ranks)} {ranks}"


def render_schedule(doc: dict[str, Any], fmt: str) -> str:
    """'' when no graph went through the overlap scheduler."""
    graphs = [
        g for g in doc["graphs"] if g.get("reproduction") and g["reproduction"].get("final") is not None
    ]
    errors = [
        g
        for g in doc["graphs"]
        if any(c.get("schedule_error") for c in [g.get("reproduction") or {}, *g.get("replays", [])])
    ]
    unbucketed = [  # graphs torch never pre-bucketed that were scheduled: rows of their own
        e for e in doc.get("not_prebucketed") or [] if (e.get("schedule") or {}).get("final") is not None
    ]
    if not graphs and not errors and not unbucketed:
        return ""
    sched = doc.get("scheduler", {})
    estimates = [g["reproduction"]["estimates"] for g in graphs] + [
        e["schedule"].get("estimates") or {} for e in unbucketed
    ]
    fb = sum(x.get("fallback_nodes") or 0 for x in estimates)
    n = sum(x.get("compute_nodes") or 0 for x in estimates)
    out = [
        "\n"
        + heading(
            f"After torch's overlap scheduler (estimates: compute from the log's "
            f"fx_compute_nodes_runtime_estimation, {fb} of {n} compute nodes fell back to the "
            f"roofline on {sched.get('gpu')}; collectives: torch's NCCL model)",
            fmt,
        )
    ]
    rows = []
    for g in graphs:
        label = f"{g['compile_id']}:{g['graph_index']}"
        rows.append(_row(g["ranks"], label + " recorded", g["reproduction"]))
        if g.get("recorded_what_if_hardware"):  # the base of the what-if caps
            rows.append(_row(g["ranks"], label + " recorded, what-if hw", g["recorded_what_if_hardware"]))
        for r in g["replays"]:
            rows.append(_row(g["ranks"], label, r))
    for e in unbucketed:  # the same at every cap: pre-bucketing merges nothing there
        row = _row(
            e["ranks"],
            f"{e['compile_id']}:{e['graph_index']} never pre-bucketed",
            {**e["schedule"], "bucket_cap_mb": None, "largest_bucket_mb": None, "est_ms_vs_recorded": None},
        )
        row[2] = "any"  # no bucket: the cap changes nothing
        rows.append(row)
    out.append(table(rows, HEADERS, fmt))
    lines = []
    for g in doc["graphs"]:
        label = f"ranks {g['ranks']} graph {g['compile_id']}:{g['graph_index']}"
        if g.get("final_reproduced") is True:
            lines.append(
                f"{label}: final collectives as recorded (inductor_collective_schedule): "
                f"{_final(g['recorded_final'])}"
            )
        elif g.get("final_reproduced") is False:
            lines += [f"{label}: FINAL SEQUENCE NOT REPRODUCED: {m}" for m in g["final_mismatches"]]
        for c in [g.get("reproduction") or {}, *g.get("replays", [])]:
            if c.get("schedule_error"):
                lines.append(f"{label} cap {c['bucket_cap_mb']:g} MB: NOT SCHEDULED: {c['schedule_error']}")
    if lines:
        out.append("\n" + "\n".join(("- " if fmt == "markdown" else "  ") + ln for ln in lines) + "\n")
    step_rows = []
    for s in doc["totals"].get("step", []):
        step_rows.append(
            [
                s["cap"],
                "/".join(f"{c:g}" for c in s["bucket_cap_mb"]),
                s["final"]["collectives"],
                _ms(s["comm_ms"]),
                _ms(s["exposed_ms"]),
                _ms(s["compute_ms"]),
                _ms(s["est_ms"]),
                _mib(s["peak_memory_bytes"]),
                fmt_mb(s["largest_bucket_mb"]) if s["largest_bucket_mb"] is not None else "-",
                _ms(s["est_ms_vs_recorded"], signed=True),
            ]
        )
        step_rows += step_what_if_rows(s)  # a mesh: the step at this cap with each what-if
    steps = doc["totals"].get("step", [])
    rank = steps[0].get("rank") if steps else None
    groups = steps[0].get("rank_groups") if steps else None
    whose = (
        " (the slowest ranks' graphs at each cap: the ranks differ)"
        if groups
        else ""
        if rank is None
        else f" (rank {rank}'s graphs)"
    )
    out.append("\n" + heading("Whole step per cap" + whose, fmt))
    if groups:  # ranks that logged other graphs: the slowest sets the step
        out.append(
            textwrap.fill(
                "The ranks logged different graphs; the step of each group at the recorded cap: "
                + "; ".join(f"{_ranks_text(g['ranks'])}: est {_ms(g['est_ms'])} ms" for g in groups)
                + ". Each cap's row is its slowest group's (the slowest rank sets the step).",
                100,
            )
            + "\n\n"
        )
    out.append(
        table(
            step_rows,
            [
                "cap",
                "cap MB",
                "collectives",
                "comm ms",
                "exposed ms",
                "compute ms",
                "est ms",
                "peak MiB",
                "largest MB",
                "est vs recorded",
            ],
            fmt,
        )
    )
    if any(s.get("mesh_what_ifs") for s in steps):
        out.append(STEP_WHAT_IFS_NOTE)
    never = max((s.get("graphs_never_prebucketed") or 0 for s in steps), default=0)
    if never:  # the step is every graph: say that the ones torch never pre-bucketed are in it
        out.append(
            f"\nThe step includes {plural(never, 'graph')} torch never pre-bucketed "
            "(the same at every cap: pre-bucketing merges nothing there).\n"
        )
    earlier = next((s for s in steps if s.get("graphs_earlier_compiles")), None)
    if earlier:  # a frame recompiled: the step runs one graph per frame and pass
        out.append(
            "\n"
            + textwrap.fill(
                "The step runs one graph per frame and pass, of the latest compile of each frame ("
                + ", ".join(earlier.get("compiles") or [])
                + "); left out, of earlier compiles: "
                + ", ".join(earlier["graphs_earlier_compiles"])
                + ".",
                100,
            )
            + "\n"
        )
    partial = [f"{s['cap']}: {s['partial']}" for s in steps if s.get("partial")]
    if partial:  # the step's sums leave out the graphs the scheduler failed on
        out.append("\n" + "".join(f"{p}\n" for p in partial))
    out.append(
        "\nexposed: communication the scheduler could not hide under compute; est = compute + exposed; "
        "peak: torch's MemoryTracker over the scheduled order (all devices), the largest graph's.\n"
        "These are torch's estimates, not measurements.\n"
        + (textwrap.fill(f"{sched['exposed_ms']}.", 100) + "\n" if sched.get("exposed_ms") else "")
    )
    rec = doc.get("recommendation")
    if doc.get("pareto_front") is not None:
        out.append("\n" + heading("Pareto front: estimated step time against peak memory", fmt))
        out.append(
            table(
                [
                    [
                        s["cap"],
                        _ms(s["est_ms"]),
                        _ms(s["exposed_ms"]),
                        _mib(s["peak_memory_bytes"]),
                        ", ".join(s.get("same_as") or []) or "-",
                    ]
                    for s in doc["pareto_front"]
                ],
                ["cap", "est ms", "exposed ms", "peak MiB", "same as caps"],
                fmt,
            )
        )
        if rec is None:
            out.append("\nno cap fits the memory budget.\n")
        else:
            vs = rec["vs_recorded_ms"]
            faster = (
                ", the recorded cap: no cap is faster"
                if rec.get("keep_recorded")
                else ""
                if vs is None
                else (
                    f", {-vs:.4f} ms faster than the recorded cap"
                    if vs < 0
                    else f", {vs:.4f} ms slower than the recorded cap"
                    if vs > 0
                    else ", the same as the recorded cap"
                )
            )
            out.append(
                f"\nrecommended cap: {rec['cap_mb']:g} MB (est {rec['est_ms']:.4f} ms, exposed "
                f"{rec['exposed_ms']:.4f} ms, peak {_mib(rec['peak_memory_bytes'])} MiB{faster}); set\n"
                f"    {rec['config']}\n(torch's estimates, not measurements.)\n"
                + (
                    f"The recommendation is drawn from a step that is {rec['partial']}.\n"
                    if rec.get("partial")
                    else ""
                )
                + (
                    f"The ranks differ: it is drawn from the slowest ranks' step ({_ranks_text(rec['ranks'])}: "
                    + "; ".join(
                        f"{_ranks_text(g['ranks'])} est {_ms(g['est_ms'])} ms" for g in rec["rank_groups"]
                    )
                    + f" at {rec['cap_mb']:g} MB).\n"
                    if rec.get("rank_groups")
                    else ""
                )
            )
            out.append(recommendation_what_ifs(rec))
    return "".join(out)


__all__ = ["render_schedule"]
