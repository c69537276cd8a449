"""The verdict: the one line summarize prints first, and its status; the one verdict function.

:func:`verdict` weighs what the analysis found (:mod:`tracekit.analyze.summarize`: divergence
across ranks, the world, totals, graphs never pre-bucketed, collectives on mesh groups
pre-bucketing never sees) and says it: ``diverge``, ``incomplete``, ``agree`` or ``no_data``,
with the findings added whatever the status. It weighs plain facts (:class:`RunFacts`), read
off a Run (:func:`run_facts`, for the summary document) or off an older saved document that
has no verdict (:func:`tracekit.analyze.documents.document_verdict`, for the report page).
The line is part of the document (``verdict.text``), so its words are made here, with
:mod:`tracekit.model.nouns`. :func:`any_divergence` says, in a few words, what divergence a
summary document reports (``summarize --fail-on-divergence``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tracekit.analyze.compiled_regions import compiled_regions, is_fsdp2, no_collective_text
from tracekit.analyze.cut_logs import cut_text
from tracekit.analyze.mesh_not_prebucketed import mesh_not_prebucketed_text
from tracekit.analyze.not_prebucketed import counts_text
from tracekit.analyze.run_mix import mix_text
from tracekit.model import SHORT_NAMES, Graph, Run
from tracekit.model.nouns import graph_label, plural, rank_noun
from tracekit.model.rankset import format_ranks, rank_list


@dataclass(frozen=True)
class RunFacts:
    """What the verdict weighs of a run besides the analysis's items: how many ranks were read,
    the graphs with an outcome (by compile id and index) and their caps, the clause on cut logs
    (:func:`tracekit.analyze.cut_logs.cut_text`), the frames compiled when no graph has an outcome
    (:func:`tracekit.analyze.compiled_regions.compiled_regions`), and the bad input counted.
    :func:`run_facts` reads them off a Run; :mod:`tracekit.analyze.documents` off an older saved
    document."""

    ranks: int
    graph_keys: frozenset[tuple[Any, Any]]
    caps: tuple[Any, ...]
    cut: str = ""
    regions: dict[str, Any] | None = None
    bad_inputs: int = 0
    mix: str = ""  # settings one job shares that differ between the ranks (tracekit.analyze.run_mix)
    readings: str = (
        ""  # shorter logs that end after a whole compile (tracekit.analyze.cut_logs.shorter_logs_text)
    )
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
        cut=cut_text(run),
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
) -> dict[str, Any]:
    """``{status, text}``: ``status`` is ``diverge`` (ranks differ: ``div``, the bucketing
    outcome, or ``other``, the schedule and compile-id divergence items, their ``ranks`` as
    ranges), ``incomplete`` (ranks missing or seen in two runs), ``agree`` or ``no_data``;
    ``text`` one line, printed first; a divergence also has ``sections``, the document keys
    whose items prove it (``divergence``, ``schedule_divergence``, ``compile_divergence``).
    Graphs never pre-bucketed (``dn``, :func:`tracekit.analyze.summarize.did_nothing`'s items)
    add ``findings`` (their count) and a FINDING to the text, whatever the status; so do
    collectives on a mesh group pre-bucketing never sees (``on_mesh``,
    :func:`tracekit.analyze.mesh_not_prebucketed.mesh_not_prebucketed`), as ``mesh_findings``. ``w``: the
    world (:func:`tracekit.model.world.world`), ``t``: the totals
    (:func:`tracekit.analyze.totals.totals`), ``facts``: the rest (:class:`RunFacts`)."""
    v = _verdict(facts, w, div, t, other, dn)
    if facts.mix:  # two runs in one directory, ranks on two torch releases: said whatever the status
        v["text"] += "; " + facts.mix
    if facts.readings and v["status"] == "diverge":  # compile ids: more compiles, or cut logs
        v["text"] += "; " + facts.readings
    found = findings_text(list(dn))
    if found:
        v["text"] += "; " + found
        v["findings"] = len({(d["compile_id"], d["graph_index"]) for d in dn if d.get("outcome")})
    if on_mesh:
        v["text"] += "; " + mesh_not_prebucketed_text(list(on_mesh))
        v["mesh_findings"] = len(on_mesh)
    return v


def _in_groups(items: Sequence[dict[str, Any]]) -> str:
    """Where, in a mesh, the blamed ranks first differ: `` inside shard group 4 (members
    2-3)``; empty outside a mesh (schedule items without ``group``)."""
    where = sorted({(d.get("role") or "", d["group"], d.get("peers") or "") for d in items if d.get("group")})
    if not where:
        return ""
    return " inside " + ", ".join(f"{(r + ' ') if r else ''}group {g} (members {p})" for r, g, p in where)


def _verdict(
    facts: RunFacts,
    w: dict[str, Any],
    div: Sequence[dict[str, Any]],
    t: dict[str, Any],
    other: Sequence[dict[str, Any]],
    dn: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    n = facts.ranks
    incomplete = []
    if w["missing"]:
        if w.get("expected") is None:  # unknown to an older document
            incomplete.append(f"{plural(w['missing_count'], 'rank')} missing ({w['missing']})")
        else:
            incomplete.append(f"{w['missing_count']} of {w['expected']} ranks missing ({w['missing']})")
    if w["duplicated"]:
        incomplete.append(
            f"{rank_noun(w['duplicated'])} {w['duplicated']} also found in another run (not merged)"
        )
    if w.get("unplaced"):
        k = len(w["unplaced"])
        incomplete.append(f"{k} file{'s' if k != 1 else ''} read as no rank (see Diagnostics)")
    cut = facts.cut
    if cut:
        incomplete.append(cut)
    tail = "; " + "; ".join(incomplete) if incomplete else ""
    if div or other:
        items = [*div, *other]

        def members(d: dict[str, Any], key: str = "ranks") -> list[int | None]:
            return rank_list(d[key])

        def on(graph_keys: set) -> str:
            n = len(graph_keys)
            return f"on {n} graph{'s' if n != 1 else ''}" if n else "in what they compiled"

        parts = []
        blamed = [d for d in items if d.get("majority", True)]
        if blamed:
            odd = {r for d in blamed for r in members(d)}
            graphs = {(d["compile_id"], d["graph_index"]) for d in blamed if "graph_index" in d}
            parts.append(
                f"{len(odd)} of {n} ranks ({format_ranks(odd)}) differ from the majority {on(graphs)}"
                + _in_groups(blamed)
            )
        splits: dict[tuple[str, ...], set] = {}
        for d in items:
            if not d.get("majority", True):
                splits.setdefault(tuple(d["groups"]), set()).add(
                    (d.get("compile_id"), d.get("graph_index")) if "graph_index" in d else None
                )
        for groups, keys in splits.items():
            parts.append(
                f"ranks split into {len(groups)} groups with no majority ({'; '.join(groups)}) "
                f"{on({k for k in keys if k is not None})}"
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
        return {"status": "diverge", "text": "DIVERGE: " + "; ".join(parts) + tail, "sections": proof}
    if not t.get("graphs"):
        regions = facts.regions
        none_held = regions is not None and no_collective_text(regions)
        fsdp2 = (
            " (FSDP2: its collectives run in eager code)"
            if none_held and regions and is_fsdp2(regions)
            else ""
        )
        return {
            "status": "no_data",
            "text": "NO DATA: no bucketing outcome in the logs"
            + ("; no compiled graph holds a collective" + fsdp2 if none_held else "")
            + (
                f"; {regions['failed']} frame compile{' failed' if regions['failed'] == 1 else 's failed'}"
                if regions is not None and regions["failed"]
                else ""
            )
            + tail,
            "sections": (["compiled_regions"] if regions is not None else [])
            + ["notes"]
            + (["world"] if incomplete else []),
        }
    if incomplete:
        agree = "agree on what all of them logged" if cut else "agree"
        return {
            "status": "incomplete",
            "text": (f"INCOMPLETE: the {n} ranks found {agree}" if n != 1 else "INCOMPLETE: one rank found")
            + tail,
            # "see Diagnostics" only where it shows the cause
            "sections": ["world"] + (["diagnostics"] if facts.bad_inputs else []),
        }
    ngraphs = len(
        facts.graph_keys | {(d["compile_id"], ("schedule", d["graph_index"])) for d in dn if d.get("outcome")}
    )
    news = nothing_merged_text(facts, t)
    mostly = {} if news else mostly_unmerged(facts)
    if mostly:
        news = "; " + mostly["text"]
    extra = {"unmerged": {k: v for k, v in mostly.items() if k != "text"}} if mostly else {}
    if n == 1:
        return {
            "status": "agree",
            "text": f"OK: one rank, {ngraphs} graph{'s' if ngraphs != 1 else ''}" + news,
            **extra,
        }
    which = f"all {ngraphs} graphs" if ngraphs != 1 else "1 graph"
    return {"status": "agree", "text": f"OK: all {n} ranks agree on {which}" + news, **extra}


#: "Most did not merge": more than this share of the collectives that could merge (a graph's
#: kinds with two or more) stayed unmerged. Half, the plain sense of "most": a run past it
#: launches more collectives unmerged than merged, so it keeps more of the per-collective
#: latency than pre-bucketing takes away, whatever its cap. Counted at least
#: (:func:`stayed_unmerged`), so the headline never claims more than the log shows.
MOSTLY_UNMERGED_SHARE = 0.5


def mostly_unmerged(facts: RunFacts) -> dict[str, Any]:
    """The verdict's news when pre-bucketing merged some collectives but most stayed unmerged
    (more than :data:`MOSTLY_UNMERGED_SHARE` of those that could merge, over the distinct
    graphs): ``{text, stayed, of, share}``, e.g. ``MOSTLY UNMERGED: at least 40 of 50
    collectives stayed unmerged (cap 25 MB); see Bucketing per graph``; ``{}`` otherwise."""
    stayed, could = facts.unmerged
    if not could or stayed >= could or stayed <= MOSTLY_UNMERGED_SHARE * could:
        return {}
    caps = facts.caps
    cap = "cap " + ", ".join(f"{x:.6g}" for x in caps[:3]) + (", ..." if len(caps) > 3 else "") + " MB"
    return {
        "text": f"MOSTLY UNMERGED: at least {stayed} of {could} collectives stayed unmerged ({cap}); "
        "see Bucketing per graph",
        "stayed": stayed,
        "of": could,
        "share": MOSTLY_UNMERGED_SHARE,
    }


def nothing_merged_text(facts: RunFacts, t: dict[str, Any]) -> str:
    """The verdict's news when pre-bucketing merged no collective in any graph it ran on (every
    count N -> N), e.g. ``; NOTHING MERGED: pre-bucketing merged no collective in any graph
    (cap 0.001 MB); see Bucketing did nothing``; empty when some graph merged some, or there is
    no collective to merge."""
    c = t.get("collectives") or {}
    if not t.get("graphs") or not any(v["before"] for v in c.values()):
        return ""
    if any(v["before"] != v["after"] for v in c.values()):
        return ""
    caps = facts.caps
    cap = "cap " + ", ".join(f"{x:.6g}" for x in caps[:3]) + (", ..." if len(caps) > 3 else "") + " MB"
    return f"; NOTHING MERGED: pre-bucketing merged no collective in any graph ({cap}); see Bucketing did nothing"


def findings_text(dn: list[dict[str, Any]]) -> str:
    """The verdict's finding for graphs never pre-bucketed (``dn``: :func:`did_nothing`'s
    items), e.g. ``FINDING: 1 graph not pre-bucketed (0/0 backward on ranks 0-3: 8
    reduce-scatters, ...)``; empty when there is none."""
    items = [d for d in dn if d.get("outcome") == "not pre-bucketed"]
    if not items:
        return ""
    keys = {(d["compile_id"], d["graph_index"]) for d in items}
    what = "; ".join(
        f"{d['compile_id']} {graph_label(d['graph_index'])} on {rank_noun(format_ranks(d['ranks']))} {format_ranks(d['ranks'])}: "
        f"{counts_text(d)}, run one by one"
        for d in items[:3]
    )
    more = f"; and {len(items) - 3} more" if len(items) > 3 else ""
    n = len(keys)
    return (
        f"FINDING: {n} graph{'s' if n != 1 else ''} never pre-bucketed ({what}{more}); "
        "see Bucketing did nothing"
    )


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
