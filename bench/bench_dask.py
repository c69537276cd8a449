#!/usr/bin/env python
"""Benchmark ``tracekit summarize --dask`` against a local run on the same directory, side by side.

    python bench/bench_dask.py RANK_LOG_DIR                   # a LocalCluster of 2 worker processes
    python bench/bench_dask.py RANK_LOG_DIR --workers 4 --runs 5
    python bench/bench_dask.py RANK_LOG_DIR --scheduler tcp://HOST:8786   # an existing cluster

RANK_LOG_DIR is a directory of rank logs (e.g. 1,024 ranks made from a fixture rank log). Each
contender runs as a subprocess (``summarize DIR --format json``, output discarded), interleaved,
``--runs`` times after one warm-up run each (page cache, workers' imports); the best wall time
counts. Contenders: ``local`` (default jobs: the cores), ``local -j1`` and ``dask`` (the workers
of the cluster read; the client merges). Needs the ``dask`` extra.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import time


def once(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("directory")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes (1 thread each)")
    ap.add_argument("--scheduler", default=None, metavar="ADDRESS", help="use this cluster instead")
    args = ap.parse_args()

    from distributed import LocalCluster

    base = [sys.executable, "-m", "tracekit", "summarize", args.directory, "--format", "json"]
    with contextlib.ExitStack() as stack:
        address = args.scheduler
        if address is None:
            cluster = stack.enter_context(
                LocalCluster(
                    n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=":0"
                )
            )
            address = cluster.scheduler_address
        contenders = {"local": base, "local -j1": base + ["-j1"], "dask": base + ["--dask", address]}
        times: dict[str, list[float]] = {name: [] for name in contenders}
        for cmd in contenders.values():
            once(cmd)
        for _ in range(args.runs):
            for name, cmd in contenders.items():
                times[name].append(once(cmd))
    best = {name: min(ts) for name, ts in times.items()}
    where = args.scheduler or f"LocalCluster, {args.workers} worker processes"
    print(f"summarize {args.directory}: best of {args.runs} ({where})")
    for name, t in best.items():
        runs = " ".join(f"{x:.2f}" for x in times[name])
        print(f"  {name:10s} {t:8.3f} s   {t / best['local']:5.2f}x local   (runs: {runs})")


if __name__ == "__main__":
    main()
