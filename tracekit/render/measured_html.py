"""The report's "Measured" section (``tracekit report LOGS --profile TRACES``): a
``tracekit.measure/1`` document -> its verdict, an inline SVG of torch's estimate against the
measured time of every collective (bucket) of the lowest measured rank, on a log scale (they
differ by orders of magnitude), and a table of each rank's graphs. Never imports torch; every
string is escaped."""

from __future__ import annotations

import html
import math
from typing import Any

from tracekit.model import SHORT_NAMES

W, ROW, LEFT, RIGHT, TOP = 620, 16, 150, 70, 22


def _esc(v: Any) -> str:
    return html.escape(str(v), quote=True)


def _ms(v: Any) -> str:
    return "-" if v is None else f"{v:.3f}"


def bars_svg(rank: dict[str, Any]) -> str:
    """Per collective of one rank: torch's estimate and the measured median as two bars on a
    log10 axis of milliseconds."""
    rows = [
        (g["label"], c)
        for g in rank["graphs"]
        for c in g["collectives"]
        if c.get("est_ms") and c.get("measured_ms") is not None
    ]
    if not rows:
        return '<p class="muted">no collective with both an estimate and a measurement</p>'
    values = [v for _, c in rows for v in (c["est_ms"], c["measured_ms"]) if v and v > 0]
    lo = math.floor(math.log10(min(values)))
    hi = math.ceil(math.log10(max(values)))
    hi = hi if hi > lo else lo + 1

    def x(v: float) -> float:
        return LEFT + (math.log10(max(v, 10.0**lo)) - lo) / (hi - lo) * (W - LEFT - RIGHT)

    h = TOP + ROW * len(rows) * 2 + 24
    parts = [
        f'<svg class="measured" width="{W}" height="{h}" viewBox="0 0 {W} {h}" role="img" '
        f'aria-label="estimated against measured ms per collective, rank {_esc(rank["rank"])}">'
        f'<text x="6" y="12">rank {_esc(rank["rank"])}: torch\'s estimate (light) against measured (dark), '
        "ms, log scale</text>"
    ]
    for e in range(lo, hi + 1):
        xe = x(10.0**e)
        parts.append(
            f'<line class="grid" x1="{xe:.1f}" x2="{xe:.1f}" y1="{TOP}" y2="{h - 20}" stroke="#ccc"/>'
            f'<text class="axis" x="{xe:.1f}" y="{h - 6}" text-anchor="middle">{10.0**e:g}</text>'
        )
    for i, (label, c) in enumerate(rows):
        y = TOP + i * 2 * ROW
        name = f"{label} #{c['position']} {SHORT_NAMES.get(c['kind'], c['kind'])}"
        parts.append(
            f'<text class="axis" x="{LEFT - 4}" y="{y + ROW:.1f}" text-anchor="end">{_esc(name)}</text>'
        )
        for k, (key, css, fill) in enumerate(
            (("est_ms", "est", "#9ecae1"), ("measured_ms", "meas", "#08519c"))
        ):
            v = c[key]
            yy = y + k * (ROW - 2)
            parts.append(
                f'<rect class="bar {css}" x="{LEFT}" y="{yy:.1f}" width="{max(x(v) - LEFT, 1):.1f}" '
                f'height="{ROW - 4}" fill="{fill}"><title>{_esc(name)}: {key.split("_")[0]} {v:.4g} ms</title></rect>'
            )
        ratio = c.get("ratio")
        if ratio is not None:
            parts.append(
                f'<text class="axis" x="{x(c["measured_ms"]) + 4:.1f}" y="{y + ROW:.1f}">{ratio:,.0f}x</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def section_measured(doc: dict[str, Any]) -> str:
    """``<section id="measured">``: the verdict, the picture, a table of graphs per rank."""
    out = ['<section id="measured"><h2>Measured</h2>', f"<p><strong>{_esc(doc.get('verdict'))}</strong></p>"]
    ranks = [r for r in doc.get("ranks") or [] if r.get("paired")]
    if ranks:
        out.append(bars_svg(ranks[0]))
    rows = []
    for r in doc.get("ranks") or []:
        for g in r.get("graphs") or []:
            rows.append(
                f"<tr><td>{_esc(r['rank'])}</td><td>{_esc(g['label'])}</td><td>{_esc(g['phase'])}</td>"
                f'<td class="num">{_ms(g["median_ms"])}</td><td class="num">{_ms(g["est_ms"])}</td>'
                f'<td class="num">{_ms(g["collectives_measured_ms"])}</td>'
                f'<td class="num">{_ms(g["exposed_measured_ms"])}</td></tr>'
            )
    if rows:
        out.append(
            "<table><thead><tr><th>rank</th><th>graph</th><th>phase</th><th>run ms</th>"
            "<th>collectives est ms</th><th>collectives measured ms</th><th>exposed ms</th></tr></thead><tbody>"
            + "".join(rows)
            + "</tbody></table>"
        )
    for n in doc.get("notes") or []:
        out.append(f'<p class="muted">{_esc(n)}</p>')
    out.append(
        '<p class="muted">medians over the profiled steps; measured: the transfer\'s span in the '
        "profiler trace; est: torch's estimate from the compile log; exposed: the main thread "
        "waiting in wait_tensor.</p></section>"
    )
    return "".join(out)


__all__ = ["bars_svg", "section_measured"]
