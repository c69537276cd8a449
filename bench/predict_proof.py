#!/usr/bin/env python
"""The table of prediction errors in docs/predict.md: for every ordered pair of the profiled
runs (calibrate on run A's logs and traces, predict cap B from A's logs), B's predicted step
against B's measured median step, with the recorded cap's own error (A on A) on the diagonal.

    python bench/predict_proof.py                             # fixtures/profiled and its repeat
    python bench/predict_proof.py DIR [DIR...] --format json  # other sets of runs

A set of runs is a directory of run directories, each with ``logs/`` and ``traces/`` (the layout
``fixtures/generate.py --scenario profiled`` writes): the caps are their logs' recorded caps.
Nothing is timed: the predictions are ``tracekit replay A/logs --profile A/traces --cap-mb B...``
(``tracekit.replay.run.run``), the measured steps those of each run's own profile.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETS = [ROOT / "fixtures" / "profiled", ROOT / "fixtures" / "profiled_repeat"]


def runs_of(set_dir: Path) -> list[Path]:
    return sorted(
        (d for d in set_dir.iterdir() if (d / "logs").is_dir() and (d / "traces").is_dir()), key=_cap_key
    )


def _cap_key(d: Path) -> float:
    digits = "".join(ch for ch in d.name.split("_")[-1] if ch.isdigit() or ch == ".")
    return float(digits or 0)


def pair_errors(set_dir: Path) -> list[dict]:
    """One row per ordered pair (A, B) of the set's runs: predicted, measured, error %."""
    from tracekit.replay.run import RunOptions, run

    runs = runs_of(set_dir)
    docs = {}
    for a in runs:
        caps = [_cap_key(b) for b in runs]
        docs[a] = run([str(a / "logs")], RunOptions(caps=caps, profiles=[str(a / "traces")], jobs=1))
    measured = {a: docs[a]["prediction"]["self_check"]["measured_step_ms"] for a in runs}
    rows = []
    for a in runs:
        p = docs[a]["prediction"]
        by_cap = {c["cap"]: c for c in p["caps"]}
        for b in runs:
            label = "recorded" if a == b else f"{_cap_key(b):g}"
            got = by_cap[label]["predicted_step_ms"]
            rows.append(
                {
                    "calibrated_on": a.name,
                    "predicted": b.name,
                    "predicted_ms": round(got, 1),
                    "measured_ms": round(measured[b], 1),
                    "error_pct": round((got - measured[b]) / measured[b] * 100, 1),
                }
            )
    return rows


def markdown(set_dir: Path, rows: list[dict]) -> str:
    names = [r.name for r in runs_of(set_dir)]
    out = [
        f"`{set_dir.relative_to(ROOT) if set_dir.is_relative_to(ROOT) else set_dir}`: predicted ms / measured ms (error)\n"
    ]
    out.append("| calibrated on \\ predicted | " + " | ".join(f"`{n}`" for n in names) + " |")
    out.append("|---" * (len(names) + 1) + "|")
    for a in names:
        cells = [
            f"{r['predicted_ms']:.1f} / {r['measured_ms']:.1f} ({r['error_pct']:+.1f}%)"
            for b in names
            for r in rows
            if r["calibrated_on"] == a and r["predicted"] == b
        ]
        out.append(f"| `{a}` | " + " | ".join(cells) + " |")
    worst = max(abs(r["error_pct"]) for r in rows)
    own = max(abs(r["error_pct"]) for r in rows if r["calibrated_on"] == r["predicted"])
    out.append(f"\nlargest error {worst:.1f}%; at the recorded cap {own:.1f}%\n")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sets", nargs="*", type=Path, help="sets of runs (default: the fixtures)")
    ap.add_argument("--format", choices=["markdown", "json"], default="markdown")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    result = {str(s): pair_errors(s.resolve()) for s in (args.sets or SETS)}
    if args.format == "json":
        print(json.dumps(result, indent=1))
    else:
        print("\n".join(markdown(Path(s).resolve(), rows) for s, rows in result.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
