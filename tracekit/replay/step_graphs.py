"""Which graphs make one step: one graph per frame and pass, the latest compile of each frame.

A run with a graph break has several frames (compile ids ``0/0`` and ``1/0``); a recompile gives
a frame a new compile (``0/1``), which replaces the older one from then on. A training step runs
each frame's graphs once: its forward (graph index 0) and its backward (1), of one compile. So
the step takes, for each frame and graph index, the graph of the frame's latest compile (the
highest ``frame_compile_id``, then the highest attempt); the graphs of earlier compiles are left
out of its sums and listed. Torch-free.

    step_labels(["0/0:0", "0/0:1", "0/1:0", "0/1:1", "1/0:0", "1/0:1", "1/1:0", "1/1:1"])
    -> {"0/1:0", "0/1:1", "1/1:0", "1/1:1"}
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# [!{compiled_autograd_id}/]{frame_id}/{frame_compile_id}[_{attempt}]
_COMPILE_ID = re.compile(r"^\[?(?:!(\d+)/)?(\d+)/(\d+)(?:_(\d+))?\]?$")


def _key(label: str) -> tuple[tuple[str, ...], tuple[int, int]]:
    """``(frame and pass, compile order)`` of a graph label ``compile_id:graph_index``; a
    compile id that does not parse is a frame of its own."""
    cid, _, index = label.rpartition(":")
    m = _COMPILE_ID.match(cid)
    if m is None:
        return (cid, index), (0, 0)
    ca, frame, compile_, attempt = m.groups()
    return (ca or "", frame, index), (int(compile_), int(attempt or 0))


def step_labels(labels: Iterable[str]) -> set[str]:
    """The labels (``compile_id:graph_index``) of the graphs one step runs: for each frame and
    graph index, the latest compile's."""
    best: dict[tuple[str, ...], tuple[tuple[int, int], str]] = {}
    for label in labels:
        where, order = _key(label)
        if where not in best or order > best[where][0]:
            best[where] = (order, label)
    return {label for _order, label in best.values()}


def compiles_taken(labels: Iterable[str]) -> list[str]:
    """The compile ids of the step's graphs (:func:`step_labels`), in order."""
    return sorted({lab.rpartition(":")[0] for lab in step_labels(labels)}, key=_compile_order)


def in_compile_order(labels: Iterable[str]) -> list[str]:
    """Graph labels (or compile ids) sorted by frame, compile, then graph index."""
    return sorted(labels, key=_compile_order)


def _compile_order(cid: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", cid))


__all__ = ["compiles_taken", "in_compile_order", "step_labels"]
