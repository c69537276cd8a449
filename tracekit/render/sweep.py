"""The report's "Cap sweep" section (``tracekit report PATH --replay REPLAY.json``): a saved
``tracekit.replay/3`` document -> inline SVG of the estimated step time and the peak memory
against the cap (the recorded and the recommended cap marked), the Pareto front of step time
against memory, a table of every cap and the config line to set. Reads ``totals.step``,
``pareto_front`` and ``recommendation`` (computed here from ``totals.step`` when the replay ran
without ``--recommend``), and on a mesh the what-ifs run at the recorded cap
(:mod:`tracekit.render.mesh_what_ifs_html`); never imports torch. Every value is torch's estimate, not a
measurement; every string is escaped.
"""

from __future__ import annotations

import html
import math
from typing import Any, TypeGuard

from tracekit.render.mesh_what_ifs_html import mesh_what_ifs_html
from tracekit.replay.recommend import pareto_front, recommend

W, H, LEFT, RIGHT, TOP, BOTTOM = 560, 150, 84, 36, 18, 30


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


def panel_svg(
    points: list[dict[str, Any]], key: str, title: str, unit: str, marks: dict[str, float], css: str
) -> str:
    """One line chart of ``key`` against the cap (log2 axis), with the marked caps."""
    xs = [math.log2(p["bucket_cap_mb"][0]) for p in points]
    ys = [(_mib(p[key]) if key == "peak_memory_bytes" else p[key]) for p in points]
    lo_y, hi_y = min(ys + [0.0]), max(ys) * 1.1 or 1.0
    fx = _scale(min(xs), max(xs), LEFT, W - RIGHT)
    fy = _scale(lo_y, hi_y, H - BOTTOM, TOP)
    parts = [
        f'<svg class="sweep {css}" data-key="{key}" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
        f'role="img" aria-label="{_esc(title)}"><text x="6" y="12">{_esc(title)}</text>'
    ]
    for frac in (0.0, 0.5, 1.0):
        v = lo_y + frac * (hi_y - lo_y)
        parts.append(
            f'<line class="grid" x1="{LEFT}" x2="{W - RIGHT}" y1="{fy(v):.1f}" y2="{fy(v):.1f}"/>'
            f'<text class="axis" x="{LEFT - 4}" y="{fy(v) + 3:.1f}" text-anchor="end">'
            f"{v:.4g}{_esc(unit)}</text>"
        )
    for p, x in zip(points, xs, strict=False):
        mb = p["bucket_cap_mb"][0]
        if abs(x - round(x)) < 1e-9 and round(x) % 2 == 0 or p is points[0] or p is points[-1]:
            parts.append(
                f'<text class="axis" x="{fx(x):.1f}" y="{H - BOTTOM + 14}" text-anchor="middle">'
                f"{_esc(_cap_text(mb))}</text>"
            )
    parts.append(
        f'<text class="axis" x="{W - RIGHT}" y="{H - 2}" text-anchor="end">cap MB (log scale)</text>'
    )
    for k, (name, mb) in enumerate(marks.items()):
        if mb > 0:
            x = fx(math.log2(mb))
            parts.append(
                f'<line class="mark {name}" data-cap="{_esc(_cap_text(mb))}" x1="{x:.1f}" x2="{x:.1f}" '
                f'y1="{TOP}" y2="{H - BOTTOM}"/><text class="mark {name}" x="{x + 3:.1f}" y="{TOP + 10 + 12 * k}">'
                f"{_esc(name)}</text>"
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
    parts.append("</svg>")
    return "".join(parts)


def pareto_svg(points: list[dict[str, Any]], front: list[dict[str, Any]]) -> str:
    """Estimated step time against peak memory, one dot per cap; the front joined."""
    xs = [_mib(p["peak_memory_bytes"]) for p in points]
    ys = [p["est_ms"] for p in points]
    fx = _scale(0.0, max(xs) * 1.1 or 1.0, LEFT, W - RIGHT)
    fy = _scale(0.0, max(ys) * 1.1 or 1.0, H - BOTTOM, TOP)
    parts = [
        f'<svg class="sweep pareto" width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img" '
        'aria-label="Pareto front"><text x="6" y="12">Pareto front: estimated step ms against peak MiB '
        "(lower left is better)</text>"
    ]
    for frac in (0.0, 0.5, 1.0):
        v = frac * max(ys) * 1.1
        parts.append(
            f'<line class="grid" x1="{LEFT}" x2="{W - RIGHT}" y1="{fy(v):.1f}" y2="{fy(v):.1f}"/>'
            f'<text class="axis" x="{LEFT - 4}" y="{fy(v) + 3:.1f}" text-anchor="end">{v:.4g} ms</text>'
        )
        m = frac * max(xs) * 1.1
        parts.append(
            f'<text class="axis" x="{fx(m):.1f}" y="{H - BOTTOM + 14}" text-anchor="middle">'
            f"{m:.4g} MiB</text>"
        )
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
