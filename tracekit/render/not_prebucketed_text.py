"""Text for the graphs torch never pre-bucketed in a ``tracekit.replay/2`` document (its
``not_prebucketed`` entries, :func:`tracekit.replay.not_prebucketed_graphs.replay_not_prebucketed`): one row per
graph rebuilt (the reproduction of "not pre-bucketed") and one per cap and what-if. Renderers
only: they work from the document."""

from __future__ import annotations

from typing import Any

from tracekit.model import COLLECTIVE_TYPES
from tracekit.render.cells import groups_text
from tracekit.render.text import fmt_counts, fmt_mb, heading, table

GRAPH_HEADERS = ["ranks", "graph", "fx nodes", "recorded", "runs", "forward groups", "reproduced", "comm ms"]
CAP_HEADERS = ["ranks", "graph", "cap MB", "cap from", "what-if", "AG", "RS", "AR", "comm ms", "vs recorded"]


def _ms(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:+.4f}" if signed else f"{x:.4f}"


def _applied(a: dict[str, Any] | None) -> str:
    if not a:
        return "-"
    if not a.get("ok"):
        return f"FAILED: {str(a.get('error', ''))[:80]}"
    return "lint ok, " + ("same counts as plan" if a.get("matches_plan") else "COUNTS DIFFER FROM PLAN")


def not_prebucketed_section(doc: dict[str, Any], fmt: str) -> str:
    """The section of the graphs never pre-bucketed; empty when the document has none."""
    entries = doc.get("not_prebucketed") or []
    if not entries:
        return ""
    out = ["\n" + heading("Graphs never pre-bucketed, rebuilt and reproduced", fmt)]
    rows = []
    for e in entries:
        rec = e["recorded"]
        verdict = (
            "not rebuilt"
            if e["error"]
            else "not compared"
            if e["reproduced"] is None
            else ("yes" if e["reproduced"] else "NO")
        )
        fwd = rec.get("forward_groups")
        rows.append(
            [
                e["ranks"],
                f"{e['compile_id']}:{e['graph_index']}",
                e["nodes"] or "-",
                rec["outcome"],
                ", ".join(f"{k} {n}" for k, n in rec["schedule"].items()),
                "-" if fwd is None else groups_text(fwd),
                verdict,
                _ms(rec.get("estimated_comm_ms")),
            ]
        )
    out.append(table(rows, GRAPH_HEADERS, fmt))
    problems = [
        f"ranks {e['ranks']} graph {e['compile_id']}:{e['graph_index']}: {p}"
        for e in entries
        for p in ([e["error"]] if e["error"] else []) + e["mismatches"]
    ]
    if problems:
        out.append("\n" + "".join(("- " if fmt == "markdown" else "  ") + p + "\n" for p in problems))
    cap_rows = []
    with_apply = any(r.get("applied") for e in entries for r in e["replays"])
    for e in entries:
        for r in e["replays"]:
            row = [
                e["ranks"],
                f"{e['compile_id']}:{e['graph_index']}",
                fmt_mb(r["bucket_cap_mb"]),
                r["cap_source"],
                r["what_if"] or "- (as torch)",
                *(fmt_counts(r["collectives"].get(t)) for t in COLLECTIVE_TYPES),
                _ms(r["estimated_comm_ms"]),
                _ms(r["comm_ms_vs_recorded"], signed=True),
            ]
            if with_apply:
                row.append(_applied(r.get("applied")))
            cap_rows.append(row)
    if cap_rows:
        out.append("\n")
        out.append(table(cap_rows, CAP_HEADERS + (["--apply"] if with_apply else []), fmt))
    if not any(r["what_if"] for e in entries for r in e["replays"]):
        out.append("\nwhat-if: --what-if forward-groups gives the pass the forward's FSDP groups.\n")
    else:
        out.append(
            "\nforward_groups: our pass given the FSDP groups the forward of the same compile id "
            "identified (torch looks for groups in each graph alone); comm ms: torch's NCCL model, "
            "vs the collectives run one by one.\n"
        )
    return "".join(out)


def not_prebucketed_only_text(doc: dict[str, Any], fmt: str) -> str:
    """A replay document whose only graphs are never pre-bucketed (``--graph`` picked them):
    their section, which torch wrote them and which one replays them, the count and the notes."""
    from tracekit.replay.torch_versions import torch_lines

    n = len(doc["not_prebucketed"])
    ok = sum(1 for e in doc["not_prebucketed"] if e["reproduced"])
    nc = sum(1 for e in doc["not_prebucketed"] if e["reproduced"] is None and not e["error"])
    versions = torch_lines(doc.get("torch"))
    return (
        not_prebucketed_section(doc, fmt).lstrip("\n")
        + ("\n" + "".join(f"{ln}\n" for ln in versions) if versions else "")
        + f"\n{n} graph{'s' if n != 1 else ''} never pre-bucketed: {ok} reproduced"
        + (f", {nc} not compared (pre-bucketing never ran in the log)" if nc else "")
        + ".\n"
        + "".join(f"note: {note}\n" for note in doc.get("notes", []))
    )
