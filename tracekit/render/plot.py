"""``--plot FILE.png``: first, when the document has a whole step per cap, what the recommendation
decides by against the cap: the step's estimated ms and exposed ms, and its peak memory, with the
recorded and the recommended caps marked (:func:`step_series`); then, per graph, collectives after
bucketing and comm ms vs the cap (the scheduler table's figures: every collective of the graph,
on HSDP the replicate all-reduces too; the FSDP groups' estimate, said so, where no schedule
ran); on a mesh, a graph's what-ifs at the recorded cap
written in its panel (:func:`what_if_note`).

matplotlib is an optional extra (``pip install tracekit[plot]``); it is imported only here, only
when a plot is asked for. The plot is drawn from the ``tracekit.replay/3`` document alone. The
caps are the tick labels, in plain MB, thinned so no two overprint; each legend sits above its
panel, over no line.
"""

from __future__ import annotations

from typing import Any

MAX_PANELS = 12


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def _series(graph: dict[str, Any]) -> tuple[list[tuple[float, int, float | None]], bool]:
    """A graph's points, one per cap (MB, collectives after, comm ms), and whether they count
    every collective of the graph: after torch's scheduler, each replay's final collectives and
    its ``comm_ms``, the figures the scheduler table prints (on HSDP the replicate all-reduces
    too); without a schedule, the FSDP groups' collectives pre-bucketing merges and their
    ``estimated_comm_ms``."""
    runs = [r for r in [graph.get("reproduction"), *graph.get("replays", [])] if r]
    every = bool(runs) and all(
        isinstance(r.get("comm_ms"), (int, float)) and ((r.get("final") or {}).get("counts") is not None)
        for r in runs
    )
    points = {}
    for r in runs:
        if every:
            after, comm = sum(r["final"]["counts"].values()), r["comm_ms"]
        else:
            after, comm = sum(c["after"] for c in r["collectives"].values()), r["estimated_comm_ms"]
        points[r["bucket_cap_mb"]] = (r["bucket_cap_mb"], after, comm)
    return [points[k] for k in sorted(points)], every


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


def _step_panel(ax: Any, data: dict[str, Any]) -> tuple[Any, list[Any], list[str], str]:
    """Draw the step's lines on ``ax``; its cap axis (:func:`_cap_axis`), its legend's handles and
    labels, and its title."""
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
    marked = [data[k] for k in ("recorded", "recommended") if data[k] is not None]
    return (
        _cap_axis(ax, caps, marked),
        handles,
        labels,
        title + (f"\n({data['partial']})" if data["partial"] else ""),
    )


def cap_label(mb: float) -> str:
    """A cap as its tick label, plain MB: ``1``, ``1.5``, ``10.4``, ``2048``."""
    return f"{mb:.0f}" if mb >= 100 else f"{mb:.3g}"


def _cap_axis(ax: Any, caps: list[float], first: list[float]) -> tuple[Any, list[float], list[float]]:
    """Label the log x axis at caps of the data only, plain MB (:func:`cap_label`), no minor tick
    labels; the axes, its ticks and the marked caps, for :func:`_thin_cap_ticks`."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    ticks = sorted(set(caps) | set(first))
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: cap_label(x)))
    ax.xaxis.set_minor_formatter(NullFormatter())
    return ax, ticks, first


def _thin_cap_ticks(fig: Any, cap_axes: list[tuple[Any, list[float], list[float]]]) -> None:
    """Once the figure is laid out, keep the cap labels that do not overprint one another (4 px
    apart at least): the marked caps first, then the two ends, then the rest in order."""
    from matplotlib.ticker import FixedLocator

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax, ticks, first in cap_axes:
        boxes = {}
        for tick in ax.xaxis.get_major_ticks():
            if tick.label1.get_visible() and tick.label1.get_text():
                boxes[tick.get_loc()] = tick.label1.get_window_extent(renderer)
        order = [*first, ticks[0], ticks[-1], *ticks]
        kept: list[float] = []
        for x in dict.fromkeys(order):
            b = boxes.get(x)
            if b is None:
                continue
            if all(b.x1 + 4 <= boxes[k].x0 or boxes[k].x1 + 4 <= b.x0 for k in kept):
                kept.append(x)
        ax.xaxis.set_major_locator(FixedLocator(sorted(kept)))


def _legend_above(ax: Any, handles: list[Any], labels: list[str], title: str) -> None:
    """The panel's legend above its axes, where it covers no line, in as many columns as fit the
    axes' width; the title above the legend."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    width = ax.get_window_extent(renderer).width
    for ncol in range(min(len(handles), 3), 0, -1):
        leg = ax.legend(
            handles,
            labels,
            loc="lower center",
            bbox_to_anchor=(0.5, 1.0),
            ncol=ncol,
            fontsize="small",
            frameon=False,
            borderaxespad=0.2,
        )
        if leg.get_window_extent(renderer).width <= width or ncol == 1:
            break
    height = leg.get_window_extent(renderer).height * 72 / fig.dpi
    ax.set_title(title, fontsize="small", pad=height + 4)


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
    legends: list[tuple[Any, list[Any], list[str], str]] = []
    cap_axes: list[tuple[Any, list[float], list[float]]] = []
    if step is not None:
        ax = flat.pop(0)
        cap_axis, handles, labels, title = _step_panel(ax, step)
        cap_axes.append(cap_axis)
        legends.append((ax, handles, labels, title))
    for ax, g in zip(flat, graphs, strict=False):
        pts, every = _series(g)
        caps = [p[0] for p in pts]
        ax.plot(caps, [p[1] for p in pts], "o-", color="tab:blue", label="collectives after")
        ax.set_xscale("log")
        ax.set_xlabel("bucket cap (MB)")
        groups = "all groups" if every else "FSDP groups"
        ax.set_ylabel(f"collectives after ({groups})", color="tab:blue")
        handles, labels = ax.get_legend_handles_labels()
        times = [(p[0], p[2]) for p in pts if p[2] is not None]
        if times:
            ax2 = ax.twinx()
            name = "comm ms, all collectives (the table's)" if every else "est comm ms, FSDP groups only"
            (c,) = ax2.plot([t[0] for t in times], [t[1] for t in times], "s--", color="tab:red", label=name)
            ax2.set_ylabel(f"comm ms ({groups})", color="tab:red")
            handles, labels = handles + [c], labels + [name]
        rec = g["recorded"]["bucket_cap_mb"]
        handles.append(ax.axvline(rec, color="gray", linestyle=":", label=f"recorded {rec:g} MB"))
        labels.append(f"recorded {rec:g} MB")
        ranks = g.get("ranks") or ("-" if g["rank"] is None else g["rank"])
        cap_axes.append(_cap_axis(ax, caps, [rec]))
        note = what_if_note(g)
        if note:  # a mesh's what-ifs ran at the recorded cap only: written under the axis, not plotted
            ax.set_xlabel(f"bucket cap (MB)\n\n{note}", fontsize="small")
        legends.append((ax, handles, labels, f"ranks {ranks}, graph {g['compile_id']}:{g['graph_index']}"))
    if not panels:
        axes.flat[0].text(0.5, 0.5, "no graph could be replayed", ha="center", va="center")
    fig.tight_layout(w_pad=3)  # room for a twin axis's label beside the next panel's
    for ax, handles, labels, title in legends:  # placed once the axes' widths are known
        _legend_above(ax, handles, labels, title)
    fig.tight_layout(w_pad=3)  # room for a twin axis's label beside the next panel's
    _thin_cap_ticks(fig, cap_axes)
    return fig, panels
