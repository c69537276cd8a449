#!/usr/bin/env python
"""Benchmark of ``tracekit replay --profile``: ``replay --recommend`` with and without the
profile, side by side in one run, on a profiled fixture (default ``fixtures/profiled/gloo_cap_12mb``).

    PYTHONPATH=. python bench/bench_predict.py                 # best of 5 each, alternating
    PYTHONPATH=. python bench/bench_predict.py --run DIR --repeat 9

Two ways, each contender alternating with the other so that the machine's load falls on both
alike, the best time of each counting: the command as a user runs it (``python -m tracekit replay
... --recommend``, a fresh process each time: torch's import included), and
``tracekit.replay.run.run`` in this process (torch imported once before the timing: the replay's
own work only, where the prediction's share is largest). The goal (issue 52): with the profile at
most 1.1x without. Then the prediction's own parts on their own: reading the traces, pairing and
calibrating, and the simulation of every cap.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _time(fn) -> float:
    gc.collect()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--run", default="fixtures/profiled/gloo_cap_12mb", help="a run directory with logs/ and traces/"
    )
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "tracekit", "replay", os.path.join(args.run, "logs"), "--recommend"]
    command += ["--format", "json", "-o", os.devnull, "--jobs", "1"]
    contenders = {"without": command, "with": [*command, "--profile", os.path.join(args.run, "traces")]}
    best_cmd = {"without": math.inf, "with": math.inf}
    for _ in range(args.repeat):
        for name, argv in contenders.items():
            best_cmd[name] = min(
                best_cmd[name],
                _time(lambda argv=argv: subprocess.run(argv, env=env, check=True, capture_output=True)),
            )
    print(f"the command, replay --recommend on {args.run}, best of {args.repeat}, alternating:")
    print(f"  without --profile  {best_cmd['without']:8.3f} s")
    print(f"  with --profile     {best_cmd['with']:8.3f} s")
    print(f"  ratio              {best_cmd['with'] / best_cmd['without']:8.3f}x   (goal: at most 1.1x)")

    import torch  # noqa: F401  # imported before any in-process timing

    from tracekit.replay.run import RunOptions, run

    logs, traces = [os.path.join(args.run, "logs")], [os.path.join(args.run, "traces")]
    plain = RunOptions(recommend=True, jobs=1)
    profiled = RunOptions(recommend=True, jobs=1, profiles=traces)
    run(logs, plain)  # warm: torch's lazy imports, the caches of the first replay
    best = {"without": math.inf, "with": math.inf}
    for _ in range(args.repeat):
        best["without"] = min(best["without"], _time(lambda: run(logs, plain)))
        best["with"] = min(best["with"], _time(lambda: run(logs, profiled)))
    print(f"in this process, tracekit.replay.run.run (torch imported already), best of {args.repeat}:")
    print(f"  without --profile  {best['without']:8.3f} s")
    print(f"  with --profile     {best['with']:8.3f} s")
    print(f"  ratio              {best['with'] / best['without']:8.3f}x   (goal: at most 1.1x)")

    from tracekit.analyze.calibration import calibrate
    from tracekit.analyze.measure import measure
    from tracekit.analyze.step_simulation import fit, predict_step
    from tracekit.read.output_code import wait_orders
    from tracekit.read.reader import checked_load
    from tracekit.read.traces import read_traces
    from tracekit.replay.predicted import _schedules

    doc = run(logs, plain)
    t_read = min(_time(lambda: read_traces(traces, jobs=1, host_ops=True)) for _ in range(args.repeat))
    loaded = read_traces(traces, jobs=1, host_ops=True)
    t_pair = min(
        _time(lambda: measure(checked_load(logs, jobs=1), loaded, None, wait_orders(logs)))
        for _ in range(args.repeat)
    )
    m = measure(checked_load(logs, jobs=1), loaded, None, wait_orders(logs))
    cal = calibrate(m.pairings)
    sched = _schedules(doc)

    def simulate() -> None:
        model = fit(cal, {k: v for k, v in sched["recorded"].items() if k in cal.graphs})
        for by_graph in sched.values():
            predict_step(model, by_graph, [])

    t_sim = min(_time(simulate) for _ in range(args.repeat))
    print(
        f"  its parts: read traces {t_read:.3f} s, load logs + pair {t_pair:.3f} s, "
        f"calibrate + fit + {len(sched)} caps simulated {t_sim:.3f} s"
    )


if __name__ == "__main__":
    main()
