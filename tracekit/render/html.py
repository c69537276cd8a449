"""A summary document -> one self-contained HTML page, the file to attach to a bug.

:func:`render_html` takes the ``tracekit.summary`` document (a dict: what
:func:`tracekit.render.summary_document.summary_document` makes, or a saved JSON summary) and returns the page
as a string. It never reads a file. The page inlines its CSS, script and SVG charts
(:mod:`tracekit.render.html_assets`) and its Content-Security-Policy forbids every fetch.

Sections, in order: verdict, world (ranks found / missing, a rank map), rank groups (ranks whose
graphs are identical, with each graph's outcome and final schedule), divergence
(``<section id="divergence" data-differing-ranks="3">``), bucket sizes (SVG bars per graph),
with a replay document the cap sweep (:mod:`tracekit.render.sweep`), graphs where bucketing did nothing (with their ``tracekit explain`` command), diagnostics.

Documents of schema ``tracekit.summary/1`` and ``/2`` both render: each key of the newer one
(``world``, ``verdict``, ``groups``, ``schedule_divergence``, ``compile_divergence``, graphs'
``final``, did-nothing ``explain``) is shown when present; when absent, world, verdict and groups
are derived from what the document holds (:mod:`tracekit.analyze.documents`), or the section
says what is missing. Rank sets may be lists of ranks or range strings (``"0-2,5"``); they are
printed as ranges.

Everything taken from the document is untrusted (it comes from logs): every string goes through
:func:`html.escape`, in text and in attributes. Long lists are cut at fixed limits, so a
1,024-rank run stays a small page.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from tracekit.analyze.documents import (
    differing_ranks,
    document_groups,
    document_verdict,
    document_world,
    rank_set,
)
from tracekit.model import COLLECTIVE_TYPES, SHORT_NAMES
from tracekit.model.nouns import graph_label, rank_noun
from tracekit.model.rankset import format_ranks
from tracekit.render.cells import did_nothing_none_text, first_diff_text, total_mb, value_text, where_text
from tracekit.render.html_assets import CSS, JS
from tracekit.render.html_parts import (
    cell,
    checked_ranks_text,
    collective_text,
    compile_where,
    cut_rows,
    esc,
    final_counts_text,
    fmt_bytes,
    majority_cell,
    rank_count,
    ranks_cell,
    row_ranks,
    table,
    where_cells,
)
from tracekit.render.majority_columns import majority_headers
from tracekit.render.mesh_text import (
    counted_groups_text,
    fsdp_groups_cell,
    groups_by_role,
    mesh_line,
    names_text,
)
from tracekit.render.summary_words import verdict_dict
from tracekit.render.text import fmt_counts, fmt_mb

#: Content-Security-Policy of the page: inline style and script, nothing fetched.
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
#: Rank groups shown with their graph tables; the rest are listed by ranks only.
MAX_GROUPS = 64
#: Rank groups whose graphs get a bucket-size chart.
MAX_CHART_GROUPS = 6
#: Bars per size list in a chart.
MAX_BARS = 400
#: Group colours (CSS classes c0..c7); later groups are grey.
COLOURS = 8
#: Rank maps are drawn up to this many ranks.
MAX_MAP_RANKS = 16384

SECTIONS = [
    ("verdict", "Verdict"),
    ("world", "World"),
    ("groups", "Rank groups"),
    ("divergence", "Divergence"),
    ("sizes", "Bucket sizes"),
    ("did-nothing", "Did nothing"),
    ("diagnostics", "Diagnostics"),
]


# --- sections --------------------------------------------------------------------------------------


def section_verdict(doc: dict[str, Any], v: dict[str, Any]) -> str:
    """The verdict ``v`` (:func:`tracekit.analyze.documents.document_verdict`): its status and
    line, the divergence sections that prove it, and the totals."""
    status, text = v["status"], v["text"]
    t = doc.get("totals") or {}
    coll = t.get("collectives") or {}
    stats = [
        f"<span>{esc(t.get('ranks', '-'))} ranks</span>",
        f"<span>{esc(t.get('graphs', '-'))} graph outcomes</span>",
    ]
    if t.get("not_prebucketed"):  # counted in the totals beside, as in the text's total row
        stats.append(f"<span>+ {esc(t['not_prebucketed'])} not pre-bucketed</span>")
    for c in COLLECTIVE_TYPES:
        if isinstance(coll.get(c), dict):
            stats.append(f"<span>{SHORT_NAMES[c]} {esc(fmt_counts(coll[c]))}</span>")
    if t.get("mb_before") is not None:
        stats.append(
            f"<span>{esc(fmt_mb(t.get('mb_before')))} MB &rarr; {esc(fmt_mb(t.get('mb_after')))} MB</span>"
        )
    titles = {
        "divergence": "bucketing outcome",
        "schedule_divergence": "final schedule",
        "compile_divergence": "compilation",
    }
    proof = [
        f"{titles[k]} ({len(doc.get(k) or [])})"
        for k in v.get("sections") or []
        if k in titles and isinstance(doc.get(k), list)
    ]
    why = f'<p class="why">why: see Divergence: {esc(", ".join(proof))}</p>' if proof else ""
    return (
        f'<section id="verdict" class="verdict verdict-{esc(status)}" data-status="{esc(status)}">'
        f'<h2>Verdict</h2><p class="line">{esc(text)}</p>{why}'
        f'<p class="stats muted">{"".join(stats)}</p></section>'
    )


def mesh_rows(mesh: dict[str, Any]) -> str:
    """The World section's mesh: one line (``world 4 = replicate 2 × shard 2``), then a table of
    its process groups by role (name, size, members, why that role)."""
    if not mesh:
        return ""
    rows = [
        [
            esc(role),
            esc(g["name"]),
            cell(g.get("size")),
            f'<span class="mono">{esc(checked_ranks_text(g["members"]))}</span>',
            esc(g.get("reason", "")),
        ]
        for role, groups in groups_by_role(mesh)
        for g in groups
    ]
    rows, more = cut_rows(rows)
    return (
        f'<p id="mesh" class="mono">Mesh: {esc(mesh_line(mesh))}</p>'
        + table(["role", "group", "size", "members", "why this role"], rows, numeric=range(2, 3))
        + more
    )


def _world_files_rows(world: dict[str, Any]) -> list[tuple[str, str]]:
    """The World rows that account for every file besides the ranks' logs, as the text's World
    line does (:func:`tracekit.model.world.world_text`): cut logs, files that are no rank,
    copies read once, files that are no log, subdirectories not read; each only when there is
    one."""
    rows = []
    cut = world.get("cut")
    if cut:
        rows.append(("cut short", f'<span class="mono">{esc(cut)}</span> (see Diagnostics)'))
    for key, label, tail in (
        ("unplaced", "not a rank", " (see Diagnostics)"),
        ("copies", "copies read once", ""),
        ("not_logs", "not a log", ""),
        ("subdirectories", "not read (subdirectories holding logs)", ""),
    ):
        paths = [str(p) for p in world.get(key) or []]
        if paths:
            names = ", ".join(esc(os.path.basename(p.rstrip("/")) or p) for p in paths[:10])
            more = f", and {len(paths) - 10} more" if len(paths) > 10 else ""
            rows.append((label, f'{len(paths)}: <span class="mono">{names}</span>{more}{tail}'))
    return rows


def section_world(world: dict[str, Any], mesh: dict[str, Any] | None = None) -> str:
    """The world: expected, found, missing and duplicated ranks, the mesh (:func:`mesh_rows`)
    when the ranks form one, and a rank map."""
    rows = []
    expected = world.get("expected")
    rows.append(("expected", esc(expected) if expected is not None else "unknown"))
    found = world.get("found")
    ranks = world.get("ranks")
    rows.append(
        (
            "found",
            f"{esc(found if found is not None else '-')}"
            + (f' <span class="mono">({esc(checked_ranks_text(ranks))})</span>' if ranks else ""),
        )
    )
    missing = checked_ranks_text(world.get("missing") or [])
    label = "missing (gaps below the highest rank)" if world.get("derived") else "missing"
    unknown = world.get("derived") and (not ranks or world.get("missing") is None)
    rows.append(
        (
            label,
            "unknown"
            if unknown
            else f'<span class="mono" data-ranks="{esc(missing)}" data-where="missing">'
            f"{esc(missing) or 'none'}</span>",
        )
    )
    dup = checked_ranks_text(world.get("duplicated") or [])
    if dup or "duplicated" in world and not world.get("derived"):
        rows.append(("duplicated", f'<span class="mono">{esc(dup) or "none"}</span>'))
    rows += _world_files_rows(world)
    dl = "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in rows)
    last = max(
        [r for r in rank_set(ranks) | rank_set(world.get("missing") or []) if r is not None],
        default=-1,
    )
    if isinstance(expected, int) and not isinstance(expected, bool):
        last = max(last, expected - 1)
    rank_map = ""
    if 0 <= last < MAX_MAP_RANKS:
        size = ' class="small"' if last >= 4096 else ""
        rank_map = (
            f'<div id="rank-map"{size} data-last="{last}" data-missing="{esc(missing)}" '
            'title="one cell per rank, coloured by rank group; click to look a rank up">'
            "</div>"
        )
    return f'<section id="world"><h2>World</h2><dl class="world">{dl}</dl>{mesh_rows(mesh or {})}{rank_map}</section>'


def not_prebucketed_row(d: dict[str, Any], has_final: bool) -> list[str]:
    """A graph-table row of a graph torch never pre-bucketed (a ``did_nothing`` item with an
    ``outcome``): "not pre-bucketed", its scheduled counts N->N and MB."""
    counts: Any = d.get("counts") if isinstance(d.get("counts"), dict) else {}
    nbytes = d.get("total_bytes")
    mb = esc(fmt_mb(round(nbytes / 2**20, 3))) if isinstance(nbytes, int) else "-"
    row = [
        *where_cells(d),
        esc(d.get("outcome")),
        cell(d.get("group_size")),
        "-",
        "-",
        *(esc(fmt_counts({"before": counts.get(t, 0), "after": counts.get(t, 0)})) for t in COLLECTIVE_TYPES),
        mb,
        mb,
    ]
    if has_final:
        row.append(esc(", ".join(f"{SHORT_NAMES.get(t, t)} {n}" for t, n in counts.items())))
    return row


def graph_table(graphs: list[dict[str, Any]], not_prebucketed: Sequence[dict[str, Any]] = ()) -> str:
    """Each graph's outcome: counts before->after, MB, and the final schedule's counts; then
    the graphs never pre-bucketed (:func:`not_prebucketed_row`)."""
    has_final = any("final" in g for g in graphs) or bool(not_prebucketed)
    headers = [
        "compile id",
        "graph",
        "FSDP groups",
        "group size",
        "machines",
        "cap MB",
        "AG",
        "RS",
        "AR",
        "MB before",
        "MB after",
    ] + (["final schedule"] if has_final else [])
    rows = []
    for g in graphs:
        coll = g.get("collectives") or {}
        sizes = g.get("sizes_mb")
        row = [
            *where_cells(g),
            esc(fsdp_groups_cell(g)),
            cell(g.get("group_size")),
            cell(g.get("n_nodes")),
            esc(fmt_mb(g.get("bucket_cap_mb"))),
            *(esc(fmt_counts(coll.get(t))) for t in COLLECTIVE_TYPES),
            esc(fmt_mb(total_mb(sizes.get("before")))) if sizes else "-",
            esc(fmt_mb(total_mb(sizes.get("after")))) if sizes else "-",
        ]
        if has_final:
            row.append(esc(final_counts_text(g.get("final"))))
        rows.append(row)
    rows += [not_prebucketed_row(d, has_final) for d in not_prebucketed]
    out = [table(headers, rows, numeric=range(3, 11))]
    for g in graphs:
        out.append(final_schedule(g))
    return "".join(out)


def final_schedule(graph: dict[str, Any]) -> str:
    final = graph.get("final")
    if not isinstance(final, dict) or not isinstance(final.get("collectives"), list):
        return ""
    items, more = cut_rows(final["collectives"])
    cid, label = where_cells(graph)
    rows = [
        [
            str(i),
            esc(SHORT_NAMES.get(str(c.get("kind")), c.get("kind", "?"))),
            cell(c.get("group")),
            cell(c.get("group_size")),
            fmt_bytes(c.get("bytes")),
            cell(c.get("est_ms")),
        ]
        for i, c in enumerate(items)
        if isinstance(c, dict)
    ]
    n = len(final["collectives"])
    return (
        f"<details><summary>final schedule of {cid} {label}: {n} collective"
        f"{'s' if n != 1 else ''}</summary>"
        + table(["#", "kind", "group", "group size", "bytes", "est ms"], rows, numeric=(0, 3, 4, 5))
        + more
        + "</details>"
    )


def section_groups(
    groups: list[dict[str, Any]], not_prebucketed: Sequence[dict[str, Any]] = (), counted: str = ""
) -> str:
    """The rank groups and their graph tables; ``counted``: on a mesh, which groups the AG, RS
    and AR columns count (:func:`tracekit.render.mesh_text.counted_groups_text`)."""
    if not groups:
        return (
            '<section id="groups"><h2>Rank groups</h2><p class="muted">this document has '
            "no per-rank graphs (no <code>ranks</code> or <code>groups</code> key)</p></section>"
        )
    out = [
        '<section id="groups"><h2>Rank groups</h2>',
        f'<p class="muted">{len(groups)} group{"s" if len(groups) != 1 else ""} of ranks whose '
        "graphs are identical (where they were read aside)</p>",
    ]
    if counted:
        out.append(f'<p class="muted" id="counted-groups">{esc(counted)}</p>')
    rest = []
    for i, g in enumerate(groups):
        ranks = checked_ranks_text(g.get("ranks"))
        count = g.get("count", rank_count(g.get("ranks")))
        colour = f"c{i}" if i < COLOURS else "cx"
        attrs = f'class="group" data-ranks="{esc(ranks)}" data-colour="{colour}" data-where="group {i + 1}"'
        graphs = [x for x in g.get("graphs") or [] if isinstance(x, dict)]
        if i >= MAX_GROUPS:  # one row each: ranks and counts only
            rest.append(
                f'<tr {attrs}><td class="num">{i + 1}</td><td class="num">{esc(count)}'
                f'</td><td class="mono">{esc(ranks) or "-"}</td></tr>'
            )
            continue
        title = (
            f'<h3><span class="swatch {colour}"></span>group {i + 1}: '
            f"{esc(count)} rank{'s' if count != 1 else ''} "
            f'<span class="mono">{esc(ranks) or "-"}</span>, {len(graphs)} graph'
            f"{'s' if len(graphs) != 1 else ''}</h3>"
        )
        held = rank_set(g.get("ranks"))
        mine = [d for d in not_prebucketed if held & rank_set(d.get("ranks"))]
        out.append(f"<div {attrs}>{title}{graph_table(graphs, mine)}</div>")
    if rest:
        out.append(
            f"<h3>{len(rest)} more groups (graph tables shown for the first {MAX_GROUPS})"
            "</h3><table><thead><tr><th>group</th><th>count</th><th>ranks</th></tr></thead>"
            f"<tbody>{''.join(rest)}</tbody></table>"
        )
    out.append("</section>")
    return "".join(out)


def section_divergence(doc: dict[str, Any]) -> str:
    differing = differing_ranks(doc)
    out = [f'<section id="divergence" data-differing-ranks="{esc(differing)}"><h2>Divergence</h2>']
    div = [d for d in doc.get("divergence") or [] if isinstance(d, dict)]
    sched = [d for d in doc.get("schedule_divergence") or [] if isinstance(d, dict)]
    comp = [d for d in doc.get("compile_divergence") or [] if isinstance(d, dict)]
    if not (div or sched or comp):
        out.append('<p class="muted">none: every rank agrees with the majority</p></section>')
        return "".join(out)
    if differing:
        out.append(
            f'<p data-ranks="{esc(differing)}" data-where="divergence">differing {rank_noun(differing)}: '
            f'<span class="mono">{esc(differing)}</span></p>'
        )
    splits: dict[tuple[str, ...], None] = {}
    for d in [*div, *sched, *comp]:
        if not d.get("majority", True) and isinstance(d.get("groups"), list):
            splits.setdefault(tuple(str(g) for g in d["groups"]), None)
    for groups in splits:  # a tie: every group named, none blamed
        members: set[int | None] = set()
        for g in groups:
            members |= rank_set(g)
        shown = " | ".join(groups[:8]) + (
            f" | ... (+{len(groups) - 8} more groups)" if len(groups) > 8 else ""
        )
        out.append(
            f'<p data-ranks="{esc(format_ranks(members))}" data-where="divergence">ranks split into '
            f"{len(groups)} groups with no majority (no rank is blamed): "
            f'<span class="mono">{esc(shown)}</span></p>'
        )
    if div:
        items, more = cut_rows(div)
        out.append("<h3>Bucketing outcome</h3>")
        rows = [
            [
                *where_cells(d),
                esc(d.get("field")),
                ranks_cell(d.get("ranks")),
                esc(value_text(str(d.get("field")), d.get("value"))),
                majority_cell(d, div),
                esc(value_text(str(d.get("field")), d.get("majority_value"))),
                esc(first_diff_text(d.get("first_difference"))),
            ]
            for d in items
        ]
        out.append(
            table(
                [
                    "compile id",
                    "graph",
                    "field",
                    "ranks",
                    "value",
                    *majority_headers(div),
                    "first difference",
                ],
                rows,
                row_attrs=row_ranks(items, "divergence"),
            )
            + more
        )
    if sched:
        items, more = cut_rows(sched)
        out.append("<h3>Final schedule</h3>")
        rows = [
            [
                *where_cells(d),
                "no schedule" if "length" in d and d["length"] is None else cell(d.get("position")),
                ranks_cell(d.get("ranks")),
                esc(collective_text(d.get("value"))),
                majority_cell(d, sched),
                esc(collective_text(d.get("majority_value"))),
            ]
            for d in items
        ]
        out.append(
            table(
                [
                    "compile id",
                    "graph",
                    "position",
                    "ranks",
                    "collective",
                    *majority_headers(sched, "collective"),
                ],
                rows,
                row_attrs=row_ranks(items, "schedule divergence"),
                numeric=(2,),
            )
            + more
        )
    if comp:
        items, more = cut_rows(comp)
        out.append("<h3>Compilation</h3>")
        rows = [
            [
                *compile_where(d),
                esc(d.get("what", "-")),
                ranks_cell(d.get("ranks")),
                esc(collective_text(d.get("value"))),
                majority_cell(d, comp),
                esc(collective_text(d.get("majority_value"))),
            ]
            for d in items
        ]
        out.append(
            table(
                ["compile id", "graph", "what", "ranks", "value", *majority_headers(comp)],
                rows,
                row_attrs=row_ranks(items, "compile divergence"),
            )
            + more
        )
    out.append("</section>")
    return "".join(out)


def sizes_svg(sizes: dict[str, Any], title: str) -> str:
    """Bars of each collective's size, the list before bucketing above the one after."""
    lists = [(w, [s for s in sizes.get(w) or [] if isinstance(s, dict)]) for w in ("before", "after")]
    lists = [(w, lst) for w, lst in lists if lst or w == "before"]
    known: list[Any] = [  # numbers
        s.get("size_mb") for _, lst in lists for s in lst if isinstance(s.get("size_mb"), (int, float))
    ]
    peak = max(known + [1e-9])
    width, left, row_h, gap = 560, 92, 56, 18
    plot_w = width - left - 8
    height = len(lists) * (row_h + gap) + 22
    parts = [
        f'<svg class="sizes" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{esc(title)}"><text x="6" y="14">{esc(title)}</text>'
    ]
    for k, (which, lst) in enumerate(lists):
        shown = lst[:MAX_BARS]
        y0 = 22 + k * (row_h + gap)
        total = total_mb(lst) or 0
        parts.append(
            f'<text x="6" y="{y0 + row_h // 2}">{which}</text>'
            f'<text x="6" y="{y0 + row_h // 2 + 13}">{len(lst)} &middot; '
            f"{esc(fmt_mb(total))} MB</text>"
        )
        step = plot_w / max(len(shown), 1)
        bar_w = max(min(step - 1, 28), 0.8)
        for i, s in enumerate(shown):
            mb: Any = s.get("size_mb") if isinstance(s.get("size_mb"), (int, float)) else 0
            h = max(row_h * mb / peak, 1)
            kind = s.get("type") if s.get("type") in ("AG", "RS", "AR") else "AR"
            parts.append(
                f'<rect class="{kind}" x="{left + i * step:.1f}" y="{y0 + row_h - h:.1f}" '
                f'width="{bar_w:.1f}" height="{h:.1f}"><title>{esc(which)} #{i}: '
                f"{esc(s.get('type'))} {esc(fmt_mb(mb))} MB {esc(s.get('name', ''))}"
                "</title></rect>"
            )
        if len(lst) > len(shown):
            parts.append(
                f'<text x="{left}" y="{y0 + row_h + 12}">first {len(shown)} of {len(lst)} shown</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def section_sizes(groups: list[dict[str, Any]]) -> str:
    out = [
        '<section id="sizes"><h2>Bucket sizes</h2>',
        '<p class="legend"><span><i style="background:var(--ag)"></i>'
        'AG all-gather</span><span><i style="background:var(--rs)"></i>RS reduce-scatter'
        '</span><span><i style="background:var(--ar)"></i>AR all-reduce</span>'
        '<span class="muted">bar height: MB, scaled per graph; hover a bar for its name'
        "</span></p>",
    ]
    charts = []
    for i, g in enumerate(groups[:MAX_CHART_GROUPS]):
        ranks = checked_ranks_text(g.get("ranks"))
        for graph in g.get("graphs") or []:
            if not isinstance(graph, dict) or not isinstance(graph.get("sizes_mb"), dict):
                continue
            cid, label = graph.get("compile_id", "?"), graph.get("graph_index")
            label = graph_label(label) if isinstance(label, int) else label
            charts.append(sizes_svg(graph["sizes_mb"], f"group {i + 1} (ranks {ranks}): {cid} {label}"))
    if not groups:
        out.append('<p class="muted">this document has no per-rank graphs</p>')
    elif not any(isinstance(g, dict) and g.get("graphs") for g in groups):
        out.append('<p class="muted">no bucketing outcome recorded: no sizes to show</p>')
    elif not charts:
        out.append(
            '<p class="muted">no sizes recorded (set pre_bucketing_fsdp_collectives_verbose '
            "= True in the job to log them)</p>"
        )
    else:
        out.append(f'<div class="charts">{"".join(charts)}</div>')
        if len(groups) > MAX_CHART_GROUPS:
            out.append(f'<p class="muted">charts for the first {MAX_CHART_GROUPS} groups</p>')
    out.append("</section>")
    return "".join(out)


def _mesh_groups_table(
    doc: dict[str, Any], key: str, where: str, title: str, count_header: str, count_text: str
) -> str:
    """The rows of ``doc[key]`` (collectives on groups pre-bucketing never sees): per graph and
    role, the groups, the kind's count (``count_text`` formats it from ``kind`` and ``count``),
    one rank's bytes and estimated ms, the ranks and the reason read off the graph; under an
    ``<h3>`` whose id is ``key`` with dashes; each row's ``data-where`` is ``where``."""
    items = [d for d in doc.get(key) or [] if isinstance(d, dict)]
    if not items:
        return ""
    items, more = cut_rows(items)
    rows = [
        [
            *where_cells(d),
            esc(f"{d.get('role', '?')} {names_text([str(g) for g in d.get('groups') or []])}"),
            esc(count_text.format(kind=d.get("kind", "?"), count=d.get("count", "?"))),
            esc(fmt_bytes(d.get("bytes"))),
            esc("-" if d.get("est_ms") is None else d["est_ms"]),
            ranks_cell(d.get("ranks")),
            esc(d.get("reason", "")),
        ]
        for d in items
    ]
    return (
        f'<h3 id="{key.replace("_", "-")}">{title}</h3>'
        + table(
            ["compile id", "graph", "groups", count_header, "bytes", "est ms", "ranks", "why"],
            rows,
            row_attrs=row_ranks(items, where),
            numeric=(4, 5),
        )
        + more
    )


def mesh_not_prebucketed_table(doc: dict[str, Any]) -> str:
    """The collectives pre-bucketing never handles on a mesh (``mesh_not_prebucketed``), a
    finding: e.g. HSDP's gradient all-reduces on the replicate groups, ``all_reduce 8->8``."""
    return _mesh_groups_table(
        doc,
        "mesh_not_prebucketed",
        "mesh not pre-bucketed",
        "On the mesh: groups pre-bucketing never sees",
        "not merged",
        "{kind} {count}->{count}",
    )


def mesh_run_once_table(doc: dict[str, Any]) -> str:
    """Collectives on groups pre-bucketing never sees that run once in a graph
    (``mesh_run_once``: fsdp_tp's all-reduce of activations on the tp groups): no finding, one
    alone has nothing to be bucketed with."""
    return _mesh_groups_table(
        doc,
        "mesh_run_once",
        "mesh run once",
        "On the mesh, one of a kind (no finding)",
        "runs",
        "{kind} {count}",
    )


def section_did_nothing(doc: dict[str, Any]) -> str:
    out = ['<section id="did-nothing"><h2>Bucketing did nothing</h2>']
    items = [d for d in doc.get("did_nothing") or [] if isinstance(d, dict)]
    # on a mesh: what pre-bucketing never handles there, then what runs once there (no finding)
    on_mesh = mesh_not_prebucketed_table(doc) + mesh_run_once_table(doc)
    if not items:
        if mesh_not_prebucketed_table(doc):
            out.append(on_mesh)
        elif not (doc.get("totals") or {}).get("graphs"):
            out.append('<p class="muted">no bucketing outcome recorded (see the notes)</p>')
        else:
            out.append(f'<p class="muted">{esc(did_nothing_none_text(doc))}</p>' + on_mesh)
        out.append("</section>")
        return "".join(out)
    items, more = cut_rows(items)
    with_explain = any(d.get("explain") for d in items)
    rows = []
    for d in items:
        counts = d.get("counts") or {}
        row = [
            *where_cells(d),
            esc(
                ", ".join(f"{SHORT_NAMES.get(t, t)} {n}->{n}" for t, n in counts.items())
                + (f" ({d['outcome']}: {d.get('reason_text', '')})" if d.get("outcome") else "")
            ),
            esc(fmt_mb(d.get("bucket_cap_mb"))),
            ranks_cell(d.get("ranks")),
        ]
        if with_explain:
            cmd = d.get("explain")
            row.append(
                f'<code>{esc(cmd)}</code><button class="copy" type="button" hidden '
                f'data-copy="{esc(cmd)}">copy</button>'
                if cmd
                else "-"
            )
        rows.append(row)
    headers = ["compile id", "graph", "not merged", "cap MB", "ranks"] + (["explain"] if with_explain else [])
    out.append(table(headers, rows, row_attrs=row_ranks(items, "did nothing")) + more)
    out.append(on_mesh)
    out.append("</section>")
    return "".join(out)


def section_diagnostics(doc: dict[str, Any]) -> str:
    diag = doc.get("diagnostics") or {}
    counts = diag.get("counts") or {}
    out = ['<section id="diagnostics"><h2>Diagnostics</h2>']
    if not counts:
        out.append('<p class="muted">no bad input</p>')
    else:
        out.append(table(["kind", "count"], [[esc(k), esc(v)] for k, v in counts.items()], numeric=(1,)))
        examples, more = cut_rows([e for e in diag.get("examples") or [] if isinstance(e, dict)])
        out.append(
            table(
                ["kind", "where", "detail"],
                [
                    [
                        esc(e.get("kind")),
                        f'<span class="mono">{esc(where_text(e.get("file"), e.get("line")))}</span>',
                        esc(e.get("detail", "")),
                    ]
                    for e in examples
                ],
            )
            + more
        )
    notes = doc.get("notes") or []
    if notes:
        out.append("<h3>Notes</h3><ul>" + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>")
    out.append("</section>")
    return "".join(out)


# --- the page --------------------------------------------------------------------------------------


def render_html(
    doc: dict[str, Any], replay: dict[str, Any] | None = None, measured: dict[str, Any] | None = None
) -> str:
    """The report page of a ``tracekit.summary`` document (see the module docstring); with a
    ``tracekit.replay/3`` document, a "Cap sweep" section too (:mod:`tracekit.render.sweep`); with
    a ``tracekit.measure/1`` document, a "Measured" section (:mod:`tracekit.render.measured_html`)."""
    world = document_world(doc)
    v = verdict_dict(document_verdict(doc, world))
    groups = document_groups(doc)
    paths = " ".join(str(p) for p in doc.get("paths") or [])
    sections = SECTIONS if replay is None else SECTIONS[:5] + [("sweep", "Cap sweep")] + SECTIONS[5:]
    sweep = ""
    if replay is not None:
        from tracekit.render.predicted_sweep import section_predicted
        from tracekit.render.sweep import section_sweep

        sweep = section_sweep(replay) + "\n"
        predicted = section_predicted(replay)  # a replay run with --profile
        if predicted:
            sections = sections[:6] + [("predicted", "Predicted")] + sections[6:]
            sweep += predicted + "\n"
    if measured is not None:
        from tracekit.render.measured_html import section_measured

        at = 5 if replay is None else 6 + any(k == "predicted" for k, _ in sections)  # after the sweeps
        sections = sections[:at] + [("measured", "Measured")] + sections[at:]
        sweep += section_measured(measured) + "\n"
    nav = "".join(f'<a href="#{k}">{esc(v)}</a>' for k, v in sections)  # every section, once known
    return "".join(
        [
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>tracekit report: {esc(v['text'])}</title><style>{CSS}</style></head>\n",
            f'<body data-schema="{esc(doc.get("schema", ""))}">',
            f'<header><h1>tracekit report</h1><p class="paths mono">{esc(paths)}</p><nav>{nav}</nav>',
            '<div class="finder"><label>Find rank<input id="rank-find" inputmode="numeric" '
            'autocomplete="off" placeholder="e.g. 3"></label><output id="rank-found"></output></div>',
            "</header>\n<main>",
            section_verdict(doc, v),
            "\n",
            section_world(world, doc.get("mesh")),
            "\n",
            section_groups(
                groups,
                [d for d in doc.get("did_nothing") or [] if isinstance(d, dict) and d.get("outcome")],
                counted_groups_text(doc),
            ),
            "\n",
            section_divergence(doc),
            "\n",
            section_sizes(groups),
            "\n",
            sweep,
            section_did_nothing(doc),
            "\n",
            section_diagnostics(doc),
            "\n",
            f"</main><footer>made by tracekit report from a {esc(doc.get('schema', '?'))} "
            "document; one self-contained file, nothing fetched</footer>\n",
            f"<script>{JS}</script></body></html>\n",
        ]
    )
