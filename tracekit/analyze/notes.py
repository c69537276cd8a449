"""Notes: plain-language remarks on what the logs hold, true to them (why a run has no
bucketing outcome at all: cache hits, no FSDP pre-bucketing, an older torch, no compile), and
:func:`why_no_outcome`, the same cause said to replay and explain.
"""

from __future__ import annotations

from typing import Any

from bucketing.compat import TESTED_TORCH
from tracekit.analyze.compiled_regions import compiled_regions, failures_text, fsdp2_text, no_collective_text
from tracekit.analyze.totals import totals
from tracekit.model import Run
from tracekit.model.findings import Finding

#: Releases whose logs tracekit was tested on (``2.13``, ``2.14``, ``2.15``): each logs a
#: ``before_post_grad_graph`` for every graph inductor compiles.
TESTED_RELEASES = tuple(".".join(v.split(".")[:2]) for v in TESTED_TORCH)


def notes(run: Run, t: dict[str, Any] | None = None) -> list[str]:
    """Plain-language remarks, true to what the logs hold: :func:`note_findings`, each said by
    :func:`note_text`."""
    return [note_text(f) for f in note_findings(run, t)]


def note_findings(run: Run, t: dict[str, Any] | None = None) -> list[Finding]:
    """What the notes say, as data: e.g. why a run has no bucketing outcome at all (``t``: the
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
        elif t["compiled_graphs"] and regions is not None and no_collective_text(regions) is not None:
            out.append(Finding("no_collective", {"regions": regions}))
            if fsdp2_text(regions):
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
        if regions is not None and failures_text(regions):
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


def note_text(f: Finding, *, command: str = "") -> str:
    """One note in words; ``command``: the command whose section a note points at, when it is
    said by another (``Compiled regions in tracekit summarize``)."""
    x = f.values
    regions = f"Compiled regions{' in ' + command if command else ''}"
    if f.kind == "no_rank_read":
        k = x["files"]
        return f"no rank read: {k} file{'s are' if k != 1 else ' is'} no rank log (see Diagnostics)"
    if f.kind == "no_entries":
        return "no log entries read"
    if f.kind == "all_cache_hits":
        return (
            f"no bucketing recorded: {_graphs_were(x['graphs'])} inductor cache hits "
            "(the cache skips the post-grad passes); re-run with caches disabled "
            "(torch._inductor.config.force_disable_caches = True)"
        )
    if f.kind == "no_collective":
        return f"no bucketing recorded: {no_collective_text(x['regions'])}; see {regions}"
    if f.kind == "fsdp2":
        return str(fsdp2_text(x["regions"]))
    if f.kind == "no_fsdp_prebucketing":
        n = x["graphs"]
        return (
            f"no bucketing recorded: {n} graph{'' if n == 1 else 's'} went through the post-grad "
            "passes without FSDP collectives pre-bucketing (is "
            "aten_distributed_optimizations.enable_overlap_scheduling on, and are the "
            "all-gathers FSDP ones?)"
        )
    if f.kind == "no_post_grad":
        versions, n = x["versions"], x["compiles"]
        head = (
            f"no bucketing recorded: {n} compile{' was' if n == 1 else 's were'} "
            "logged, but no graph reached the post-grad passes' log (no before_post_grad_graph): "
        )
        if x["tested"]:
            why = (
                f"torch {', '.join(versions)} logs one for every graph inductor compiles, so the compiles "
                "stopped before inductor's post-grad passes (an error, a graph break with nothing to "
                "compile, or another backend)"
            )
        else:
            torch = f"torch {', '.join(versions)}" if versions else "a torch that does not say its version"
            why = (
                f"{torch} may not log them (tracekit reads the logs of torch {', '.join(TESTED_RELEASES)}), "
                "or the compiles stopped before inductor"
            )
        return head + why
    if f.kind == "no_compile":
        return (
            "no bucketing recorded: the logs hold no compile (no dynamo_start entry); "
            "were they written with TORCH_TRACE set?"
        )
    if f.kind == "frames_failed":
        return f"{failures_text(x['regions'])}; see {regions}"
    if f.kind == "cache_hits":
        return (
            f"{_graphs_were(x['graphs'])} inductor cache hits and have no bucketing record; "
            "re-run with caches disabled to see them"
        )
    raise ValueError(f"no words for a note of kind {f.kind!r}")


def why_no_outcome(run: Run) -> str:
    """Why ``run`` gives replay or explain no recorded bucketing outcome to work on: the cause
    :func:`note_findings` finds (cache hits, no FSDP pre-bucketing, an older torch, no compile)."""
    found = note_findings(run)
    cause = [f for f in found if f.kind in NO_OUTCOME]
    if cause:
        # summarize's section, named as the command that has it; FSDP2's reason said with it
        return "; ".join(
            note_text(f, command="tracekit summarize")
            for f in [cause[0], *(f for f in found if f.kind == "fsdp2")]
        )
    return (
        "no recorded pre_bucketing_fsdp_collectives outcome matched the selection "
        "(--rank, --graph): see tracekit summarize for the graphs there are"
    )


def _graphs_were(n: int) -> str:
    """``1 graph was`` / ``3 graphs were``."""
    return f"{n} graph was" if n == 1 else f"{n} graphs were"
