"""The report's "Predicted" section (``tracekit report PATH --replay REPLAY.json``, when the
replay ran with ``--profile``): the step each cap would measure, predicted from the job's own
profile, as a line against the cap (log scale), with the measured step as a square where the
profile measured it (the recorded cap); then the table of caps (predicted beside torch's
estimate), the self-check, the recommendation and what is not modelled. Reads the replay
document's ``prediction`` and ``totals.step`` (for each cap's MB); never imports torch; every
string is escaped."""

from __future__ import annotations

from typing import Any

from tracekit.render.sweep import _cap_text, _esc, _num, panel_svg


def _mb_of(replay: dict[str, Any]) -> dict[str, float]:
    """Cap label -> its MB, from ``totals.step`` (one cap an entry)."""
    out: dict[str, float] = {}
    for s in (replay.get("totals") or {}).get("step") or []:
        caps = s.get("bucket_cap_mb") or []
        if len(caps) == 1 and _num(caps[0]) and caps[0] > 0 and isinstance(s.get("cap"), str):
            out[s["cap"]] = caps[0]
    return out


def section_predicted(replay: dict[str, Any]) -> str:
    """``<section id="predicted">``, or "" when the replay has no ``prediction``."""
    p = replay.get("prediction")
    if not isinstance(p, dict) or not isinstance(p.get("caps"), list):
        return ""
    mb = _mb_of(replay)
    points: dict[float, dict[str, Any]] = {}
    for c in p["caps"]:
        if isinstance(c, dict) and c.get("cap") in mb and _num(c.get("predicted_step_ms")):
            m = mb[c["cap"]]
            if m not in points or c["cap"] == "recorded":
                points[m] = {**c, "bucket_cap_mb": [m]}
    out = ['<section id="predicted"><h2>Predicted</h2>']
    if not points:
        out.append('<p class="muted">the prediction has no cap with a known size</p></section>')
        return "".join(out)
    line = [points[k] for k in sorted(points)]
    measured = tuple(
        (mb[c["cap"]], c["measured_step_ms"])
        for c in p["caps"]
        if isinstance(c, dict) and c.get("cap") in mb and _num(c.get("measured_step_ms"))
    )
    marks = {"recorded": mb["recorded"]} if "recorded" in mb else {}
    rec = p.get("recommendation") if isinstance(p.get("recommendation"), dict) else None
    if rec and rec.get("cap") in mb:
        marks["best"] = mb[rec["cap"]]
    sc = p.get("self_check") or {}
    out.append(
        "<p class=\"muted\">the step each cap would measure, predicted from the job's profile: each cap's "
        "replayed schedule run with the profile's measured costs (the square: the step the profile "
        f"measured). Self-check at the recorded cap: {_esc(sc.get('error_pct'))}%"
        + (" <b>(flagged)</b>" if sc.get("flagged") else "")
        + f"; the calibration's error: {_esc(p.get('error_pct'))}%.</p>"
    )
    out.append('<div class="charts">')
    out.append(
        panel_svg(
            line,
            "predicted_step_ms",
            "predicted step ms against the cap",
            " ms",
            marks,
            "predicted",
            measured,
        )
    )
    out.append("</div>")
    rows = []
    for c in line:
        cells = [
            _cap_text(c["bucket_cap_mb"][0]),
            str(c.get("cap")),
            *(
                f"{c[k]:.1f}" if _num(c.get(k)) else "-"
                for k in ("predicted_step_ms", "exposed_ms", "comm_ms")
            ),
            f"{c['est_ms']:.4f}" if _num(c.get("est_ms")) else "-",
            f"{c['measured_step_ms']:.1f}" if _num(c.get("measured_step_ms")) else "-",
        ]
        rows.append(
            f'<tr data-cap="{_esc(cells[0])}">'
            + "".join(
                f'<td class="num">{_esc(v)}</td>' if i != 1 else f"<td>{_esc(v)}</td>"
                for i, v in enumerate(cells)
            )
            + "</tr>"
        )
    out.append(
        '<table class="predicted"><thead><tr><th>cap MB</th><th>cap</th><th>predicted ms</th><th>exposed ms</th>'
        "<th>comm ms</th><th>torch est ms</th><th>measured ms</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
    )
    if rec and isinstance(rec.get("text"), str):
        out.append(f'<p id="predicted-recommended">{_esc(rec["text"])}</p>')
    notes = [n for n in p.get("not_modelled") or [] if isinstance(n, str)]
    if notes:
        out.append('<p class="muted">not modelled: ' + _esc("; ".join(notes)) + "</p>")
    out.append("</section>")
    return "".join(out)


__all__ = ["section_predicted"]
