"""Benchmark of ``tracekit replay``: parse + plan vs torch's own pass, and sweep cost.

For graphs with 100, 1,000 and 5,000 FSDP collectives (``bench/graphs.py``'s
``make_fsdp_graph``: half all-gathers, half reduce-scatters), printed as the
``print_readable`` text a log records, it measures side by side in one run:

- parse: the text -> GraphModule with fake values (:func:`tracekit.replay.graph_text.parse_graph_text`);
- plan: ``bucketing.FsdpPlanner`` set-up + one cap (what a single-cap replay counts with);
- torch pass: ``torch._inductor.fx_passes.fsdp.pre_bucket_fsdp_collectives`` on the same
  rebuilt graph at the same cap (the full rewrite torch runs);
- sweep ratio: a replay of 8 caps over a single-cap replay, each as ``tracekit replay`` does it
  per graph (parse, planner, then per cap a plan and the NCCL-model comm estimate).

Run, from the repository's root: ``PYTHONPATH=. python bench/bench_replay.py`` (``--sizes 100,1000`` for a
quick run). Goals (issue 5): growth no worse than n log n, plan at least 10x faster than torch's
pass, an 8-cap sweep at most 2x a single-cap replay.
"""

from __future__ import annotations

import argparse
import gc
import logging
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CAP_MB = 0.25  # 16 KiB collectives: buckets of 16
SWEEP = [0.05, 0.1, 0.25, 0.5, 1.0, 4.0, 16.0, 64.0]


def _best(fn, repeat: int) -> tuple[float, object]:
    best, out = math.inf, None
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100,1000,5000", help="FSDP collectives per graph")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--torch-max", type=int, default=5000, help="skip torch's pass above this size")
    args = ap.parse_args()

    from torch._inductor.fx_passes import fsdp as torch_fsdp

    from bench.graphs import make_fsdp_graph
    from bucketing import FsdpPlanner, register_fake_process_groups
    from tracekit.replay.comm_estimate import Hardware
    from tracekit.replay.graph_text import parse_graph_text
    from tracekit.replay.replayer import GraphReplayer
    from tracekit.replay.results import ReplayOptions

    torch_fsdp.logger.setLevel(logging.WARNING)
    register_fake_process_groups(["0"], 4)
    parse_graph_text(
        make_fsdp_graph(4).print_readable(print_output=False, include_stride=True, include_device=True)
    )  # warm-up

    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        text = make_fsdp_graph(n // 2).print_readable(
            print_output=False, include_stride=True, include_device=True
        )
        # Small graphs take milliseconds: more repeats keep a shared machine's noise out.
        repeat = args.repeat * (10 if n <= 100 else 3 if n <= 1000 else 1)
        t_parse, gm = _best(lambda text=text: parse_graph_text(text), repeat)

        def plan_only(gm=gm):
            planner = FsdpPlanner(gm)
            return planner.plan(CAP_MB)

        def replay(caps, text=text):
            # What `tracekit replay` does per graph: parse, planner, per cap a plan + comm estimate.
            rp = GraphReplayer(text, ReplayOptions())
            return [rp.at(c, "override", Hardware()) for c in caps]

        t_plan, report = _best(plan_only, repeat)
        t_single, _ = _best(lambda: replay([CAP_MB]), repeat)
        t_sweep, _ = _best(lambda: replay(SWEEP), repeat)
        t_torch = None
        if n <= args.torch_max:
            fresh = parse_graph_text(text)
            t0 = time.perf_counter()
            torch_fsdp.pre_bucket_fsdp_collectives(fresh, bucket_cap_mb=CAP_MB)
            t_torch = time.perf_counter() - t0
        rows.append(
            (
                n,
                len(gm.graph.nodes),
                len(text),
                t_parse,
                t_plan,
                t_torch,
                t_sweep / t_single,
                report.counts_after,
            )
        )
        print(f"... {n} collectives done", file=sys.stderr, flush=True)

    print(
        f"cap {CAP_MB} MB; sweep caps {SWEEP}; best of {args.repeat} (x10 at 100, x3 at 1000); "
        f"torch's pass once; {os.cpu_count()} cores\n"
    )
    head = (
        f"{'collectives':>11} {'nodes':>7} {'text MB':>8} {'parse s':>8} {'plan s':>8} "
        f"{'torch pass s':>12} {'torch/plan':>10} {'torch/(parse+plan)':>18} {'sweep8/single':>13}  counts after"
    )
    print(head)
    print("-" * len(head))
    for n, nodes, chars, tp, tpl, tt, ratio, counts in rows:
        torch_s = "-" if tt is None else f"{tt:.3f}"
        speedup = "-" if tt is None else f"{tt / tpl:.0f}x"
        whole = "-" if tt is None else f"{tt / (tp + tpl):.1f}x"
        print(
            f"{n:>11} {nodes:>7} {chars / 1e6:>8.2f} {tp:>8.3f} {tpl:>8.4f} {torch_s:>12} "
            f"{speedup:>10} {whole:>18} {ratio:>12.2f}x  {counts}"
        )
    print()
    timed = [r for r in rows if r[5] is not None]
    if timed:
        worst = min(r[5] / r[4] for r in timed)
        print(
            f"goal plan >= 10x faster than torch's pass: worst {worst:.0f}x -> {'met' if worst >= 10 else 'MISSED'}"
        )
    worst_sweep = max(r[6] for r in rows)
    print(
        f"goal 8-cap sweep <= 2x a single-cap replay: worst {worst_sweep:.2f}x -> "
        f"{'met' if worst_sweep <= 2 else 'MISSED'}"
    )
    for (n0, _, _, p0, l0, t0, _, _), (n1, _, _, p1, l1, t1, _, _) in zip(rows, rows[1:], strict=False):
        k = math.log(n1 / n0)
        line = f"growth {n0}->{n1}: parse n^{math.log(p1 / p0) / k:.2f}, plan n^{math.log(l1 / l0) / k:.2f}"
        if t0 and t1:
            line += f", torch pass n^{math.log(t1 / t0) / k:.2f}"
        nlogn = math.log((n1 * math.log(n1)) / (n0 * math.log(n0))) / k
        print(f"{line}  (n log n would be n^{nlogn:.2f})")


if __name__ == "__main__":
    main()
