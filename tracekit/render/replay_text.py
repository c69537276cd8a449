"""The text of ``tracekit replay`` (table and markdown) from its ``tracekit.replay/3`` document
(:func:`tracekit.replay.results.replay_document`): the recorded outcomes rebuilt and reproduced,
the other caps, the graphs torch never pre-bucketed, the schedule and the totals."""

from __future__ import annotations

from typing import Any

from tracekit.model import COLLECTIVE_TYPES, SHORT_NAMES
from tracekit.model.nouns import plural
from tracekit.model.rankset import format_ranks, parse_ranks
from tracekit.render.text import (
    UNITS_MB,
    UNITS_SIZES,
    fmt_caps,
    fmt_counts,
    fmt_mb,
    heading,
    table,
)

GRAPH_HEADERS = ["ranks", "graph", "fx nodes", "recorded cap MB", "AG", "RS", "AR", "reproduced", "comm ms"]
CAP_HEADERS = [
    "ranks",
    "graph",
    "cap MB",
    "cap from",
    "AG",
    "RS",
    "AR",
    "buckets",
    "largest MB",
    "comm ms",
    "vs recorded",
]


def _ms(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:+.4f}" if signed else f"{x:.4f}"


def _applied_text(applied: dict[str, Any] | None) -> str:
    if not applied:
        return "-"
    if not applied.get("ok"):
        return f"FAILED: {applied.get('error', '')[:80]}"
    return "lint ok, " + ("same counts as plan" if applied.get("matches_plan") else "COUNTS DIFFER FROM PLAN")


def _ranks(g: dict[str, Any]) -> str:
    """The ranks an entry stands for, as ranges (a /1 document has one ``rank``)."""
    return g.get("ranks") or ("rank not logged" if g["rank"] is None else str(g["rank"]))


def hardware_line(doc: dict[str, Any], which: str) -> str:
    """What the comm-ms column of a table assumes, said above it: ``which`` is ``"recorded"``
    (the recorded buckets) or ``"replays"`` (the other caps)."""
    seen: list[dict[str, Any]] = []
    for g in doc["graphs"]:
        hws = (
            [g["recorded"].get("hardware")]
            if which == "recorded"
            else [r.get("hardware") for r in g["replays"]]
        )
        for hw in hws:
            if hw and hw not in seen:
                seen.append(hw)
    if not seen:
        return "comm ms: torch's NCCL model (no graph was costed)\n"
    parts = [
        f"{hw['interconnect']}, group size {hw['group_size']}, "
        f"{hw['n_nodes']} machine{'s' if hw['n_nodes'] != 1 else ''}"
        for hw in seen
    ]
    return f"comm ms: torch's NCCL model, assuming {'; '.join(parts)}\n"


def other_groups_lines(doc: dict[str, Any]) -> list[str]:
    """The recorded graphs whose schedule also runs collectives outside their FSDP groups (a
    mesh's replicate all-reduces, tensor parallelism's): the comm-ms column costs the FSDP
    groups' collectives only (what pre-bucketing merges), so each says what the others add
    and the graph's whole figure: torch's overlap scheduler's comm ms of the graph at the
    recorded cap where it ran (the one figure the scheduler table and the what-ifs' "as run"
    row show), else the two added, summarize's est ms of the graph (its *Collectives that
    run*): hsdp's backward ``0/0:1: + 8 AR on group 1, 0.0658 ms: 0.0851 ms in all``."""
    out = []
    for g in doc["graphs"]:
        rec, final = g["recorded"], g.get("recorded_final") or {}
        groups = set(rec.get("fsdp_groups") or [])
        others = [c for c in final.get("collectives") or [] if c.get("group") not in groups]
        if not groups or not others:
            continue
        kinds: dict[str, int] = {}
        for c in others:
            kinds[SHORT_NAMES.get(c["kind"], c["kind"])] = (
                kinds.get(SHORT_NAMES.get(c["kind"], c["kind"]), 0) + 1
            )
        names = sorted({str(c.get("group")) for c in others})
        ms = [c.get("est_ms") for c in others]
        add = None if None in ms else round(sum(ms), 4)
        # the graph's one comm figure: torch's scheduler's at the recorded cap where it ran
        # (the scheduler table's and the what-if "as run" row's), else the two parts added
        scheduled = (g.get("reproduction") or {}).get("comm_ms")
        whole = (
            scheduled
            if scheduled is not None
            else None
            if add is None or rec["estimated_comm_ms"] is None
            else round(rec["estimated_comm_ms"] + add, 4)
        )
        out.append(
            f"{_ranks(g)} {g['compile_id']}:{g['graph_index']}: + "
            + ", ".join(f"{n} {k}" for k, n in kinds.items())
            + f" on group{'s' if len(names) != 1 else ''} {', '.join(names)}, {_ms(add)} ms: {_ms(whole)} ms in all"
        )
    return out


def render_text(doc: dict[str, Any], fmt: str) -> str:
    """The table / markdown view of a ``tracekit.replay/3`` document: one row per distinct
    replay, with the ranks it stands for."""
    import os

    if not doc["graphs"] and doc.get("not_prebucketed"):  # only graphs torch never pre-bucketed
        from tracekit.render.not_prebucketed_text import not_prebucketed_only_text

        return not_prebucketed_only_text(doc, fmt)
    if not doc["graphs"]:  # nothing to replay: why, not an empty table
        from tracekit.render.nothing_text import nothing_text

        return nothing_text(doc, "replay", fmt)
    types = COLLECTIVE_TYPES
    out = [heading("Recorded outcomes, rebuilt and reproduced", fmt), hardware_line(doc, "recorded")]
    runs = {os.path.dirname(g["file"]) for g in doc["graphs"]}

    def run_of(g: dict[str, Any]) -> list[str]:
        # Several runs side by side: say which directory each row comes from.
        return [os.path.basename(os.path.dirname(g["file"])) or "."] if len(runs) > 1 else []

    rows = []
    for g in doc["graphs"]:
        rec = g["recorded"]
        verdict = {"reproduced": "yes", "not reproduced": "NO", "partial": "PARTIAL"}.get(
            g["verdict"], g["verdict"]
        )
        rows.append(
            [
                *run_of(g),
                _ranks(g),
                f"{g['compile_id']}:{g['graph_index']}",
                g["nodes"] or "-",
                fmt_mb(rec["bucket_cap_mb"]),
                *(fmt_counts(rec["collectives"].get(t)) for t in types),
                verdict,
                _ms(rec["estimated_comm_ms"]),
            ]
        )
    out.append(table(rows, (["run"] if len(runs) > 1 else []) + GRAPH_HEADERS, fmt))
    others = other_groups_lines(doc)
    if others:
        out.append(
            "\ncomm ms: the FSDP groups' collectives only (those pre-bucketing merges); the graphs also run "
            "others, as logged (summarize's est ms counts them all):\n"
            + "".join(("- " if fmt == "markdown" else "  ") + ln + "\n" for ln in others)
        )
    problems = []
    for g in doc["graphs"]:
        label = f"{g['file']}: ranks {_ranks(g)} graph {g['compile_id']}:{g['graph_index']}"
        if g["error"]:
            problems.append(f"{label}: {g['error']}")
        for m in g["mismatches"]:
            problems.append(f"{label}: NOT REPRODUCED: {m}")
        for m in g.get("partial", []):
            problems.append(f"{label}: PARTIAL: {m}")
        if g.get("note"):
            problems.append(f"{label}: {g['note']}")
    if problems:
        out.append("\n" + "\n".join(("- " if fmt == "markdown" else "  ") + p for p in problems) + "\n")
    from tracekit.render.mesh_replay_text import process_groups_section, run_once_section, unhandled_section

    out.append(process_groups_section(doc, fmt))  # on a mesh: the groups registered
    out.append(unhandled_section(doc, fmt))  # and what pre-bucketing never handles there
    out.append(run_once_section(doc, fmt))  # and the collectives there that run once (no finding)
    cap_rows = []
    cap_text = fmt_caps(r["bucket_cap_mb"] for g in doc["graphs"] for r in g["replays"])
    for g in doc["graphs"]:
        for r in g["replays"]:
            buckets = r["bucket_sizes_mb"]
            n_after = sum(len(v) for v in buckets.values())
            row = [
                *run_of(g),
                _ranks(g),
                f"{g['compile_id']}:{g['graph_index']}",
                cap_text[r["bucket_cap_mb"]],
                r["cap_source"],
                *(fmt_counts(r["collectives"].get(t)) for t in types),
                f"{n_after} ({r['merged_buckets']} merged)",
                fmt_mb(r["largest_bucket_mb"]),
                _ms(r["estimated_comm_ms"]),
                _ms(r["comm_ms_vs_recorded"], signed=True),
            ]
            if doc.get("apply"):
                row.append(_applied_text(r.get("applied")))
            cap_rows.append(row)
    if doc["caps"] or cap_rows:
        hw = doc["hardware"]
        what_if = ", ".join(
            f"{k}={v}" for k, v in [*hw.items(), ("bucket_mode", doc.get("bucket_mode"))] if v is not None
        )
        title = "Other caps" + (f" ({what_if})" if what_if else "")
        out.append("\n" + heading(title, fmt))
        out.append(hardware_line(doc, "replays"))
        out.append(
            table(
                cap_rows,
                (["run"] if len(runs) > 1 else []) + CAP_HEADERS + (["--apply"] if doc.get("apply") else []),
                fmt,
            )
        )
        out.append(
            "\nbuckets: collectives left after bucketing (merged: buckets of 2 or more); "
            f"largest: the biggest one, the memory it pins;\n{UNITS_MB}; {UNITS_SIZES}; comm ms: torch's "
            "NCCL model of the FSDP collectives, vs the recorded buckets on the same hardware.\n"
        )
    from tracekit.render.not_prebucketed_text import not_prebucketed_section

    out.append(not_prebucketed_section(doc, fmt))  # graphs torch never pre-bucketed

    from tracekit.render.replay_schedule_text import render_schedule

    out.append(render_schedule(doc, fmt))
    from tracekit.render.predicted_text import predicted_section

    out.append(predicted_section(doc, fmt))  # with --profile: the step each cap would measure
    from tracekit.replay.torch_versions import torch_lines

    versions = torch_lines(doc.get("torch"))  # which torch wrote the logs, which one replays them
    if versions:
        out.append("\n" + "".join(f"{ln}\n" for ln in versions))
    t = doc["totals"]
    graphs = plural(t["graphs"], "graph")
    if t.get("outcomes", t["graphs"]) != t["graphs"]:  # --all-ranks: ranks shared the replays
        every = format_ranks(r for g in doc["graphs"] for r in parse_ranks(g["ranks"]))
        graphs = f"{t['graphs']} distinct graphs for {t['outcomes']} recorded outcomes (ranks {every})"
    # a cut log: the step lacks what the rank compiled after the cut (exit 1)
    cut = next((s["cut"] for s in t.get("step") or [] if s.get("cut")), None)
    out.append(
        f"\n{graphs}: {t['rebuilt']} rebuilt, {t['reproduced']} reproduced, "
        + (f"partial: {t['partial']} of {plural(t['graphs'], 'graph')}, " if t.get("partial") else "")
        + f"{t['not_reproduced']} not reproduced, {t['failed']} not rebuilt"
        + (f"; and {t['not_prebucketed']} never pre-bucketed" if t.get("not_prebucketed") else "")
        + (f"; the step is partial: rank {cut['rank']}'s log is cut" if cut else "")
        + ".\n"
    )
    for note in doc.get("notes", []):
        out.append(f"note: {note}\n")
    return "".join(out)
