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

#: Releases whose logs tracekit was tested on (``2.13``, ``2.14``, ``2.15``): each logs a
#: ``before_post_grad_graph`` for every graph inductor compiles.
TESTED_RELEASES = tuple(".".join(v.split(".")[:2]) for v in TESTED_TORCH)


def notes(run: Run, t: dict[str, Any] | None = None) -> list[str]:
    """Plain-language remarks, true to what the logs hold: e.g. why a run has no bucketing
    outcome at all (``t``: the run's :func:`totals`, when the caller has them already)."""
    out: list[str] = []
    if t is None:
        t = totals(run)
    if not run.ranks and run.unplaced:
        k = len(run.unplaced)
        out.append(f"no rank read: {k} file{'s are' if k != 1 else ' is'} no rank log (see Diagnostics)")
    elif not run.ranks:
        out.append("no log entries read")
    elif t["graphs"] == 0:
        if t["cache_hits"]:
            out.append(
                f"no bucketing recorded: {_graphs_were(t['cache_hits'])} inductor cache hits "
                "(the cache skips the post-grad passes); re-run with caches disabled "
                "(torch._inductor.config.force_disable_caches = True)"
            )
        elif t["compiled_graphs"] and _no_collective(run):
            out += _no_collective(run)
        elif t["compiled_graphs"]:
            out.append(
                f"no bucketing recorded: {t['compiled_graphs']} graph{'' if t['compiled_graphs'] == 1 else 's'} went through the post-grad "
                "passes without FSDP collectives pre-bucketing (is "
                "aten_distributed_optimizations.enable_overlap_scheduling on, and are the "
                "all-gathers FSDP ones?)"
            )
        elif t["compiles"]:
            versions = sorted({r.torch_version for r in run.ranks if r.torch_version})
            head = (
                f"no bucketing recorded: {t['compiles']} compile{' was' if t['compiles'] == 1 else 's were'} "
                "logged, but no graph reached the post-grad passes' log (no before_post_grad_graph): "
            )
            if versions and all(
                v.startswith(TESTED_RELEASES) for v in versions
            ):  # the tested releases log them: the compiles stopped
                why = (
                    f"torch {', '.join(versions)} logs one for every graph inductor compiles, so the compiles "
                    "stopped before inductor's post-grad passes (an error, a graph break with nothing to "
                    "compile, or another backend)"
                )
            else:
                torch = (
                    f"torch {', '.join(versions)}" if versions else "a torch that does not say its version"
                )
                why = (
                    f"{torch} may not log them (tracekit reads the logs of torch {', '.join(TESTED_RELEASES)}), "
                    "or the compiles stopped before inductor"
                )
            out.append(head + why)
        else:
            out.append(
                "no bucketing recorded: the logs hold no compile (no dynamo_start entry); "
                "were they written with TORCH_TRACE set?"
            )
        out += _failure_notes(run)
    elif t["cache_hits"]:
        out.append(
            f"{_graphs_were(t['cache_hits'])} inductor cache hits and have no bucketing record; "
            "re-run with caches disabled to see them"
        )
    return out


def _no_collective(run: Run) -> list[str]:
    """The notes of a run whose compiled graphs hold no collective (:mod:`tracekit.analyze.compiled_regions`):
    that, and what FSDP2's graph breaks say; empty when some graph holds one."""
    regions = compiled_regions(run)
    text = None if regions is None else no_collective_text(regions)
    if regions is None or text is None:
        return []
    fsdp2 = fsdp2_text(regions)
    return [f"no bucketing recorded: {text}; see Compiled regions"] + ([fsdp2] if fsdp2 else [])


def _failure_notes(run: Run) -> list[str]:
    """One note on the frame compiles that failed, when some did (:func:`tracekit.analyze.compiled_regions.failures_text`)."""
    regions = compiled_regions(run)
    text = None if regions is None else failures_text(regions)
    return [f"{text}; see Compiled regions"] if text else []


def why_no_outcome(run: Run) -> str:
    """Why ``run`` gives replay or explain no recorded bucketing outcome to work on: the cause
    :func:`notes` finds (cache hits, no FSDP pre-bucketing, an older torch, no compile)."""
    all_notes = notes(run)
    found = [n for n in all_notes if n.startswith(("no bucketing recorded", "no rank read", "no log"))]
    if found:
        # summarize's section, named as the command that has it; FSDP2's reason said with it
        fsdp2 = [n for n in all_notes if n.startswith("FSDP2")]
        return "; ".join(
            [
                found[0].replace("; see Compiled regions", "; see Compiled regions in tracekit summarize"),
                *fsdp2,
            ]
        )
    return (
        "no recorded pre_bucketing_fsdp_collectives outcome matched the selection "
        "(--rank, --graph): see tracekit summarize for the graphs there are"
    )


def _graphs_were(n: int) -> str:
    """``1 graph was`` / ``3 graphs were``."""
    return f"{n} graph was" if n == 1 else f"{n} graphs were"
