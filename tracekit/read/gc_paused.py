"""``@gc_paused``: run a function with Python's cyclic garbage collector paused.

Reading logs builds many small objects (per rank: graphs, collective sizes, counts) and no
reference cycles, so the collector's passes over them find nothing: at 8,192 rank logs they
were a fifth of the reading time, and the more objects are kept, the longer each pass takes.
Reference counting still frees everything as usual; the collector is resumed (if it was on)
when the function returns or raises, so a caller's own cycles are collected afterwards.

    @gc_paused
    def load(paths): ...
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def gc_paused(fn: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        was_on = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if was_on:
                gc.enable()

    return wrapper
