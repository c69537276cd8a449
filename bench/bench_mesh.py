#!/usr/bin/env python
"""Benchmark ``tracekit summarize`` on a 2-D mesh directory against a 1-D one of the same size.

    python bench/bench_mesh.py                       # 1,024 ranks, small logs, 5 runs
    python bench/bench_mesh.py --ranks 4096 --runs 3

Both directories are made by ``bench/make_ranks.py`` from real fixture logs, ``--small`` (the
entries summarize reads). The 1-D one: rank 0 of ``fixtures/logs/spmd_auto`` for every rank. The
2-D one: an HSDP mesh of replicate N/2 × shard 2 made from ``fixtures/logs/hsdp`` (rank ``r``
from the fixture's rank ``r % 4``), its process groups named as a job of N ranks names them: the
shard groups are N/2 groups of 2 ranks (rank ``r`` in group ``3 + r // 2``, rewritten in the
``fsdp_groups=[...]`` outcome lines and the estimate rows' ``group_name:``), the replicate groups
two of N/2 ranks (``1``, ``2``: the fixture's), and ``# World size: N``. Rewritten payloads get
their ``has_payload`` MD5 recomputed, so the logs read clean. The mesh analysis (groups and
roles, the per-communicator schedule check with N/2 shard groups mapped to one role, the
collectives pre-bucketing never handles) then does its whole work.

Each directory is summarized as ``tracekit summarize DIR --format json --output FILE`` (the
default jobs), runs interleaved, best wall time kept; a text run of the 2-D one is checked to
say ``world N = replicate N/2 × shard 2`` and OK. Printed side by side with the ratio (issue 37:
2-D / 1-D <= 1.2 wanted) and the machine's load (``os.getloadavg``) before and after.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_summarize import TRACEKIT, run  # noqa: E402
from make_ranks import make_ranks, rank_log  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MESH = "hsdp"
FLAT = "spmd_auto"
MESH_RANKS = 4
#: The fixture's shard group names (ranks 0-1: '3', ranks 2-3: '4') in the lines summarize reads.
_SHARD = re.compile(rb"(group_name:|fsdp_groups=\[')([34])\b")
_WORLD = re.compile(rb"# World size: \d+")
_MD5 = re.compile(rb'"has_payload": "[0-9a-f]{32}"')


def relabel(path: Path, rank: int, n: int) -> None:
    """Rename the shard group of ``rank``'s log to ``3 + rank // 2`` and its world to ``n``;
    each changed payload's MD5 recomputed."""
    lines = path.read_bytes().split(b"\n")
    out: list[bytes] = []
    i = 0
    while i < len(lines):
        env = lines[i]
        j = i + 1
        while j < len(lines) and lines[j].startswith(b"\t"):
            j += 1
        payload = lines[i + 1 : j]
        new = [_WORLD.sub(b"# World size: %d" % n, _SHARD.sub(rb"\g<1>%d" % (3 + rank // 2), p)) for p in payload]
        if new != payload:
            digest = hashlib.md5(b"\n".join(p[1:] for p in new)).hexdigest().encode()
            env = _MD5.sub(b'"has_payload": "' + digest + b'"', env)
        out += [env, *new]
        i = j
    path.write_bytes(b"\n".join(out))


def make_dirs(work: Path, n: int) -> dict[str, Path]:
    """The 1-D and the 2-D directory of ``n`` small rank logs."""
    if n % MESH_RANKS:
        raise SystemExit(f"--ranks must be a multiple of {MESH_RANKS}")
    flat, mesh = work / f"flat_{n}", work / f"mesh_{n}"
    make_ranks(flat, n, base=FLAT, small=True)
    sources = {k: rank_log(MESH, k) for k in range(MESH_RANKS)}
    make_ranks(mesh, n, base=sources[0], diverge={r: sources[r % MESH_RANKS] for r in range(n) if r % MESH_RANKS},
               small=True)
    for f in mesh.iterdir():
        m = re.search(r"_rank_(\d+)_", f.name)
        if m:
            relabel(f, int(m.group(1)), n)
    return {f"1-D ({FLAT})": flat, f"2-D ({MESH})": mesh}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", action="store_true", help="keep the directories")
    args = ap.parse_args(argv)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    work = Path(tempfile.mkdtemp(prefix="tracekit_bench_mesh_", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    try:
        dirs = make_dirs(work, args.ranks)
        mesh_dir = dirs[f"2-D ({MESH})"]
        text = subprocess.run([sys.executable, "-c", TRACEKIT, "summarize", str(mesh_dir)], env=env,
                              capture_output=True, text=True, check=True).stdout
        want = f"Mesh: world {args.ranks} = replicate {args.ranks // 2} × shard 2;"
        if want not in text or not text.split("\n")[2].startswith("OK:"):
            sys.exit(f"the 2-D directory is not read as a healthy mesh:\n{text[:2000]}")
        out = work / "out.json"
        load_before = os.getloadavg()
        best: dict[str, float] = {}
        for _ in range(args.runs):
            for name, d in dirs.items():
                cmd = [sys.executable, "-c", TRACEKIT, "summarize", str(d), "--format", "json", "--output", str(out)]
                wall, _rss, _pss, rc, _cpu = run(cmd, env)
                if rc != 0:
                    sys.exit(f"{name}: exited {rc}")
                best[name] = min(wall, best.get(name, wall))
        load_after = os.getloadavg()
        print(f"summarize, {args.ranks:,} small rank logs, best of {args.runs} (interleaved)")
        for name, wall in best.items():
            print(f"  {name:<20}{wall:>8.3f} s")
        a, b = best[f"2-D ({MESH})"], best[f"1-D ({FLAT})"]
        print(f"  2-D / 1-D: {a / b:.2f} (<= 1.2 wanted)")
        print(f"  load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
