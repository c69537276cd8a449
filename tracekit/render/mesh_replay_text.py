"""Text for replay on a mesh (a ``tracekit.replay/3`` document whose graphs carry
``process_groups``): the process groups each graph registered before torch's passes ran, with
their role, size (and where it came from) and members. Renderers only: they work from the
document; a 1-D document has no such section."""

from __future__ import annotations

from typing import Any

from tracekit.render.text import heading, table

GROUP_HEADERS = ["group", "role", "size", "size from", "members", "collectives", "graphs"]


def process_groups_section(doc: dict[str, Any], fmt: str) -> str:
    """One row per process group the replayed graphs use; empty without a mesh."""
    seen: dict[str, tuple[dict[str, Any], list[str], list[str]]] = {}
    for g in doc["graphs"]:
        for pg in g.get("process_groups") or []:
            row = seen.setdefault(pg["name"], (pg, [], []))
            label = f"{g['compile_id']}:{g['graph_index']}"
            if label not in row[1]:
                row[1].append(label)
            row[2].extend(k for k in pg["kinds"] if k not in row[2])
    if not seen:
        return ""
    rows = [
        [
            name,
            pg["role"] or "-",
            pg["size"] if pg["size"] is not None else "UNKNOWN",
            pg["size_from"] or "-",
            pg["members"] or "-",
            ", ".join(kinds),
            ", ".join(graphs),
        ]
        for name, (pg, graphs, kinds) in sorted(seen.items(), key=lambda kv: _name_key(kv[0]))
    ]
    return (
        "\n"
        + heading("Process groups registered (fake, of each group's size) before torch's passes ran", fmt)
        + table(rows, GROUP_HEADERS, fmt)
        + "\nsize from: graph (its group_size argument), members (the ranks whose logs use the name),\n"
        "world (the log's '# World size' over the graph's other groups).\n"
    )


UNHANDLED_HEADERS = ["ranks", "graph", "group", "role", "kind", "count", "bytes", "est ms"]
WHAT_IF_HEADERS = [
    "ranks",
    "graph",
    "what-if (recorded cap)",
    "left on group",
    "their est ms",
    "comm ms",
    "exposed ms",
    "est ms",
]

#: The what-ifs' table when other caps were replayed too: each row names its cap.
CAP_HEADERS = [*WHAT_IF_HEADERS[:2], "cap: what-if", *WHAT_IF_HEADERS[3:]]


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"


def what_if_label(w: dict[str, Any], groups: list[str]) -> str:
    """``our pass given '1' as well`` or ``torch's scheduler, collective_bucketing on``."""
    names = ", ".join(map(repr, groups))
    if w["name"] == "our_pass_with_groups":
        return f"our pass given {names} as well"
    return "torch's scheduler, collective_bucketing on"


def _collective_cells(g: dict[str, Any], label: str, c: dict[str, Any]) -> list[Any]:
    """A collective's cells on a group pre-bucketing never sees: the graph's ranks, its label,
    the group, role, kind, count, one rank's bytes and estimated ms."""
    nbytes = "-" if c["bytes"] is None else f"{c['bytes']:,}"
    return [g["ranks"], label, c["group"], c["role"] or "-", c["kind"], c["count"], nbytes, _ms(c["est_ms"])]


def unhandled_section(doc: dict[str, Any], fmt: str) -> str:
    """Collectives pre-bucketing never handles on the mesh (``not_prebucketed_on_mesh``), the
    reason, and the what-ifs run on each graph; empty when no graph has any."""
    entries = [(g, g["not_prebucketed_on_mesh"]) for g in doc["graphs"] if g.get("not_prebucketed_on_mesh")]
    if not entries:
        return ""
    rows: list[list[Any]] = []
    reasons: list[str] = []
    what_rows: list[list[Any]] = []
    errors: list[str] = []
    torch_figure = False
    any_caps = any(m.get("at_caps") for _, m in entries)
    for g, m in entries:
        label = f"{g['compile_id']}:{g['graph_index']}"
        for c in m["collectives"]:
            rows.append(_collective_cells(g, label, c))
            if c["reason"] not in reasons:
                reasons.append(c["reason"])
        groups = list(dict.fromkeys(c["group"] for c in m["collectives"]))
        at_caps = m.get("at_caps") or []
        for i, e in enumerate([m, *at_caps]):
            # with other caps replayed, each row says its cap (the recorded one first)
            cap = (
                ""
                if not at_caps
                else f"{e['as_run']['bucket_cap_mb']:g} MB{' (recorded)' if i == 0 else ''}: "
            )
            torch_figure |= _what_if_rows(what_rows, errors, g, label, groups, e, cap)
    out = [
        "\n" + heading("Collectives pre-bucketing never handles on the mesh", fmt),
        table(rows, UNHANDLED_HEADERS, fmt),
        "\n" + "".join(("- " if fmt == "markdown" else "  ") + f"{_wrap(r)}\n" for r in reasons),
        "\n" + table(what_rows, WHAT_IF_HEADERS if not any_caps else CAP_HEADERS, fmt),
    ]
    # --recommend: its grid's caps were replayed, the what-ifs ran at some of them
    fewer = any(len(m.get("at_caps") or []) < len(g.get("replays") or []) for g, m in entries)
    whole = (doc.get("totals") or {}).get("step_mesh_what_ifs") or []
    if whole:
        step = doc["totals"]["step"][0]
        out.append(
            f"\nwhole step (rank {step['rank']}'s graphs) at the recorded cap: exposed {_ms(step['exposed_ms'])}, est {_ms(step['est_ms'])} ms as run\n"
        )
        for w in whole:
            out.append(
                f"  {what_if_step_label(w['name'])}: exposed {_ms(w['exposed_ms'])}, est {_ms(w['est_ms'])} ms ({w['est_ms_vs_recorded']:+.4f})\n"
            )
    if errors:
        out.append("\n" + "".join(("- " if fmt == "markdown" else "  ") + f"{e}\n" for e in errors))
    out.append(
        "\nwhat-ifs: run on the rebuilt graph at the recorded cap"
        + (
            " and at each cap replayed"
            if any_caps and not fewer
            else " and at the other caps shown"
            if any_caps
            else ""
        )
        + ", then torch's overlap scheduler; left on\n"
        "group: the collectives left on those groups after it, their est ms torch's NCCL model.\n"
    )
    if fewer:
        out.append(
            "Other caps were replayed; the what-ifs ran at the caps shown only (with --recommend they\n"
            "run at the caps given with --cap-mb and at the cap it recommends, not at each cap of its grid).\n"
        )
    if torch_figure:
        out.append(
            "*: torch's own exposed figure, computed from the estimates of the collectives before its\n"
            "bucketing: it does not move when the scheduler buckets them (the comm ms beside it does).\n"
        )
    return "".join(out)


def _what_if_rows(
    what_rows: list[list[Any]],
    errors: list[str],
    g: dict[str, Any],
    label: str,
    groups: list[str],
    e: dict[str, Any],
    cap: str,
) -> bool:
    """The rows of one cap's what-ifs (``e``: ``as_run`` and ``what_ifs``), ``cap`` before each
    label; True when torch's own exposed figure (``*``) is among them."""
    a = e["as_run"]
    what_rows.append(
        [
            g["ranks"],
            label,
            f"{cap}as run",
            _n(a["left"]),
            _ms(a["left_est_ms"]),
            _ms(a["comm_ms"]),
            _ms(a["exposed_ms"]),
            _ms(a["est_ms"]),
        ]
    )
    torch_figure = False
    for w in e["what_ifs"]:
        if not w["ok"]:
            errors.append(
                f"ranks {g['ranks']} graph {label}: {cap}{what_if_label(w, groups)}: could not run: {w['error']}"
            )
            continue
        exposed = _ms(w["exposed_ms"])
        if w["name"] == "overlap_bucketing":
            exposed += "*"
            torch_figure = True
        what_rows.append(
            [
                g["ranks"],
                label,
                f"{cap}{what_if_label(w, groups)}",
                _n(w["left"]),
                _ms(w["left_est_ms"]),
                _ms(w["comm_ms"]),
                exposed,
                _ms(w["est_ms"]),
            ]
        )
    return torch_figure


RUN_ONCE_HEADERS = ["ranks", "graph", "group", "role", "kind", "count", "bytes", "est ms", "collective"]


def run_once_section(doc: dict[str, Any], fmt: str) -> str:
    """Collectives on groups pre-bucketing never sees that run once in their graph
    (``run_once_on_mesh``: tensor parallelism's all-reduces of activations): their count, bytes,
    estimate, why there is no finding and no what-if, and what each carries, read off the
    graph; empty when no graph has any."""
    import textwrap

    rows: list[list[Any]] = []
    notes: list[str] = []
    for g in doc["graphs"]:
        label = f"{g['compile_id']}:{g['graph_index']}"
        for c in g.get("run_once_on_mesh") or []:
            rows.append([*_collective_cells(g, label, c), c["collective"]])
            text = f"{label} {c['collective']}: {c['reason']}" + (
                f"; read off the graph: {c['context']['text']}" if c.get("context") else ""
            )
            notes.append(textwrap.fill(text, 100, subsequent_indent="    "))
    if not rows:
        return ""
    return (
        "\n"
        + heading("Collectives on groups pre-bucketing never sees, one of a kind (no finding)", fmt)
        + table(rows, RUN_ONCE_HEADERS, fmt)
        + "\n"
        + "".join(("- " if fmt == "markdown" else "  ") + n.replace("\n", "\n  ") + "\n" for n in notes)
    )


#: The short names of the what-ifs in the whole step's rows (``1 + our pass``).
STEP_WHAT_IF_NAMES = {"our_pass_with_groups": "our pass", "overlap_bucketing": "collective_bucketing"}

STEP_WHAT_IFS_NOTE = (
    "\nX + our pass: the step at cap X with our pass given the groups pre-bucketing never sees on the\n"
    "mesh as well; X + collective_bucketing: with torch's scheduler's collective_bucketing on (*: its\n"
    "own exposed figure, which does not move); the graphs without what-ifs as run. A cap without such\n"
    "rows: the what-ifs did not run there (--recommend runs them at the caps given with --cap-mb and\n"
    "at the cap it recommends, not at each cap of its grid: two more scheduler runs a cap and graph).\n"
)


def step_what_if_rows(step: dict[str, Any]) -> list[list[Any]]:
    """The rows under a ``Whole step per cap`` row: that cap's step with each what-if
    (``mesh_what_ifs``, :mod:`tracekit.replay.mesh_whole_step`); none without."""
    rows = []
    for w in step.get("mesh_what_ifs") or []:
        exposed = _ms(w["exposed_ms"]) + ("*" if w["name"] == "overlap_bucketing" else "")
        rows.append(
            [
                f"{step['cap']} + {STEP_WHAT_IF_NAMES.get(w['name'], w['name'])}",
                "/".join(f"{c:g}" for c in step["bucket_cap_mb"]),
                _n(w.get("collectives")),
                "-",  # the what-ifs' comm ms are NCCL sums, not the scheduler's (see the what-ifs' table)
                exposed,
                _ms(round(w["est_ms"] - w["exposed_ms"], 4)),
                _ms(w["est_ms"]),
                "-",
                "-",
                f"{w['est_ms_vs_recorded']:+.4f}",
            ]
        )
    return rows


def recommendation_what_ifs(rec: dict[str, Any]) -> str:
    """What the what-ifs would give at the recommended cap (``recommendation.mesh_what_ifs``),
    after the recommendation; "" without. The recommendation itself is of the caps as torch runs
    them: the what-ifs change the pass or the scheduler, not the cap."""
    whole = rec.get("mesh_what_ifs") or []
    if not whole:
        return ""
    parts = [
        f"{what_if_step_label(w['name'])}: est {w['est_ms']:.4f} ms ({w['est_ms_vs_as_run']:+.4f}), exposed "
        f"{w['exposed_ms']:.4f}{'*' if w['name'] == 'overlap_bucketing' else ''}"
        for w in whole
    ]
    return (
        f"At {rec['cap_mb']:g} MB, with the what-ifs on the mesh (the Pareto front and the recommendation are of\n"
        "the caps as torch runs them: the what-ifs change the pass or the scheduler, not the cap):\n"
        + "".join(f"  {p}\n" for p in parts)
    )


def what_if_step_label(name: str) -> str:
    """A what-if's name in the whole step's lines."""
    return (
        "our pass given the groups as well"
        if name == "our_pass_with_groups"
        else "torch's scheduler, collective_bucketing on"
    )


def _wrap(text: str, width: int = 196) -> str:
    """A reason within 200 columns: lines past ``width`` go on four spaces in (a shorter one
    as it is)."""
    import textwrap

    return text if len(text) <= width else textwrap.fill(text, width, subsequent_indent="    ")


def _n(x: int | None) -> str:
    return "-" if x is None else str(x)


def _name_key(name: str) -> tuple[bool, int, str]:
    return (not name.isdigit(), int(name) if name.isdigit() else 0, name)


__all__ = [
    "STEP_WHAT_IFS_NOTE",
    "process_groups_section",
    "recommendation_what_ifs",
    "run_once_section",
    "step_what_if_rows",
    "unhandled_section",
    "what_if_label",
    "what_if_step_label",
]
