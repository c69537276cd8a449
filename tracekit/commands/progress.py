"""A progress bar on stderr for long reads, shown only when stderr is a terminal.

Never writes to stdout (so JSON output stays clean) and draws nothing when stderr is a file or
a pipe. Use as the ``progress`` callback of :func:`tracekit.read.reader.load`::

    with ProgressBar() as bar:
        run = load(paths, progress=bar)
"""

from __future__ import annotations

import sys
import time
from typing import IO

#: MB here are those of every table: 2^20 bytes (docs/output.md, "Units").
MB = 1 << 20


class ProgressBar:
    """``bar(done_bytes, total_bytes)`` redraws at most ten times a second. With ``unit`` set
    (``"graphs"``), ``done`` and ``total`` are counts of it, not bytes; :meth:`say` shows a
    phase that has no count (``importing torch``) until the bar draws or closes."""

    def __init__(
        self,
        stream: IO[str] | None = None,
        label: str = "reading",
        width: int = 30,
        min_total: int = 32 << 20,
        unit: str | None = None,
    ) -> None:
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.label = label
        self.width = width
        self.min_total = min_total  # smaller reads finish too fast to need a bar
        try:
            self.enabled = bool(self.stream.isatty())
        except (AttributeError, ValueError):
            self.enabled = False
        self._last = 0.0
        self._drawn = False

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total < self.min_total:
            return
        now = time.monotonic()
        if now - self._last < 0.1 and done < total:
            return
        self._last = now
        frac = min(1.0, done / total) if total else 1.0
        filled = int(frac * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        if self.unit is None:
            amount = f"{done / MB:,.0f}/{total / MB:,.0f} MB"
        else:
            amount = f"{done:,}/{total:,} {self.unit}"
        self._clear()
        self.stream.write(f"\r{self.label} [{bar}] {frac * 100:5.1f}% {amount}")
        self.stream.flush()
        self._drawn = True

    @property
    def wanted(self) -> ProgressBar | None:
        """This bar as a reader's ``progress`` callback, or None when it draws nothing (not on a
        terminal): a reader that has no bar to feed need not take its files' sizes for a total
        (100,000 small rank logs: a ``stat`` each)."""
        return self if self.enabled else None

    def say(self, text: str) -> None:
        """One line of status (``importing torch...``) on a terminal, replaced by what comes next."""
        if not self.enabled:
            return
        self._clear()
        self.stream.write(f"\r{text}\r")  # the cursor back at the start: any line after covers it
        self.stream.flush()
        self._drawn = True

    def _clear(self) -> None:
        if self._drawn:
            self.stream.write("\r" + " " * (self.width + 50) + "\r")
            self._drawn = False

    def close(self) -> None:
        if self._drawn:
            self._clear()
            self.stream.flush()

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def note_loading_torch(stream: IO[str] | None = None, bar: ProgressBar | None = None) -> None:
    """Say, on a terminal, that torch is loading (``replay`` and ``explain`` import it: a few
    seconds on a cold start, with nothing else on the screen); nothing once it is loaded, or
    when stderr is a file or a pipe. Called first thing in the command, before the imports
    that pull torch in. Given the command's ``bar``, the note is its status line, cleared by
    what the bar shows next or by its close: no "loading torch" left on the screen."""
    if "torch" in sys.modules:
        return
    if bar is not None:
        bar.say("tracekit: loading torch…")
        return
    stream = stream if stream is not None else sys.stderr
    try:
        if not stream.isatty():
            return
        stream.write("tracekit: loading torch…\n")
        stream.flush()
    except (AttributeError, ValueError, OSError):
        pass
