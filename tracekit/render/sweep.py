"""The report's "Cap sweep" section (``tracekit report PATH --replay REPLAY.json``): a saved
``tracekit.replay/3`` document -> inline SVG of the estimated step time and the peak memory
against the cap (the recorded and the recommended cap marked), the Pareto front of step time
against memory, a table of every cap and the config line to set. Reads ``totals.step``,
``pareto_front`` and ``recommendation`` (computed here from ``totals.step`` when the replay ran
without ``--recommend``), and on a mesh the what-ifs run at the recorded cap
(:mod:`tracekit.render.mesh_what_ifs_html`); never imports torch. Every value is torch's estimate, not a
measurement; every string is escaped. The charts' axes span the data with a margin
(:func:`data_range`) and say so when they do not start at 0; the marked caps' names sit above the
chart (:func:`mark_labels`) and the cap labels are thinned so that no text overprints another or
the line.
"""

from __future__ import annotations

import html
import math
from typing import Any, TypeGuard

from tracekit.render.mesh_what_ifs_html import mesh_what_ifs_html
from tracekit.replay.recommend import pareto_front, recommend

W, PLOT_H, LEFT, RIGHT, TOP, BOTTOM = 560, 102, 84, 36, 18, 30
CHAR_W, ROW = 7, 13  # a character's width at the page's 11px, at most, and a row of labels (px)
MARGIN = 0.15  # of the data's span, above and below it


def _esc(v: Any) -> str:
    return html.escape(str(v), quote=True)


def _num(v: Any) -> TypeGuard[float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def sweep_points(replay: dict[str, Any]) -> list[dict[str, Any]]:
    """The step entries of one cap each with an estimate and a peak, by cap (duplicates once)."""
    out: dict[float, dict[str, Any]] = {}
    for s in (replay.get("totals") or {}).get("step") or []:
        caps = s.get("bucket_cap_mb") or []
        if (
            len(caps) != 1
            or not _num(caps[0])
            or caps[0] <= 0
            or not _num(s.get("est_ms"))
            or not _num(s.get("peak_memory_bytes"))
        ):
            continue
        if caps[0] not in out or s.get("cap") == "recorded":
            out[caps[0]] = s
    return [out[k] for k in sorted(out)]


def _mib(n: float) -> float:
    return n / 2**20


def _scale(lo: float, hi: float, a: float, b: float):
    if hi <= lo:
        return lambda v: (a + b) / 2
    return lambda v: a + (v - lo) / (hi - lo) * (b - a)


def _cap_text(mb: float) -> str:
    return f"{mb:.4g}"


def _width(text: str) -> float:
    return CHAR_W * len(text)


def data_range(values: list[float]) -> tuple[float, float]:
    """An axis over ``values``: from below their least to above their largest by :data:`MARGIN`
    of their span (of a tenth of the value when all are one), from 0 where the margin would
    reach it; so a 3% difference between caps takes a visible part of the axis."""
    lo, hi = min(values), max(values)
    span = hi - lo or abs(hi) * 0.1 or 1.0
    bottom, top = lo - MARGIN * span, hi + MARGIN * span
    if lo >= 0 > bottom:
        bottom = 0.0
    return bottom, top


def _from(lo: float, unit: str) -> str:
    return "" if lo == 0 else f" (axis from {lo:.4g}{unit}, not 0)"


def _spread(items: list[tuple[float, str]], lo: float, hi: float, gap: float = 6) -> list[tuple[float, str]]:
    """The labels (x of its middle, text) that fit between ``lo`` and ``hi`` without touching one
    another (``gap`` px apart), the first and the last given first, then the rest in order."""
    order = [*items[:1], *items[-1:], *items[1:-1]]
    kept: list[tuple[float, float, float, str]] = []
    for x, text in order:
        half = _width(text) / 2
        x = min(max(x, lo + half), hi - half)
        if all(x + half + gap <= k0 or k1 + gap <= x - half for k0, k1, _, _ in kept):
            kept.append((x - half, x + half, x, text))
    return [(x, text) for _, _, x, text in sorted(kept)]


def _y_grid(ys: list[float], fy: Any, unit: str) -> list[str]:
    """The y axis's grid lines at the least, middle and largest of ``ys``, each labelled."""
    return [
        f'<line class="grid" x1="{LEFT}" x2="{W - RIGHT}" y1="{fy(v):.1f}" y2="{fy(v):.1f}"/>'
        f'<text class="axis" x="{LEFT - 4}" y="{fy(v) + 3:.1f}" text-anchor="end">{v:.4g}{_esc(unit)}</text>'
        for v in sorted({min(ys), (min(ys) + max(ys)) / 2, max(ys)})
    ]


def _x_ticks(ticks: list[tuple[float, str]], h: float) -> list[str]:
    """The x axis's labels (x, text) under a chart ``h`` px high, those that fit (:func:`_spread`)."""
    return [
        f'<text class="axis tick" x="{x:.1f}" y="{h - BOTTOM + 14}" text-anchor="middle">{_esc(text)}</text>'
        for x, text in _spread(ticks, 0, W)
    ]


def mark_labels(marks: dict[str, float], xs: dict[str, float]) -> list[tuple[str, float, int, str]]:
    """Where the marked caps' names go: in rows above the chart, over no line nor point, each
    beside its mark (right of it, or left where the chart ends), one row down where it would
    touch the label before it; marks at one cap share one label. (text, x, row, anchor)."""
    by_cap: dict[float, list[str]] = {}
    for name, mb in marks.items():
        if mb > 0:
            by_cap.setdefault(mb, []).append(name)
    out: list[tuple[str, float, int, str]] = []
    ends: list[float] = []  # per row, the right end of its last label
    for mb in sorted(by_cap):
        text = ", ".join(by_cap[mb])
        x = xs[by_cap[mb][0]]
        if x + 3 + _width(text) <= W - 2:
            anchor, x0, x1, tx = "start", x + 3, x + 3 + _width(text), x + 3
        else:
            anchor, x0, x1, tx = "end", x - 3 - _width(text), x - 3, x - 3
        row = next((r for r, end in enumerate(ends) if x0 >= end + 6), len(ends))
        if row == len(ends):
            ends.append(x1)
        ends[row] = x1
        out.append((text, tx, row, anchor))
    return out


def panel_svg(
    points: list[dict[str, Any]],
    key: str,
    title: str,
    unit: str,
    marks: dict[str, float],
    css: str,
    measured: tuple[tuple[float, float], ...] = (),
) -> str:
    """One line chart of ``key`` against the cap (log2 axis), with the marked caps. The y axis
    spans the data (:func:`data_range`; the title says where it starts when not at 0), the
    marks' names sit in rows above the chart (:func:`mark_labels`), the cap labels never touch.
    ``measured``: (cap MB, value) points drawn as squares beside the line (a run's measurement)."""
    xs = [math.log2(p["bucket_cap_mb"][0]) for p in points]
    ys = [(_mib(p[key]) if key == "peak_memory_bytes" else p[key]) for p in points]
    lo_y, hi_y = data_range(ys + [v for _, v in measured])
    fx = _scale(min(xs), max(xs), LEFT, W - RIGHT)
    xmark = {name: fx(math.log2(mb)) for name, mb in marks.items() if mb > 0}
    labels = mark_labels(marks, xmark)
    top = TOP + ROW * (1 + max((r for _, _, r, _ in labels), default=-1))
    h = top + PLOT_H + BOTTOM
    fy = _scale(lo_y, hi_y, top + PLOT_H, top)
    heading = title + _from(lo_y, unit)
    parts = [
        f'<svg class="sweep {css}" data-key="{key}" data-y-min="{lo_y:.6g}" data-y-max="{hi_y:.6g}" '
        f'width="{W}" height="{h}" viewBox="0 0 {W} {h}" role="img" aria-label="{_esc(heading)}">'
        f'<text class="title" x="6" y="12">{_esc(heading)}</text>'
    ]
    parts += _y_grid(ys, fy, unit)
    ticks = [
        (fx(x), _cap_text(p["bucket_cap_mb"][0]))
        for p, x in zip(points, xs, strict=False)
        if abs(x - round(x)) < 1e-9 and round(x) % 2 == 0 or p is points[0] or p is points[-1]
    ]
    parts += _x_ticks(ticks, h)
    parts.append(
        f'<text class="axis" x="{W - RIGHT}" y="{h - 2}" text-anchor="end">cap MB (log scale)</text>'
    )
    for name, mb in marks.items():
        if mb > 0:
            x = xmark[name]
            parts.append(
                f'<line class="mark {name}" data-cap="{_esc(_cap_text(mb))}" x1="{x:.1f}" x2="{x:.1f}" '
                f'y1="{top}" y2="{top + PLOT_H}"/>'
            )
    for text, x, row, anchor in labels:
        names = text.replace(",", "")
        parts.append(
            f'<text class="mark {names}" x="{x:.1f}" y="{top - 4 - ROW * row}" text-anchor="{anchor}">'
            f"{_esc(text)}</text>"
        )
    path = " ".join(
        f"{'M' if i == 0 else 'L'}{fx(x):.1f},{fy(y):.1f}"
        for i, (x, y) in enumerate(zip(xs, ys, strict=False))
    )
    parts.append(f'<path class="line" d="{path}"/>')
    for p, x, y in zip(points, xs, ys, strict=False):
        parts.append(
            f'<circle class="pt" data-cap="{_esc(_cap_text(p["bucket_cap_mb"][0]))}" cx="{fx(x):.1f}" '
            f'cy="{fy(y):.1f}" r="3"><title>cap {_esc(_cap_text(p["bucket_cap_mb"][0]))} MB '
            f"({_esc(p.get('cap'))}): {y:.4g}{_esc(unit)}</title></circle>"
        )
    for mb, v in measured:
        x, y = fx(math.log2(mb)), fy(v)
        parts.append(
            f'<rect class="measured" data-cap="{_esc(_cap_text(mb))}" x="{x - 4:.1f}" y="{y - 4:.1f}" '
            f'width="8" height="8"><title>measured at cap {_esc(_cap_text(mb))} MB: {v:.4g}{_esc(unit)}'
            "</title></rect>"
        )
    parts.append("</svg>")
    return "".join(parts)


def pareto_svg(points: list[dict[str, Any]], front: list[dict[str, Any]]) -> str:
    """Estimated step time against peak memory, one dot per cap; the front joined. Both axes span
    the data (:func:`data_range`), the title says where they start when not at 0."""
    xs = [_mib(p["peak_memory_bytes"]) for p in points]
    ys = [p["est_ms"] for p in points]
    lo_x, hi_x = data_range(xs)
    lo_y, hi_y = data_range(ys)
    h = TOP + PLOT_H + BOTTOM
    fx = _scale(lo_x, hi_x, LEFT, W - RIGHT)
    fy = _scale(lo_y, hi_y, TOP + PLOT_H, TOP)
    title = "Pareto front: estimated step ms against peak MiB (lower left is better"
    not_0 = [name for name, lo in (("ms", lo_y), ("MiB", lo_x)) if lo]
    heading = title + (f"; {' and '.join(not_0)} axes not from 0)" if not_0 else ")")
    parts = [
        f'<svg class="sweep pareto" data-x-min="{lo_x:.6g}" data-x-max="{hi_x:.6g}" data-y-min="{lo_y:.6g}" '
        f'data-y-max="{hi_y:.6g}" width="{W}" height="{h}" viewBox="0 0 {W} {h}" role="img" '
        f'aria-label="Pareto front"><text class="title" x="6" y="12">{_esc(heading)}</text>'
    ]
    parts += _y_grid(ys, fy, " ms")
    ticks = [(fx(m), f"{m:.4g} MiB") for m in sorted({min(xs), (min(xs) + max(xs)) / 2, max(xs)})]
    parts += _x_ticks(ticks, h)
    fr = sorted(front, key=lambda s: s["peak_memory_bytes"])
    if fr:
        d = " ".join(
            f"{'M' if i == 0 else 'L'}{fx(_mib(s['peak_memory_bytes'])):.1f},{fy(s['est_ms']):.1f}"
            for i, s in enumerate(fr)
        )
        parts.append(f'<path class="front" d="{d}"/>')
    on_front = {(s["peak_memory_bytes"], s["est_ms"]) for s in fr}
    for p, x, y in zip(points, xs, ys, strict=False):
        cls = "pt front" if (p["peak_memory_bytes"], p["est_ms"]) in on_front else "pt"
        parts.append(
            f'<circle class="{cls}" data-cap="{_esc(_cap_text(p["bucket_cap_mb"][0]))}" '
            f'cx="{fx(x):.1f}" cy="{fy(y):.1f}" r="3.5"><title>cap '
            f"{_esc(_cap_text(p['bucket_cap_mb'][0]))} MB: {y:.4f} ms, {x:.2f} MiB</title></circle>"
        )
    parts.append("</svg>")
    return "".join(parts)


def section_sweep(replay: dict[str, Any]) -> str:
    """``<section id="sweep">``: the charts, the table of caps and the config line."""
    out = ['<section id="sweep"><h2>Cap sweep</h2>']
    points = sweep_points(replay)
    step = (replay.get("totals") or {}).get("step") or []
    if len(points) < 1:
        out.append(
            '<p class="muted">the replay has no cap with an estimated step time (was torch\'s '
            "overlap scheduler run? <code>tracekit replay PATH --recommend --format json</code>)"
            "</p>"
        )
        out.append(mesh_what_ifs_html(replay) + "</section>")
        return "".join(out)
    rec = (
        replay.get("recommendation")
        if isinstance(replay.get("recommendation"), dict)
        else recommend(step, None)
    )
    given = replay.get("pareto_front")
    front = given if isinstance(given, list) else pareto_front(step)
    front = [
        s for s in front if isinstance(s, dict) and _num(s.get("est_ms")) and _num(s.get("peak_memory_bytes"))
    ]
    recorded = next((s for s in step if s.get("cap") == "recorded"), None)
    marks: dict[str, float] = {}
    if recorded and len(recorded.get("bucket_cap_mb") or []) == 1 and _num(recorded["bucket_cap_mb"][0]):
        marks["recorded"] = recorded["bucket_cap_mb"][0]
    if rec and _num(rec.get("cap_mb")):
        marks["recommended"] = rec["cap_mb"]
    replayed_by = (replay.get("torch") or {}).get("replay") if isinstance(replay.get("torch"), dict) else None
    who = f"torch {_esc(str(replayed_by).split('+')[0])}'s" if replayed_by else "torch's"
    out.append(
        f'<p class="muted">{who} estimates from the replay (recorded compute estimates, '
        "NCCL model, roofline), not measurements: est = compute + exposed communication, summed "
        "over the step's graphs; peak: the largest graph's.</p>"
    )
    out.append('<div class="charts">')
    out.append(panel_svg(points, "est_ms", "estimated step ms against the cap", " ms", marks, "est"))
    out.append(
        panel_svg(points, "peak_memory_bytes", "peak memory MiB against the cap", " MiB", marks, "peak")
    )
    out.append(pareto_svg(points, front))
    out.append("</div>")
    fkeys = {(s["peak_memory_bytes"], s["est_ms"]) for s in front}
    rows = []
    for p in points:
        mb = p["bucket_cap_mb"][0]
        tags = [t for t, m in marks.items() if m == mb]
        exposed = f"{p['exposed_ms']:.4f}" if _num(p.get("exposed_ms")) else "-"
        pareto = "yes" if (p["peak_memory_bytes"], p["est_ms"]) in fkeys else ""
        rows.append(
            f'<tr data-cap="{_esc(_cap_text(mb))}"><td class="num">{_esc(_cap_text(mb))}</td>'
            f'<td>{_esc(p.get("cap"))}</td><td class="num">{p["est_ms"]:.4f}</td>'
            f'<td class="num">{exposed}</td><td class="num">{_mib(p["peak_memory_bytes"]):.2f}</td>'
            f"<td>{pareto}</td><td>{_esc(', '.join(tags))}</td></tr>"
        )
    out.append(
        '<table class="sweep"><thead><tr><th>cap MB</th><th>cap</th><th>est ms</th><th>exposed ms</th>'
        "<th>peak MiB</th><th>Pareto</th><th>marked</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
    )
    if rec and rec.get("config"):
        vs = rec.get("vs_recorded_ms")
        faster = (
            ", the recorded cap: no cap is faster"
            if rec.get("keep_recorded")
            else ""
            if not _num(vs)
            else (
                f", {-vs:.4f} ms faster than the recorded cap"
                if vs < 0
                else ", as fast as the recorded cap"
                if vs == 0
                else f", {vs:.4f} ms slower than the recorded cap"
            )
        )
        budget = rec.get("memory_budget_gb")
        out.append(
            f'<p id="sweep-recommended">recommended cap: <b>{_esc(_cap_text(rec["cap_mb"]))} MB</b> '
            f"(est {rec['est_ms']:.4f} ms, peak {_mib(rec['peak_memory_bytes']):.2f} MiB{_esc(faster)}"
            + (f", within {_esc(budget)} GB" if budget is not None else "")
            + f'); set</p><pre class="config"><code>{_esc(rec["config"])}</code></pre>'
            f'<button class="copy" type="button" hidden data-copy="{_esc(rec["config"])}">copy</button>'
        )
    out.append(mesh_what_ifs_html(replay))  # a mesh's what-ifs at the recorded cap; "" without
    out.append("</section>")
    return "".join(out)


__all__ = ["pareto_svg", "panel_svg", "section_sweep", "sweep_points"]
