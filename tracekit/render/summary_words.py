"""The words of summarize's verdict and notes: a :class:`~tracekit.model.findings.Verdict`
(what :func:`tracekit.analyze.verdict.verdict` found, as data) said in the one line summarize
prints first, the document's ``verdict.text``, one kind of clause each (:func:`clause_text`);
the notes (:func:`tracekit.analyze.notes.notes`), one kind each (:func:`note_text`), and the
same cause said to replay and explain (:func:`no_outcome_text`). Counts and rank sets take
their nouns from :mod:`tracekit.model.nouns`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracekit.analyze.cut_logs import ENDS_EARLY
from tracekit.analyze.notes import TESTED_RELEASES
from tracekit.model.findings import Finding, Verdict
from tracekit.model.nouns import graph_label, plural, rank_noun
from tracekit.model.rankset import format_ranks, rank_order
from tracekit.render.compiled_regions_text import failures_text, fsdp2_text, no_collective_text
from tracekit.render.mesh_text import names_text

#: What a verdict says first, by its status.
STATUS_WORDS = {"diverge": "DIVERGE", "no_data": "NO DATA", "incomplete": "INCOMPLETE", "agree": "OK"}


def verdict_dict(v: Verdict | dict[str, Any]) -> dict[str, Any]:
    """The document's ``verdict``: ``{status, text, ...keys}``, the text said by
    :func:`verdict_text`; a saved document's verdict (a dict: its words are the document's) as it is."""
    if isinstance(v, dict):
        return v
    return {"status": v.status, "text": verdict_text(v), **v.keys}


def verdict_text(v: Verdict) -> str:
    """The verdict's one line: its status, then its clauses, each said by :func:`clause_text`."""
    return f"{STATUS_WORDS[v.status]}: " + "; ".join(clause_text(c) for c in v.clauses)


def shorter_logs_text(x: dict[str, Any]) -> str:
    """Both readings of shorter logs (:func:`tracekit.analyze.cut_logs.shorter_logs`), with how
    many more each rank logged: ``ranks 0,2 logged 2 compile ids, ending after 1/0; rank 1 logged
    6 more (from 1/1), rank 3 14 more (from 1/1): either those ranks compiled more than ranks 0,2
    (recompiles, other frames), or the logs of ranks 0,2 stop early, though each ends after a
    whole compile, which shows no cut``."""
    shorts, counts, longer = x["short"], x["counts"], x["longer"]
    who = f"rank {format_ranks(shorts)}" if len(shorts) == 1 else f"ranks {format_ranks(shorts)}"
    ends = f", ending after {', '.join(x['ends'])}" if x["ends"] else ""
    logged = f"{who} logged {' or '.join(map(str, counts))} compile id{'s' if counts != [1] else ''}{ends}"
    parts = []
    for i, (n, first, ranks) in enumerate(x["more"]):
        noun = "rank" if len(ranks) == 1 else "ranks"
        parts.append(f"{noun} {format_ranks(ranks)}{' logged' if i == 0 else ''} {n} more (from {first})")
    whose = "the log of" if len(shorts) == 1 else "the logs of"
    return (
        f"{logged}; {', '.join(parts)}: either {'rank' if len(longer) == 1 else 'ranks'} "
        f"{format_ranks(longer)} compiled more (recompiles, other frames), or {whose} {who} "
        f"{'stops' if len(shorts) == 1 else 'stop'} early, "
        f"though {'it ends' if len(shorts) == 1 else 'each ends'} after a whole compile, which shows no cut"
    )


def cut_text(x: dict[str, Any]) -> str:
    """The verdict's clause for cut logs (:func:`tracekit.analyze.cut_logs.cut_logs`), e.g.
    ``rank 3's log is cut (it ends inside an entry, line 5803 of FILE): compared only on what it
    logged``."""
    cut = x["cut"]
    ranks = sorted({c["rank"] for c in cut}, key=rank_order)
    first = cut[0]
    where = f"{first['file']}:{first['line']}" if first["line"] else first["file"]
    how = "it ends inside an entry" if first["line"] and "kind" not in first else first["detail"]
    who = (
        f"rank {format_ranks(ranks)}'s log is"
        if len(ranks) == 1
        else f"the logs of ranks {format_ranks(ranks)} are"
    )
    extra = len(cut) - 1
    more = f"; and {plural(extra, 'more cut file')}" if extra else ""
    text = f"{who} cut ({how}, at {where}{more})"
    if first.get("kind") == ENDS_EARLY:  # whole, but shorter than its peers'
        who = who.replace("'s log is", "'s log").replace(" are", "")
        ends = first["ends"] if len(ranks) == 1 else first["ends"].replace("ends", "end", 1)
        text = f"{who} {ends} (at {where}{more}); {first['others']}"
    if x["ranks"] < 2:
        return text
    return f"{text}: compared only on what {'it' if len(ranks) == 1 else 'they'} logged"


def _caps_text(caps: Sequence[Any]) -> str:
    """``cap 25 MB``; ``cap 1, 2, 3, ... MB`` past three caps."""
    return "cap " + ", ".join(f"{x:.6g}" for x in caps[:3]) + (", ..." if len(caps) > 3 else "") + " MB"


def _on(graphs: int) -> str:
    """``on 2 graphs``, or ``in what they compiled`` for a divergence in no graph."""
    return f"on {plural(graphs, 'graph')}" if graphs else "in what they compiled"


def clause_text(c: Finding) -> str:
    """One clause of the verdict's line, in words."""
    x = c.values
    if c.kind == "differ":
        where = (
            " inside "
            + ", ".join(f"{(r + ' ') if r else ''}group {g} (members {p})" for r, g, p in x["where"])
            if x["where"]
            else ""
        )
        return (
            f"{x['differ']} of {x['ranks']} ranks ({x['which']}) differ from the majority {_on(x['graphs'])}"
            + where
        )
    if c.kind == "no_majority":
        return f"ranks split into {len(x['groups'])} groups with no majority ({'; '.join(x['groups'])}) {_on(x['graphs'])}"
    if c.kind == "missing":
        if x["expected"] is None:
            return f"{plural(x['count'], 'rank')} missing ({x['ranks']})"
        return f"{x['count']} of {x['expected']} ranks missing ({x['ranks']})"
    if c.kind == "duplicated":
        return f"{rank_noun(x['ranks'])} {x['ranks']} also found in another run (not merged)"
    if c.kind == "unplaced":
        k = x["files"]
        return f"{plural(k, 'file')} read as no rank (see Diagnostics)"
    if c.kind == "cut_logs":
        return cut_text(x)
    if c.kind == "shorter_logs":
        return shorter_logs_text(x)
    if c.kind == "run_mix":
        return x["text"]
    if c.kind == "no_outcome":
        return "no bucketing outcome in the logs"
    if c.kind == "no_collective":
        return "no compiled graph holds a collective" + (
            " (FSDP2: its collectives run in eager code)" if x["fsdp2"] else ""
        )
    if c.kind == "frames_failed":
        return f"{x['count']} frame compile{' failed' if x['count'] == 1 else 's failed'}"
    if c.kind == "found":
        agree = "agree on what all of them logged" if x["cut"] else "agree"
        return f"the {x['ranks']} ranks found {agree}" if x["ranks"] != 1 else "one rank found"
    if c.kind == "agree":
        g = x["graphs"]
        if x["ranks"] == 1:
            return f"one rank, {plural(g, 'graph')}"
        return f"all {x['ranks']} ranks agree on " + (f"all {g} graphs" if g != 1 else "1 graph")
    if c.kind == "nothing_merged":
        return f"NOTHING MERGED: pre-bucketing merged no collective in any graph ({_caps_text(x['caps'])}); see Bucketing did nothing"
    if c.kind == "mostly_unmerged":
        return (
            f"MOSTLY UNMERGED: at least {x['stayed']} of {x['of']} collectives stayed unmerged "
            f"({_caps_text(x['caps'])}); see Bucketing per graph"
        )
    if c.kind == "never_prebucketed":
        items = x["items"]
        what = "; ".join(
            f"{d['compile_id']} {graph_label(d['graph_index'])} on {rank_noun(format_ranks(d['ranks']))} {format_ranks(d['ranks'])}: "
            f"{finding_counts_text(d)}, run one by one"
            for d in items[:3]
        )
        more = f"; and {len(items) - 3} more" if len(items) > 3 else ""
        n = x["graphs"]
        return f"FINDING: {plural(n, 'graph')} never pre-bucketed ({what}{more}); see Bucketing did nothing"
    if c.kind == "mesh_not_prebucketed":
        return mesh_not_prebucketed_text(x["items"])
    raise ValueError(f"no words for a verdict clause of kind {c.kind!r}")


def finding_counts_text(item: dict[str, Any]) -> str:
    """``8 reduce-scatters, 298,144 B, 0.0704 ms estimated``: what a finding runs one by one."""
    names = {"all_gather": "all-gather", "reduce_scatter": "reduce-scatter", "all_reduce": "all-reduce"}
    kinds = ", ".join(plural(n, names[t]) for t, n in item["counts"].items())
    nbytes = "?" if item["total_bytes"] is None else f"{item['total_bytes']:,}"
    ms = "?" if item["total_est_ms"] is None else f"{item['total_est_ms']:.4f}"
    return f"{kinds}, {nbytes} B, {ms} ms estimated"


def mesh_not_prebucketed_text(items: list[dict[str, Any]]) -> str:
    """The verdict's finding: ``FINDING: 8 all_reduce never bucketed (0/0 backward on ranks
    0-3, replicate groups 1 | 2: 585,504 B, 0.0851 ms est.)``; empty when there is none."""
    if not items:
        return ""

    what = "; ".join(
        f"{d['count']} {d['kind']} on {d['role']} group{'s' if len(d['groups']) > 1 else ''} "
        f"{names_text(d['groups'])} ({d['compile_id']} {graph_label(d['graph_index'])}, "
        f"{rank_noun(d['ranks'])} {d['ranks']}: "
        f"{'?' if d['bytes'] is None else format(d['bytes'], ',')} B, "
        f"{'?' if d['est_ms'] is None else d['est_ms']} ms est.)"
        for d in items[:3]
    )
    more = f"; and {len(items) - 3} more" if len(items) > 3 else ""
    return f"FINDING: collectives pre-bucketing never handles on this mesh, run one by one: {what}{more}"


def note_text(f: Finding, *, command: str = "") -> str:
    """One note of a summary (:func:`tracekit.analyze.notes.notes`) in words; ``command``: the command whose section a note points at, when it is
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
            f"no bucketing recorded: {plural(n, 'graph')} went through the post-grad "
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


def _graphs_were(n: int) -> str:
    """``1 graph was`` / ``3 graphs were``."""
    return f"{n} graph was" if n == 1 else f"{n} graphs were"


def no_outcome_text(f: Finding) -> str:
    """Why replay or explain has no recorded bucketing outcome to work on
    (:func:`tracekit.analyze.notes.why_no_outcome`): the cause summarize's notes say, its section
    named as the command that has it, FSDP2's reason with it; or that the selection matched none."""
    if f.values["notes"]:
        return "; ".join(note_text(n, command="tracekit summarize") for n in f.values["notes"])
    return (
        "no recorded pre_bucketing_fsdp_collectives outcome matched the selection "
        "(--rank, --graph): see tracekit summarize for the graphs there are"
    )


def said_notes(notes: Sequence[str | Finding]) -> list[str]:
    """A replay or explain document's notes in words: a finding (why there is nothing to work on,
    :func:`no_outcome_text`) said, the rest as they are."""
    return [no_outcome_text(n) if isinstance(n, Finding) else n for n in notes]
