"""``--plot FILE.png``: first, when the document has a whole step per cap, what the recommendation
decides by against the cap: the step's estimated ms and exposed ms, and its peak memory, with the
recorded and the recommended caps marked (:func:`step_series`); then, per graph, collectives after
bucketing and estimated comm time vs the cap; on a mesh, a graph's what-ifs at the recorded cap
written in its panel (:func:`what_if_note`).

matplotlib is an optional extra (``pip install tracekit[plot]``); it is imported only here, only
when a plot is asked for. The plot is drawn from the ``tracekit.replay/3`` document alone.
"""

from __future__ import annotations

from typing import Any

MAX_PANELS = 12


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def _series(graph: dict[str, Any]) -> list[tuple[float, int, float | None]]:
    points = {}
    for r in [graph.get("reproduction"), *graph.get("replays", [])]:
        if not r:
            continue
        after = sum(c["after"] for c in r["collectives"].values())
        points[r["bucket_cap_mb"]] = (r["bucket_cap_mb"], after, r["estimated_comm_ms"])
    return [points[k] for k in sorted(points)]


def what_if_note(graph: dict[str, Any]) -> str | None:
    """The panel's note for a mesh graph with collectives pre-bucketing never handles
    (``not_prebucketed_on_mesh``): what each what-if at the recorded cap leaves on those groups
    and its exposed ms, against as run; None without what-ifs. hsdp_overlap's backward::

        what-ifs at the recorded cap (left on group '1', exposed ms):
        as run 6, 0.1631; our pass given '1' as well 1, 0.0871;
        torch's scheduler, collective_bucketing on 1, 0.1631 (torch's figure)
    """
    m = graph.get("not_prebucketed_on_mesh")
    if not m:
        return None
    from tracekit.render.mesh_replay_text import what_if_label

    groups = list(dict.fromkeys(str(c.get("group")) for c in m.get("collectives") or []))
    a = m.get("as_run") or {}
    parts = [f"as run {a.get('left')}, {_ms(a.get('exposed_ms'))}"]
    for w in m.get("what_ifs") or []:
        if not w.get("ok"):
            parts.append(f"{what_if_label(w, groups)}: could not run")
            continue
        figure = " (torch's figure)" if w.get("name") == "overlap_bucketing" else ""
        parts.append(f"{what_if_label(w, groups)} {w.get('left')}, {_ms(w.get('exposed_ms'))}{figure}")
    names = ", ".join(map(repr, groups))
    return (
        f"what-ifs at the recorded cap (left on group {names}, exposed ms):\n"
        + "; ".join(parts[:2])
        + ";\n"
        + "; ".join(parts[2:])
    ).rstrip(";\n")


def step_series(doc: dict[str, Any]) -> dict[str, Any] | None:
    """What the step panel draws, from the document's whole step per cap (``totals.step``), one
    point per cap in MB (a cap that gives the same MB as another is drawn once; ``auto`` and
    ``recorded`` at the cap they stand for, a graph's largest): ``caps`` (MB, ascending),
    ``est_ms``, ``exposed_ms``, ``peak_mib`` (None where not known), and the caps marked:
    ``recorded`` and ``recommended`` (MB, or None), and ``partial`` (the step's own words when
    it leaves graphs out). None without a step."""
    steps = [s for s in (doc.get("totals") or {}).get("step") or [] if isinstance(s, dict)]
    points: dict[float, dict[str, Any]] = {}
    recorded = None
    for s in steps:
        mb = [m for m in s.get("bucket_cap_mb") or [] if isinstance(m, (int, float))]
        if not mb:
            continue
        x = float(max(mb))
        if s.get("cap") == "recorded":
            recorded = x
        points.setdefault(x, s)
    if not points:
        return None
    caps = sorted(points)
    peak = [points[x].get("peak_memory_bytes") for x in caps]
    rec = doc.get("recommendation") or {}
    partial = next((s["partial"] for s in steps if s.get("partial")), None)
    return {
        "caps": caps,
        "est_ms": [points[x].get("est_ms") for x in caps],
        "exposed_ms": [points[x].get("exposed_ms") for x in caps],
        "peak_mib": [None if b is None else b / 2**20 for b in peak],
        "recorded": recorded,
        "recommended": rec.get("cap_mb") if isinstance(rec.get("cap_mb"), (int, float)) else None,
        "partial": partial,
    }


def _step_panel(ax: Any, data: dict[str, Any]) -> None:
    caps = data["caps"]

    def line(ys: list[Any]) -> tuple[list[float], list[float]]:
        pts = [(x, y) for x, y in zip(caps, ys, strict=True) if y is not None]
        return [p[0] for p in pts], [p[1] for p in pts]

    ax.plot(*line(data["est_ms"]), "o-", color="tab:blue", label="est ms (step)")
    ax.plot(*line(data["exposed_ms"]), "s--", color="tab:orange", label="exposed ms")
    ax.set_xscale("log")
    ax.set_xlabel("bucket cap (MB)")
    ax.set_ylabel("ms (torch's estimates)")
    handles, labels = ax.get_legend_handles_labels()
    xs, peak = line(data["peak_mib"])
    if peak:
        ax2 = ax.twinx()
        (p,) = ax2.plot(xs, peak, "^:", color="tab:green", label="peak MiB")
        ax2.set_ylabel("peak memory (MiB)", color="tab:green")
        handles, labels = handles + [p], labels + ["peak MiB"]
    for key, colour, style in (("recorded", "gray", ":"), ("recommended", "tab:red", "-")):
        x = data[key]
        if x is not None:
            handles.append(ax.axvline(x, color=colour, linestyle=style, label=f"{key} {x:g} MB"))
            labels.append(f"{key} {x:g} MB")
    title = "whole step: what the recommendation decides by"
    ax.set_title(title + (f"\n({data['partial']})" if data["partial"] else ""), fontsize="small")
    ax.legend(handles, labels, loc="best", fontsize="small")


def _ms(x: Any) -> str:
    return f"{x:.4f}" if isinstance(x, (int, float)) else "-"


def plot_replay(doc: dict[str, Any], path: str) -> int:
    """Draw the document's step (when it has one) and replayed graphs (up to :data:`MAX_PANELS`
    panels) into ``path``; panels drawn."""
    fig, n = figure(doc)  # raises PlotUnavailable without matplotlib
    import matplotlib.pyplot as plt

    try:
        fig.savefig(path, dpi=100)
    finally:
        plt.close(fig)
    return n


def figure(doc: dict[str, Any]) -> tuple[Any, int]:
    """The figure :func:`plot_replay` saves, and its panels drawn (the caller closes it)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise PlotUnavailable("--plot needs matplotlib: pip install 'tracekit[plot]'") from e
    step = step_series(doc)
    graphs = [g for g in doc["graphs"] if g.get("error") is None and g.get("reproduction")]
    graphs = graphs[: MAX_PANELS - (step is not None)]
    panels = len(graphs) + (step is not None)
    n = max(panels, 1)
    cols = min(n, 3)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax in axes.flat[panels:]:
        ax.axis("off")
    flat = list(axes.flat)
    if step is not None:
        _step_panel(flat.pop(0), step)
    for ax, g in zip(flat, graphs, strict=False):
        pts = _series(g)
        caps = [p[0] for p in pts]
        ax.plot(caps, [p[1] for p in pts], "o-", color="tab:blue", label="collectives after")
        ax.set_xscale("log")
        ax.set_xlabel("bucket cap (MB)")
        ax.set_ylabel("FSDP collectives after", color="tab:blue")
        times = [(p[0], p[2]) for p in pts if p[2] is not None]
        if times:
            ax2 = ax.twinx()
            ax2.plot([t[0] for t in times], [t[1] for t in times], "s--", color="tab:red")
            ax2.set_ylabel("estimated comm ms", color="tab:red")
        rec = g["recorded"]["bucket_cap_mb"]
        ax.axvline(rec, color="gray", linestyle=":", label=f"recorded {rec:g} MB")
        ranks = g.get("ranks") or ("-" if g["rank"] is None else g["rank"])
        ax.set_title(f"ranks {ranks}, graph {g['compile_id']}:{g['graph_index']}")
        ax.legend(loc="upper right", fontsize="small")
        note = what_if_note(g)
        if note:  # a mesh's what-ifs ran at the recorded cap only: written under the axis, not plotted
            ax.set_xlabel(f"bucket cap (MB)\n\n{note}", fontsize="small")
    if not panels:
        axes.flat[0].text(0.5, 0.5, "no graph could be replayed", ha="center", va="center")
    fig.tight_layout()
    return fig, panels
