"""The rest of the pipeline: the installed torch's own overlap scheduler on a rebuilt, pre-bucketed graph.

Data flows one way: rebuilt graph (:mod:`~tracekit.replay.graph_text`) -> a copy pre-bucketed
at a cap (:func:`bucketing.pre_bucket_fsdp_collectives`) -> torch's ``OverlapScheduler``
(``torch._inductor.fx_passes.overlap_scheduling``; called, never copied) -> the figures of
:class:`ScheduledGraph` -> render. The graph is rebuilt once; this module copies it per cap.

What the scheduler is fed (docs/log-format.md, "Estimates and overlap scheduling"):

- settings as ``schedule_overlap_bucketing_from_inductor_configs`` reads them: the function's
  defaults, replaced by every value of ``config.aten_distributed_optimizations`` that is not
  None (so ``enable_fusion_regions`` is the config's True), then by the command's overrides;
- ``custom_runtime_estimation`` (:class:`RecordedEstimates`): each compute node's recorded
  "Benchmarked Est(us)" (from that graph's own ``fx_compute_nodes_runtime_estimation``); the
  other nodes torch's roofline when the run had no hook; collectives torch's NCCL model; the
  roofline with the named GPU's peaks (:data:`GPUS`, patched into ``get_gpu_dram_gbps`` /
  ``get_device_tflops``); compute nodes without a recorded estimate are counted (``fallback``);
- a fake process group of the graph's group size (no communication), fake tensors on CPU.

What is read back: ``scheduler.collective_info[start]`` (``estimated_time_ms``,
``exposed_time_ms``: torch's ``total_exposed_ms`` is their sum), ``scheduler.node_estimations``
(compute), the order of ``scheduler.scheduled``, and the final graph's collectives. Peak memory
is torch's ``MemoryTracker`` walked over the scheduled order with every device counted (the
scheduler's own tracker skips CPU tensors, so on a CPU replay its figure is 0): the bytes of
tensors alive at the worst point, inputs included, as the allocator would hold them.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx

from bucketing.compat import Call
from bucketing.gc_pause import young_collections
from tracekit.read.parsers import collective_op


@dataclass(frozen=True)
class Gpu:
    """Peak figures of a GPU, for torch's roofline (nodes without a recorded estimate)."""

    name: str
    dram_gbps: float  # HBM bandwidth, GB/s
    tflops: float  # dense bf16 TFLOP/s


#: The GPUs ``--gpu`` names (their figures: docs/log-format.md, "Estimates and overlap scheduling").
GPUS: dict[str, Gpu] = {
    "H100": Gpu("H100", 3350, 989),
    "A100": Gpu("A100", 2039, 312),
    "B200": Gpu("B200", 8000, 2250),
}

#: The ``aten_distributed_optimizations`` keys torch's ``..._from_inductor_configs`` reads for
#: the scheduler (the pre-bucketing ones and the estimation hook are ours to set).
_CONFIG_KEYS = (
    "collective_bucketing",
    "max_compute_pre_fetch",
    "insert_overlap_deps",
    "collective_estimator",
    "compute_estimator",
    "max_memory_increase_gb",
    "max_memory_increase_ratio",
    "compute_overlap_multipler",
    "max_in_flight_gb",
    "max_coll_distance",
    "log_final_collectives_estimations",
    "bucket_exposed_first",
    "bucket_only_internode_comms",
    "enable_fusion_regions",
    "prioritize_bucketing_during_scheduling",
    "bucket_mode",
)

#: The scheduler settings a run's log may name (:mod:`tracekit.replay.run_settings`): the
#: config's, and the function-only ``max_off_bucket_gb``.
SETTING_KEYS = (*_CONFIG_KEYS, "max_off_bucket_gb")

#: The scheduler's classes and functions replay calls, with the arguments it passes (checked
#: before any work: :func:`bucketing.compat.check_calls`).
SCHEDULER_CALLS = (
    Call(
        "torch._inductor.fx_passes.overlap_scheduling",
        "OverlapScheduler",
        1,
        ("custom_runtime_estimation", *_CONFIG_KEYS, "max_off_bucket_gb"),
    ),
    Call("torch._inductor.fx_passes.overlap_scheduling", "is_compute_node", 1),
    Call("torch._inductor.fx_passes.memory_estimator", "MemoryTracker", 1, ("device_filter",)),
)

#: Settings the command may override (``--collective-bucketing``, ...), with their types.
OVERRIDABLE = {
    "collective_bucketing": bool,
    "max_in_flight_gb": float,
    "max_memory_increase_gb": float,
    "max_memory_increase_ratio": float,
    "bucket_mode": str,
}


@functools.cache
def _parameters(fn: Callable[..., Any]) -> Mapping[str, inspect.Parameter]:
    """``inspect.signature(fn).parameters``, read once per function (0.1 ms a call: a sweep
    asks for the settings at every cap)."""
    return inspect.signature(fn).parameters


def scheduler_settings(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``OverlapScheduler`` keyword arguments torch's inductor would use, then ``overrides``.

    Never benchmarks: compute estimates come from the log through the hook (with
    ``compute_estimator="analytical"`` torch keeps the hook's value for every compute node),
    collectives from the NCCL model; never logs the final estimates."""
    from torch._inductor import config
    from torch._inductor.fx_passes.overlap_scheduling import schedule_overlap_bucketing

    params = _parameters(schedule_overlap_bucketing)
    out = {k: params[k].default for k in _CONFIG_KEYS if k in params}
    opts = config.aten_distributed_optimizations
    for k in _CONFIG_KEYS:
        v = getattr(opts, k, None)
        if v is not None:
            out[k] = v
    out.update({k: v for k, v in (overrides or {}).items() if v is not None})
    out["collective_estimator"] = "analytical"
    # "analytical" keeps the hook's values (the recorded "Benchmarked" column): in "benchmark"
    # mode torch first looks the node up in its on-disk benchmark cache (values of earlier
    # compiles on this machine win over the hook) and allocates real tensors of its shapes
    out["compute_estimator"] = "analytical"
    out["log_final_collectives_estimations"] = False
    # max_off_bucket_gb and the other function-only arguments keep their defaults unless the
    # run's log named them (overrides)
    for k in ("max_off_bucket_gb",):
        if k in params and (overrides or {}).get(k) is None:
            out[k] = params[k].default
    return out


@contextlib.contextmanager
def gpu_peaks(gpu: Gpu):
    """Make torch's roofline use ``gpu``'s bandwidth and FLOP/s (on CPU triton has neither)."""
    import torch._inductor.utils as inductor_utils
    import torch.utils._runtime_estimation as runtime_estimation

    saved = [
        (m, n, getattr(m, n))
        for m in (inductor_utils, runtime_estimation)
        # torch 2.15's roofline asks get_device_dram_gbps(device); 2.13 and 2.14 get_gpu_dram_gbps()
        for n in ("get_gpu_dram_gbps", "get_device_dram_gbps", "get_device_tflops")
        if hasattr(m, n)
    ]
    try:
        for m, n, _ in saved:
            # any arguments: torch 2.15 asks get_device_tflops(dtype, device=...), 2.13 (dtype)
            value = gpu.tflops if n == "get_device_tflops" else gpu.dram_gbps
            setattr(m, n, lambda *args, _value=value, **kwargs: _value)
        yield
    finally:
        for m, n, f in saved:
            setattr(m, n, f)


@contextlib.contextmanager
def no_estimation_artifacts():
    """Skip the scheduler's estimation artifacts (``fx_compute_nodes_runtime_estimation``,
    ``fx_collectives_analytical_estimation``): a replay logs nothing, and building their rows
    counts every compute node's FLOPs twice (a quarter of the scheduler's time on big graphs).
    The estimates the scheduler uses are untouched."""
    import torch._inductor.fx_passes.node_runtime_estimation as nre

    names = ("_log_compute_estimations", "_log_collective_benchmarks")
    saved = {n: getattr(nre, n) for n in names if hasattr(nre, n)}
    try:
        for n in saved:
            setattr(nre, n, lambda *a, **k: None)
        yield
    finally:
        for n, f in saved.items():
            setattr(nre, n, f)


class RecordedEstimates:
    """The ``custom_runtime_estimation`` hook: recorded compute estimates in ms; for the other
    nodes what the run's scheduler gave them, where that can be known.

    Counts the compute nodes that had none (``fallback``: torch's roofline times them).

    ``roofline_rest``: the run had no hook of its own (:func:`tracekit.replay.run_settings.
    stock_estimates`). torch's scheduler then times every node that is neither a compute node
    nor a collective by its roofline (waits, copies, views at 0), and leaves a node out when
    that is 0; but once any hook is given, it asks the hook instead and takes None as "no
    time". So for a stock run this hook answers with the roofline, as torch did::

        stock run:      mul -> roofline 0.0012 ms   wait_tensor -> 0.0008   view -> (none)
        replay before:  mul -> (none)               wait_tensor -> (none)   view -> (none)
        replay now:     as the stock run

    For a run that had its own hook, what it gave those nodes is not in the log: None, and
    :func:`tracekit.replay.run_settings.unrecorded_estimates` says so."""

    def __init__(self, benchmarked_us: dict[str, float] | None, roofline_rest: bool = False):
        self.us = benchmarked_us or {}
        self.roofline_rest = roofline_rest
        self.fallback: set[str] = set()
        self.used: set[str] = set()

    def __call__(self, node: fx.Node, override_size: int | None) -> float | None:
        from torch._inductor.fx_passes.overlap_scheduling import (
            estimate_roofline_runtime_ms,
            is_compute_node,
        )

        if node.op != "call_function":
            return None
        if _collective_start(node) is not None:
            # the run's benchmark where the log has it (by torch's cache key), else torch's
            # NCCL model
            key = benchmark_key(node) if self.us else None
            us = None if key is None else self.us.get(key)
            return None if us is None else us / 1e3
        us = self.us.get(node.name)
        if us is not None:
            self.used.add(node.name)
            return us / 1e3
        if is_compute_node(node):
            self.fallback.add(node.name)
            return None
        if self.roofline_rest:
            ms = estimate_roofline_runtime_ms(node)
            return ms if ms > 0 else None
        return None


def benchmark_key(node: fx.Node) -> str | None:
    """The key torch's collective benchmarks are cached and logged by
    (``fx_collectives_node_runtime_estimation``): the op, its group's size and the bytes of its
    first tensor input, e.g. ``_c10d_functional.all_gather_into_tensor.default: (2 group size,
    1048576 bytes)``; None when a size is unknown."""
    from torch.distributed.distributed_c10d import _get_group_size_by_name

    group = _group_name(node)
    size = _first_tensor_bytes(node)
    if group is None or size is None:
        return None
    try:
        group_size = _get_group_size_by_name(group)
    except Exception:  # noqa: BLE001 - a group not registered: no benchmark applies
        return None
    return f"{node.target}: ({group_size} group size, {size} bytes)"


@dataclass
class FinalCollective:
    """One collective of the scheduled graph, in run order (as ``inductor_collective_schedule``
    and ``fx_collectives_analytical_estimation`` would describe it)."""

    name: str
    kind: str
    op: str
    group: str | None
    group_size: int | None
    bytes: int | None
    est_ms: float  # torch's NCCL model, as its estimation artifact rounds it (4 decimals)

    def key(self) -> tuple:
        return (self.kind, self.group, self.bytes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "op": self.op,
            "group": self.group,
            "group_size": self.group_size,
            "bytes": self.bytes,
            "est_ms": self.est_ms,
        }


@dataclass
class ScheduledGraph:
    """torch's overlap schedule of one graph at one cap, and what it costs."""

    final: list[FinalCollective] = field(default_factory=list)
    #: the same collectives before the scheduler ran (graph order after pre-bucketing): what
    #: ``fx_collectives_analytical_estimation`` describes, written at the start of its run
    before_overlap: list[FinalCollective] = field(default_factory=list)
    comm_ms: float = 0.0  # sum of the scheduler's collective estimates
    exposed_ms: float = 0.0  # sum of collective_info[..].exposed_time_ms (torch's total_exposed_ms)
    compute_ms: float = 0.0  # sum of the scheduler's estimates of the other nodes
    peak_memory_bytes: int = 0
    compute_nodes: int = 0
    fallback: list[str] = field(default_factory=list)  # compute nodes timed by the roofline
    timeline: list[dict[str, Any]] = field(default_factory=list)
    memory: list[list[float]] = field(default_factory=list)  # [start_us, bytes in use] after each node
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def est_ms(self) -> float:
        return self.compute_ms + self.exposed_ms

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.final:
            out[c.kind] = out.get(c.kind, 0) + 1
        return out


def copy_graph(gm: fx.GraphModule) -> fx.GraphModule:
    """A copy of ``gm`` to rewrite (node meta copied shallowly: fake values are shared), in a
    module whose code is generated only if read (:func:`bucketing.fx_nodes.copy_graph_module`)."""
    from bucketing.fx_nodes import copy_graph_module

    return copy_graph_module(gm)


def _group_name(node: fx.Node) -> str | None:
    from torch._inductor.fx_passes.overlap_scheduling import get_group_name

    try:
        return str(get_group_name(node))
    except Exception:  # noqa: BLE001 - a group torch cannot resolve is reported as unknown
        return None


def _first_tensor_bytes(node: fx.Node) -> int | None:
    """Bytes of the first tensor input, as torch's estimation key counts them."""
    for a in node.all_input_nodes:
        v = a.meta.get("val")
        if isinstance(v, torch.Tensor):
            try:
                return int(v.numel()) * v.dtype.itemsize
            except Exception:  # noqa: BLE001 - unbacked sizes
                return None
    return None


def _group_size(node: fx.Node) -> int | None:
    for a in list(node.args) + list(node.kwargs.values()):
        if isinstance(a, int) and not isinstance(a, bool):
            return a
    return None


def _collective_start(node: fx.Node) -> tuple[str, str] | None:
    """The (kind, op) of a node that starts a collective; None for any other node (a wait too)."""
    return _collective_of(node.target) if node.op == "call_function" else None


def _collective_of(target: Any) -> tuple[str, str] | None:
    """``collective_op`` of a ``_c10d_functional`` op's name (None for any other target and
    for a wait), kept per target: a walk over a graph's nodes asks once per op, not per node.
    Kept by the target's identity (an ``OpOverload`` hashes in Python), with the target itself
    beside its answer so that an identity reused by another object is not believed."""
    known = _COLLECTIVE_OF.get(id(target))
    if known is not None and known[0] is target:
        return known[1]
    text = str(target)
    kind = collective_op(text) if "_c10d_functional" in text else None
    _COLLECTIVE_OF[id(target)] = (target, kind)
    return kind


_COLLECTIVE_OF: dict[int, tuple[Any, tuple[str, str] | None]] = {}


def _estimate_key(node: fx.Node) -> tuple:
    """What torch's NCCL model reads of a collective: its op, its plain arguments (group name,
    group size, ...) and the shapes and dtypes of its inputs and output."""

    def shape(v):
        return (tuple(v.shape), v.dtype) if isinstance(v, torch.Tensor) else None

    def as_shape(a: fx.Node):
        return shape(a.meta.get("val"))

    return (
        str(node.target),
        repr(fx.node.map_arg(node.args, as_shape)),
        repr(fx.node.map_arg(node.kwargs, as_shape)),
        shape(node.meta.get("val")),
    )


def final_collectives(gm: fx.GraphModule, cache: dict[tuple, float] | None = None) -> list[FinalCollective]:
    """The collectives of ``gm`` in graph order, each with torch's NCCL estimate (the first of
    what ``fx_collectives_analytical_estimation`` writes: ``estimate_nccl_collective_runtime_from_fx_node``
    with the NCCL estimator). ``cache``: estimates by :func:`_estimate_key`, kept across calls
    (a 1,000-layer graph has 2,000 collectives of a few distinct shapes)."""
    from torch._inductor.comm_analysis import estimate_nccl_collective_runtime_from_fx_node

    cache = {} if cache is None else cache
    out = []
    for n in gm.graph.nodes:
        collective = _collective_start(n)
        if collective is None:
            continue
        kind, op = collective
        try:
            key = _estimate_key(n)
        except Exception:  # noqa: BLE001 - unbacked sizes: estimate this one without the cache
            key = None
        est = cache.get(key) if key is not None else None
        if est is None:
            try:
                est = round(
                    float(estimate_nccl_collective_runtime_from_fx_node(n, None, use_nccl_estimator=True)), 4
                )
            except Exception:  # noqa: BLE001
                est = float("nan")
            if key is not None:
                cache[key] = est
        out.append(
            FinalCollective(n.name, kind, op, _group_name(n), _group_size(n), _first_tensor_bytes(n), est)
        )
    return out


def every_device(device: Any) -> bool:
    """The memory walk's device filter: every device counts (torch's own skips CPU tensors)."""
    return True


def memory_walk(gm: fx.GraphModule, sched: Any, order: list[fx.Node] | None = None) -> Any:
    """torch's ``MemoryTracker`` over the scheduled graph ``gm``, every device counted (the
    scheduler's own skips CPU tensors), for our walk in the scheduled order.

    A tracker first maps each node to the storages it allocates and uses (torch's
    ``GraphAliasTracker``, a pass over every node's fake values: a 2,703-node graph, 0.4 s).
    The scheduler has made that map already, for every device, over the same nodes when its
    run added or removed none (the map does not depend on the nodes' order: a storage is
    allocated by the one node all its aliases depend on). Then the tracker is built on the
    scheduler's map; otherwise on a map of its own. Either way the same figures, the same
    ``MemoryTracker``::

        before: MemoryTracker(gm.graph)  ->  GraphAliasTracker(nodes)   # again, per cap
        after:  MemoryTracker(gm.graph)  ->  sched.memory_tracker.alias_tracker

    ``order``: the order the walk will schedule the nodes in; then the tracker asks about each
    storage's last use in that order only (:func:`_last_uses`).
    """
    from torch._inductor.fx_passes import memory_estimator

    known = getattr(getattr(sched, "memory_tracker", None), "alias_tracker", None)
    mapped = getattr(known, "node_to_output_storages", None)
    nodes = list(gm.graph.nodes)
    if not isinstance(mapped, dict) or len(mapped) != len(nodes) or not all(n in mapped for n in nodes):
        tracker = memory_estimator.MemoryTracker(gm.graph, device_filter=every_device)
    else:
        made = memory_estimator.GraphAliasTracker
        memory_estimator.GraphAliasTracker = lambda _nodes: known
        try:
            tracker = memory_estimator.MemoryTracker(gm.graph, device_filter=every_device)
        finally:
            memory_estimator.GraphAliasTracker = made
    return _last_uses(_plain_scheduled(tracker), order)


def _last_uses(tracker: Any, order: list[fx.Node] | None) -> Any:
    """The tracker asking, when a node is scheduled, about the last use in ``order`` of each
    storage the node uses instead of about every use.

    A storage is freed once every node that uses it is scheduled: the tracker asks
    ``all(u in scheduled for u in storage_to_uses[storage])`` for each storage of each node.
    Walked in a known order, every use is scheduled exactly when the last of them in that order
    is; a bucket's buffer has hundreds of uses on a large graph (each of its members' views),
    and with every device counted the question was the walk's largest cost (a 1,000-layer
    graph at 8 MB: quadratic in the bucket). The storage map itself is not changed (it may be
    the scheduler's): the tracker gets a copy whose ``storage_to_uses`` holds one node each::

        before: storage_to_uses[buf] = {view_0, getitem_0, ..., view_k}   # k uses asked
        after:  storage_to_uses[buf] = (view_k,)   # the last of them in ``order``

    A use not in ``order`` is never scheduled, so a storage with one is never freed, as before
    (that use is kept as the last). Without ``order``, or on a tracker without these
    attributes (another torch), the tracker is left as it is."""
    alias = getattr(tracker, "alias_tracker", None)
    uses = getattr(alias, "storage_to_uses", None)
    if order is None or not isinstance(uses, dict):
        return tracker
    import copy
    from collections import defaultdict

    position = {n: i for i, n in enumerate(order)}
    never = len(order)
    last: defaultdict[Any, tuple[fx.Node, ...]] = defaultdict(tuple)
    for key, nodes in uses.items():
        if len(nodes) > 1:
            last[key] = (max(nodes, key=lambda u: position.get(u, never)),)
        else:
            last[key] = tuple(nodes)
    view: Any = copy.copy(alias)
    view.storage_to_uses = last
    fresh = getattr(alias, "node_to_fresh_allocations", None)
    if isinstance(fresh, dict):
        view.walk_events = {n for n, made in fresh.items() if made}.union(*last.values())
    tracker.alias_tracker = view
    return tracker


def _walk_events(tracker: Any) -> set[fx.Node] | None:
    """The nodes that change the walk's bytes: those that allocate a storage and those that
    are the last use of one in the walk's order (:func:`_last_uses`), or None (every node
    then goes through the tracker). Scheduling any other node only adds it to the tracker's
    set of scheduled nodes, which the tracker reads for last uses only::

        before: tracker.schedule_node(n)        # for every node: ~7 us, mostly to find nothing
        after:  tracker.schedule_node(n) if n in events else tracker.scheduled.add(n)
    """
    events = getattr(getattr(tracker, "alias_tracker", None), "walk_events", None)
    if not isinstance(events, set) or not isinstance(getattr(tracker, "scheduled", None), set):
        return None
    return events


def byte_changes(tracker: Any, order: list[fx.Node]) -> dict[fx.Node, int] | None:
    """The bytes in use that each node of ``order`` adds (its fresh storages) less those it
    frees (the storages whose last use in ``order`` it is), for the nodes that change them:
    what torch's ``MemoryTracker`` gives scheduling ``order`` node by node, read off the
    storage map it was built on (:func:`memory_walk`) in two passes.

    The tracker's own step runs about 5 us of Python a node (an assertion, an ordered set of
    freed storages, a debug log call, a size through ``optimization_hint``), and asks about
    every use of each storage a node uses; a 1,443-node graph has 1,000 nodes that allocate or
    free. The same rules: a storage counts from its allocating node on, on the tracker's
    devices; it is freed once every node that uses it has run (at its last use in ``order``;
    never, if a node that uses it is not in ``order``), unless its allocator is not releasable
    (a primal)::

        before: tracker.schedule_node(n); cur = tracker.current_memory_bytes   # per node
        after:  cur += changes.get(n, 0)                                       # the same cur

    None where the tracker could not walk ``order`` cleanly (a storage used before it is
    live, a size that is not an int, a map without these fields): then the tracker walks it,
    node by node, as before."""
    alias: Any = getattr(tracker, "alias_tracker", None)
    try:
        fresh = alias.node_to_fresh_allocations
        uses = alias.node_to_storage_uses
        allocator = alias.storage_to_allocator
        counted = tracker.device_filter
        releasable = tracker.is_releasable
        size_of = tracker._get_storage_size
        # storages by their address (torch's StorageKey: the storage's, on one device), a
        # plain int: a StorageKey hashes and compares in Python, thousands of times a walk
        live = {s.storage._cdata: size_of(s) for s in tracker.current_live_storages}
        # whether a storage goes at its last use (its allocator is releasable: not a primal)
        may_free = {s.storage._cdata: releasable(allocator[s]) for s in tracker.current_live_storages}
    except Exception:  # noqa: BLE001 - not the tracker this was written for: it walks
        return None
    every = counted is every_device  # then no storage is filtered out: the filter is not asked
    changes: dict[fx.Node, int] = {}
    try:
        walked = set(order)
        # the last use of each storage in ``order``; None: a node outside ``order`` uses it,
        # so it is never freed
        last: dict[int, fx.Node | None] = {
            s.storage._cdata: None for n in uses if n not in walked for s in uses[n]
        }
        setdefault = last.setdefault
        for n in reversed(order):
            for s in uses[n]:
                setdefault(s.storage._cdata, n)
        for n in order:
            if n.op in ("placeholder", "get_attr", "output"):
                continue
            change = 0
            for s in fresh[n]:
                key = s.storage._cdata
                if key not in live and (every or counted(s.device)):
                    live[key] = size = size_of(s)
                    may_free[key] = releasable(n)  # n allocates it
                    change += size
            for s in uses[n]:
                key = s.storage._cdata
                size = live.get(key)
                if size is None:
                    if every or counted(s.device):
                        return None  # used before it is live: the tracker asserts; let it walk
                    continue
                if last[key] is n and may_free[key]:
                    del live[key]
                    change -= size
            if type(change) is not int:
                return None
            if change:
                changes[n] = change
    except Exception:  # noqa: BLE001 - whatever the map holds that we do not expect: the tracker walks
        return None
    return changes


def _plain_scheduled(tracker: Any) -> Any:
    """The tracker with its set of scheduled nodes and its set of live storages plain ``set``s:
    it asks, for each storage a node uses, whether every user of that storage is scheduled yet
    and whether the storage is live, and with every device counted that is tens of questions
    per node, each a Python-level ``__contains__`` (or ``add``, ``remove``) on torch's
    ``OrderedSet``; a ``set`` answers in C. The walk never reads either set's order."""
    if hasattr(tracker, "scheduled") and not tracker.scheduled:
        tracker.scheduled = set()
    live = getattr(tracker, "current_live_storages", None)
    if live is not None and not isinstance(live, set):
        tracker.current_live_storages = set(live)
    return tracker


@contextlib.contextmanager
def nodes_released() -> Any:
    """Let go of the nodes torch's scheduler keeps once the block ends (or raises).

    ``overlap_scheduling.get_group_name`` is ``functools.cache``'d by node: every collective
    the scheduler (or we, for the timeline) ask about stays in its cache, and with it the
    node's graph. A replay schedules a copy of a graph per cap, so each copy, rewritten and
    scheduled, was kept for the life of the process: on the 1,000-layer graph 16,030 nodes and
    their fake values a cap, which the collector then carried through every generation. The
    cache is emptied at the end (torch asks again and caches again)::

        before: get_group_name.cache -> {ag_copy_1: '0', ...} -> ag_copy_1.graph -> every node
        after:  the cache emptied once the schedule's figures are read; the copy is garbage
    """
    try:
        yield
    finally:
        from torch._inductor.fx_passes import overlap_scheduling

        clear = getattr(getattr(overlap_scheduling, "get_group_name", None), "cache_clear", None)
        if clear is not None:
            clear()


@nodes_released()
def schedule(
    gm: fx.GraphModule,
    compute_us: dict[str, float] | None,
    gpu: Gpu,
    settings: dict[str, Any],
    members: dict[str, list[str]] | None = None,
    estimates: dict[tuple, float] | None = None,
    comm_model: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
    roofline_rest: bool = False,
) -> ScheduledGraph:
    """Run torch's ``OverlapScheduler`` on ``gm`` (pre-bucketed already; rewritten in place).

    ``members``: bucket node name -> the original collectives it merged (for the timeline).
    ``estimates``: a cache of collective estimates to share across caps (:func:`final_collectives`).
    ``comm_model``: makes the context in which torch's NCCL model answers for what-if hardware
    (:func:`tracekit.replay.comm_estimate.scheduler_model`), around the scheduler's run and the
    estimates of the collectives before and after it; None: the hardware torch detects.
    ``roofline_rest``: the run had no estimation hook, so the nodes that are neither compute
    nor collectives are timed by torch's roofline, as it timed them (:class:`RecordedEstimates`).
    Raises what the scheduler raises (the caller turns it into a note on that graph).
    Whatever happens, torch's scheduler keeps none of the graph's nodes (:func:`nodes_released`)."""
    from torch._inductor.fx_passes.overlap_scheduling import OverlapScheduler, is_compute_node

    hook = RecordedEstimates(compute_us, roofline_rest)
    estimates = {} if estimates is None else estimates
    model = comm_model or contextlib.nullcontext
    with model():
        before = final_collectives(gm, estimates)
        # the scheduler's own cyclic garbage (pytree's closures) collected as it is made, in
        # small passes, rather than all at once when the caller's paused collector resumes
        with gpu_peaks(gpu), no_estimation_artifacts(), young_collections():
            sched = OverlapScheduler(gm, custom_runtime_estimation=hook, **settings)
            gm = sched.run()
    order = list(sched.scheduled)
    infos = sched.collective_info
    est = sched.node_estimations
    out = ScheduledGraph(settings={k: v for k, v in settings.items()})
    out.comm_ms = sum(i.estimated_time_ms for i in infos.values())
    out.exposed_ms = sum(i.exposed_time_ms for i in infos.values())
    out.fallback = sorted(hook.fallback)
    out.compute_nodes = len(sched.compute_nodes)
    wait_of = {i.wait_node: (s, i) for s, i in infos.items()}
    members = members or {}
    # Timeline: nodes run one after another on the compute stream; a collective is issued at
    # its start node and takes its estimate on its group's stream; its wait holds the compute
    # stream for the collective's exposed time (so the compute stream ends at est_ms).
    t = 0.0
    tracker = memory_walk(gm, sched)
    changes = byte_changes(tracker, order)
    events = None
    if changes is None:  # torch's tracker walks, asking about each storage's last use only
        tracker = _last_uses(tracker, order)
        events = _walk_events(tracker)
    peak = cur = tracker.current_memory_bytes
    out.memory.append([0.0, peak])
    for n in order:
        if n in infos:
            i = infos[n]
            out.timeline.append(
                {
                    "name": n.name,
                    "type": "collective",
                    "start_us": round(t * 1e3, 3),
                    "dur_us": round(i.estimated_time_ms * 1e3, 3),
                    "exposed_us": round(i.exposed_time_ms * 1e3, 3),
                    "group": _group_name(n),
                    "kind": _collective_of(n.target)[0],  # type: ignore[index]  # a collective (in infos)
                    "bytes": i.size_bytes,  # torch's size_bytes: input + output
                    "input_bytes": _first_tensor_bytes(n),  # one rank's input, as summarize's bytes
                    "members": members.get(n.name, [n.name]),
                    "hidden_by": [h.name for h in i.hiding_nodes],
                }
            )
        elif n in wait_of:
            s, i = wait_of[n]
            out.timeline.append(
                {
                    "name": n.name,
                    "type": "wait",
                    "start_us": round(t * 1e3, 3),
                    "dur_us": round(i.exposed_time_ms * 1e3, 3),
                    "collective": s.name,
                }
            )
            t += i.exposed_time_ms
        elif n.op == "call_function" and est.get(n):
            ms = est[n]
            if n.name in hook.used:
                source = "recorded"
            else:  # torch's roofline times a compute node; the others are in a fused region's estimate
                source = "roofline" if is_compute_node(n) else "fusion_region"
            out.timeline.append(
                {
                    "name": n.name,
                    "type": "compute",
                    "start_us": round(t * 1e3, 3),
                    "dur_us": round(ms * 1e3, 3),
                    "estimate": source,
                }
            )
            out.compute_ms += ms
            t += ms
        if changes is not None:
            change = changes.get(n)
            if change:
                cur += change
                peak = max(peak, cur)
                out.memory.append([round(t * 1e3, 3), cur])
            continue
        if events is not None and n not in events:
            tracker.scheduled.add(n)  # neither allocates nor frees (_walk_events)
            continue
        try:
            tracker.schedule_node(n)
        except Exception:  # noqa: BLE001 - a node the tracker cannot size: skip its bytes
            pass
        cur = tracker.current_memory_bytes
        peak = max(peak, cur)
        if out.memory[-1][1] != cur:
            out.memory.append([round(t * 1e3, 3), cur])
    out.peak_memory_bytes = int(peak)
    with model():
        out.final = final_collectives(gm, estimates)
    out.before_overlap = before
    return out


__all__ = [
    "GPUS",
    "OVERRIDABLE",
    "SETTING_KEYS",
    "FinalCollective",
    "Gpu",
    "RecordedEstimates",
    "benchmark_key",
    "ScheduledGraph",
    "byte_changes",
    "copy_graph",
    "final_collectives",
    "gpu_peaks",
    "memory_walk",
    "schedule",
    "scheduler_settings",
]
