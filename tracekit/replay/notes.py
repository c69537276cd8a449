"""The notes a replay or explain document carries (its ``notes``): why there was nothing to
work on (:func:`nothing_selected`, as data the commands say, or :class:`NoLog` when the input
holds no compile log at all), what the reader set aside (:func:`bad_input_note`), and how far
the hardware what-ifs reach (:data:`WHAT_IF_REACH`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracekit.model.findings import Finding
from tracekit.model.nouns import plural

#: Where the hardware what-ifs stop, said with any overlap figure: torch's overlap scheduler
#: times collectives with its NCCL model of the logged process group, not the what-if hardware.
WHAT_IF_REACH = (
    "--interconnect, --group-size and --gpus-per-node reach every figure: the pre-bucketing comm "
    "estimates, the auto cap, torch's overlap scheduler (its NCCL model answers for the what-if "
    "hardware), the step, the Pareto front and the recommendation; the step's recorded row is the "
    "recorded cap on that hardware, the per-graph 'recorded' rows stay as logged (the "
    "reproduction); compute times stay the log's"
)


class NoLog(ValueError):
    """Nothing in the input looked like a compile log; the message is the one line
    ``tracekit summarize`` fails with (:func:`tracekit.read.reader.no_log_detail`, unescaped)."""


def nothing_selected(paths: Sequence[str]) -> Finding:
    """Replay or explain found nothing to work on in ``paths``: read them once more (this path
    only) and find why (:func:`tracekit.analyze.notes.why_no_outcome`: nothing to do is no
    finding; the commands say it, :func:`tracekit.render.summary_words.said_notes`). Raises
    :class:`NoLog` when they hold no compile log."""
    from tracekit.analyze.notes import why_no_outcome
    from tracekit.read.reader import holds_compile_log, load, no_log_detail

    run = load(list(paths), jobs=1)
    if not holds_compile_log(run):
        raise NoLog(no_log_detail(run))
    return why_no_outcome(run)


def bad_input_note(diag: Any) -> str:
    """The note replay and explain add when the reader set inputs aside: '3 bad inputs while reading: k=v, ...'."""
    counts = ", ".join(f"{k}={v}" for k, v in sorted(diag.counts.items()))
    return f"{plural(diag.total, 'bad input')} while reading: {counts}"


__all__ = ["WHAT_IF_REACH", "NoLog", "bad_input_note", "nothing_selected"]
