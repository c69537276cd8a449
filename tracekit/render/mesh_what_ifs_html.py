"""The report's mesh what-ifs (``tracekit report PATH --replay REPLAY.json``, in the "Cap sweep"
section): a saved ``tracekit.replay/3`` document of a mesh whose graphs carry
``not_prebucketed_on_mesh`` (collectives pre-bucketing never handles, such as HSDP's replicate
all-reduces, and the what-ifs run on them at the recorded cap:
:mod:`tracekit.replay.mesh_what_ifs`) -> one table per graph and one of the whole step. Reads
the document only; never imports torch; every string is escaped. Empty for a document without
what-ifs (a 1-D run).

For hsdp_overlap's backward (6 all-reduces on replicate group '1')::

    what-if (recorded cap)                      left on group  their est ms  comm ms  exposed ms  est ms
    as run                                      6              0.1176        0.1771   0.1631      0.3180
    our pass given '1' as well                  1              0.0414        0.1011   0.0871      0.2420
"""

from __future__ import annotations

import html
from typing import Any

from tracekit.render.mesh_replay_text import CAP_HEADERS, WHAT_IF_HEADERS, what_if_label, what_if_step_label

HEADERS = WHAT_IF_HEADERS  # the text table's columns
STEP_HEADERS = ["whole step", "exposed ms", "est ms", "vs as run"]


def _esc(v: Any) -> str:
    return html.escape(str(v), quote=True)


def _ms(x: Any) -> str:
    return f"{x:.4f}" if isinstance(x, (int, float)) and not isinstance(x, bool) else "-"


def _cap(mb: Any) -> str:
    return f"{mb:g}" if isinstance(mb, (int, float)) and not isinstance(mb, bool) else "?"


def _row(cells: list[str], what: str) -> str:
    tds = "".join(f'<td class="num">{c}</td>' if i >= 3 else f"<td>{c}</td>" for i, c in enumerate(cells))
    return f'<tr data-what-if="{_esc(what)}">{tds}</tr>'


def _table(headers: list[str], rows: list[str], css: str) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in headers)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def mesh_what_ifs_html(replay: dict[str, Any]) -> str:
    """``<div id="mesh-what-ifs">``: the what-ifs per graph, the whole step with each, the
    what-ifs that could not run; ``""`` when no graph has any."""
    graphs = [
        g for g in replay.get("graphs") or [] if isinstance(g, dict) and g.get("not_prebucketed_on_mesh")
    ]
    if not graphs:
        return ""
    rows, errors, reasons = [], [], []
    torch_figure = False
    any_caps = any(g["not_prebucketed_on_mesh"].get("at_caps") for g in graphs)
    # --recommend: its grid's caps were replayed, the what-ifs ran at some of them
    fewer = any(
        len(g["not_prebucketed_on_mesh"].get("at_caps") or []) < len(g.get("replays") or []) for g in graphs
    )
    for g in graphs:
        m = g["not_prebucketed_on_mesh"]
        label = f"{g.get('compile_id')}:{g.get('graph_index')}"
        ranks = g.get("ranks", g.get("rank"))
        collectives = [c for c in m.get("collectives") or [] if isinstance(c, dict)]
        groups = list(dict.fromkeys(str(c.get("group")) for c in collectives))
        reasons += [
            str(c["reason"]) for c in collectives if c.get("reason") and str(c["reason"]) not in reasons
        ]
        at_caps = [e for e in m.get("at_caps") or [] if isinstance(e, dict)]
        for i, e in enumerate([m, *at_caps]):
            # with other caps replayed, each row says its cap (the recorded one first)
            cap_mb = (e.get("as_run") or {}).get("bucket_cap_mb")
            cap = "" if not at_caps else f"{_esc(_cap(cap_mb))} MB{' (recorded)' if i == 0 else ''}: "
            a = e.get("as_run") or {}
            base = [_esc(ranks), _esc(label)]
            rows.append(
                _row(
                    [
                        *base,
                        f"{cap}as run",
                        _esc(a.get("left", "-")),
                        _ms(a.get("left_est_ms")),
                        _ms(a.get("comm_ms")),
                        _ms(a.get("exposed_ms")),
                        _ms(a.get("est_ms")),
                    ],
                    "as_run",
                )
            )
            for w in e.get("what_ifs") or []:
                name = cap + _esc(what_if_label(w, groups))
                if not w.get("ok"):
                    errors.append(
                        f"ranks {_esc(ranks)} graph {_esc(label)}: {name}: could not run: {_esc(w.get('error'))}"
                    )
                    continue
                exposed = _ms(w.get("exposed_ms"))
                if w.get("name") == "overlap_bucketing":
                    exposed += "*"
                    torch_figure = True
                rows.append(
                    _row(
                        [
                            *base,
                            name,
                            _esc(w.get("left", "-")),
                            _ms(w.get("left_est_ms")),
                            _ms(w.get("comm_ms")),
                            exposed,
                            _ms(w.get("est_ms")),
                        ],
                        str(w.get("name")),
                    )
                )
    out = [
        '<div id="mesh-what-ifs"><h3>What-ifs on the mesh: collectives pre-bucketing never handles</h3>',
        "".join(f'<p class="muted">{_esc(r)}</p>' for r in reasons),
        _table(HEADERS if not any_caps else CAP_HEADERS, rows, "mesh-what-ifs"),
    ]
    t = replay.get("totals")
    totals: dict[str, Any] = t if isinstance(t, dict) else {}
    steps = [s for s in totals.get("step") or [] if isinstance(s, dict)]
    # the whole step at each cap where the what-ifs ran (mesh_whole_step): the recorded cap's
    # alone without a cap before each row, as before other caps had them
    with_what_ifs = [s for s in steps if s.get("mesh_what_ifs")]
    if not with_what_ifs and steps and totals.get("step_mesh_what_ifs"):  # an older document
        with_what_ifs = [{**steps[0], "mesh_what_ifs": totals["step_mesh_what_ifs"]}]
    srows = []
    for step in with_what_ifs:
        cap = "" if len(with_what_ifs) == 1 else f"{_esc(step.get('cap'))}: "
        srows.append(
            f'<tr data-what-if="as_run"><td>{cap}as run (rank {_esc(step.get("rank"))}\'s graphs)</td>'
            f'<td class="num">{_ms(step.get("exposed_ms"))}</td><td class="num">{_ms(step.get("est_ms"))}</td>'
            '<td class="num">-</td></tr>'
        )
        for w in step["mesh_what_ifs"]:
            if not isinstance(w, dict):
                continue
            name = what_if_step_label(str(w.get("name")))
            vs = w.get("est_ms_vs_as_run", w.get("est_ms_vs_recorded"))
            srows.append(
                f'<tr data-what-if="{_esc(w.get("name"))}"><td>{cap}{_esc(name)}</td>'
                f'<td class="num">{_ms(w.get("exposed_ms"))}</td><td class="num">{_ms(w.get("est_ms"))}</td>'
                f'<td class="num">{f"{vs:+.4f}" if isinstance(vs, (int, float)) else "-"}</td></tr>'
            )
    if srows:
        out.append(_table(STEP_HEADERS, srows, "mesh-what-ifs-step"))
    if errors:
        out.append("".join(f'<p class="error">{e}</p>' for e in errors))
    out.append(
        '<p class="muted">what-ifs: run on the rebuilt graph at the recorded cap'
        + (
            " and at each cap replayed"
            if any_caps and not fewer
            else " and at the other caps shown"
            if any_caps
            else ""
        )
        + ", then torch's overlap scheduler;"
        " left on group: the collectives left on those groups after it, their est ms "
        "torch's NCCL model. The timeline of our pass's what-if is in <code>replay --trace-out</code>'s "
        "recorded-cap file.</p>"
    )
    if torch_figure:
        out.append(
            '<p class="muted">*: torch\'s own exposed figure, computed from the estimates of the '
            "collectives before its bucketing: it does not move when the scheduler buckets them (the "
            "comm ms beside it does).</p>"
        )
    out.append("</div>")
    return "".join(out)


__all__ = ["mesh_what_ifs_html"]
