#!/usr/bin/env python
"""What each piece of the reader's speed machinery gains, each against the reader without it,
side by side in one run (issue 40: a piece is kept where it gains at least 15% on the workload
it exists for).

    python bench/bench_machinery.py                    # one log of 550 MB, 5 runs
    python bench/bench_machinery.py --size 1GB --runs 7

Each piece has a switch (``tracekit/read/speed_switches.py``, docs/performance.md), an environment
variable that turns it off:

- ``TRACEKIT_NO_NATIVE``: the scanner's C inner loop; its workload: one large log;
- ``TRACEKIT_NO_SEGMENTS``: cutting a large file into segments read in parallel; one large log.

The envelope memo and the interner's aliases were measured here too, on 8,192 small rank logs
(their workload: a job's ranks log the same envelopes and values), and removed: 1.12x and
1.09x without them (the figures: git log of docs/performance.md).

Each contender is ``tracekit summarize PATH --format json --output FILE`` (default jobs), the
reader with every piece on and the reader with one off, interleaved, ``--runs`` times; the
best wall time counts. Printed: each one's best wall time, CPU time (workers included) and
peak RSS, and the ratio ``piece off / all on`` (1.15 or more: the piece gains 15%). The JSON
outputs of every contender of a workload are compared: they must be the same bytes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_summarize import TRACEKIT, run  # noqa: E402
from make_large_log import make_large_log, parse_size  # noqa: E402
from make_ranks import make_ranks, rank_log  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MiB = 2**20
#: The workload each piece exists for: "large" (one large log) or "ranks" (many rank logs).
PIECES = {
    "TRACEKIT_NO_NATIVE": "large",
    "TRACEKIT_NO_SEGMENTS": "large",
}
SWITCHES = tuple(PIECES)


def _warm(path: Path) -> None:
    for f in sorted(path.iterdir()) if path.is_dir() else [path]:
        with open(f, "rb") as fh:
            while fh.read(1 << 24):
                pass


def _compare(path: Path, pieces: list[str], runs: int, env: dict[str, str], work: Path) -> dict[str, tuple]:
    """Best (wall, RSS, CPU) of ``runs`` of the reader with all on and with each piece off."""
    contenders = {"all on": env} | {p: dict(env, **{p: "1"}) for p in pieces}
    best: dict[str, tuple] = {}
    outputs: dict[str, bytes] = {}
    for _ in range(runs):
        for name, cenv in contenders.items():
            out = work / "out.json"
            _warm(path)
            cmd = [
                sys.executable,
                "-c",
                TRACEKIT,
                "summarize",
                str(path),
                "--format",
                "json",
                "--output",
                str(out),
            ]
            wall, rss, _pss, rc, cpu = run(cmd, cenv)
            if rc != 0:
                sys.exit(f"{name}: exited {rc}")
            outputs[name] = out.read_bytes()
            old = best.get(name)
            best[name] = (min(wall, old[0]), max(rss, old[1]), min(cpu, old[2])) if old else (wall, rss, cpu)
    differ = [n for n, o in outputs.items() if o != outputs["all on"]]
    if differ:
        sys.exit(f"the summary differs with {', '.join(differ)} off")
    return best


def _print(title: str, best: dict[str, tuple]) -> list[str]:
    print(f"\n{title}")
    print(f"  {'contender':<28}{'best s':>9}{'cpu s':>8}{'max RSS MiB':>13}{'off / on':>10}")
    on = best["all on"][0]
    lines = []
    for name, (wall, rss, cpu) in best.items():
        ratio = "" if name == "all on" else f"{wall / on:.2f}"
        print(
            f"  {name + ('' if name == 'all on' else ' (off)'):<28}{wall:>9.3f}{cpu:>8.2f}{rss / MiB:>13.1f}{ratio:>10}"
        )
        if name != "all on":
            verdict = "keep" if wall / on >= 1.15 else "under 15%"
            lines.append(f"{name}: {wall / on:.2f}x without it ({verdict}) on {title}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="550MB", help="the large log's size (default 550MB)")
    ap.add_argument("--ranks", type=int, default=0, help="small rank logs, for a piece that exists for them")
    ap.add_argument("--runs", type=int, default=5, help="runs of each contender; the best counts")
    ap.add_argument("--dir", default=None, help="where to write the logs (default: a temporary directory)")
    args = ap.parse_args()
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "tracekit")],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    env = {k: v for k, v in os.environ.items() if k not in SWITCHES} | {"PYTHONPATH": str(ROOT)}
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores, runs={args.runs} (best wall time counts), "
        f"load {os.getloadavg()[0]:.2f} at start"
    )
    work = Path(tempfile.mkdtemp(prefix="tracekit_bench_machinery_", dir=args.dir))
    table: list[str] = []
    try:
        large = work / "large.log"
        make_large_log([rank_log("spmd_auto")], large, parse_size(args.size))
        best = _compare(large, [p for p, w in PIECES.items() if w == "large"], args.runs, env, work)
        table += _print(f"one log of {large.stat().st_size / 1e6:.0f} MB", best)
        large.unlink()
        rank_pieces = [p for p, w in PIECES.items() if w == "ranks"]
        if args.ranks and rank_pieces:
            ranks = make_ranks(work / "ranks", args.ranks, small=True).out_dir
            best = _compare(ranks, rank_pieces, args.runs, env, work)
            table += _print(f"{args.ranks:,} small rank logs", best)
        print(f"\nRatios (load {os.getloadavg()[0]:.2f} at the end)")
        for line in table:
            print(f"  {line}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
