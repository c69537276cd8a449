"""The text forms of a ``tracekit.summary/2`` document (``summarize --format table|markdown|csv``,
and the verdict's sections): the verdict first, the world (ranks found, missing, seen twice), one
row per graph and distinct outcome with its ranks as ranges (``--per-rank``: one row per rank and
graph), totals, rank consensus, graphs where bucketing did nothing, diagnostics, notes. They work
from the document alone (never a Run, never a file), so a saved JSON summary renders the same way.
"""

from __future__ import annotations

from typing import Any

from tracekit.model import COLLECTIVE_TYPES, SHORT_NAMES
from tracekit.model.nouns import graph_label, plural
from tracekit.model.rankset import format_ranks, rank_members, rank_order
from tracekit.model.world import world_text
from tracekit.render.cells import (
    did_nothing_none_text,
    differences_line,
    first_diff_text,
    ranks_as_ranges,
    total_mb,
    value_text,
    where_text,
)
from tracekit.render.compile_events_text import render_breaks_and_recompiles
from tracekit.render.compiled_regions_text import render_compiled_regions
from tracekit.render.majority_columns import majority_cell, majority_headers
from tracekit.render.mesh_text import (
    counted_groups_text,
    fsdp_groups_cell,
    mesh_line,
    names_text,
    run_once_text,
)
from tracekit.render.schedule_text import render_schedule_sections
from tracekit.render.text import (
    UNITS_MB,
    UNITS_SIZES,
    dumps_json,
    fmt_counts,
    fmt_mb,
    heading,
    ranks_cell,
    section_line,
    table,
    wrap_clauses,
)

#: Headers of the outcome tables. "machines" is torch's nNodes: the machines the FSDP group spans.
OUTCOME_HEADERS = ["compile id", "graph", "FSDP groups", "group size", "machines", "cap MB", "AG", "RS", "AR"]
SIZE_HEADERS = ["MB before", "MB after"]
#: The sections whose rows prove a DIVERGE verdict, by document key.
SECTION_TITLES = {
    "divergence": "Rank consensus",
    "schedule_divergence": "Schedule consensus",
    "compile_divergence": "Compile ids and cache consensus",
}
#: The sections that tell why a run is incomplete or has no data.
OTHER_TITLES = {
    "world": "World",
    "compiled_regions": "Compiled regions",
    "diagnostics": "Diagnostics",
    "notes": "Notes",
}


def _outcome_cells(g: dict[str, Any], with_sizes: bool) -> list[Any]:
    row = [
        g["compile_id"],
        graph_label(g["graph_index"]),
        fsdp_groups_cell(g),
        g["group_size"],
        g["n_nodes"],
        fmt_mb(g["bucket_cap_mb"]),
        *(fmt_counts(g["collectives"].get(t)) for t in COLLECTIVE_TYPES),
    ]
    if with_sizes:
        sz = g.get("sizes_mb")
        row += [fmt_mb(total_mb(sz["before"])) if sz else "-", _after_text(sz) if sz else "-"]
    return row


def _after_text(sz: dict[str, Any]) -> str:
    """The MB after bucketing; ``= 0.284`` when it differs from before by the rounding of the
    logged sizes only (each is rounded to 3 decimals: merging is no saving of bytes)."""
    before, after = sz.get("before") or [], sz.get("after")
    if after is None:
        return "-"
    b, a = total_mb(before), total_mb(after)
    if b is not None and a is not None and a != b and abs(a - b) <= 0.0005 * (len(before) + len(after)):
        return f"= {fmt_mb(a)}"
    return fmt_mb(a)


def _has_sizes(graphs: list[dict[str, Any]]) -> bool:
    return any(g.get("sizes_mb") for g in graphs)


def grouped_rows(doc: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """One row per graph and distinct outcome, with the ranks that have it (as ranges) and
    their count: graphs in first-seen order, the most common outcome first."""
    by_graph: dict[tuple[str, int], dict[str, tuple[dict[str, Any], list[int | None]]]] = {}
    for grp in doc["groups"]:
        members = rank_members(grp["ranks"])
        for g in grp["graphs"]:
            outcome = dumps_json(g)
            slot = by_graph.setdefault((g["compile_id"], g["graph_index"]), {})
            if outcome in slot:
                slot[outcome][1].extend(members)
            else:
                slot[outcome] = (g, list(members))
    graphs = [g for grp in doc["groups"] for g in grp["graphs"]]
    with_sizes = _has_sizes(graphs)
    headers = ["ranks", "count", *OUTCOME_HEADERS, *(SIZE_HEADERS if with_sizes else [])]
    rows = []
    for slot in by_graph.values():
        for g, members in sorted(slot.values(), key=lambda v: -len(v[1])):
            rows.append([ranks_cell(format_ranks(members)), len(members), *_outcome_cells(g, with_sizes)])
    return headers, rows


def per_rank_rows(doc: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows of the per-rank, per-graph table (``--per-rank``)."""
    graphs = [g for r in doc["ranks"] for g in r["graphs"]]
    with_sizes = _has_sizes(graphs)
    headers = ["rank", *OUTCOME_HEADERS, *(SIZE_HEADERS if with_sizes else [])]
    rows = [
        ["rank not logged" if r["rank"] is None else r["rank"], *_outcome_cells(g, with_sizes)]
        for r in doc["ranks"]
        for g in r["graphs"]
    ]
    return headers, rows


def not_prebucketed_rows(doc: dict[str, Any], headers: list[str]) -> list[list[Any]]:
    """Outcome-table rows of the graphs torch never pre-bucketed (``did_nothing`` items with an
    ``outcome``): "not pre-bucketed" for their groups, their scheduled counts N->N, the MB the
    schedule's estimation gives (one row per rank under ``--per-rank``)."""
    rows = []
    for d in doc.get("did_nothing") or []:
        if not d.get("outcome"):
            continue
        mb = None if d.get("total_bytes") is None else round(d["total_bytes"] / 2**20, 3)
        cells = [
            d["compile_id"],
            graph_label(d["graph_index"]),
            d["outcome"],
            d.get("group_size"),
            "-",
            "-",
            *(
                fmt_counts({"before": n, "after": n})
                for n in (d["counts"].get(t, 0) for t in COLLECTIVE_TYPES)
            ),
        ]
        if "MB before" in headers:
            cells += [fmt_mb(mb), fmt_mb(mb)]
        members = rank_members(d["ranks"])
        if headers[0] == "ranks":
            rows.append([ranks_cell(ranks_as_ranges(d["ranks"])), len(members), *cells])
        else:
            rows += [["-" if r is None else r, *cells] for r in sorted(members, key=rank_order)]
    return rows


def graph_rows(doc: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """The outcome table: per rank when the document has ``ranks``, else grouped; then the
    graphs never pre-bucketed (:func:`not_prebucketed_rows`)."""
    headers, rows = per_rank_rows(doc) if doc.get("ranks") is not None else grouped_rows(doc)
    return headers, rows + not_prebucketed_rows(doc, headers)


def _total_row(doc: dict[str, Any], headers: list[str]) -> list[Any]:
    """The outcome table's total: the document's ``totals``, which count the graphs never
    pre-bucketed too (:func:`tracekit.analyze.not_prebucketed.table_totals`)."""
    t = doc["totals"]
    lead = ["total", ""] if headers[0] == "ranks" else ["total"]
    never = t.get("not_prebucketed") or 0
    more = [f"+ {never}", "not pre-bucketed"] if never else ["", ""]
    row = [
        *lead,
        plural(t["graphs"], "graph"),
        *more,
        "",
        "",
        "",
        *(fmt_counts(t["collectives"][c]) for c in COLLECTIVE_TYPES),
    ]
    if len(headers) > len(row):
        b, a = t["mb_before"], t["mb_after"]
        n = sum(c["before"] + c["after"] for c in t["collectives"].values())
        rounding = b is not None and a is not None and a != b and abs(a - b) <= 0.0005 * n
        row += [fmt_mb(b), f"= {fmt_mb(a)}" if rounding else fmt_mb(a)]
    return row


def render_text(doc: dict[str, Any], fmt: str) -> str:
    """The table/markdown report of a summary document, verdict first; CSV is every section
    in one table (:mod:`tracekit.render.summary_csv`)."""
    if fmt == "csv":  # every section, numbers as numbers (tracekit.render.summary_csv)
        from tracekit.render.summary_csv import summary_csv

        return summary_csv(doc)
    headers, rows = graph_rows(doc)
    out = []
    if doc.get("verdict"):
        out += [heading("Verdict", fmt), wrap_clauses(doc["verdict"]["text"]) + "\n"]
        proof = [
            f"{SECTION_TITLES[k]} ({len(doc.get(k) or [])} row{'s' if len(doc.get(k) or []) != 1 else ''})"
            for k in doc["verdict"].get("sections") or []
            if k in SECTION_TITLES
        ]
        proof += [
            OTHER_TITLES[k]
            for k in doc["verdict"].get("sections") or []
            if k in OTHER_TITLES and (k not in ("notes", "compiled_regions") or doc.get(k))
        ]
        if proof:
            out.append(f"Why: see {', '.join(proof)} below\n")
    if doc.get("world"):
        out += ["\n", section_line("World", world_text(doc["world"]), fmt)]
    if doc.get("mesh"):
        out.append(section_line("Mesh", mesh_line(doc["mesh"]), fmt))
    per_rank = doc.get("ranks") is not None
    title = (
        "Bucketing per rank and graph"
        if per_rank
        else "Bucketing per graph (ranks with the same outcome together)"
    )
    out.append("\n" + heading(title, fmt))
    if not rows:
        out.append("no bucketing outcome recorded (see Notes)\n")
        if doc.get("compiled_regions"):
            out.append(render_compiled_regions(doc["compiled_regions"], fmt))
    else:
        out.append(table(rows + [_total_row(doc, headers)], headers, fmt))
        legend = [UNITS_MB] + ([UNITS_SIZES] if headers[-1] == SIZE_HEADERS[-1] else [])
        out.append(
            "\n" + "; ".join(legend) + f"; total: over all rows' ranks ({doc['totals']['ranks']}), "
            "not one job's bytes; = X: differs from before by rounding only\n"
        )
        counted = counted_groups_text(doc)  # on a mesh: which groups AG, RS, AR count
        if counted:
            out.append(counted + "\n")
        if doc.get("compiled_regions"):  # rows of graphs never pre-bucketed only: the verdict names it
            out.append(render_compiled_regions(doc["compiled_regions"], fmt))

    div = doc["divergence"]
    if rows:
        if not div:
            nranks = doc["totals"]["ranks"]
            out.append(
                "\n"
                + section_line(
                    "Rank consensus",
                    f"all {nranks} ranks agree on the bucketing outcome"
                    if nranks > 1
                    else "one rank: nothing to compare",
                    fmt,
                )
            )
        else:
            out.append("\n" + heading("Rank consensus", fmt))
            out.append(differences_line(div) + "\n\n")
            out.append(
                table(
                    [
                        [
                            d["compile_id"],
                            graph_label(d["graph_index"]),
                            d["field"],
                            ranks_cell(ranks_as_ranges(d["ranks"])),
                            value_text(d["field"], d["value"]),
                            majority_cell(d, div, ranks_as_ranges(d["majority_ranks"])),
                            value_text(d["field"], d["majority_value"]),
                            "see Schedule consensus"
                            if d["field"] == "final"
                            else first_diff_text(d["first_difference"]),
                        ]
                        for d in div
                    ],
                    [
                        "compile id",
                        "graph",
                        "field",
                        "ranks",
                        "value",
                        *majority_headers(div),
                        "first difference",
                    ],
                    fmt,
                )
            )

    if doc["totals"]["ranks"]:  # schedules and compile ids are logged with or without an outcome
        out.append(render_schedule_sections(doc, fmt))
    if doc.get("breaks_and_recompiles"):
        out.append(render_breaks_and_recompiles(doc["breaks_and_recompiles"], fmt))

    if rows:
        dn = doc["did_nothing"]
        if not dn and not doc.get("mesh_not_prebucketed"):
            out.append("\n" + section_line("Bucketing did nothing", did_nothing_none_text(doc), fmt))
        elif dn:
            out.append("\n" + heading("Bucketing did nothing", fmt))
            out.append(
                table(
                    [
                        [
                            d["compile_id"],
                            graph_label(d["graph_index"]),
                            ", ".join(f"{SHORT_NAMES[t]} {n}->{n}" for t, n in d["counts"].items())
                            + (f" ({d['outcome']})" if d.get("outcome") else ""),
                            fmt_mb(d["bucket_cap_mb"]),
                            ranks_cell(ranks_as_ranges(d["ranks"])),
                            d.get("explain", "-"),
                        ]
                        for d in dn
                    ],
                    ["compile id", "graph", "not merged", "cap MB", "ranks", "why"],
                    fmt,
                )
            )
            out.append(not_prebucketed_lines(dn, fmt))
        unb = doc.get("mesh_not_prebucketed") or []
        if unb:
            out.append(
                "\n" + heading("Bucketing did nothing on the mesh (groups pre-bucketing never sees)", fmt)
            )
            out.append(
                table(
                    [
                        [
                            d["compile_id"],
                            graph_label(d["graph_index"]),
                            f"{d['role']} {names_text(d['groups'])}",
                            f"{d['kind']} {d['count']}->{d['count']}",
                            "?" if d["bytes"] is None else f"{d['bytes']:,}",
                            "?" if d["est_ms"] is None else f"{d['est_ms']:.4f}",
                            ranks_cell(d["ranks"]),
                        ]
                        for d in unb
                    ],
                    ["compile id", "graph", "groups", "not merged", "bytes", "est ms", "ranks"],
                    fmt,
                )
            )
            out.append("\nwhy: " + unb[0]["reason"] + "\n")
        out.append(run_once_text(doc, fmt))  # on a mesh: a kind that runs once there (no finding)

    diag = doc["diagnostics"]
    if not diag["counts"]:
        out.append("\n" + section_line("Diagnostics", "no bad input", fmt))
    else:
        out.append("\n" + heading("Diagnostics", fmt))
        out.append(table([[k, v] for k, v in diag["counts"].items()], ["kind", "count"], fmt))
        out.append("\n")
        out.append(
            table(
                [
                    [e["kind"], where_text(e["file"], e["line"]), e.get("detail", "")]
                    for e in diag["examples"]
                ],
                ["kind", "where", "detail"],
                fmt,
            )
        )
    if doc.get("notes"):
        out.append("\n" + heading("Notes", fmt))
        out.append("".join(f"- {n}\n" for n in doc["notes"]))
    return "".join(out)


def not_prebucketed_lines(dn: list[dict[str, Any]], fmt: str) -> str:
    """One line per graph never pre-bucketed: its reason, what runs one by one, and the
    forward's FSDP groups (``dn``: the document's ``did_nothing``)."""
    items = [d for d in dn if d.get("outcome")]
    if not items:
        return ""
    from tracekit.render.summary_words import finding_counts_text

    return "\n" + "".join(
        f"- {d['compile_id']} {graph_label(d['graph_index'])} (ranks {ranks_cell(ranks_as_ranges(d['ranks']))}): "
        f"{d['outcome']}: {d['reason_text']}. It runs {finding_counts_text(d)}, one by one.\n"
        for d in items
    )
