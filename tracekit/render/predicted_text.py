"""The ``Predicted from the profile`` section of ``tracekit replay --profile``'s table and
markdown: per cap, the step the profile predicts beside torch's estimate and, at the recorded
cap, the measured step; then the calibration in a few lines, the self-check, the recommendation
(with ``--recommend``) and what is not modelled. Empty without a ``prediction``."""

from __future__ import annotations

from typing import Any

from tracekit.render.text import heading, table
from tracekit.replay.predicted import SELF_CHECK_PCT

HEADERS = ["cap", "predicted step ms", "exposed ms", "comm ms", "compute ms", "torch est ms", "measured ms"]


def _f(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _cap(label: str) -> str:
    return label if label in ("recorded", "auto") else f"{label} MB"


def predicted_section(doc: dict[str, Any], fmt: str) -> str:
    p = doc.get("prediction")
    if not p:
        return ""
    bullet = "- " if fmt == "markdown" else "  "
    rows = [
        [
            _cap(c["cap"]),
            _f(c["predicted_step_ms"]),
            _f(c["exposed_ms"]),
            _f(c["comm_ms"]),
            _f(c["compute_ms"]),
            _f(c["est_ms"], 4),
            _f(c["measured_step_ms"]),
        ]
        for c in p["caps"]
    ]
    cal = p["calibration"]
    fit = cal["transfer_fit"]
    sc = p["self_check"]
    lines = [
        f"calibrated on {len(cal['traces'])} traces (ranks {', '.join(str(r) for r in cal['ranks'])}), "
        f"{cal['steps']} profiled steps: step {_f(cal['step_ms']['median'])} ms median "
        f"({_f(cal['step_ms']['min'])}-{_f(cal['step_ms']['max'])}), spread {p['step_spread_pct']}%",
        f"transfers: {fit['latency_ms']:.2f} ms + {fit['ms_per_mib']:.3f} ms/MiB moved (latency "
        f"{'fitted' if fit['latency'] == 'fitted' else 'assumed'}); residuals over {fit['transfers']} measured "
        f"transfers: median {fit['residual_median_pct']}%, max {fit['residual_max_pct']}%",
        f"a matmul beside a transfer: {1 + cal['sharing']['slowdown']:.2f}x its time alone"
        f"{'' if cal['sharing']['measured'] else ' (assumed)'}; copies {cal['copy']['ms_per_mib']:.3f} ms/MiB, "
        f"first touch of a fresh buffer +{cal['copy']['first_touch_ms_per_mib']:.3f} ms/MiB"
        f"{'' if cal['copy']['first_touch_measured'] else ' (assumed)'}",
        f"self-check: the recorded cap predicted {_f(sc['predicted_step_ms'])} ms against "
        f"{_f(sc['measured_step_ms'])} ms measured ({sc['error_pct']:+.1f}%)"
        + (f": CALIBRATION FLAGGED, beyond {SELF_CHECK_PCT:g}%" if sc["flagged"] else ""),
    ]
    flag = (
        f"CALIBRATION FLAGGED: the recorded cap is predicted {sc['error_pct']:+.1f}% off the step the profile "
        f"measured (beyond {SELF_CHECK_PCT:g}%); the predictions below carry at least that error\n"
        if sc["flagged"]
        else ""
    )
    own = next((c for c in p["caps"] if c["cap"] == "recorded"), None)
    if own and own.get("nodes"):
        n = own["nodes"]
        lines.append(
            f"nodes at the recorded cap: {n['matmul_measured']} matmuls timed by the measured ones, "
            f"{n['matmul_scaled_estimate']} by a scaled estimate, {n['gap_share']} share the measured gap"
        )
    lines += [f"note: {n}" for n in cal.get("notes", [])]
    rec = p.get("recommendation")
    if rec:
        lines.append(("recommended: " if rec["cap"] is not None else "") + rec["text"])
    lines.append("not modelled: " + "; ".join(p["not_modelled"]))
    return (
        "\n"
        + heading("Predicted from the profile (the step each cap would measure)", fmt)
        + flag
        + table(rows, HEADERS, fmt)
        + "\n"
        + "".join(f"{bullet}{ln}\n" for ln in lines)
    )


__all__ = ["predicted_section"]
