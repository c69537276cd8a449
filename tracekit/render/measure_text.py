"""The text of ``tracekit measure`` from a ``tracekit.measure/1`` document: the verdict, then per
rank its steps, one row per graph (run time; torch's estimate of its collectives beside their
measured time; exposed), one row per collective (measured against estimated, and the ratio), what
could not be paired, and the skew across ranks. ``json`` is the document itself."""

from __future__ import annotations

import textwrap
from typing import Any

from tracekit.render.text import dumps_json, heading, table, wrap_clauses

FOOTER = (
    "ms: median over profiled steps (min-max); measured: the transfer's span, from its start to its end on "
    "this rank (waiting for a late rank included); est: torch's estimate from the log; exposed: the main "
    "thread waiting in wait_tensor (GPU: the compute stream idle during the kernel); bytes: one rank's input."
)


def _ms(v: Any) -> str | None:
    return None if v is None else f"{v:.3f}"


def _est(v: Any) -> str | None:
    """torch's estimates are small: four decimals, as the log gives them."""
    return None if v is None else f"{v:.4f}"


def _range(s: dict[str, Any] | None) -> str | None:
    if not s or s.get("median_ms") is None:
        return None
    if s["count"] == 1:
        return f"{s['median_ms']:.3f}"
    return f"{s['median_ms']:.3f} ({s['min_ms']:.3f}-{s['max_ms']:.3f})"


def _ratio(v: Any) -> str | None:
    return None if v is None else f"{v:,.1f}x"


def _steps_line(r: dict[str, Any]) -> str:
    s = r["steps"]
    if not r["profiler_steps"]:
        return "no ProfilerStep spans read: one window, no step time"
    return f"{s['count']} profiled steps, step {_range(s)} ms (median, min-max)"


def render(doc: dict[str, Any], fmt: str) -> str:
    """``table`` or ``markdown`` text, or ``json`` (the document)."""
    if fmt == "json":
        return dumps_json(doc)
    md = fmt == "markdown"
    li = "- " if md else ""
    out = [f"**{doc['verdict']}**\n\n" if md else wrap_clauses(doc["verdict"]) + "\n\n"]
    for r in doc["ranks"]:
        out.append(heading(f"rank {r['rank']}", fmt))
        out.append(f"{li}trace: {r['trace']} ({r['form']}{', ' + r['backend'] if r['backend'] else ''})\n")
        out.append(f"{li}{_steps_line(r)}\n")
        if r["paired"]:
            how = (
                "the log's output code"
                if r["waits"] == "output code"
                else "derived (oldest open collective first)"
            )
            out.append(f"{li}which wait ends which collective: {how}\n")
        if not r["complete"]:
            cut = (
                f"{li}trace cut short: {r['events_read']:,} events read and used; {'; '.join(r['problems'])}"
            )
            out.append(textwrap.fill(cut, 100, subsequent_indent="  ") + "\n")
        if not r["has_shapes"]:
            out.append(
                f"{li}recorded without record_shapes: sizes from the log alone, paired on kind and order only\n"
            )
        out.append(f"{li}paired: {r['paired']} collective runs; not paired: {len(r['unpaired'])}\n\n")
        if r["graphs"] and r["paired"]:
            rows = [
                [
                    g["label"],
                    g["phase"],
                    _range(g["run"]),
                    _est(g["est_ms"]),
                    _range(g["collectives_measured"]),
                    _ratio(g["ratio"]),
                    _range(g["exposed_measured"]),
                ]
                for g in r["graphs"]
            ]
            head = ["graph", "phase", "run ms", "coll est ms", "coll measured ms", "ratio", "exposed ms"]
            if any(g["exposed_est_ms"] is not None for g in r["graphs"]):  # measure --estimates
                head.append("exposed est ms")
                for row, g in zip(rows, r["graphs"], strict=True):
                    row.append(_est(g["exposed_est_ms"]))
            out.append(table(rows, head, fmt))
            out.append("\n")
            rows = [
                [
                    g["label"],
                    c["position"],
                    c["kind"],
                    None if c["bytes"] is None else f"{c['bytes']:,}",
                    _est(c["est_ms"]),
                    _range(c["measured"]),
                    _ratio(c["ratio"]),
                    _ms(c["exposed_ms"]),
                    _ms(c["issue_ms"]),
                ]
                for g in r["graphs"]
                for c in g["collectives"]
            ]
            if rows:
                headers = [
                    "graph",
                    "#",
                    "kind",
                    "bytes",
                    "est ms",
                    "measured ms",
                    "ratio",
                    "exposed ms",
                    "issue ms",
                ]
                out.append(table(rows, headers, fmt))
                out.append("\n")
        for u in r["unpaired"][:10]:
            where = f"step {u['step']} graph {u['graph']}: " if u["graph"] is not None else ""
            out.append(
                textwrap.fill(f"{li}not paired: {where}{u['reason']}", 100, subsequent_indent="  ") + "\n"
            )
        if len(r["unpaired"]) > 10:
            out.append(f"{li}... and {len(r['unpaired']) - 10} more graph runs not paired\n")
        if r["unpaired"]:
            out.append("\n")
    if doc["skew"]:
        out.append(heading("across ranks", fmt))
        rows = [
            [
                s["graph"],
                s["steps"],
                _range(s["skew"]),
                f"rank {s['last_rank']} ({s['last_rank_steps']}/{s['steps']})",
            ]
            for s in doc["skew"]
        ]
        out.append(table(rows, ["graph", "steps", "skew ms", "arrives last"], fmt))
        out.append(f"\n{doc['basis']['skew']}.\n\n")
    for n in doc["notes"]:
        out.append(textwrap.fill(f"{li}note: {n}", 100, subsequent_indent="  ") + "\n")
    if doc["notes"]:
        out.append("\n")
    footer = FOOTER
    if any(g["exposed_est_ms"] is not None for r in doc["ranks"] for g in r["graphs"]):
        footer += (
            " exposed est: torch's overlap scheduler's exposed figure at the recorded cap, from the "
            "tracekit replay document given to --estimates."
        )
    out.append(textwrap.fill(footer, 100) + "\n")
    return "".join(out)


__all__ = ["render"]
