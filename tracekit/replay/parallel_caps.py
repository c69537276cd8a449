"""A graph's distinct caps scheduled side by side, in worker processes (``--jobs N``).

torch's overlap scheduler is most of a sweep's time, and each cap's run is independent of the
others: the same rebuilt graph, copied, pre-bucketed at the cap and scheduled. So once the graph
is rebuilt, :func:`schedule_in_workers` forks up to N workers (``concurrent.futures``'
``ProcessPoolExecutor``, as the reader's), which inherit the rebuilt graph and its planners, and
asks each for :meth:`GraphReplayer.scheduled` at some of the caps whose schedules differ. Their
results (plain dataclasses) come back pickled and are kept by the replayer under the same key a
run in this process keeps them under; the caps are then replayed in order, as with one job, and
find their schedule made. The output is the same byte for byte: the same functions compute it,
on the same inputs. A cap the scheduler refuses is left to this process, which meets the same
error and says it as a serial run does. Without ``fork`` (not Linux or macOS), for one job,
one distinct schedule or a small graph (:data:`MIN_NODES`), nothing is forked. The pool is
always shut down before :func:`schedule_in_workers` returns or raises (:func:`end_pool`; on an
error or Ctrl-C its workers are terminated first): no worker outlives the call, so none is
left when the command ends with ``os._exit`` (which would skip concurrent.futures' own exit hook).
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

#: Graphs smaller than this are scheduled here: their schedules take milliseconds, less than
#: starting workers (the fixture logs' graphs of 59-110 nodes: 6.4 s with one job, 8.5 s with
#: two; a 2,703-node graph's caps take 1-4 s each).
MIN_NODES = 1000

#: The replayer the forked workers inherit (set only while a pool runs).
_REPLAYER: Any = None


def _schedule_one(job: tuple[float, dict[str, float] | None, bool]) -> Any:
    """In a worker: the schedule at one cap, or None when the scheduler refused it."""
    cap_mb, compute_us, what_if = job
    try:
        return _REPLAYER.scheduled(cap_mb, compute_us, what_if)
    except Exception:  # noqa: BLE001 - this process runs the cap again and reports the error
        return None


def schedule_in_workers(
    replayer: Any,
    wanted: list[tuple[float, bool]],
    compute_us: dict[str, float] | None,
    jobs: int,
    min_nodes: int | None = None,
) -> int:
    """Schedule the ``(cap_mb, what_if)`` pairs of ``wanted`` whose schedules are distinct and
    not yet made, in up to ``jobs`` forked workers; the replayer keeps the results. Returns
    how many were made (none for a graph of fewer than ``min_nodes`` nodes, by default
    :data:`MIN_NODES`)."""
    global _REPLAYER
    if len(replayer.gm.graph.nodes) < (MIN_NODES if min_nodes is None else min_nodes):
        return 0
    todo: dict[tuple, tuple[float, dict[str, float] | None, bool]] = {}
    for cap_mb, what_if in wanted:
        key, _ = replayer.schedule_key(cap_mb, compute_us, what_if)
        if not replayer.knows_schedule(key) and key not in todo:
            todo[key] = (cap_mb, compute_us, what_if)
    if jobs < 2 or len(todo) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return 0
    replayer.register_groups()  # before the fork: the workers inherit the fake process groups
    _REPLAYER = replayer
    made = 0
    pool = None
    finished = False
    try:
        ctx = multiprocessing.get_context("fork")
        pool = ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=ctx)
        for key, scheduled in zip(todo, pool.map(_schedule_one, todo.values()), strict=True):
            if scheduled is not None:
                replayer.keep_schedule(key, scheduled)
                made += 1
        finished = True
    except (BrokenProcessPool, OSError):  # a worker lost (killed, no memory), no fork: the rest here
        finished = True
    finally:
        _REPLAYER = None
        if pool is not None:
            end_pool(pool, kill=not finished)
    return made


def end_pool(pool: ProcessPoolExecutor, kill: bool) -> None:
    """Shut ``pool`` down and wait for its workers to exit, so that none outlives the call.

    ``kill`` (an error or Ctrl-C in this process while workers still run): the queued caps are
    cancelled and the workers terminated first, as their schedules would only be thrown away.
    Otherwise the workers are idle and exit when told."""
    if kill:
        # concurrent.futures has no public way to stop a running task before Python 3.14's
        # terminate_workers(): its processes, as the executor keeps them
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            if process.is_alive():
                process.terminate()
    pool.shutdown(wait=True, cancel_futures=True)


__all__ = ["end_pool", "schedule_in_workers"]
