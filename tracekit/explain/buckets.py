"""``tracekit explain``: why each collective is, or is not, in a bucket (the ``tracekit.explain/1`` document).

Pure: recorded outcomes with their graph texts (:class:`tracekit.read.reader.GraphSource`) in, a
document out; nothing here reads a file or formats text. For each graph:

1. rebuild it and replay it at the recorded cap (:func:`tracekit.replay.engine.replay_source`,
   which also retries the exact automatic cap when the log's rounded one misses);
2. plan there with the planner's decisions on (:meth:`bucketing.FsdpPlanner.plan` with
   ``explain=True``): one reason per collective, from the planner's own bookkeeping, never
   re-derived here (reasons: :data:`bucketing.report.REASONS`);
3. check that the planned buckets are the recorded outcome: the counts, and the bucket members
   when the log has them (``GraphSource.recorded_buckets``, read in the same pass as the graph
   text); a difference is listed, never hidden;
4. add a what-if to each lone collective where one exists, verified by planning again
   (:class:`bucketing.whatif.WhatIf`): for ``over_cap`` the smallest cap that merges it, for an
   all-gather's ``dtype_break`` the bucket mode ``custom_ops_multidtype``.

Document::

    {"schema": "tracekit.explain/1", "paths": [...],
     "graphs": [{"rank": 0, "compile_id": "0/0", "graph_index": 0, "file": ..., "line": ...,
                 "cap_mb": 0.1, "recorded": {"AG": "8->5", ...}, "reproduced": true,
                 "buckets_checked": "members" | "counts", "mismatches": [], "error": null,
                 "buckets": {"AG": [[name, ...], ...], "RS": [...], "AR": [...]},
                 "collectives": [{"name", "kind", "size_mb", "dtype", "group", "bucket",
                                  "reason", "detail", "what_if": null | {...}}]}],
     "notes": [...], "diagnostics": {...}}
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tracekit.model import COLLECTIVE_TYPES, SHORT_NAMES

SCHEMA = "tracekit.explain/1"
MULTIDTYPE = "custom_ops_multidtype"


def _what_if(d: Any, whatif: Any, cap_mb: float, bucket_mode: str) -> dict[str, Any] | None:
    """A verified what-if for one decision, or None."""
    if d.reason == "over_cap":
        cap = whatif.cap_that_merges(d.name, cap_mb)
        if cap is not None:
            from tracekit.model.exact_numbers import exact_mb

            return {"cap_mb": cap, "verified": True, "text": f"a cap of {exact_mb(cap)} MB buckets it"}
    elif d.reason == "dtype_break" and d.kind == "AG" and "multidtype" not in bucket_mode:
        if whatif.bucket_mode_merges(d.name, cap_mb, MULTIDTYPE):
            return {
                "bucket_mode": MULTIDTYPE,
                "verified": True,
                "text": f"bucket_mode={MULTIDTYPE} buckets it (all-gathers keyed by group only)",
            }
    return None


def _member_mismatches(
    planned: dict[str, list[list[str]]], recorded: dict[str, Any] | None
) -> tuple[str, list[str]]:
    """("members" | "counts", differences) between planned and recorded bucket members."""
    if not recorded or all(recorded.get(k) is None for k in ("AG", "RS")):
        return "counts", []
    out = []
    for kind in SHORT_NAMES.values():
        want = recorded.get(kind)
        if want is None:
            continue
        if want != planned.get(kind, []):
            out.append(f"{kind} buckets: recorded {want}, planned {planned.get(kind, [])}")
    return "members", out


def explain_graph(src: Any, options: Any, rebuilt: dict, recorded: dict[str, Any] | None) -> dict[str, Any]:
    """One graph of the document (see the module docstring)."""
    from bucketing.whatif import WhatIf
    from tracekit.replay.engine import replay_source

    g = src.graph
    gr = replay_source(src, options, rebuilt)
    out: dict[str, Any] = {
        "rank": src.rank,
        "compile_id": src.compile_id,
        "graph_index": src.graph_index,
        "file": g.file,
        "log_torch": getattr(src, "torch_version", None),
        "line": g.line,
        "cap_mb": g.bucket_cap_mb,
        "recorded": {
            SHORT_NAMES[t]: f"{g.collectives[t].before}->{g.collectives[t].after}"
            for t in COLLECTIVE_TYPES
            if t in g.collectives
        },
        "reproduced": None,
        "buckets_checked": None,
        "mismatches": [],
        "note": None,
        "error": gr.error,
        "bucket_mode": None,
        "buckets": {},
        "collectives": [],
    }
    if gr.error is not None:
        return out
    planner = gr.replayer.planner
    cap = gr.reproduction.bucket_cap_mb  # type: ignore[union-attr]  # no error: it was reproduced
    report = planner.plan(cap, explain=True)
    planned = {k: [[m.name for m in b] for b in report.buckets.get(k, [])] for k in SHORT_NAMES.values()}
    checked, members = _member_mismatches(planned, recorded)
    mismatches = list(gr.mismatches) + members
    whatif = WhatIf(planner)
    collectives = [
        {**d.to_dict(), "what_if": _what_if(d, whatif, cap, planner.bucket_mode)} for d in report.decisions
    ]
    if len(gr.groups) > 1:  # a mesh: collectives on groups the pass never saw
        from tracekit.explain.on_mesh import add_mesh_reasons

        add_mesh_reasons(gr, cap, collectives)
    notes = [gr.note] if gr.note else []
    if whatif.exhausted:
        notes.append(f"what-ifs stopped after {whatif.budget} plans: the collectives left have none")
    out.update(
        cap_mb=cap,
        reproduced=not mismatches,
        buckets_checked=checked,
        mismatches=mismatches,
        note="; ".join(notes) or None,
        bucket_mode=planner.bucket_mode,
        buckets=planned,
        collectives=collectives,
    )
    return out


def explain_document(
    sources: Iterable[Any],
    *,
    symbols: Mapping[str, int] | None = None,
    extra: dict[str, Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
    groups: Any = None,
) -> dict[str, Any]:
    """The ``tracekit.explain/1`` document of ``sources`` (each with its recorded bucket members,
    ``GraphSource.recorded_buckets``); ``progress(done, total)`` after each graph; ``groups``:
    the run's process groups on a mesh (:func:`tracekit.replay.process_groups.table_for`)."""
    from tracekit.replay.results import ReplayOptions

    # the recorded run's modes are not in torch's log: the pass's default mode and inductor's
    # configured bucket_mode, as when it ran
    options = ReplayOptions(symbols=dict(symbols or {}), overlap=False, groups=groups)  # pre-bucketing only
    rebuilt: dict = {}
    sources = list(sources)
    graphs = []
    for s in sources:
        graphs.append(explain_graph(s, options, rebuilt, s.recorded_buckets))
        if progress is not None:
            progress(len(graphs), len(sources))
    doc = {"schema": SCHEMA, "graphs": graphs}
    doc.update(extra or {})
    return doc


def explain_mixed(
    mixed: list[Any],
    extra: dict[str, Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
    groups: Any = None,
) -> dict[str, Any]:
    """The ``tracekit.explain/1`` document of ``mixed``: recorded outcomes
    (:class:`tracekit.read.reader.GraphSource`, :func:`explain_document`) and graphs never
    pre-bucketed (:class:`tracekit.read.pairing.NotPrebucketedSource` with a schedule that runs
    collectives: :func:`tracekit.explain.not_prebucketed.explain_not_prebucketed`), each in its place
    in the logs; ``groups`` as in :func:`explain_document`; ``progress(done, total)`` over the
    graphs of both kinds: ``(0, total)`` first, then after each graph."""
    from tracekit.explain.not_prebucketed import explain_not_prebucketed
    from tracekit.read.pairing import NotPrebucketedSource

    sources = [s for s in mixed if not isinstance(s, NotPrebucketedSource)]
    never = not_prebucketed_of(mixed)
    total = len(sources) + len(never)  # progress counts every graph explained, of both kinds
    recorded = None
    if progress is not None:
        tell = progress
        if total:
            tell(0, total)  # shown while the first graph is explained (torch's passes run)

        def recorded(done: int, _n: int) -> None:
            tell(done, total)

    doc = explain_document(sources, extra=extra, progress=recorded, groups=groups)
    order = {id(s): i for i, s in enumerate(mixed)}
    entries = [(order[id(s)], g) for s, g in zip(sources, doc["graphs"], strict=False)]
    for k, u in enumerate(never, 1):  # torch's overlap scheduler runs in its what-if
        entries.append((order[id(u)], explain_not_prebucketed(u)))
        if progress is not None:
            progress(len(sources) + k, total)
    doc["graphs"] = [g for _, g in sorted(entries, key=lambda e: e[0])]
    return doc


def not_prebucketed_of(mixed: list[Any]) -> list[Any]:
    """The graphs never pre-bucketed among ``mixed`` that run collectives."""
    from tracekit.read.pairing import NotPrebucketedSource

    return [s for s in mixed if isinstance(s, NotPrebucketedSource) and s.final.collectives]


__all__ = ["SCHEMA", "explain_document", "explain_graph", "explain_mixed", "not_prebucketed_of"]
