"""Replay: rebuild each recorded graph, reproduce its recorded outcome, then plan other caps.

For each :class:`tracekit.read.reader.GraphSource` (one recorded ``pre_bucketing_fsdp_collectives``
outcome paired by the reader with the graph text it came from):

1. rebuild the graph (:func:`tracekit.replay.graph_text.parse_graph_text`); a graph that
   cannot be rebuilt is reported with its reason and the others go on;
2. plan at the recorded cap and compare the counts with the recorded ones (``reproduced``;
   the differences are listed, never hidden). The log prints the cap rounded to 0.1 MB; when
   that misses and the automatic cap rounds to the recorded one, the exact automatic cap is
   tried too and the note says so;
3. plan each requested cap (a number, or ``auto`` on the requested hardware) with one
   :class:`bucketing.FsdpPlanner` per graph, so a sweep costs one parse;
4. with ``apply``, run the full rewrite (``bucketing.pre_bucket_fsdp_collectives``) on a fresh
   rebuild, after registering the graph's group names as fake process groups, and lint it.

Each cap gets the counts after, the size of every collective after bucketing, the largest one
(the memory it pins) and the NCCL-model estimate of the FSDP collectives' time
(:mod:`tracekit.replay.comm_estimate`), next to the recorded cap's.

One graph is planned and scheduled by a :class:`tracekit.replay.replayer.GraphReplayer`; what
comes out (:class:`~tracekit.replay.results.GraphReplay`, the document) is
:mod:`tracekit.replay.results`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from tracekit.model import COLLECTIVE_TYPES, SHORT_NAMES, Graph
from tracekit.replay import comm_estimate as ce
from tracekit.replay import run_settings
from tracekit.replay.graph_text import GraphTextError
from tracekit.replay.post_grad import how_rebuilt
from tracekit.replay.replayer import GraphReplayer
from tracekit.replay.results import CapReplay, CapRequest, GraphReplay, ReplayOptions
from tracekit.replay.schedule_figures import shown_delta


def compare_final(recorded: Graph, sched: Any, after_overlap: bool = False) -> list[str]:
    """What differs between the recorded final collectives and the replayed schedule.

    The recorded ``inductor_collective_schedule`` names the ops in run order, without sizes; the
    reader gives them sizes and estimates from the graph's estimation CSV, kind by kind. That
    CSV is ``fx_collectives_analytical_estimation`` (written when the scheduler starts: graph
    order before scheduling) unless ``fx_collectives_estimations_after_overlap_bucketing`` was
    logged (``after_overlap``: run order). So: the kinds are compared in run order, and each
    kind's (group, bytes, estimate) in the order that CSV has, against the replay's collectives
    in the same order (before the scheduler ran, or after it)."""
    f = recorded.final
    if f is None:
        return []
    out = []
    want = [c.kind for c in f.collectives]
    have = [c.kind for c in sched.final]
    if want != have:
        i = next(
            (i for i, (a, b) in enumerate(zip(want, have, strict=False)) if a != b), min(len(want), len(have))
        )
        a = want[i] if i < len(want) else "nothing"
        b = have[i] if i < len(have) else "nothing"
        out.append(
            f"final collective #{i + 1}: recorded {a}, replayed {b} "
            f"({len(want)} recorded, {len(have)} replayed)"
        )
        return out
    if f.sizes != "matched":  # the log gave no sizes to compare
        return out
    mine = sched.final if after_overlap else sched.before_overlap
    for kind in dict.fromkeys(want):
        w = [(c.group, c.bytes) for c in f.collectives if c.kind == kind]
        h = [(c.group, c.bytes) for c in mine if c.kind == kind]
        if w != h:
            i = next((i for i, (a, b) in enumerate(zip(w, h, strict=False)) if a != b), min(len(w), len(h)))
            was = w[i] if i < len(w) else "nothing"
            got = h[i] if i < len(h) else "nothing"
            out.append(f"{kind} #{i + 1} (group, bytes): recorded {was}, replayed {got}")
            continue
        we = [c.est_ms for c in f.collectives if c.kind == kind]
        he = [c.est_ms for c in mine if c.kind == kind]
        for i, (rec_ms, rep_ms) in enumerate(zip(we, he, strict=False)):
            if rec_ms is not None and rep_ms == rep_ms and abs(rec_ms - rep_ms) > 5e-5:
                out.append(f"{kind} #{i + 1}: recorded estimate {rec_ms} ms, replayed {rep_ms} ms")
                break
    return out


def _compare(recorded: Graph, got: CapReplay) -> list[str]:
    """What differs between a recorded outcome and a replay: counts, and the verbose sizes
    when the log has them (sizes before by name; sizes after per kind, names aside, since
    merged buckets get new names)."""
    out = []
    for t in COLLECTIVE_TYPES:
        want = recorded.collectives.get(t)
        have = got.collectives.get(t)
        if want is None or have is None:
            continue
        if (want.before, want.after) != (have["before"], have["after"]):
            out.append(
                f"{t}: recorded {want.before}->{want.after}, replayed {have['before']}->{have['after']}"
            )
    sizes = recorded.sizes_mb
    if sizes is None or got.report is None:
        return out
    want_before = [(s.type, s.size_mb, s.name) for s in sizes.before]
    have_before = [(s["type"], s["size_mb"], s["name"]) for s in got.report.sizes_before]
    if want_before != have_before:
        i = next(
            (i for i, (a, b) in enumerate(zip(want_before, have_before, strict=False)) if a != b),
            min(len(want_before), len(have_before)),
        )
        a = want_before[i] if i < len(want_before) else "nothing"
        b = have_before[i] if i < len(have_before) else "nothing"
        out.append(f"sizes before: collective #{i + 1}: recorded {a}, rebuilt graph {b}")
    if sizes.after is not None:
        for kind in SHORT_NAMES.values():
            want_after = sorted(s.size_mb for s in sizes.after if s.type == kind)
            have_after = sorted(s["size_mb"] for s in got.report.sizes_after if s["type"] == kind)
            if want_after != have_after:
                out.append(f"sizes after ({kind}, MB): recorded {want_after}, replayed {have_after}")
    return out


def replay_source(
    src: Any,
    options: ReplayOptions,
    rebuilt: dict[tuple, Any] | None = None,
    on_cap: Callable[[int, int], None] | None = None,
) -> GraphReplay:
    """Replay one :class:`tracekit.read.reader.GraphSource`; never raises for a bad graph.

    ``rebuilt`` (optional, shared across calls) keeps each distinct graph text's rebuilt graph
    and planner, or its error: ranks normally log identical graphs, so ``--all-ranks`` parses
    each one once. ``on_cap(done, total)``: after the reproduction and after each other cap.
    """
    g: Graph = src.graph
    out = GraphReplay(
        rank=src.rank,
        compile_id=src.compile_id,
        graph_index=src.graph_index,
        source=g.source,
        text_artifact=src.text_artifact,
        recorded=g,
        overlap_scheduled=bool(getattr(src, "overlap_scheduled", False)),
        compute_estimates_us=getattr(src, "compute_estimates_us", None),
        estimates_after_overlap=bool(getattr(src, "estimates_after_overlap", False)),
        log_torch=getattr(src, "torch_version", None),
    )
    if src.text is None:
        out.error = (
            "no graph text logged for this outcome (neither before_post_grad_graph nor "
            "tracekit_fsdp_input_graph)"
        )
        return out
    # Hints the log recorded for symbolic sizes (if the reader offers them), then --sym.
    hints = dict(src.symbol_hints)
    if hints:
        options = replace(options, symbols={**hints, **options.symbols})
    key = (
        hashlib.sha256(src.text.encode("utf-8", "surrogatepass")).hexdigest(),
        tuple(sorted(options.symbols.items())),
        options.mode,
        options.bucket_mode,
        how_rebuilt(src),
    )
    rp = None if rebuilt is None else rebuilt.get(key)
    if rp is None:
        try:
            inference, post_grad = how_rebuilt(src)
            rp = GraphReplayer(src.text, options, inference=inference, post_grad=post_grad)
        except GraphTextError as e:
            rp = f"cannot rebuild the graph from {src.text_artifact}: {e}"
        except Exception as e:  # noqa: BLE001 - a planner failure on one graph must not stop the others
            rp = f"cannot plan the rebuilt graph: {type(e).__name__}: {str(e)[:300]}"
        if rebuilt is not None:
            rebuilt[key] = rp
    if isinstance(rp, str):
        out.error = rp
        return out
    out.replayer = rp
    out.groups = list(rp.groups)
    out.nodes = len(rp.gm.graph.nodes)
    out.symbols = dict(rp.gm.meta.get("tracekit_symbols", {}))
    out.parse_ms = rp.parse_ms
    from tracekit.replay.overlap_schedule import SETTING_KEYS

    run = getattr(src, "run_settings", None)
    rp.run_overrides = run_settings.scheduler_overrides(run, SETTING_KEYS)
    rp.stock_estimates = run_settings.stock_estimates(run)
    try:
        _replay_caps(rp, out, options, on_cap)
    except Exception as e:  # noqa: BLE001
        out.error = f"replay failed: {type(e).__name__}: {str(e)[:300]}"
    if out.final_reproduced is False:  # say what the log cannot tell, not a bare mismatch
        out.final_mismatches += run_settings.unrecorded_estimates(run, out.compute_estimates_us)
        if rp.post_grad_note:
            out.final_mismatches.append(rp.post_grad_note)
    return out


def _replay_caps(
    rp: GraphReplayer,
    out: GraphReplay,
    options: ReplayOptions,
    on_cap: Callable[[int, int], None] | None = None,
) -> None:
    g = out.recorded
    # The recorded cap, on the recorded hardware (torch's own detection): no what-if here.
    here = ce.Hardware()
    # torch's line rounds the cap to 0.1 MB: an automatic cap is retried exactly below.
    repro = rp.at(g.bucket_cap_mb, "recorded", here)
    mismatches = _compare(g, repro)
    if mismatches and rp.group_size:
        exact = ce.auto_cap(rp.group_size, ce.Hardware())
        if round(exact.cap_mb, 1) == round(g.bucket_cap_mb, 1) and exact.cap_mb != g.bucket_cap_mb:
            retry = rp.at(exact.cap_mb, "recorded", here)
            if not _compare(g, retry):
                out.note = (
                    f"reproduced with the exact automatic cap {exact.cap_mb:.4f} MB "
                    f"(the log prints {g.bucket_cap_mb:.1f})"
                )
                repro, mismatches = retry, []
    if rp.group_size is not None and g.group_size is not None and rp.group_size != g.group_size:
        mismatches.append(f"group_size: recorded {g.group_size}, rebuilt graph {rp.group_size}")
    if list(rp.planner.fsdp_groups) != list(g.fsdp_groups):
        mismatches.append(
            f"fsdp_groups: recorded {g.fsdp_groups}, rebuilt graph {list(rp.planner.fsdp_groups)}"
        )
    run_schedule = options.overlap if options.overlap is not None else out.overlap_scheduled
    if run_schedule:
        out.partial_reasons += rp.unsized_groups()
    hw = options.hardware
    requests: list[CapRequest | None] = list(options.caps)
    if (options.bucket_mode or options.scheduler_overrides) and not requests:
        requests = [None]  # the recorded cap, in the what-if bucket mode or scheduler settings
    if on_cap is not None:  # progress never goes back: caps scheduled side by side are told first
        on_cap = _forward_only(on_cap)
    if run_schedule and options.jobs > 1:
        from tracekit.replay.parallel_caps import schedule_in_workers

        try:
            wanted = [(repro.bucket_cap_mb, False)]
            wanted += [(float(_request_cap(rp, req, repro, hw)), True) for req in requests]
        except Exception:  # noqa: BLE001 - the loop below meets the same error, and says it
            wanted = []
        total = 1 + len(requests)
        ready = None if on_cap is None else (lambda n, step=on_cap: step(n, total))
        schedule_in_workers(rp, wanted, out.compute_estimates_us, options.jobs, on_ready=ready)
    if run_schedule:
        _schedule_cap(rp, out, repro, what_if=False)
        if repro.schedule is not None and out.overlap_scheduled:
            out.final_mismatches = compare_final(g, repro.schedule, out.estimates_after_overlap)
            out.final_reproduced = None if g.final is None else not out.final_mismatches
        if repro.schedule is not None and len(rp.groups) > 1:  # a mesh: what pre-bucketing leaves
            from tracekit.replay.mesh_what_ifs import mesh_not_prebucketed

            out.mesh_not_prebucketed = mesh_not_prebucketed(rp, repro, out.compute_estimates_us)
    if len(rp.groups) > 1:  # a mesh: the collectives on other groups that run once (no finding)
        from tracekit.replay.mesh_what_ifs import run_once

        rp.register_groups()
        out.mesh_run_once = run_once(rp)
    out.reproduction = repro
    if on_cap is not None:
        on_cap(1, 1 + len(requests))
    out.reproduced = not mismatches
    out.mismatches = mismatches
    base_ms, base_hw = repro.estimated_comm_ms, repro.hardware
    if hw != here:
        # Compare with the recorded buckets costed on the requested hardware.
        base_ms, base_hw = rp.comm_ms(repro.report, hw), ce.describe(hw, rp.group_size)
    out.recorded_comm_ms = base_ms
    out.recorded_hardware = base_hw
    if run_schedule and hw != here and repro.schedule is not None:
        # the recorded cap on the what-if hardware: what the what-if caps are compared with
        out.recorded_what_if = replace(repro, applied=None, schedule=None, schedule_error=None)
        _schedule_cap(rp, out, out.recorded_what_if, what_if=True)
        if out.recorded_what_if.schedule is None:
            out.recorded_what_if = None
    base = out.recorded_base
    for req in requests:
        if req is None:
            r = rp.at(repro.bucket_cap_mb, "recorded", hw, apply=options.apply, what_if=True)
        elif req.mb is None:
            cap = ce.auto_cap(rp.group_size, hw)
            r = rp.at(cap.cap_mb, cap.source, hw, apply=options.apply, what_if=True)
        else:
            r = rp.at(req.mb, "override", hw, apply=options.apply, what_if=True)
        if r.estimated_comm_ms is not None and base_ms is not None:
            r.comm_ms_vs_recorded = shown_delta(r.estimated_comm_ms, base_ms)
        if run_schedule:
            _schedule_cap(rp, out, r, what_if=True)
            if r.schedule is not None and base is not None and base.schedule is not None:
                r.est_ms_vs_recorded = shown_delta(r.schedule.est_ms, base.schedule.est_ms)
        out.replays.append(r)
        if on_cap is not None:
            on_cap(1 + len(out.replays), 1 + len(requests))


def _forward_only(on_cap: Callable[[int, int], None]) -> Callable[[int, int], None]:
    """``on_cap``, called only when the count of caps done goes up (with ``--jobs``, the caps
    scheduled side by side are counted as their schedules are made; the loop over the caps
    that follows then finds them done)."""
    told = 0

    def step(done: int, total: int) -> None:
        nonlocal told
        if done > told:
            told = done
            on_cap(done, total)

    return step


def _request_cap(rp: GraphReplayer, req: CapRequest | None, repro: CapReplay, hw: ce.Hardware) -> float:
    """The cap ``req`` asks for (as the loop of :func:`_replay_caps` plans it)."""
    if req is None:
        return repro.bucket_cap_mb
    if req.mb is None:
        return ce.auto_cap(rp.group_size, hw).cap_mb
    return req.mb


def _schedule_cap(rp: GraphReplayer, out: GraphReplay, cap: CapReplay, what_if: bool) -> None:
    """torch's overlap scheduler on ``cap``'s pre-bucketed graph; a refusal is a note."""
    try:
        cap.schedule = rp.scheduled(cap.bucket_cap_mb, out.compute_estimates_us, what_if=what_if)
    except Exception as e:  # noqa: BLE001 - a graph the scheduler refuses must not stop the others
        cap.schedule_error = f"overlap scheduler failed: {type(e).__name__}: {str(e)[:300]}"


# --- many graphs ---------------------------------------------------------------------------------


def _record(g: Graph) -> tuple:
    """Everything of a recorded outcome that a replay uses or reports: the cap it is reproduced
    at, the groups, counts and sizes the reproduction is compared with, and the shown fields."""

    def sizes(xs):
        return None if xs is None else tuple((x.type, x.size_mb, x.name) for x in xs)

    return (
        g.bucket_cap_mb,
        tuple(g.fsdp_groups),
        g.group_size,
        g.n_nodes,
        g.source,
        tuple((t, c.before, c.after) for t, c in g.collectives.items()),
        None if g.sizes_mb is None else (sizes(g.sizes_mb.before), sizes(g.sizes_mb.after)),
    )


def same_replay_key(src: Any) -> tuple:
    """Sources with equal keys replay identically, so one replay stands for all of them: the
    same graph text and symbol hints (what is rebuilt), the same recorded outcome (so the
    reproduction verdict is each one's), the same graph, and the same directory (separate runs
    stay separate rows). The options are the same for every source of one call. The text is
    compared whole (ranks' texts are usually one shared string, see ``replay_sources_for``)."""
    hints = getattr(src, "symbol_hints", None) or {}
    compute = getattr(src, "compute_estimates_us", None) or {}
    final = src.graph.final
    return (
        os.path.dirname(src.graph.file),
        src.compile_id,
        src.graph_index,
        src.text_artifact,
        src.text,
        tuple(sorted(hints.items())),
        _record(src.graph),
        tuple(compute.items()),
        bool(getattr(src, "overlap_scheduled", False)),
        None if final is None else tuple((c.kind, c.group, c.bytes, c.est_ms) for c in final.collectives),
        getattr(src, "torch_version", None),
    )


def replay_sources(
    sources: Iterable[Any],
    options: ReplayOptions,
    progress: Callable[[int, int], None] | None = None,
    on_cap: Callable[[int, int, int, int], None] | None = None,
) -> list[GraphReplay]:
    """Replay many sources: each distinct replay (:func:`same_replay_key`) once, reported for
    every rank that shares it (``GraphReplay.ranks``), in the order first seen. 1,024 ranks
    that logged the same graphs cost about one rank; a rank that recorded another outcome from
    the same text is its own entry (its reproduction is checked against its own record).
    ``progress(done, total)``: distinct replays done, after each one; ``on_cap(graph, graphs,
    done, total)``: within the ``graph``-th of ``graphs`` (from 1), its caps done (the
    reproduction first) of ``total``, after each."""
    groups: dict[tuple, tuple[Any, list[int | None]]] = {}
    for src in sources:
        key = same_replay_key(src)
        if key in groups:
            groups[key][1].append(src.rank)
        else:
            groups[key] = (src, [src.rank])
    rebuilt: dict[tuple, Any] = {}  # texts shared by entries that differ in their records
    out: list[GraphReplay] = []
    for src, ranks in groups.values():
        n = len(out) + 1
        step = None if on_cap is None else (lambda done, total, n=n: on_cap(n, len(groups), done, total))
        r = replay_source(src, options, rebuilt, step)
        r.ranks = ranks
        out.append(r)
        if progress is not None:
            progress(len(out), len(groups))
    return out


__all__ = ["compare_final", "replay_source", "replay_sources", "same_replay_key"]
