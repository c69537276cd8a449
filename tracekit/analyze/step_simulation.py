"""A step at some cap, timed by what a profile measured: :func:`fit` calibrates on the recorded
cap's schedule, :func:`predict_graph` runs one graph's schedule at any cap.

The schedule is the one ``tracekit replay`` made at that cap with torch's own passes: the
scheduled graph's nodes in run order (``timeline.nodes``: compute nodes, collectives with their
bytes and the collectives they merged, waits). The job would run that order, since its scheduler
decided it from torch's estimates; only the times are the profile's. Two workers run it:

- the **main thread** runs the nodes one after another: a matmul-like node (torch's compute
  node, ``estimate`` not ``fusion_region``) for its estimate times the graph's measured ratio of
  matmul time alone to estimate; the other nodes share the graph's measured **gap** (less the
  recorded cap's own bucket copies) evenly, among the nodes the recorded schedule also has;
  issuing a collective costs the measured issue time for its kind and bytes, plus, for a bucket
  (a collective that merged several), the copy of its input into the bucket; a wait blocks until
  its collective is done, then costs the measured wait time and, for a bucket, the copy out into
  the tensors it serves;
- the **transfers** run one at a time in issue order, each ``latency + bytes moved x ms/MiB``.

A buffer of :data:`~tracekit.analyze.calibration.FRESH_PAGES_BYTES` or more is fresh pages at
every step, and whoever writes it first pays their first touch: the copy into a bucket that
large, the transfer into an output that large. The copy out writes into the per-tensor outputs,
which are smaller and reused.

While the main thread computes beside a transfer, both run ``1 + sharing`` times slower (they
share cores: :class:`~tracekit.analyze.calibration.Calibration`'s ``sharing``); alone, at full
speed. So one bucket that holds everything, issued before any compute, shows its lost overlap:
the main thread waits, idle, for the whole transfer.

:func:`fit` sets the transfer rate (ms per MiB moved) so that the recorded cap's graphs, run
this way, take what they measured in sum; the latency is fitted from the transfers when their
sizes differ twofold or more, else :data:`LATENCY_PRIOR`. What is not modelled: ranks that drift
apart or straggle (one rank is simulated, with the median costs of all), the kernels'
contention for memory bandwidth beyond the measured sharing, and a GPU's behaviour when only
CPU runs were measured.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from tracekit.analyze.calibration import FRESH_PAGES_BYTES, MIB, Calibration, GraphCost

#: Milliseconds a gloo collective takes beyond its bytes, when the profile's transfers are all
#: about one size (the fixtures' 12 MB runs, whose transfers move 4-24 MiB, fit 1.50 and 1.68).
LATENCY_PRIOR = 1.5
FUSION = "fusion_region"


@dataclass
class TransferFit:
    """``ms = latency_ms + ms_per_mib x MiB moved``, and how well it fits the measured transfers."""

    latency_ms: float
    ms_per_mib: float
    latency_fitted: bool
    residual_median_pct: float | None = None  # median of |measured - fit| / measured
    residual_max_pct: float | None = None
    transfers: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "latency_ms": round(self.latency_ms, 4),
            "ms_per_mib": round(self.ms_per_mib, 4),
            "latency": "fitted" if self.latency_fitted else "assumed (the transfers are all about one size)",
            "transfers": self.transfers,
            "residual_median_pct": self.residual_median_pct,
            "residual_max_pct": self.residual_max_pct,
        }


@dataclass
class GraphModel:
    """One graph's costs for the simulation, from its measurement and its recorded schedule."""

    cost: GraphCost
    matmul_ratio: float  # measured matmul time alone / torch's estimate of the compute nodes
    gap_base_ms: float  # the gap less the recorded cap's bucket copies
    recorded_nodes: frozenset[str]  # names of the recorded schedule's non-compute nodes


@dataclass
class Model:
    """A calibration fitted to its recorded schedules: what :func:`predict_graph` runs on."""

    calibration: Calibration
    transfer: TransferFit
    graphs: dict[tuple[str, int], GraphModel] = field(default_factory=dict)
    unmatched_nodes: int = 0  # compute nodes timed by a scaled estimate, not a measured op


@dataclass
class GraphPrediction:
    """One graph at one cap: its time, and where the main thread spent it."""

    total_ms: float
    compute_ms: float  # the main thread busy (compute, issuing, copies)
    exposed_ms: float  # the main thread blocked in waits
    comm_ms: float  # the transfers' time
    nodes: dict[str, int] = field(default_factory=dict)  # how its nodes were timed (NODE_SOURCES)


#: How a node of a schedule is timed: a matmul-like node that a measured matmul stands for; one
#: beyond the graph's measured matmuls (its estimate scaled by the graph's measured-to-estimated
#: ratio); another node the recorded schedule has (a share of the measured gap); a node the
#: recorded schedule lacks (no time of its own: a bucket's copies are timed with its collective,
#: the rest of the graph's work is in the gap the others share).
NODE_SOURCES = ("matmul_measured", "matmul_scaled_estimate", "gap_share", "not_in_recorded")


def _copies(node: dict[str, Any]) -> tuple[int, int]:
    """Bytes copied into and out of a bucket: (input, output) of a collective that merged
    several; (0, 0) for one that merged nothing."""
    if len(node.get("members") or []) <= 1:
        return 0, 0
    inp = int(node.get("input_bytes") or 0)
    out = max(int(node.get("bytes") or 0) - inp, 0)
    return inp, out


def moved_bytes(node: dict[str, Any]) -> int:
    """The whole buffer a collective moves: the larger of its input and output."""
    inp = int(node.get("input_bytes") or 0)
    return max(inp, int(node.get("bytes") or 0) - inp)


def first_touch_ms(nbytes: int, cal: Calibration) -> float:
    """The first touch of a buffer of ``nbytes``: nothing below :data:`FRESH_PAGES_BYTES`."""
    return nbytes / MIB * cal.first_touch_ms_per_mib if nbytes >= FRESH_PAGES_BYTES else 0.0


def copy_ms(nbytes: int, cal: Calibration, fresh: bool = False) -> float:
    """A copy of ``nbytes``; ``fresh``: into a buffer this copy writes first."""
    if nbytes <= 0:
        return 0.0
    return nbytes / MIB * cal.copy_ms_per_mib + (first_touch_ms(nbytes, cal) if fresh else 0.0)


def issue_ms(kind: str, input_bytes: int, cal: Calibration) -> float:
    rates = cal.issue_ms_per_mib
    rate = rates.get(kind, statistics.median(rates.values()) if rates else 0.0)
    return cal.issue_base_ms + rate * input_bytes / MIB


def _is_compute(node: dict[str, Any]) -> bool:
    return node.get("type") == "compute" and node.get("estimate") != FUSION


def bucket_copies_ms(nodes: list[dict[str, Any]], cal: Calibration) -> float:
    """The copies into and out of a schedule's buckets."""
    total = 0.0
    for n in nodes:
        if n.get("type") == "collective":
            cin, cout = _copies(n)
            total += copy_ms(cin, cal, fresh=True) + copy_ms(cout, cal)
    return total


def transfer_ms(node: dict[str, Any], model: Model) -> float:
    """A collective's transfer: latency, bytes moved, and the first touch of a fresh output."""
    inp = int(node.get("input_bytes") or 0)
    out = max(int(node.get("bytes") or 0) - inp, 0)
    fit = model.transfer
    return fit.latency_ms + fit.ms_per_mib * moved_bytes(node) / MIB + first_touch_ms(out, model.calibration)


def graph_model(cost: GraphCost, nodes: list[dict[str, Any]], cal: Calibration) -> GraphModel:
    est = sum(float(n.get("dur_us") or 0.0) for n in nodes if _is_compute(n)) / 1e3
    ratio = cost.matmul_alone_ms / est if est > 0 else 0.0
    gap_base = max(cost.gap_ms - bucket_copies_ms(nodes, cal), 0.0)
    names = frozenset(n["name"] for n in nodes if n.get("type") == "compute" and not _is_compute(n))
    return GraphModel(cost, ratio, gap_base, names)


def predict_graph(
    nodes: list[dict[str, Any]], model: Model, graph: GraphModel, slices: list[list[Any]] | None = None
) -> GraphPrediction:
    """Run one graph's schedule (``timeline.nodes`` at some cap) with the model's costs.
    ``slices``: where to add what ran, ``[track, name, start ms, ms]`` (track "main" or
    "transfers"; a wait is named ``wait <collective>``), from the graph's start."""
    cal = model.calibration
    others = [n for n in nodes if n.get("type") == "compute" and not _is_compute(n)]
    shared = [n for n in others if n["name"] in graph.recorded_nodes] or others
    per_other = graph.gap_base_ms / len(shared) if shared else 0.0
    shared_names = {n["name"] for n in shared}
    # the main thread's items: ("work", ms, name) | ("issue", name, transfer ms, copy-out ms) | ("wait", name)
    items: list[tuple[Any, ...]] = []
    for n in nodes:
        kind = n.get("type")
        if kind == "compute":
            if _is_compute(n):
                items.append(("work", float(n.get("dur_us") or 0.0) / 1e3 * graph.matmul_ratio, n["name"]))
            elif n["name"] in shared_names:
                items.append(("work", per_other, n["name"]))
        elif kind == "collective":
            cin, cout = _copies(n)
            items.append(
                (
                    "work",
                    issue_ms(n.get("kind", ""), int(n.get("input_bytes") or 0), cal)
                    + copy_ms(cin, cal, fresh=True),
                    f"issue {n['name']}",
                )
            )
            items.append(("issue", n["name"], transfer_ms(n, model), copy_ms(cout, cal)))
        elif kind == "wait":
            items.append(("wait", n.get("collective")))
    out = _run(items, cal.sharing, cal.wait_ms, slices)
    matmuls = sum(1 for n in nodes if _is_compute(n))
    measured = min(matmuls, graph.cost.matmuls)
    out.nodes = dict(
        zip(NODE_SOURCES, (measured, matmuls - measured, len(shared), len(others) - len(shared)), strict=True)
    )
    return out


def _run(
    items: list[tuple[Any, ...]], sharing: float, wait_ms: float, slices: list[list[Any]] | None = None
) -> GraphPrediction:
    """The two workers, in fluid time: each runs at full speed alone, ``1 + sharing`` times
    slower while the other runs too."""
    t = busy = exposed = comm = 0.0
    queue: list[list[Any]] = []  # [name, ms of transfer work left]
    active: list[Any] | None = None
    done: set[str] = set()
    copy_out: dict[str, float] = {}
    cur: float | None = None  # the main thread's work left on its current item
    cur_name, cur_start, blocked_since = "", 0.0, 0.0
    i = 0
    blocked = False
    while True:
        while cur is None and i < len(items):
            it = items[i]
            if it[0] == "work":
                cur, cur_name, cur_start, i = it[1], it[2], t, i + 1
            elif it[0] == "issue":
                queue.append([it[1], it[2], t])
                copy_out[it[1]] = it[3]
                i += 1
            elif it[1] in done or it[1] not in copy_out:  # a wait on a finished (or unknown) collective
                if blocked and slices is not None and t > blocked_since:
                    slices.append(["main", f"exposed {it[1]}", blocked_since, t - blocked_since])
                cur, cur_name, cur_start, i = wait_ms + copy_out.get(it[1], 0.0), f"wait {it[1]}", t, i + 1
                blocked = False
            else:
                if not blocked:
                    blocked_since = t
                blocked = True
                break
        if active is None and queue:
            active = queue.pop(0)
            active.append(t)  # when it began to move
        if cur is None and active is None:
            break
        rate = 1.0 / (1.0 + sharing) if cur is not None and active is not None else 1.0
        steps = []
        if cur is not None:
            steps.append(cur / rate)
        if active is not None:
            steps.append(active[1] / rate)
        dt = min(steps)
        t += dt
        if cur is not None:
            busy += dt
            cur -= dt * rate
            if cur <= 1e-12:
                cur = None
                if slices is not None:
                    slices.append(["main", cur_name, cur_start, t - cur_start])
        elif blocked:
            exposed += dt
        if active is not None:
            comm += dt
            active[1] -= dt * rate
            if active[1] <= 1e-12:
                done.add(active[0])
                if slices is not None:
                    slices.append(["transfers", active[0], active[3], t - active[3]])
                active = None
    return GraphPrediction(total_ms=t, compute_ms=busy, exposed_ms=exposed, comm_ms=comm)


def _transfer_fit(cal: Calibration) -> tuple[float, bool]:
    """The latency: fitted (least squares over the measured transfers, at least 0) when their
    sizes differ twofold or more, else :data:`LATENCY_PRIOR`."""
    xs = [t.moved_bytes / MIB for t in cal.transfers]
    ys = [t.ms for t in cal.transfers]
    if len(xs) >= 3 and min(xs) > 0 and max(xs) / min(xs) >= 2.0:
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
        return max(my - slope * mx, 0.0), True
    return LATENCY_PRIOR, False


def _root(f: Any, lo: float, hi: float, tol: float = 1e-6) -> float:
    """Where the non-decreasing ``f`` crosses 0 in [lo, hi] (an end when it does not), by
    regula falsi with the Illinois step: a few runs of the schedule, not 50 halvings."""
    f_lo, f_hi = f(lo), f(hi)
    if f_lo >= 0:
        return lo
    if f_hi <= 0:
        return hi
    side = 0
    x = lo
    for _ in range(60):
        x = hi - f_hi * (hi - lo) / (f_hi - f_lo)
        fx = f(x)
        if abs(fx) < tol or hi - lo < tol:
            break
        if fx > 0:
            hi, f_hi = x, fx
            if side == 1:
                f_lo /= 2
            side = 1
        else:
            lo, f_lo = x, fx
            if side == -1:
                f_hi /= 2
            side = -1
    return x


def fit(cal: Calibration, recorded: dict[tuple[str, int], list[dict[str, Any]]]) -> Model:
    """Fit the calibration to the recorded cap's schedules (graph key -> ``timeline.nodes``):
    the transfer rate that makes those graphs' simulated time their measured time in sum."""
    latency, fitted = _transfer_fit(cal)
    model = Model(cal, TransferFit(latency, 1.0, fitted))
    for key, nodes in recorded.items():
        cost = cal.graphs.get(key)
        if cost is not None:
            model.graphs[key] = graph_model(cost, nodes, cal)
    target = sum(model.graphs[k].cost.span_ms for k in model.graphs)

    def excess(rate: float) -> float:  # grows with the rate: a slower transfer never ends sooner
        model.transfer.ms_per_mib = rate
        return sum(predict_graph(recorded[k], model, g).total_ms for k, g in model.graphs.items()) - target

    model.transfer.ms_per_mib = _root(excess, 0.0, 64.0)
    residuals = [
        abs(t.ms - (latency + model.transfer.ms_per_mib * t.moved_bytes / MIB)) / t.ms * 100
        for t in cal.transfers
        if t.ms > 0
    ]
    if residuals:
        model.transfer.residual_median_pct = round(statistics.median(residuals), 1)
        model.transfer.residual_max_pct = round(max(residuals), 1)
    model.transfer.transfers = len(cal.transfers)
    return model


def predict_step(
    model: Model,
    schedules: dict[tuple[str, int], list[dict[str, Any]]],
    slices: list[list[Any]] | None = None,
) -> dict[str, Any]:
    """The step at one cap: each measured graph's schedule (graph key -> ``timeline.nodes``)
    run by the model, plus the measured time outside the graph runs. A graph the profile did
    not measure is left out (it did not run in the profiled steps). ``slices``: where to add
    what ran (:func:`predict_graph`'s, the graphs one after another from the step's start, each
    track name prefixed with its graph, ``0/0:1 main``)."""
    parts = []
    start = 0.0
    for k, g in model.graphs.items():
        if k not in schedules:
            continue
        mine: list[list[Any]] | None = [] if slices is not None else None
        parts.append(predict_graph(schedules[k], model, g, mine))
        if slices is not None and mine is not None:
            slices += [
                [f"{k[0]}:{k[1]} {tr}", name, round(start + a, 4), round(d, 4)] for tr, name, a, d in mine
            ]
        start += parts[-1].total_ms
    return {
        "predicted_step_ms": round(sum(p.total_ms for p in parts) + model.calibration.outside_ms, 3),
        "exposed_ms": round(sum(p.exposed_ms for p in parts), 3),
        "comm_ms": round(sum(p.comm_ms for p in parts), 3),
        "compute_ms": round(sum(p.compute_ms for p in parts), 3),
        "graphs": len(parts),
        "nodes": {k: sum(p.nodes.get(k, 0) for p in parts) for k in NODE_SOURCES},
    }


__all__ = [
    "LATENCY_PRIOR",
    "NODE_SOURCES",
    "GraphModel",
    "GraphPrediction",
    "Model",
    "TransferFit",
    "bucket_copies_ms",
    "copy_ms",
    "first_touch_ms",
    "fit",
    "graph_model",
    "issue_ms",
    "moved_bytes",
    "predict_graph",
    "predict_step",
    "transfer_ms",
]
