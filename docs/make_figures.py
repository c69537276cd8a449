"""Make the README's figures of the overlap what-if (docs/sweep.png, docs/timeline.png) with
headless chromium, from the overlap_cap_a fixture:

1. ``tracekit replay fixtures/logs/overlap_cap_a --recommend --format json --trace-out DIR``;
2. docs/sweep.png: the report's Cap sweep section (its markup and CSS, tracekit.render.sweep)
   of ``tracekit replay fixtures/logs/overlap_cap_b --recommend --format json`` (recorded at 64 MB);
3. docs/timeline.png: two trace files (DIR/cap_<X>MB.json, the recorded cap above 64 MB) drawn as Perfetto lays a trace out,
   one row per track (thread_name), slices by category, the memory counter as steps. Perfetto's
   UI cannot be fetched offline and this chromium has no chrome://tracing, so this is our own
   drawing of the same file, not a Perfetto screenshot.

    python docs/make_figures.py [--caps 1.5,64]
"""

from __future__ import annotations

import argparse
import html
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

COLOURS = {"compute": "#7a8699", "exposed": "#c2352b", "communication": "#3b7dd8"}


def timeline_html(traces: list[tuple[str, dict]], width: int = 1400) -> str:
    """An HTML page drawing trace-event documents one above the other (one time scale): tracks
    as rows, slices as boxes, counters as steps."""
    end = max(e["ts"] + e.get("dur", 0) for _, t in traces for e in t["traceEvents"] if "ts" in e)
    body = "".join(_timeline_svg(trace, title, end, width) for title, trace in traces)
    legend = " ".join(f'<span style="background:{c}"></span>{n}' for n, c in COLOURS.items())
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><style>body{{margin:8px;font:12px system-ui,"
            "sans-serif;background:#fff}}svg text{font-size:12px;fill:#1d2430}svg .proc{font-weight:600}"
            "svg .in{fill:#fff;font-size:10px}svg .lane{fill:#f5f7fa}svg .tick{stroke:#e3e6ea}"
            "svg .axis{fill:#5b6472;font-size:10px}p span{display:inline-block;width:10px;height:10px;"
            f"margin:0 4px 0 12px}}</style></head><body><p>{legend} (tracekit's drawing of the trace files; "
            f"hover a box for its name)</p>{body}</body></html>")


def _timeline_svg(trace: dict, title: str, end: float, width: int) -> str:
    ev = trace["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    slices = [e for e in ev if e["ph"] == "X"]
    counters: dict[tuple, list] = {}
    for e in ev:
        if e["ph"] == "C":
            counters.setdefault((e["pid"], e["name"]), []).append((e["ts"], e["args"]["bytes"]))
    left, row, gap = 230, 30, 6
    rows: list[tuple[str, object]] = []
    for pid in sorted(procs):
        rows.append(("process", procs[pid]))
        for key in sorted(k for k in names if k[0] == pid):
            rows.append(("track", key))
            label = names[key].split(" ")[0]
            if names[key].endswith("compute") and (pid, f"{label} memory") in counters:
                rows.append(("counter", (pid, f"{label} memory")))
    scale = (width - left - 20) / end
    y, parts = 30, []
    for kind, what in rows:
        if kind == "process":
            parts.append(f'<text x="6" y="{y + 14}" class="proc">{html.escape(what)}</text>')
            y += 22
            continue
        if kind == "track":
            parts.append(f'<text x="14" y="{y + 19}">{html.escape(names[what])}</text>'
                         f'<rect x="{left}" y="{y}" width="{width - left - 20}" height="{row}" class="lane"/>')
            for e in slices:
                if (e["pid"], e["tid"]) != what:
                    continue
                x, w = left + e["ts"] * scale, max(e["dur"] * scale, 0.5)
                label = e["name"] if e["cat"] != "compute" else e["name"]
                txt = (f'<text x="{x + 2:.1f}" y="{y + 19}" class="in">{html.escape(label[:int(w / 6.2)])}</text>'
                       if w > 24 else "")
                parts.append(f'<rect x="{x:.1f}" y="{y + 2}" width="{w:.1f}" height="{row - 4}" '
                             f'fill="{COLOURS.get(e["cat"], "#999")}"><title>{html.escape(e["name"])}</title></rect>{txt}')
            y += row + gap
        else:
            pts = sorted(counters[what])
            top = max(b for _, b in pts) or 1
            d = f"M{left + pts[0][0] * scale:.1f},{y + row}"
            prev = pts[0][1]
            for ts, b in pts:
                d += f" L{left + ts * scale:.1f},{y + row - prev / top * (row - 4):.1f}"
                d += f" L{left + ts * scale:.1f},{y + row - b / top * (row - 4):.1f}"
                prev = b
            d += f" L{left + end * scale:.1f},{y + row - prev / top * (row - 4):.1f} L{left + end * scale:.1f},{y + row} Z"
            parts.append(f'<text x="14" y="{y + 19}">{html.escape(what[1])} (peak {top / 2**20:.2f} MiB)</text>'
                         f'<path d="{d}" fill="#d9822b" opacity="0.6"/>')
            y += row + gap
    for k in range(0, 11):  # time axis
        t = end * k / 10
        x = left + t * scale
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="22" y2="{y}" class="tick"/>'
                     f'<text x="{x:.1f}" y="16" class="axis">{t:.0f} us</text>')
    return (f'<p><b>{html.escape(title)}</b></p>'
            f'<svg width="{width}" height="{y + 10}">{"".join(parts)}</svg>')


def screenshot(page: str, png: str, width: int, height: int) -> None:
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size={width},{height}", f"--screenshot={png}", "file://" + page],
                   check=True, capture_output=True, timeout=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--caps", default="1.5,64", help="the cap files to draw (cap_<X>MB.json), comma list")
    args = ap.parse_args()
    from tracekit.render.html_assets import CSS
    from tracekit.render.sweep import section_sweep

    tmp = tempfile.mkdtemp(prefix="tracekit_figures_")
    out = subprocess.run([sys.executable, "-m", "tracekit", "replay", os.path.join(ROOT, "fixtures/logs/overlap_cap_a"),
                          "--recommend", "--format", "json", "--trace-out", tmp], capture_output=True, text=True,
                         cwd=ROOT, check=True, env={**os.environ, "PYTHONPATH": ROOT}).stdout
    del out  # the sweep is drawn for overlap_cap_b: recorded at 64 MB, a smaller cap is faster
    doc = json.loads(subprocess.run(
        [sys.executable, "-m", "tracekit", "replay", os.path.join(ROOT, "fixtures/logs/overlap_cap_b"), "--recommend",
         "--format", "json"], capture_output=True, text=True, cwd=ROOT, check=True,
        env={**os.environ, "PYTHONPATH": ROOT}).stdout)
    page = os.path.join(tmp, "sweep.html")
    with open(page, "w") as f:
        f.write(f"<!DOCTYPE html><html><head><meta charset='utf-8'><style>{CSS}</style></head>"
                f"<body><main>{section_sweep(doc)}</main></body></html>")
    screenshot(page, os.path.join(ROOT, "docs/sweep.png"), 900, 1110)
    traces = []
    for cap in args.caps.split(","):
        with open(os.path.join(tmp, f"cap_{cap}MB.json")) as f:
            traces.append((f"overlap_cap_a replayed at {cap} MB: cap_{cap}MB.json", json.load(f)))
    page = os.path.join(tmp, "timeline.html")
    with open(page, "w") as f:
        f.write(timeline_html(traces))
    screenshot(page, os.path.join(ROOT, "docs/timeline.png"), 1420, 40 + 320 * len(traces))
    print("docs/sweep.png, docs/timeline.png written")


if __name__ == "__main__":
    main()
