"""Benchmark of replay through torch's overlap scheduler: one big graph, many caps.

A ``make_fsdp_graph(--layers)`` graph (default 1,000 layers: 1,000 all-gathers and 1,000
reduce-scatters, matmuls between them) is printed as a log records it, rebuilt once
(:class:`tracekit.replay.replayer.GraphReplayer`), then pre-bucketed and scheduled by torch's
``OverlapScheduler`` once per cap (:meth:`GraphReplayer.scheduled`), at 17 caps: 0.05 to 2,048 MB.
Compute nodes get a recorded-style estimate (10 us per mm), as a log's CSV would give.

Run: ``PYTHONPATH=. python bench/bench_overlap_schedule.py`` (``--layers 100`` for a quick run).
Goal (issue 19): 1,000 layers at 17 caps in under 60 s on 2 cores; prints the cost per cap.

``--as-logged`` runs the same caps a second time, in the same process, on the graph as logged
and in our pass's own order (``post_grad=False``, ``torch_order=False``: what replay did before it
gave torch's scheduler torch's graph, issue 50), and prints the two totals and their ratio: the
cost of torch's post-grad passes (once, at the rebuild) and of torch's order (at each cap).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CAPS = [0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 0.75]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=1000)
    ap.add_argument("--caps", type=int, default=len(CAPS), help="how many of the 17 caps")
    ap.add_argument("--as-logged", action="store_true", help="also time the graph as logged, in our order")
    args = ap.parse_args()

    from torch._inductor.fx_passes import fsdp as torch_fsdp

    from bench.graphs import make_fsdp_graph

    torch_fsdp.logger.setLevel(logging.WARNING)
    logging.getLogger("torch._inductor.fx_passes.overlap_scheduling").setLevel(logging.WARNING)
    t0 = time.perf_counter()
    text = make_fsdp_graph(args.layers).print_readable(
        print_output=False, include_stride=True, include_device=True
    )
    print(f"{args.layers} layers: the graph's text made in {time.perf_counter() - t0:.2f} s")
    totals = [_sweep(text, args, True)]
    if args.as_logged:
        totals.append(_sweep(text, args, False))
        (a, b) = totals
        print(f"as torch's scheduler is given it {a:.1f} s, as logged {b:.1f} s: x{a / b:.2f}")


def _sweep(text: str, args: argparse.Namespace, as_torch: bool) -> float:
    """Rebuild the graph, schedule it at the caps; the seconds in all (rebuild included)."""
    from tracekit.replay.replayer import GraphReplayer
    from tracekit.replay.results import ReplayOptions

    t0 = time.perf_counter()
    rp = GraphReplayer(text, ReplayOptions(), post_grad=as_torch)
    rp.torch_order = as_torch
    t_rebuild = time.perf_counter() - t0
    compute_us = {n.name: 10.0 for n in rp.gm.graph.nodes if n.op == "call_function" and "mm" in n.name}
    print(
        f"{args.layers} layers ({'as torch gives it' if as_torch else 'as logged, our order'}): "
        f"{len(rp.gm.graph.nodes)} fx nodes; rebuild once {t_rebuild:.2f} s"
    )
    print(f"{'cap MB':>8} {'collectives':>12} {'exposed ms':>11} {'peak MiB':>9} {'s':>7}")
    total = 0.0
    for cap in CAPS[: args.caps]:
        t0 = time.perf_counter()
        sc = rp.scheduled(float(cap), compute_us)
        dt = time.perf_counter() - t0
        total += dt
        print(
            f"{cap:>8g} {len(sc.final):>12} {sc.exposed_ms:>11.4f} {sc.peak_memory_bytes / 2**20:>9.2f} {dt:>7.2f}"
        )
    n = min(args.caps, len(CAPS))
    print(
        f"{n} caps: {total:.1f} s scheduling ({total / n:.2f} s per cap); with the rebuild {total + t_rebuild:.1f} s "
        f"(goal: under 60 s for 1,000 layers at 17 caps)"
    )
    print(
        f"torch's scheduler ran {rp.scheduler_runs} times for {n} caps: caps whose buckets are the same "
        f"reuse the schedule of the first (GraphReplayer.scheduled)"
    )
    return total + t_rebuild


if __name__ == "__main__":
    main()
