"""Notes: remarks on what the logs hold, true to them (why a run has no bucketing outcome at
all: cache hits, no FSDP pre-bucketing, an older torch, no compile), as data
(:class:`~tracekit.model.findings.Finding`; their words are
:mod:`tracekit.render.summary_words`'), and :func:`why_no_outcome`, the same cause for replay
and explain.
"""

from __future__ import annotations

from typing import Any

from bucketing.compat import TESTED_TORCH
from tracekit.analyze.compiled_regions import compiled_regions, failed_frames, holds_no_collective, is_fsdp2
from tracekit.analyze.totals import totals
from tracekit.model import Run
from tracekit.model.findings import Finding

#: Releases whose logs tracekit was tested on (``2.13``, ``2.14``, ``2.15``): each logs a
#: ``before_post_grad_graph`` for every graph inductor compiles.
TESTED_RELEASES = tuple(".".join(v.split(".")[:2]) for v in TESTED_TORCH)


def notes(run: Run, t: dict[str, Any] | None = None) -> list[Finding]:
    """The notes of a summary, as data (said by :func:`tracekit.render.summary_words.note_text`): e.g. why a run has no bucketing outcome at all (``t``: the
    run's :func:`totals`, when the caller has them already)."""
    out: list[Finding] = []
    if t is None:
        t = totals(run)
    if not run.ranks and run.unplaced:
        out.append(Finding("no_rank_read", {"files": len(run.unplaced)}))
    elif not run.ranks:
        out.append(Finding("no_entries"))
    elif t["graphs"] == 0:
        regions = compiled_regions(run)
        if t["cache_hits"]:
            out.append(Finding("all_cache_hits", {"graphs": t["cache_hits"]}))
        elif t["compiled_graphs"] and regions is not None and holds_no_collective(regions):
            out.append(Finding("no_collective", {"regions": regions}))
            if is_fsdp2(regions):
                out.append(Finding("fsdp2", {"regions": regions}))
        elif t["compiled_graphs"]:
            out.append(Finding("no_fsdp_prebucketing", {"graphs": t["compiled_graphs"]}))
        elif t["compiles"]:
            versions = sorted({r.torch_version for r in run.ranks if r.torch_version})
            # the tested releases log them: the compiles stopped
            tested = bool(versions) and all(v.startswith(TESTED_RELEASES) for v in versions)
            out.append(
                Finding("no_post_grad", {"compiles": t["compiles"], "versions": versions, "tested": tested})
            )
        else:
            out.append(Finding("no_compile"))
        if regions is not None and failed_frames(regions):
            out.append(Finding("frames_failed", {"regions": regions}))
    elif t["cache_hits"]:
        out.append(Finding("cache_hits", {"graphs": t["cache_hits"]}))
    return out


#: The notes that say why a run has no bucketing outcome at all (:func:`why_no_outcome`).
NO_OUTCOME = frozenset(
    {
        "no_rank_read",
        "no_entries",
        "all_cache_hits",
        "no_collective",
        "no_fsdp_prebucketing",
        "no_post_grad",
        "no_compile",
    }
)


def why_no_outcome(run: Run) -> Finding:
    """Why ``run`` gives replay or explain no recorded bucketing outcome to work on, as data
    (said by :func:`tracekit.render.summary_words.no_outcome_text`): ``no_outcome`` with the
    ``notes`` :func:`notes` finds for it (cache hits, no FSDP pre-bucketing, an older torch, no
    compile; FSDP2's reason with it), none when the logs have outcomes the selection missed."""
    found = notes(run)
    cause = [f for f in found if f.kind in NO_OUTCOME]
    return Finding(
        "no_outcome", {"notes": [cause[0], *(f for f in found if f.kind == "fsdp2")] if cause else []}
    )
