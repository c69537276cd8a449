"""What the reader's and replay's process pools share: how their workers are made and how a
pool is ended so that none of its workers outlives it.

Both fork their workers (they start at once with what this process has imported; replay's
inherit the rebuilt graph), leave Ctrl-C to this process, and end the pool on every path::

    pool = ProcessPoolExecutor(n, mp_context=fork_context(), initializer=ignore_sigint)
    try: ...
    finally: end_pool(pool, kill=interrupted)
"""

from __future__ import annotations

import multiprocessing
import signal
from concurrent.futures import ProcessPoolExecutor
from multiprocessing.context import BaseContext


def fork_context() -> BaseContext | None:
    """The ``fork`` start method where there is one, else None."""
    return multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None


def ignore_sigint() -> None:
    """In a worker: Ctrl-C (sent to the whole process group) is the parent's to handle; it ends
    the pool, and a worker's result is then never read."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def end_pool(pool: ProcessPoolExecutor, kill: bool = False) -> None:
    """Shut ``pool`` down and wait for its workers to exit, so that none outlives the call.

    ``kill`` (an error or Ctrl-C in this process while workers still run): the queued work is
    cancelled and the workers terminated first, as their results would only be thrown away;
    otherwise a task being run is let finish. A pool that could fork only some of its workers
    never started the thread that ends them (``shutdown`` then leaves them waiting for work,
    and the interpreter's exit waits for them forever): those are terminated here. Python 3.14
    has ``terminate_workers``; before it, the pool's processes are only in ``_processes``."""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    if kill:
        for process in workers:
            if process.is_alive():
                process.terminate()
    try:
        pool.shutdown(wait=True, cancel_futures=True)
    finally:
        for process in workers:
            if process.is_alive():
                process.terminate()
            process.join()


__all__ = ["end_pool", "fork_context", "ignore_sigint"]
