"""The graphs that replay and explain read: the logs' rebuildable graphs and those torch never
pre-bucketed, selected by rank and compile id, with a bar of bytes read on a terminal; a
selection that matches nothing ends the command (exit 2) in its own words."""

from __future__ import annotations

from typing import Any

from tracekit.commands.options import BAD_INPUT, fail
from tracekit.commands.progress import ProgressBar
from tracekit.model.words import plural


def read_graph_sources(command: str, paths: list[str], status: ProgressBar, **selection: Any) -> list[Any]:
    """``replay_sources_for(paths, **selection)`` read with graph_and_not_prebucketed_sources:
    graph sources and :class:`~tracekit.read.pairing.NotPrebucketedSource` in log order.
    ``selection``: rank, all_ranks, graphs (selectors), diagnostics. On a SelectionError both
    bars are closed and ``command`` fails with its message."""
    from tracekit.read.reader import graph_and_not_prebucketed_sources
    from tracekit.replay.selection import SelectionError, replay_sources_for

    status.say("reading the logs ...")
    reading = ProgressBar()  # large inputs: a bar of bytes read (on a terminal only)
    try:
        mixed = replay_sources_for(
            paths, reader=graph_and_not_prebucketed_sources, progress=reading, **selection
        )
    except SelectionError as e:
        reading.close()
        status.close()
        fail(command, str(e), BAD_INPUT)
    reading.close()
    return list(mixed)


def bad_input_note(diag: Any) -> str:
    """The note replay and explain add when the reader set inputs aside: '3 bad inputs while reading: k=v, ...'."""
    counts = ", ".join(f"{k}={v}" for k, v in sorted(diag.counts.items()))
    return f"{plural(diag.total, 'bad input')} while reading: {counts}"
