"""The verdict: what summarize says first, and its status; the one verdict function.

:func:`verdict` weighs what the analysis found (:mod:`tracekit.analyze.summarize`: divergence
across ranks, the world, totals, graphs never pre-bucketed, collectives on mesh groups
pre-bucketing never sees) and returns it as data, a :class:`~tracekit.model.findings.Verdict`:
``diverge``, ``incomplete``, ``agree`` or ``no_data``, with its clauses (the findings added
whatever the status). It weighs plain facts (:class:`RunFacts`), read off a Run
(:func:`run_facts`, for the summary document) or off an older saved document that has no
verdict (:func:`tracekit.analyze.documents.document_verdict`, for the report page). Its words,
the document's ``verdict.text``, are :mod:`tracekit.render.summary_words`'. :func:`any_divergence`
says, in a few words, what divergence a summary document reports (``summarize
--fail-on-divergence``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tracekit.analyze.compiled_regions import compiled_regions, holds_no_collective, is_fsdp2
from tracekit.analyze.cut_logs import cut_logs
from tracekit.analyze.run_mix import mix_text
from tracekit.model import SHORT_NAMES, Graph, Run
from tracekit.model.findings import Finding, Verdict
from tracekit.model.nouns import plural
from tracekit.model.rankset import format_ranks, rank_list


@dataclass(frozen=True)
class RunFacts:
    """What the verdict weighs of a run besides the analysis's items: how many ranks were read,
    the graphs with an outcome (by compile id and index) and their caps, the cut logs
    (:func:`tracekit.analyze.cut_logs.cut_logs`), the frames compiled when no graph has an outcome
    (:func:`tracekit.analyze.compiled_regions.compiled_regions`), and the bad input counted.
    :func:`run_facts` reads them off a Run; :mod:`tracekit.analyze.documents` off an older saved
    document."""

    ranks: int
    graph_keys: frozenset[tuple[Any, Any]]
    caps: tuple[Any, ...]
    cut: dict[str, Any] | None = None  # cut logs (tracekit.analyze.cut_logs.cut_logs)
    regions: dict[str, Any] | None = None
    bad_inputs: int = 0
    mix: str = ""  # settings one job shares that differ between the ranks (tracekit.analyze.run_mix)
    #: shorter logs that end after a whole compile (tracekit.analyze.cut_logs.shorter_logs)
    readings: dict[str, Any] | None = None
    #: (collectives that stayed unmerged, at least; collectives that could merge), over the
    #: distinct graphs (:func:`unmerged_counts`); (0, 0) when not known (an older document)
    unmerged: tuple[int, int] = (0, 0)


def run_facts(run: Run, graphs: Iterable[Graph], no_outcome: bool) -> RunFacts:
    """The :class:`RunFacts` of ``run``; ``graphs``: every distinct graph of its ranks (those
    of its rank groups); ``no_outcome``: no graph has one (the compiled frames are then read)."""
    keys: set[tuple[Any, Any]] = set()
    caps = set()
    distinct = []
    for g in graphs:
        keys.add(g.key)
        caps.add(g.bucket_cap_mb)
        distinct.append(g)
    return RunFacts(
        ranks=len(run.ranks),
        graph_keys=frozenset(keys),
        caps=tuple(sorted(caps)),
        cut=cut_logs(run),
        regions=compiled_regions(run) if no_outcome else None,
        bad_inputs=run.diagnostics.total,
        mix=mix_text(run),
        unmerged=unmerged_counts(distinct),
    )


def stayed_unmerged(g: Graph, kind: str) -> int:
    """How many of ``g``'s collectives of ``kind`` pre-bucketing left alone, at least: exactly
    when both size lists were logged (an unmerged collective keeps its node's name in
    ``pre_bucketing_collective_sizes_after``, a bucket gets a new one); else the least the
    counts allow (``before`` B -> ``after`` A: at most B - A buckets of two or more, so at
    least 2A - B stayed alone; all B when A == B). 0 for a kind with fewer than two."""
    c = g.collectives.get(kind)
    if c is None or c.before < 2:
        return 0
    if c.after >= c.before:
        return c.before
    short = SHORT_NAMES[kind]
    if g.sizes_mb is not None and g.sizes_mb.after is not None:
        before = {s.name for s in g.sizes_mb.before if s.type == short}
        after = [s.name for s in g.sizes_mb.after if s.type == short]
        if len(before) == c.before and len(after) == c.after:
            return sum(n in before for n in after)
    return max(0, 2 * c.after - c.before)


def unmerged_counts(graphs: Iterable[Graph]) -> tuple[int, int]:
    """``(stayed, could)`` over ``graphs`` (each distinct graph once): collectives that stayed
    unmerged, at least (:func:`stayed_unmerged`), of those that could merge (kinds a graph
    has two or more of)."""
    stayed = could = 0
    for g in graphs:
        for kind, c in g.collectives.items():
            if c.before > 1:
                could += c.before
                stayed += stayed_unmerged(g, kind)
    return stayed, could


def verdict(
    facts: RunFacts,
    w: dict[str, Any],
    div: Sequence[dict[str, Any]],
    t: dict[str, Any],
    other: Sequence[dict[str, Any]] = (),
    dn: Sequence[dict[str, Any]] = (),
    on_mesh: Sequence[dict[str, Any]] = (),
) -> Verdict:
    """The :class:`~tracekit.model.findings.Verdict`: ``status`` is ``diverge`` (ranks differ:
    ``div``, the bucketing outcome, or ``other``, the schedule and compile-id divergence items,
    their ``ranks`` as ranges), ``incomplete`` (ranks missing or seen in two runs), ``agree`` or
    ``no_data``; its clauses are what the one line printed first says; a divergence also has
    ``sections``, the document keys whose items prove it (``divergence``, ``schedule_divergence``,
    ``compile_divergence``). Graphs never pre-bucketed (``dn``,
    :func:`tracekit.analyze.summarize.did_nothing`'s items) add ``findings`` (their count) and a
    FINDING clause, whatever the status; so do collectives on a mesh group pre-bucketing never
    sees (``on_mesh``, :func:`tracekit.analyze.mesh_not_prebucketed.mesh_not_prebucketed`), as
    ``mesh_findings``. ``w``: the world (:func:`tracekit.model.world.world`), ``t``: the totals
    (:func:`tracekit.analyze.totals.totals`), ``facts``: the rest (:class:`RunFacts`)."""
    status, clauses, keys = _verdict(facts, w, div, t, other, dn)
    if facts.mix:  # two runs in one directory, ranks on two torch releases: said whatever the status
        clauses.append(Finding("run_mix", {"text": facts.mix}))
    if facts.readings and status == "diverge":  # compile ids: more compiles, or cut logs
        clauses.append(Finding("shorter_logs", facts.readings))
    never = [d for d in dn if d.get("outcome") == "not pre-bucketed"]
    if never:
        clauses.append(
            Finding(
                "never_prebucketed",
                {"graphs": len({(d["compile_id"], d["graph_index"]) for d in never}), "items": never},
            )
        )
        keys["findings"] = len({(d["compile_id"], d["graph_index"]) for d in dn if d.get("outcome")})
    if on_mesh:
        clauses.append(Finding("mesh_not_prebucketed", {"items": list(on_mesh)}))
        keys["mesh_findings"] = len(on_mesh)
    return Verdict(status, tuple(clauses), keys)


def _in_groups(items: Sequence[dict[str, Any]]) -> list[tuple[str, Any, str]]:
    """Where, in a mesh, the blamed ranks first differ: ``(role, group, members)`` each; empty
    outside a mesh (schedule items without ``group``)."""
    return sorted({(d.get("role") or "", d["group"], d.get("peers") or "") for d in items if d.get("group")})


def _verdict(
    facts: RunFacts,
    w: dict[str, Any],
    div: Sequence[dict[str, Any]],
    t: dict[str, Any],
    other: Sequence[dict[str, Any]],
    dn: Sequence[dict[str, Any]],
) -> tuple[str, list[Finding], dict[str, Any]]:
    """The status, the clauses and the other keys, before the findings said whatever the status."""
    n = facts.ranks
    incomplete = []
    if w["missing"]:  # expected: None when unknown to an older document
        incomplete.append(
            Finding(
                "missing", {"count": w["missing_count"], "expected": w.get("expected"), "ranks": w["missing"]}
            )
        )
    if w["duplicated"]:
        incomplete.append(Finding("duplicated", {"ranks": w["duplicated"]}))
    if w.get("unplaced"):
        incomplete.append(Finding("unplaced", {"files": len(w["unplaced"])}))
    cut = facts.cut
    if cut:
        incomplete.append(Finding("cut_logs", cut))
    if div or other:
        items = [*div, *other]
        parts = []
        blamed = [d for d in items if d.get("majority", True)]
        if blamed:
            odd = {r for d in blamed for r in rank_list(d["ranks"])}
            graphs = {(d["compile_id"], d["graph_index"]) for d in blamed if "graph_index" in d}
            parts.append(
                Finding(
                    "differ",
                    {
                        "differ": len(odd),
                        "ranks": n,
                        "which": format_ranks(odd),
                        "graphs": len(graphs),
                        "where": _in_groups(blamed),
                    },
                )
            )
        splits: dict[tuple[str, ...], set] = {}
        for d in items:
            if not d.get("majority", True):
                splits.setdefault(tuple(d["groups"]), set()).add(
                    (d.get("compile_id"), d.get("graph_index")) if "graph_index" in d else None
                )
        for groups, in_graphs in splits.items():
            parts.append(
                Finding(
                    "no_majority",
                    {"groups": list(groups), "graphs": len({k for k in in_graphs if k is not None})},
                )
            )
        proof = [
            k
            for k, v in (
                ("divergence", div),
                ("schedule_divergence", [d for d in other if "graph_index" in d]),
                ("compile_divergence", [d for d in other if "what" in d]),
            )
            if v
        ]
        return "diverge", parts + incomplete, {"sections": proof}
    if not t.get("graphs"):
        regions = facts.regions
        clauses = [Finding("no_outcome")]
        if regions is not None and holds_no_collective(regions):
            clauses.append(Finding("no_collective", {"fsdp2": bool(regions and is_fsdp2(regions))}))
        if regions is not None and regions["failed"]:
            clauses.append(Finding("frames_failed", {"count": regions["failed"]}))
        sections = (
            (["compiled_regions"] if regions is not None else [])
            + ["notes"]
            + (["world"] if incomplete else [])
        )
        return "no_data", clauses + incomplete, {"sections": sections}
    if incomplete:
        # "see Diagnostics" only where it shows the cause
        sections = ["world"] + (["diagnostics"] if facts.bad_inputs else [])
        return (
            "incomplete",
            [Finding("found", {"ranks": n, "cut": bool(cut)}), *incomplete],
            {"sections": sections},
        )
    ngraphs = len(
        facts.graph_keys | {(d["compile_id"], ("schedule", d["graph_index"])) for d in dn if d.get("outcome")}
    )
    clauses = [Finding("agree", {"ranks": n, "graphs": ngraphs})]
    keys: dict[str, Any] = {}
    news = nothing_merged(facts, t)
    if news is None:
        news = mostly_unmerged(facts)
        if news is not None:
            keys["unmerged"] = {k: news.values[k] for k in ("stayed", "of", "share")}
    if news is not None:
        clauses.append(news)
    return "agree", clauses, keys


#: "Most did not merge": more than this share of the collectives that could merge (a graph's
#: kinds with two or more) stayed unmerged. Half, the plain sense of "most": a run past it
#: launches more collectives unmerged than merged, so it keeps more of the per-collective
#: latency than pre-bucketing takes away, whatever its cap. Counted at least
#: (:func:`stayed_unmerged`), so the headline never claims more than the log shows.
MOSTLY_UNMERGED_SHARE = 0.5


def mostly_unmerged(facts: RunFacts) -> Finding | None:
    """The verdict's news when pre-bucketing merged some collectives but most stayed unmerged
    (more than :data:`MOSTLY_UNMERGED_SHARE` of those that could merge, over the distinct
    graphs): ``mostly_unmerged`` with ``stayed``, ``of``, ``share`` and the ``caps``; None
    otherwise."""
    stayed, could = facts.unmerged
    if not could or stayed >= could or stayed <= MOSTLY_UNMERGED_SHARE * could:
        return None
    return Finding(
        "mostly_unmerged", {"stayed": stayed, "of": could, "share": MOSTLY_UNMERGED_SHARE, "caps": facts.caps}
    )


def nothing_merged(facts: RunFacts, t: dict[str, Any]) -> Finding | None:
    """The verdict's news when pre-bucketing merged no collective in any graph it ran on (every
    count N -> N): ``nothing_merged`` with the ``caps``; None when some graph merged some, or
    there is no collective to merge."""
    c = t.get("collectives") or {}
    if not t.get("graphs") or not any(v["before"] for v in c.values()):
        return None
    if any(v["before"] != v["after"] for v in c.values()):
        return None
    return Finding("nothing_merged", {"caps": facts.caps})


def any_divergence(doc: dict[str, Any]) -> str:
    """What cross-rank divergence a summary document reports, in a few words (``""`` for
    none): of the bucketing outcome (``divergence``), of the collectives that run
    (``schedule_divergence``), of compile ids and cache events (``compile_divergence``)."""
    parts = [
        plural(len(doc[k]), what)
        for k, what in (
            ("divergence", "bucketing difference"),
            ("schedule_divergence", "schedule difference"),
            ("compile_divergence", "compile id / cache difference"),
        )
        if doc.get(k)
    ]
    return ", ".join(parts)
