"""A graph's distinct caps scheduled side by side: this process and forked workers (``--jobs N``).

torch's overlap scheduler is most of a sweep's time, and each cap's run is independent of the
others: the same rebuilt graph, copied, pre-bucketed at the cap and scheduled. So once the graph
is rebuilt, :func:`schedule_in_workers` has ``N`` processes schedule the caps whose schedules
differ: this one and ``N - 1`` workers forked from it (``concurrent.futures``'
``ProcessPoolExecutor``, as the reader's, which also reads a batch in this process while its
workers read the others). The workers inherit the rebuilt graph and its planners; each asks
:meth:`GraphReplayer.scheduled` at one cap at a time, and its result (plain dataclasses, a few
hundred KB on a 9,000-node graph) comes back pickled and is kept by the replayer under the same
key a run in this process keeps it under. The caps are then replayed in order, as with one job,
and find their schedule made. The output is the same byte for byte: the same functions compute
it, on the same inputs.

How the work is shared (a 1,000-layer graph, 17 caps, 10 distinct schedules of 1.9-9 s each):

- **Distinct plans only.** The caps are planned here (milliseconds each) and only one cap of
  each distinct plan is scheduled: 32 MB to 2 GB give one bucket a kind, as 16 MB does.
- **Longest first.** A smaller cap makes more, smaller buckets: more collectives for torch's
  scheduler to place (9 s at 0.05 MB against 1.9 s from 4 MB up). The caps go smallest first,
  so the longest starts at once and the short ones fill in at the end.
- **The first cap leaves at once.** With one worker (``--jobs 2``), the smallest cap is planned
  and sent to it first; the others are planned here while it runs. With more, every cap is
  planned first (a few hundred ms on 9,000 nodes), so that no more workers are forked than
  there are distinct caps to share (each fork, made here one after another, costs tens of ms).
- **A free process takes the next cap.** A thread here per worker hands it the next cap when it
  is done with one (the threads only wait and hand over: torch runs in this thread alone); this
  process takes the next one itself between its own. No process idles while a cap waits.
- Workers start with the collector's objects frozen (``gc.freeze``: a collection there does
  not walk, and copy, the inherited graph) and ignore Ctrl-C (this process ends them).

A cap the scheduler refuses is left to the caller's loop, which meets the same error and says
it as a serial run does. Without ``fork`` (not Linux or macOS), for one job, one distinct
schedule or a small graph (:data:`MIN_NODES`), nothing is forked. The pool is always shut down
before :func:`schedule_in_workers` returns or raises (:func:`end_pool`; on an error or Ctrl-C
its workers are terminated first): no worker outlives the call, so none is left when the
command ends with ``os._exit`` (which would skip concurrent.futures' own exit hook).
"""

from __future__ import annotations

import gc
import threading
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from tracekit.read.process_pools import end_pool, fork_context, ignore_sigint

#: Graphs smaller than this are scheduled here: their schedules take milliseconds, about what
#: forking a worker and handing it caps costs. The bench's graphs at its 17 caps, one job
#: against two on 2 free cores (best of 3-4, load 1.0): 93 nodes 0.071 / 0.081 s, 138 nodes
#: 0.107 / 0.105 s, 183 nodes 0.187 / 0.135 s, 363 nodes 0.41 / 0.28 s, 723 nodes 1.09 /
#: 0.65 s (the fixture logs' graphs, 59-110 nodes, stay here).
MIN_NODES = 200

#: The replayer the forked workers inherit (set only while a pool runs).
_REPLAYER: Any = None

#: ``(cap_mb, compute_us, what_if)``: what :meth:`GraphReplayer.scheduled` is asked.
Job = tuple[float, "dict[str, float] | None", bool]


def _start_worker() -> None:
    """In a new worker: the inherited objects out of the collector's passes, Ctrl-C left to the
    parent (which ends the workers)."""
    gc.freeze()
    ignore_sigint()


def _schedule_one(job: Job) -> Any:
    """In a worker: the schedule at one cap, or None when the scheduler refused it."""
    cap_mb, compute_us, what_if = job
    try:
        return _REPLAYER.scheduled(cap_mb, compute_us, what_if)
    except Exception:  # noqa: BLE001 - this process runs the cap again and reports the error
        return None


class _Queue:
    """The distinct caps not taken yet, longest first, shared by this process and the threads
    that feed the workers. ``close()``: no cap will be added (planning is done)."""

    def __init__(self) -> None:
        self._jobs: deque[tuple[tuple, Job]] = deque()
        self._open = True
        self._cond = threading.Condition()

    def put(self, key: tuple, job: Job) -> None:
        with self._cond:
            self._jobs.append((key, job))
            self._cond.notify()

    def put_first(self, key: tuple, job: Job) -> None:
        with self._cond:
            self._jobs.appendleft((key, job))
            self._cond.notify()

    def drop(self) -> None:
        with self._cond:
            self._jobs.clear()

    def close(self) -> None:
        with self._cond:
            self._open = False
            self._cond.notify_all()

    def take(self, wait: bool) -> tuple[tuple, Job] | None:
        """The next cap; None when there is none (``wait``: and none will be added)."""
        with self._cond:
            while wait and not self._jobs and self._open:
                self._cond.wait()
            return self._jobs.popleft() if self._jobs else None


class _Feeder(threading.Thread):
    """Hands one worker of ``pool`` a cap at a time from ``queue``, starting with ``first`` (a
    future already submitted); keeps what comes back in ``done``. It only waits and hands over.
    Ends when the queue is empty and closed, or the pool fails (a worker lost, shut down)."""

    def __init__(self, pool: ProcessPoolExecutor, queue: _Queue, first: tuple[tuple, Future] | None):
        super().__init__(name="tracekit-cap-feeder", daemon=True)
        self.pool, self.queue, self.first = pool, queue, first
        self.done: list[tuple[tuple, Any]] = []

    def run(self) -> None:
        current = self.first
        self.first = None
        try:
            while True:
                if current is None:
                    nxt = self.queue.take(wait=True)
                    if nxt is None:
                        return
                    current = (nxt[0], self.pool.submit(_schedule_one, nxt[1]))
                key, future = current
                self.done.append((key, future.result()))
                current = None
        except BaseException:  # noqa: BLE001 - pool broken or shut down: what is left is run here
            return


def schedule_in_workers(
    replayer: Any,
    wanted: list[tuple[float, bool]],
    compute_us: dict[str, float] | None,
    jobs: int,
    min_nodes: int | None = None,
    on_ready: Callable[[int], None] | None = None,
) -> int:
    """Schedule the ``(cap_mb, what_if)`` pairs of ``wanted`` whose schedules are distinct and
    not yet made, in this process and up to ``jobs - 1`` forked workers; the replayer keeps the
    results. Returns how many were made (none for a graph of fewer than ``min_nodes`` nodes, by
    default :data:`MIN_NODES`). ``on_ready(n)``: called here as schedules are made (by this
    process after each of its own, as the workers' come back), with how many of ``wanted``,
    counted with repeats, have theirs."""
    global _REPLAYER
    if len(replayer.gm.graph.nodes) < (MIN_NODES if min_nodes is None else min_nodes):
        return 0
    ctx = fork_context()
    if jobs < 2 or ctx is None:
        return 0
    repeats = Counter(wanted)
    # smallest cap first: more buckets, the longest schedule (see the module's docstring)
    pairs = sorted(repeats, key=lambda p: p[0])
    keys: dict[tuple[float, bool], tuple] = {}  # the pairs planned so far: their schedule's key

    def distinct(cap_mb: float, what_if: bool) -> tuple | None:
        key, _ = replayer.schedule_key(cap_mb, compute_us, what_if)
        new = not replayer.knows_schedule(key) and key not in keys.values()
        keys[cap_mb, what_if] = key
        return key if new else None

    # Fewer than two distinct caps are scheduled here, by the caller's loop. With one worker,
    # the first two are found and the rest planned while it runs; with more, every cap is
    # planned first, so that no more workers are forked than there are caps for them.
    todo: list[tuple[tuple, Job]] = []
    rest = iter(pairs)
    for cap_mb, what_if in rest:
        key = distinct(cap_mb, what_if)
        if key is not None:
            todo.append((key, (cap_mb, compute_us, what_if)))
            if len(todo) == 2 and jobs == 2:
                break
    if len(todo) < 2:
        return 0
    workers = min(jobs - 1, len(todo) - 1)
    replayer.register_groups()  # before the fork: the workers inherit the fake process groups
    _REPLAYER = replayer
    made = 0
    pool = None
    feeders: list[_Feeder] = []
    queue = _Queue()
    finished = False
    told = -1

    def tell() -> None:
        nonlocal told
        if on_ready is None:
            return
        back = {key for f in feeders for key, scheduled in list(f.done) if scheduled is not None}
        ready = sum(repeats[p] for p, key in keys.items() if key in back or replayer.knows_schedule(key))
        if ready != told:
            told = ready
            on_ready(ready)

    try:
        for job in todo[1:]:
            queue.put(*job)
        try:
            pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_start_worker)
            # the longest cap leaves at once; submitting forks the workers, from this thread
            first = (todo[0][0], pool.submit(_schedule_one, todo[0][1]))
        except (OSError, RuntimeError, BrokenProcessPool):  # no process could be made: all here
            queue.put_first(*todo[0])
        else:
            feeders = [_Feeder(pool, queue, first if i == 0 else None) for i in range(workers)]
            for feeder in feeders:
                feeder.start()
        for cap_mb, what_if in rest:  # planned here while the workers run
            key = distinct(cap_mb, what_if)
            if key is not None:
                queue.put(key, (cap_mb, compute_us, what_if))
        queue.close()
        while (taken := queue.take(wait=False)) is not None:
            cap_mb, _, what_if = taken[1]
            try:
                replayer.scheduled(cap_mb, compute_us, what_if)  # kept by the replayer
            except Exception:  # noqa: BLE001 - the caller's loop meets the same error, and says it
                continue
            made += 1
            tell()
        for feeder in feeders:
            while feeder.is_alive():  # the workers' last caps: progress as they come back
                feeder.join(0.25)
                tell()
        for feeder in feeders:
            for key, scheduled in feeder.done:
                if scheduled is not None:
                    replayer.keep_schedule(key, scheduled)
                    made += 1
        # a cap a lost worker had taken (the pool broken) is left to the caller's loop
        finished = True
    finally:
        _REPLAYER = None
        if not finished:
            queue.drop()  # an error or Ctrl-C here: nothing more is handed over
        queue.close()
        if pool is not None:
            end_pool(pool, kill=not finished)
        for feeder in feeders:
            feeder.join()
    tell()
    return made


__all__ = ["schedule_in_workers"]
