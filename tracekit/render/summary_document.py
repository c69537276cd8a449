"""Summarize's document, said: what the analysis found
(:func:`tracekit.analyze.summarize.summary_findings`) with its verdict and notes in words
(:mod:`tracekit.render.summary_words`), the ``tracekit.summary/2`` JSON document every output
of summarize and report is made from."""

from __future__ import annotations

from typing import Any

from tracekit.analyze.summarize import summary_findings
from tracekit.model import Run
from tracekit.render.summary_words import note_text, verdict_dict


def summary_document(run: Run, *, per_rank: bool = False, with_ranks: bool = True) -> dict[str, Any]:
    """The ``tracekit.summary/2`` JSON document of a Run: world, verdict (``{status, text, ...}``),
    rank groups (ranks with identical outcomes), totals, divergence, did-nothing graphs, notes,
    diagnostics; rank sets as ranges. ``per_rank``: also ``ranks``, one entry per rank with its
    files and where each graph was read (``with_ranks=False`` leaves it to
    :func:`tracekit.render.summary_json.write_summary_json`)."""
    doc = summary_findings(run, per_rank=per_rank, with_ranks=with_ranks)
    doc["verdict"] = verdict_dict(doc["verdict"])
    doc["notes"] = [note_text(f) for f in doc["notes"]]
    return doc
