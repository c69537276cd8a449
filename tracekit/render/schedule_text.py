"""Text for the collectives that run: summarize's sections on final schedules and cross-rank
schedule / compile-id / cache divergence, and diff's rows for a changed ``final``.

Renderers only: they work from a ``tracekit.summary`` document (or compared values), never
from files (the analysis is :mod:`tracekit.analyze.schedule`).
"""

from __future__ import annotations

from typing import Any

import orjson

from tracekit.analyze.schedule import ENTRY_KEYS, first_difference
from tracekit.model import COLLECTIVE_TYPES
from tracekit.model.nouns import graph_label, plural
from tracekit.model.rankset import rank_members
from tracekit.render.cells import bytes_text, entry_text, sequence_text
from tracekit.render.majority_columns import majority_cell, majority_headers
from tracekit.render.mesh_text import schedule_groups_text
from tracekit.render.text import UNITS_BYTES, heading, ranks_cell, section_line, table

FINAL_HEADERS = ["compile id", "graph", "ranks", "AG", "RS", "AR", "other", "bytes", "est ms", "sizes"]


def final_change_rows(a: list[list[Any]] | None, b: list[list[Any]] | None) -> list[list[str]]:
    """diff's ``[what, A, B]`` rows for a changed ``final``: the summary, then the first
    differing collective."""
    rows = [["final", sequence_text(a), sequence_text(b)]]
    if a is not None and b is not None:
        i = first_difference(a, b)
        if i is not None:
            at = [None if i >= len(s) else dict(zip(ENTRY_KEYS, s[i], strict=False)) for s in (a, b)]
            rows.append([f"final: first diff #{i}", entry_text(at[0]), entry_text(at[1])])
    return rows


def _holders(doc: dict[str, Any]) -> list[tuple[list[Any], dict[str, Any]]]:
    """(ranks, entry): the per-rank entries of a ``--per-rank`` document, else the rank groups
    (an entry then stands for all its ranks)."""
    if doc.get("ranks") is not None:
        return [([r["rank"]], r) for r in doc["ranks"]]
    return [(rank_members(grp["ranks"]), grp) for grp in doc.get("groups") or []]


def _finals(doc: dict[str, Any]) -> list[tuple[list[Any], dict[str, Any]]]:
    """(ranks, final dict) of every graph with a final schedule, outcome-less ones included."""
    out = []
    for ranks, r in _holders(doc):
        out += [(ranks, g["final"]) for g in r["graphs"] if g.get("final")]
        out += [(ranks, f) for f in r.get("schedules_without_outcome") or []]
    return out


def final_groups(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(ranks as ranges, final schedule) per graph and group of ranks with the same final
    schedule (counts, sizes, estimates), in compile order: the rows of "Collectives that run",
    the same in the table (:func:`final_rows`) and the CSV."""
    from tracekit.model.rankset import format_ranks

    groups: dict[tuple[str, int, bytes], list[Any]] = {}
    first: dict[tuple[str, int, bytes], dict[str, Any]] = {}
    for ranks, f in _finals(doc):
        sig = {k: f[k] for k in ("counts", "sizes", "collectives")}
        key = (f["compile_id"], f["position"], orjson.dumps(sig, option=orjson.OPT_SORT_KEYS))
        groups.setdefault(key, []).extend(ranks)
        first.setdefault(key, f)
    order: dict[str, int] = {}
    for cid, _pos, _sig in groups:
        order.setdefault(cid, len(order))
    return [
        (format_ranks(groups[key]), first[key])
        for key in sorted(
            groups, key=lambda k: (order[k[0]], k[1], min(-1 if r is None else r for r in groups[k]))
        )
    ]


def final_totals(f: dict[str, Any]) -> tuple[int | None, float | None]:
    """A final schedule's bytes and estimated ms, summed; None where one collective lacks it."""
    sizes = [x["bytes"] for x in f["collectives"]]
    ms = [x["est_ms"] for x in f["collectives"]]
    return (None if None in sizes else sum(sizes), None if None in ms else round(sum(ms), 4))


def final_rows(doc: dict[str, Any]) -> list[list[Any]]:
    """One row per graph and group of ranks with the same final schedule (counts, sizes,
    estimates), ranks as ranges (:func:`final_groups`)."""
    rows = []
    for ranks, f in final_groups(doc):
        c = f["counts"]
        sizes = [x["bytes"] for x in f["collectives"]]
        ms = [x["est_ms"] for x in f["collectives"]]
        rows.append(
            [
                f["compile_id"],
                graph_label(f["position"]),
                ranks_cell(ranks),
                *(c.get(t, 0) for t in COLLECTIVE_TYPES),
                c.get("other", 0),
                "?" if None in sizes else bytes_text(sum(sizes)),
                "?" if None in ms else f"{sum(ms):.4f}",
                f["sizes"],
            ]
        )
    return rows


def _at(d: dict[str, Any]) -> str:
    return "no schedule" if d["length"] is None else f"#{d['position']}"


def _value(d: dict[str, Any], key: str) -> str:
    v = d[key]
    if isinstance(v, dict) and "state" in v:
        return f"{v['compile_id']} {v['state']}"
    if isinstance(v, dict):
        return entry_text(v)
    return "end of list" if v is None else str(v)


def render_schedule_sections(doc: dict[str, Any], fmt: str) -> str:
    """The summarize sections: the collectives that run per graph (ranks grouped), whether
    the ranks run the same ones, and whether they compiled the same compile ids with the same
    cache hits and misses (``table`` or ``markdown``)."""
    nranks = doc["totals"]["ranks"]
    out = ["\n" + heading("Collectives that run (inductor_collective_schedule)", fmt)]
    rows = final_rows(doc)
    if rows:
        out.append(table(rows, FINAL_HEADERS, fmt))
        groups = schedule_groups_text(doc)  # on a mesh: every group
        out.append(f"\n{UNITS_BYTES}{'; ' + groups if groups else ''}\n")
    else:
        # the cache is named only where the logs show a cache hit (torch logs no schedule then)
        hits = any(e[1] == "hit" for _r, holder in _holders(doc) for e in holder.get("cache_events") or [])
        regions = doc.get("compiled_regions")
        why = (
            "no compiled graph holds a collective: see Compiled regions"
            if regions and not regions["collectives"]
            else "no collective left after compilation"
        ) + (", or graphs loaded from the inductor cache" if hits else "")
        out.append(f"no inductor_collective_schedule logged ({why})\n")

    div = doc.get("schedule_divergence") or []
    if div:
        out.append("\n" + heading("Schedule consensus", fmt))
        ties = sum(1 for d in div if not d.get("majority", True))
        whom = (
            "than the majority"
            if not ties
            else (
                "than the others (no majority: no rank is blamed)"
                if ties == len(div)
                else f"than the majority ({ties} with no majority)"
            )
        )
        out.append(
            f"{plural(len(div), 'graph')} where ranks run other collectives (kind, group, bytes, dtype, "
            f"in order) {whom}: a hang or corruption risk\n\n"
        )
        in_group = any("group" in d for d in div)  # a mesh: the group and its members
        out.append(
            table(
                [
                    [
                        d["compile_id"],
                        graph_label(d["graph_index"]),
                        ranks_cell(d["ranks"]),
                        *([f"{d['group']} ({d['peers']})" if d.get("group") else "-"] if in_group else []),
                        _at(d),
                        _value(d, "value"),
                        majority_cell(d, div),
                        _value(d, "majority_value"),
                    ]
                    for d in div
                ],
                [
                    "compile id",
                    "graph",
                    "ranks",
                    *(["in group (members)"] if in_group else []),
                    "at",
                    "value",
                    *majority_headers(div),
                ],
                fmt,
            )
        )
        if in_group:
            out.append(
                "\nmesh: group names are compared by role (two shard groups alike); "
                "a rank is named with the group where it first differs and that group's members\n"
            )
    elif nranks > 1:
        ngraphs = len({(f["compile_id"], f["position"]) for _r, f in _finals(doc)})
        where = "the one graph" if ngraphs == 1 else f"all {ngraphs} graphs"
        said = (
            f"all {plural(nranks, 'rank')} run the same collectives (kind, group, bytes, dtype, in order) "
            f"in {where} with a schedule"
            if ngraphs
            else "no graph logged the collectives it runs (inductor_collective_schedule): nothing to compare"
        )
        out.append("\n" + section_line("Schedule consensus", said, fmt))
    else:
        out.append("\n" + section_line("Schedule consensus", "fewer than two ranks: nothing to compare", fmt))

    cdiv = doc.get("compile_divergence") or []
    title = "Compile ids and cache consensus"
    if cdiv:
        out.append("\n" + heading(title, fmt))
        out.append(
            table(
                [
                    [
                        d["what"],
                        ranks_cell(d["ranks"]),
                        _at(d),
                        _value(d, "value"),
                        majority_cell(d, cdiv),
                        _value(d, "majority_value"),
                    ]
                    for d in cdiv
                ],
                ["what", "ranks", "at", "value", *majority_headers(cdiv)],
                fmt,
            )
        )
    elif nranks > 1:
        ids = max((len(r.get("compile_ids") or []) for _ranks, r in _holders(doc)), default=0)
        events = max((len(r.get("cache_events") or []) for _ranks, r in _holders(doc)), default=0)
        out.append(
            "\n"
            + section_line(
                title,
                f"all {plural(nranks, 'rank')} compiled the same {plural(ids, 'compile id')} in the "
                f"same order, with the same {plural(events, 'FX graph cache event')}",
                fmt,
            )
        )
    else:
        out.append("\n" + section_line(title, "fewer than two ranks: nothing to compare", fmt))
    return "".join(out)
