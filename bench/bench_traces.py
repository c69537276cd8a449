#!/usr/bin/env python
"""Benchmark the trace reader (``tracekit.read.traces.read_trace``) against whole-file parses of
the same large profiler trace, side by side, with each one's peak memory.

    python bench/bench_traces.py                       # a 200 MB trace made from the gloo fixture
    python bench/bench_traces.py --size-mb 1000        # the 1 GB claim
    python bench/bench_traces.py --source fixtures/traces/nccl_2gpu/rank0.json.gz --size-mb 500
    python bench/bench_traces.py --hta-python /tmp/htavenv/bin/python   # HTA from another env

The large trace is made from a real one (``--source``, ``.json`` or ``.json.gz``; by default
rank 0 of ``fixtures/profiled/gloo_cap_1mb``, else the NCCL fixture): its header, then its steps'
events (those that start within its ``ProfilerStep#N`` spans) repeated, each copy shifted by the
steps' length (``ts`` and the step numbers moved), until the file reaches ``--size-mb``, then the
rest of its events and its end, in Kineto's layout, uncompressed, in ``--out``.

Contenders, each in a fresh subprocess (the time is the read's own, import excluded; the peak RSS
is the child's ``resource.getrusage(RUSAGE_SELF).ru_maxrss``, interpreter and imports included):

- ``tracekit``: ``read_trace(path)`` (streamed, only the kept events decoded);
- ``json.load``: the standard library, whole file;
- ``orjson``: ``orjson.loads`` of the file's bytes, whole;
- ``HTA``: Holistic Trace Analysis's ``TraceAnalysis(trace_dir=...)`` on a directory holding the
  file, when ``hta`` imports in ``--hta-python`` (default: this interpreter); else the line says
  why not.

Every contender runs ``--runs`` times (default 1: the 1 GB parses take minutes); the best time
counts. Numbers vary with the machine's load: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCES = [
    ROOT / "fixtures" / "profiled" / "gloo_cap_1mb" / "traces",
    ROOT / "fixtures" / "traces" / "nccl_2gpu" / "rank0.json.gz",
]
_OPEN, _CLOSE = b"\n  {\n", b"\n  }"
_TS_RE = re.compile(rb'("ts": )(-?[0-9.]+)')
_STEP_RE = re.compile(rb'("name": "ProfilerStep#)(\d+)(")')


def _source(given: str | None) -> Path:
    if given is not None:
        return Path(given)
    for p in DEFAULT_SOURCES:
        if p.is_dir():
            found = sorted(p.glob("*.json*"))
            if found:
                return found[0]
        elif p.exists():
            return p
    sys.exit("bench_traces: no source trace found; give --source")


def _events(data: bytes) -> tuple[bytes, list[bytes], bytes]:
    """(header up to the first event, event blocks each ``\\n  {...\\n  }``, the end)."""
    first = data.index(_OPEN)
    blocks: list[bytes] = []
    pos = first
    while True:
        end = data.index(_CLOSE, pos + 4) + len(_CLOSE)
        blocks.append(data[pos:end])
        nxt = data.find(_OPEN, end)
        if nxt == -1 or data[end:nxt].strip() != b",":
            return data[:first], blocks, data[end:]
        pos = nxt


def make_large(source: Path, size_mb: int, out: Path) -> tuple[int, int]:
    """Write the large trace; returns (bytes, events)."""
    raw = source.read_bytes()
    data = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    head, blocks, tail = _events(data)
    steps = []
    for b in blocks:
        if b'"name": "ProfilerStep#' in b and b'"cat": "user_annotation"' in b:
            ev = json.loads(b)
            steps.append((ev["ts"], ev["ts"] + ev["dur"]))
    if not steps:
        sys.exit(f"bench_traces: {source} has no ProfilerStep#N spans to repeat")
    lo, hi = min(s for s, _ in steps), max(e for _, e in steps)
    n_steps = len(steps)
    body, rest = [], []
    for b in blocks:
        m = _TS_RE.search(b)
        (body if m is not None and lo <= float(m.group(2)) < hi else rest).append(b)
    # each repeated block as (before ts, ts, after ts), the step number split out too
    parts = []
    for b in body:
        m = _TS_RE.search(b)
        assert m is not None
        parts.append((b[: m.start(2)], float(m.group(2)), b[m.end(2) :]))
    target = size_mb << 20
    written = events = 0
    with open(out, "wb") as f:
        f.write(head)
        written += len(head)
        copy = 0
        sep = b""
        while written < target:
            shift = copy * (hi - lo)
            chunk = []
            for before, ts, after in parts:
                ev = before + f"{ts + shift:.3f}".encode() + after
                if copy and b"ProfilerStep#" in before:
                    ev = _STEP_RE.sub(
                        lambda m, c=copy: (
                            m.group(1) + str(int(m.group(2)) + c * n_steps).encode() + m.group(3)
                        ),
                        ev,
                    )
                chunk.append(ev)
            piece = sep + b",".join(chunk)
            f.write(piece)
            written += len(piece)
            events += len(chunk)
            sep = b","
            copy += 1
        for b in rest:
            f.write(b"," + b)
            events += 1
        f.write(tail)
    return out.stat().st_size, events


CHILD = r"""
import json, resource, sys, time
mode, path = sys.argv[1], sys.argv[2]
if mode == "tracekit":
    from tracekit.read.traces import read_trace
    t = time.perf_counter(); r = read_trace(path); dt = time.perf_counter() - t
    what = f"{r.events_read} events, kept: {len(r.steps)} steps, {len(r.issued)} issued, {len(r.transfers)} transfers, {len(r.compute)} kernels"
elif mode == "json.load":
    t = time.perf_counter()
    with open(path) as f:
        d = json.load(f)
    dt = time.perf_counter() - t; what = f"{len(d['traceEvents'])} events"
elif mode == "orjson":
    import orjson
    t = time.perf_counter()
    with open(path, "rb") as f:
        d = orjson.loads(f.read())
    dt = time.perf_counter() - t; what = f"{len(d['traceEvents'])} events"
elif mode == "HTA":
    import os, logging
    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis
    t = time.perf_counter(); a = TraceAnalysis(trace_dir=os.path.dirname(path)); dt = time.perf_counter() - t
    what = f"{sum(len(a.t.get_trace(r)) for r in a.t.get_ranks())} events in its frames"
print(json.dumps({"s": dt, "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "what": what}))
"""


def run_child(python: str, mode: str, path: Path, timeout: float) -> dict | str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    try:
        out = subprocess.run(
            [python, "-c", CHILD, mode, str(path)], capture_output=True, text=True, env=env, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return f"gave up after {timeout:g} s"
    if out.returncode != 0:
        lines = out.stderr.strip().splitlines() or [f"exit status {out.returncode}"]
        return lines[-1][:160]
    return json.loads(out.stdout.strip().splitlines()[-1])


def hta_available(python: str) -> str | None:
    """None when HTA imports in ``python``, else why not."""
    out = subprocess.run([python, "-c", "import hta.trace_analysis"], capture_output=True, text=True)
    if out.returncode == 0:
        return None
    last = (out.stderr.strip().splitlines() or ["import failed"])[-1]
    return f"not installed in {python} ({last}); pip install holistictraceanalysis, or --hta-python"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", default=None, help="a real trace to repeat (.json or .json.gz)")
    ap.add_argument("--size-mb", type=int, default=200, help="size of the trace to make (default 200)")
    ap.add_argument("--out", default=None, help="directory for the large trace (default: a temporary one)")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--skip", action="append", default=[], help="a contender not to run (repeatable)")
    ap.add_argument("--hta-python", default=sys.executable, help="the interpreter HTA is installed in")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds a contender may take")
    args = ap.parse_args()

    source = _source(args.source)
    with tempfile.TemporaryDirectory(prefix="bench_traces_", dir=args.out) as tmp:
        big = Path(tmp) / "rank0.pt.trace.json"
        t = time.perf_counter()
        size, events = make_large(source, args.size_mb, big)
        print(
            f"{big.name}: {size / (1 << 20):,.0f} MiB, {events:,} events, made in {time.perf_counter() - t:.1f} s "
            f"from {source.relative_to(ROOT) if source.is_relative_to(ROOT) else source}"
        )
        results: dict[str, dict | str] = {}
        for name in ("tracekit", "json.load", "orjson", "HTA"):
            if name in args.skip:
                results[name] = "skipped (--skip)"
                continue
            python = args.hta_python if name == "HTA" else sys.executable
            if name == "HTA" and (why := hta_available(python)) is not None:
                results[name] = why
                continue
            best: dict | str = "no run"
            for _ in range(args.runs):
                r = run_child(python, name, big, args.timeout)
                if isinstance(r, str):
                    best = r
                    break
                if isinstance(best, str) or r["s"] < best["s"]:
                    best = r
            results[name] = best
    base = results.get("json.load")
    print(f"{'':10s} {'seconds':>9s} {'MB/s':>7s} {'vs json.load':>13s} {'peak RSS':>10s}  read")
    for name, r in results.items():
        if isinstance(r, str):
            print(f"{name:10s} {'-':>9s} {'-':>7s} {'-':>13s} {'-':>10s}  {r}")
            continue
        speed = f"{base['s'] / r['s']:.2f}x faster" if isinstance(base, dict) else "-"
        print(
            f"{name:10s} {r['s']:9.2f} {size / 1e6 / r['s']:7.0f} {speed:>13s} {r['rss_kib'] / 1024:7.0f} MiB  {r['what']}"
        )


if __name__ == "__main__":
    main()
