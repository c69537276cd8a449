"""Switches that turn off one piece of the reader's speed machinery each, read from the
environment when tracekit is imported, so that ``bench/bench_machinery.py`` can time each piece
against the reader without it, side by side in one run (docs/performance.md). Output is the
same either way: only the time and memory change.

- ``TRACEKIT_NO_NATIVE=1``: the scanner's C inner loop (``tracekit/read/_scan.c``) is not used;
  its regex decides (:data:`tracekit.read.envelopes.NATIVE`).
- ``TRACEKIT_NO_SEGMENTS=1``: a large uncompressed file is read whole by one process, not cut
  into segments read in parallel (:func:`tracekit.read.segments.segment_count`).
"""

from __future__ import annotations

import os


def _on(name: str) -> bool:
    return not os.environ.get(f"TRACEKIT_NO_{name}")


SEGMENTS = _on("SEGMENTS")
