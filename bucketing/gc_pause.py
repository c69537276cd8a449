"""``gc_paused()``: Python's cyclic garbage collector paused while a block or a function runs;
``young_collections()``: only its youngest generation collected, often, while a block runs.

Torch-free (``import bucketing.gc_pause`` imports no torch), so the log reader uses it too.
It lives here, not in ``tracekit``, because ``bucketing`` never imports ``tracekit`` (the pass
installs into a training job without the log tools) while ``tracekit`` may import the
torch-free part of ``bucketing`` (``tests/project/test_structure.py``: its stage "torch-free
bucketing"); the passes (``prebucket``, ``plan``), replay and the reader all pause the
collector, so the one module both packages reach is this one. A third top-level package for
these 70 lines would be one more thing to install, type-check and lint, for no import it
allows that this one does not.
Reading logs, rebuilding a graph from its text and planning buckets all make many small objects
and no reference cycles, next to large live ones; the collector's passes over them find nothing
and dominate (5,000 layers planned: 13 s instead of 6.5 s; at 8,192 rank logs a fifth of the
reading time; rebuilding a 5,000-collective graph: 2.5x the parse time). Reference counting
still frees everything as usual; the collector is resumed (if it was on) when the block ends or
raises, and garbage made meanwhile is collected then.

    with gc_paused():
        plan(gm)

    @gc_paused()
    def load(paths): ...

A block that makes many short-lived reference cycles is the opposite case: torch's overlap
scheduler leaves about 280,000 cyclic objects a run on a 1,000-layer graph (``tree_flatten``'s
recursive ``helper`` closure, one per call). Left to the paused collector, they were collected
in one pass over 400,000 objects when it resumed, 0.25-0.3 s a run; collected a few hundred at
a time while the scheduler runs, still in the CPU's caches, they cost 0.04 s::

    before: with gc_paused(): copy; pre-bucket; OverlapScheduler(gm).run(); walk   # one big pass
    after:  with gc_paused(): copy; pre-bucket
                with young_collections(): OverlapScheduler(gm).run()          # small passes
                walk
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

#: Older generations are not collected inside :func:`young_collections` (Python counts up to it).
_NEVER = 2**31 - 1


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block (or, as ``@gc_paused()``, the function);
    a collector the caller had turned off stays off."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextlib.contextmanager
def young_collections() -> Iterator[None]:
    """Collect the youngest generation as objects are made while the block runs, and nothing
    older; the collector's state and thresholds are put back when the block ends or raises.

    On entry the youngest generation is collected once, so that what the caller made before the
    block (a graph copy, alive) is not walked by the block's collections: their cost is the
    block's own garbage. A block's survivors move to the next generation, which its usual
    threshold collects after the block. The collector runs inside the block even if it was
    paused or off outside it; the block's own allocations decide when (Python's first threshold,
    700 unless set)."""
    enabled = gc.isenabled()
    threshold = gc.get_threshold()
    gc.collect(0)
    gc.set_threshold(threshold[0] or 700, _NEVER, _NEVER)
    gc.enable()
    try:
        yield
    finally:
        if not enabled:
            gc.disable()
        gc.set_threshold(*threshold)
