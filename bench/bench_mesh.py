#!/usr/bin/env python
"""Benchmark ``tracekit summarize`` on a 2-D mesh directory against a 1-D one of the same size.

    python bench/bench_mesh.py                       # 1,024 ranks, small logs, 5 runs
    python bench/bench_mesh.py --ranks 4096 --runs 3
    python bench/bench_mesh.py --runs 7 --against /tmp/before   # and a checkout of an earlier commit

The directories are made by ``bench/make_ranks.py`` from real fixture logs, ``--small`` (the
entries summarize reads). The first 1-D one: rank 0 of ``fixtures/logs/spmd_auto`` for every rank. The
2-D one: an HSDP mesh of replicate N/2 × shard 2 made from ``fixtures/logs/hsdp`` (rank ``r``
from the fixture's rank ``r % 4``), its process groups named as a job of N ranks names them: the
shard groups are N/2 groups of 2 ranks (rank ``r`` in group ``3 + r // 2``, rewritten in the
``fsdp_groups=[...]`` outcome lines and the estimate rows' ``group_name:``), the replicate groups
two of N/2 ranks (``1``, ``2``: the fixture's), and ``# World size: N``. Rewritten payloads get
their ``has_payload`` MD5 recomputed, so the logs read clean. The mesh analysis (groups and
roles, the per-communicator schedule check with N/2 shard groups mapped to one role, the
collectives pre-bucketing never handles) then does its whole work.

Two 1-D directories, as "a 1-D directory of the same size" can mean the rank count or the
bytes: ``1-D (spmd_auto)`` has the same rank count but 15% fewer bytes (a smaller model's log:
9,180,918 B for 1,024 ranks against 10,822,374 B); ``1-D (hsdp, 1 group)`` has the same rank
count and the same entries, lines and bytes as the 2-D one within 0.1%: the 2-D logs with every
process group named ``0`` (one communicator, as a 1-D job names its default group; the world
``N``), so that only the mesh differs. The ratio wanted (issue 37, <= 1.2) is printed against both.

Each directory is summarized as ``tracekit summarize DIR --format json --output FILE`` (the
default jobs), runs interleaved, best wall time kept (and best CPU time of the process tree,
less sensitive to others' load), with the modules imported from bytecode (written by the check
runs under the work directory: ``PYTHONPYCACHEPREFIX``), as an installed tracekit imports them; a text run of the 2-D one is checked to
say ``world N = replicate N/2 × shard 2`` and OK. Printed side by side with the ratio (issue 37:
2-D / 1-D <= 1.2 wanted) and the machine's load (``os.getloadavg``) before and after.
``--against TREE``: another checkout (``git worktree add --detach /tmp/before COMMIT``, its C
scanner built) summarizes the same directories in the same runs, interleaved: a before/after
measured side by side.
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
#: Every group name of the fixture (replicate '1', '2'; shard '3', '4'): the 1-D form names them '0'.
_ANY_GROUP = re.compile(rb"(group_name:|fsdp_groups=\[')([1-4])\b")
_WORLD = re.compile(rb"# World size: \d+")
_MD5 = re.compile(rb'"has_payload": "[0-9a-f]{32}"')


def relabel(path: Path, rank: int, n: int, one_group: bool = False) -> None:
    """Rename the shard group of ``rank``'s log to ``3 + rank // 2`` and its world to ``n``;
    each changed payload's MD5 recomputed. ``one_group``: every group named ``0`` instead (the
    1-D form of the same log)."""
    pattern, name = (_ANY_GROUP, 0) if one_group else (_SHARD, 3 + rank // 2)
    lines = path.read_bytes().split(b"\n")
    out: list[bytes] = []
    i = 0
    while i < len(lines):
        env = lines[i]
        j = i + 1
        while j < len(lines) and lines[j].startswith(b"\t"):
            j += 1
        payload = lines[i + 1 : j]
        new = [_WORLD.sub(b"# World size: %d" % n, pattern.sub(rb"\g<1>%d" % name, p)) for p in payload]
        if new != payload:
            digest = hashlib.md5(b"\n".join(p[1:] for p in new)).hexdigest().encode()
            env = _MD5.sub(b'"has_payload": "' + digest + b'"', env)
        out += [env, *new]
        i = j
    path.write_bytes(b"\n".join(out))


FLAT_NAME, SAME_NAME, MESH_NAME = f"1-D ({FLAT})", f"1-D ({MESH}, 1 group)", f"2-D ({MESH})"


def make_dirs(work: Path, n: int) -> dict[str, Path]:
    """The two 1-D directories and the 2-D one of ``n`` small rank logs (see the module
    docstring)."""
    if n % MESH_RANKS:
        raise SystemExit(f"--ranks must be a multiple of {MESH_RANKS}")
    flat, same, mesh = work / f"flat_{n}", work / f"same_{n}", work / f"mesh_{n}"
    make_ranks(flat, n, base=FLAT, small=True)
    sources = {k: rank_log(MESH, k) for k in range(MESH_RANKS)}
    for d, one_group in ((mesh, False), (same, True)):
        make_ranks(
            d,
            n,
            base=sources[0],
            diverge={r: sources[r % MESH_RANKS] for r in range(n) if r % MESH_RANKS},
            small=True,
        )
        for f in d.iterdir():
            m = re.search(r"_rank_(\d+)_", f.name)
            if m:
                relabel(f, int(m.group(1)), n, one_group)
    return {FLAT_NAME: flat, SAME_NAME: same, MESH_NAME: mesh}


def dir_bytes(d: Path) -> int:
    return sum(f.stat().st_size for f in d.iterdir())


def tree_env(tree: Path, pycache: Path) -> dict[str, str]:
    """The environment that runs ``tree``'s tracekit, its modules imported from bytecode kept in
    ``pycache`` (as an installed tracekit imports them), whatever PYTHONDONTWRITEBYTECODE says."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))
    )
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    env["PYTHONSAFEPATH"] = "1"  # ``-c`` puts the working directory first: it may be another tree
    return env


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", action="store_true", help="keep the directories")
    ap.add_argument(
        "--against",
        metavar="TREE",
        type=Path,
        default=None,
        help="another tracekit checkout (a worktree of an earlier commit, its C scanner built): "
        "it summarizes the same directories too, runs interleaved, both printed (a before/after "
        "in one run)",
    )
    args = ap.parse_args(argv)
    work = Path(
        tempfile.mkdtemp(prefix="tracekit_bench_mesh_", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    )
    trees = {"this tree": ROOT, **({"against": args.against.resolve()} if args.against else {})}
    envs = {label: tree_env(tree, work / f"pycache{i}") for i, (label, tree) in enumerate(trees.items())}
    try:
        dirs = make_dirs(work, args.ranks)
        mesh_dir = dirs[MESH_NAME]
        for env in envs.values():  # the check runs write each tree's bytecode
            text = subprocess.run(
                [sys.executable, "-c", TRACEKIT, "summarize", str(mesh_dir)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            want = f"Mesh: world {args.ranks} = replicate {args.ranks // 2} × shard 2;"
            if want not in text or not text.split("\n")[2].startswith("OK:"):
                sys.exit(f"the 2-D directory is not read as a healthy mesh:\n{text[:2000]}")
            text = subprocess.run(
                [sys.executable, "-c", TRACEKIT, "summarize", str(dirs[SAME_NAME])],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            if "Mesh:" in text or not text.split("\n")[2].startswith(f"OK: all {args.ranks} ranks agree"):
                sys.exit(
                    f"the 1-D directory of the same bytes is not read as a healthy 1-D run:\n{text[:2000]}"
                )
        out = work / "out.json"
        load_before = os.getloadavg()
        best: dict[tuple[str, str], float] = {}
        best_cpu: dict[tuple[str, str], float] = {}
        for _ in range(args.runs):
            for name, d in dirs.items():
                for label, env in envs.items():
                    cmd = [
                        sys.executable,
                        "-c",
                        TRACEKIT,
                        "summarize",
                        str(d),
                        "--format",
                        "json",
                        "--output",
                        str(out),
                    ]
                    wall, _rss, _pss, rc, cpu = run(cmd, env)
                    if rc != 0:
                        sys.exit(f"{name} ({label}): exited {rc}")
                    key = (label, name)
                    best[key] = min(wall, best.get(key, wall))
                    best_cpu[key] = min(cpu, best_cpu.get(key, cpu))
        load_after = os.getloadavg()
        print(f"summarize, {args.ranks:,} small rank logs, best of {args.runs} (interleaved)")
        for label, tree in trees.items():
            if len(trees) > 1:
                print(f"{label}: {tree}")
            for name in dirs:
                wall, cpu = best[(label, name)], best_cpu[(label, name)]
                print(f"  {name:<24}{wall:>8.3f} s wall {cpu:>7.3f} s CPU {dir_bytes(dirs[name]):>12,} B")
            for base, same in ((FLAT_NAME, "same rank count"), (SAME_NAME, "same rank count and bytes")):
                wall = best[(label, MESH_NAME)] / best[(label, base)]
                cpu = best_cpu[(label, MESH_NAME)] / best_cpu[(label, base)]
                print(f"  2-D / {base}: {wall:.2f} wall, {cpu:.2f} CPU (<= 1.2 wanted; {same})")
        print(f"  load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
