"""A ``tracekit.replay/3`` document -> Chrome trace-event JSON, one file per cap
(``replay --trace-out DIR``: ``DIR/cap_<X>MB.json``), for Perfetto and ``chrome://tracing``.

Reads only the document (each graph's ``timeline: {nodes, memory}`` per cap); never imports
torch. Layout, the same in every cap file (so two files compare side by side):

- one process per rank group (``pid``; ``process_name`` "ranks 0-3"), the graphs of a step one
  after another on the time axis (each starts where the previous graph's compute stream ended),
  graphs torch never pre-bucketed included (after the others; the same at every cap);
- per graph, one compute track (``thread_name`` "0/0:0 compute": the nodes as torch's overlap
  scheduler ordered them, then each collective's exposed part where its wait holds the stream,
  a slice named "exposed ...") and one communication track per process group
  ("0/0:0 communication group 0": each collective a slice named with its kind, bucket members
  and bytes);
- a counter per graph ("0/0:0 memory", ``args.bytes``): the bytes in use over time;
- in the recorded cap's file of a mesh whose graphs have what-ifs (collectives pre-bucketing
  never handles: ``not_prebucketed_on_mesh``), one more process per what-if and rank group
  ("ranks 0 what-if: our pass given '1' as well"): the step again, each graph with a what-if
  drawn from that what-if's timeline, the others as recorded.

With ``--profile`` (the document's ``prediction``), each cap's file has one more process,
"predicted from the profile": the step that cap would measure, as the prediction ran it (per
graph a main-thread track and a transfers track, in ms scaled to the file's microseconds); and the
recorded cap's file one more, "measured: rank R, ProfilerStep#N": the profile's own (median) step beside it.

Where a collective sits on its communication track follows torch's rule for hiding: the compute
after its issue hides the collectives in flight on a group oldest first, so a group's
collectives run one after another. A collective begins when it is issued or when the one before
it on its group ends, and ends when the compute has hidden its estimate or, when part of it is
exposed, when its wait ends. Times are microseconds from the start of the step (``ts``,
``dur``), and a collective's ``args.issued_us`` is on that clock too; a collective's bytes are
summarize's (one rank's input), torch's ``size_bytes`` beside them (:data:`UNITS`, which each
file's metadata carries).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from tracekit.render.mesh_replay_text import what_if_label

#: Track ids within a rank group's process: per graph, compute then one per process group.
TRACK_STRIDE = 64


def cap_file_name(step_entry: dict[str, Any]) -> str:
    """``cap_<X>MB.json`` for one ``totals.step`` entry (X the cap in MB, ``%g``; a recorded cap
    that differs between graphs is ``cap_recordedMB.json``)."""
    caps = step_entry.get("bucket_cap_mb") or []
    x = f"{caps[0]:g}" if len(caps) == 1 else str(step_entry.get("cap", "unknown"))
    return f"cap_{x}MB.json"


#: What the trace's numbers are, in its metadata: one clock for slices and args, and bytes
#: as summarize counts them.
UNITS = {
    "clock": "microseconds from the start of the step (its first graph's first node): ts and "
    "args.issued_us; dur and the other *_us args are durations",
    "bytes": "a collective's args.bytes and slice name: one rank's input, as summarize's bytes "
    "(an all-gather's shard); args.size_bytes: torch's size_bytes, input + output; a memory "
    "counter's args.bytes: bytes in use",
}

#: A slice names at most this many bucket members; the rest are in its ``args.members``.
NAMED_MEMBERS = 2


def collective_slice_name(c: dict[str, Any]) -> str:
    """``all_gather [a, b] 524,288 B``: kind, bucket members, bytes as summarize counts them (one
    rank's input: for an all-gather its shard; the timeline's ``input_bytes``); a timeline
    without them (a replay document made before they were added) gives torch's ``size_bytes``
    and says so, ``1,572,864 B in+out``. A bucket of more than :data:`NAMED_MEMBERS` is named by
    its first ones and its count, ``all_gather [a, b, +43 more] ...``: the name stays short (a
    track label), the slice's ``args.members`` lists them all."""
    members = [str(m) for m in c.get("members") or [c.get("name")]]
    n, unit = c.get("input_bytes"), "B"
    if not isinstance(n, int):
        n, unit = c.get("bytes"), "B in+out"
    size = f"{n:,} {unit}" if isinstance(n, int) else "? B"
    if len(members) > NAMED_MEMBERS:
        members = [*members[:NAMED_MEMBERS], f"+{len(members) - NAMED_MEMBERS} more"]
    return f"{c.get('kind')} [{', '.join(members)}] {size}"


def comm_layout(nodes: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """Collective name -> (begin_us, end_us) on its group's stream (see the module docstring)."""
    inflight: list[dict[str, Any]] = []  # oldest first: {c, left, begin}
    free: dict[Any, float] = {}  # group -> when its last collective ended
    out: dict[str, tuple[float, float]] = {}

    def hide(group_excluded: Any, t0: float, dur: float) -> None:
        budget: dict[Any, float] = {}
        for f in inflight:
            g = f["c"].get("group")
            if g == group_excluded or f["left"] <= 0:
                continue
            b = budget.setdefault(g, dur)
            if b <= 0:
                continue
            take = min(f["left"], b)
            if f["begin"] is None:
                f["begin"] = max(t0 + (dur - b), free.get(g, 0.0))
            f["left"] -= take
            budget[g] = b - take
            if f["left"] <= 1e-9:
                f["end"] = t0 + (dur - budget[g])
                free[g] = f["end"]

    for n in nodes:
        kind = n.get("type")
        if kind == "collective":
            inflight.append({"c": n, "left": float(n.get("dur_us") or 0.0), "begin": None, "end": None})
        elif kind == "compute":
            hide(object(), float(n["start_us"]), float(n.get("dur_us") or 0.0))
        elif kind == "wait":
            f = next((f for f in inflight if f["c"].get("name") == n.get("collective")), None)
            if f is None:
                continue
            s, e = float(n["start_us"]), float(n.get("dur_us") or 0.0)
            g = f["c"].get("group")
            hide(g, s, e)  # an exposed wait hides the other groups' collectives
            issued = float(f["c"]["start_us"])
            begin = f["begin"] if f["begin"] is not None else max(issued, free.get(g, 0.0))
            if e > 0:
                end = s + e
            elif f["end"] is not None:
                end = f["end"]
            else:  # hidden by torch's estimate, not by our walk (a latency it discounted)
                end = max(begin, s)
            begin = min(begin, end)
            out[f["c"]["name"]] = (begin, end)
            free[g] = max(free.get(g, 0.0), end)
            inflight.remove(f)
    for f in inflight:  # issued, never waited on: its estimate from its begin
        c = f["c"]
        b = f["begin"] if f["begin"] is not None else max(float(c["start_us"]), free.get(c.get("group"), 0.0))
        out[c["name"]] = (b, b + float(c.get("dur_us") or 0.0))
        free[c.get("group")] = b + float(c.get("dur_us") or 0.0)
    return _serial(out, {n.get("name"): n.get("group") for n in nodes if n.get("type") == "collective"})


def _serial(spans: dict[str, tuple[float, float]], group: dict[Any, Any]) -> dict[str, tuple[float, float]]:
    """Spans of one group never overlap: a span that begins before the previous one's end starts at it."""
    last: dict[Any, float] = {}
    out = {}
    for name, (b, e) in sorted(spans.items(), key=lambda kv: kv[1]):
        g = group.get(name)
        b = max(b, last.get(g, b))
        e = max(b, e)
        out[name] = (b, e)
        last[g] = e
    return out


def _graph_label(g: dict[str, Any]) -> str:
    return f"{g.get('compile_id')}:{g.get('graph_index')}"


def _cap_entry(g: dict[str, Any], i: int, hw_what_if: bool = False) -> dict[str, Any] | None:
    """Graph ``g``'s figures at cap ``i`` of the step (on what-if hardware, the recorded cap's
    on it, as the step's recorded row)."""
    if "schedule" in g:  # a graph never pre-bucketed: one schedule at every cap (what-ifs apart)
        return (g.get("schedule_what_if") if i > 0 or hw_what_if else None) or g.get("schedule")
    if i == 0:
        return g.get("recorded_what_if_hardware") or g.get("reproduction")
    reps = g.get("replays") or []
    return reps[i - 1] if i - 1 < len(reps) else None


def _groups_of(graphs: list[dict[str, Any]]) -> list[Any]:
    """The process groups of each graph's collectives over every cap (the same tracks per file)."""
    out: list[Any] = []
    for g in graphs:
        runs = [g.get("schedule"), g.get("schedule_what_if")] if "schedule" in g else []
        for e in [g.get("reproduction"), *(g.get("replays") or []), *runs]:
            for n in ((e or {}).get("timeline") or {}).get("nodes") or []:
                if n.get("type") == "collective" and n.get("group") not in out:
                    out.append(n.get("group"))
    return out


def _graph_slices(
    events: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    pid: int,
    base: int,
    tracks: dict[Any, int],
    glabel: str,
    offset: float,
) -> float:
    """Append one graph's slices (compute, exposed, communication); returns where its compute
    stream ends."""
    layout: dict[Any, tuple[float, float]] = comm_layout(nodes)  # looked up by a node's name, maybe None
    kinds = {n.get("name"): n.get("kind", "") for n in nodes if n.get("type") == "collective"}
    end = 0.0
    for n in nodes:
        t = n.get("type")
        ts = offset + float(n.get("start_us") or 0.0)
        dur = float(n.get("dur_us") or 0.0)
        if t == "compute":
            events.append(
                {
                    "ph": "X",
                    "cat": "compute",
                    "name": str(n.get("name")),
                    "ts": ts,
                    "dur": dur,
                    "pid": pid,
                    "tid": base,
                    "args": {"estimate": n.get("estimate"), "graph": glabel},
                }
            )
            end = max(end, ts + dur)
        elif t == "wait" and dur > 0:
            coll = n.get("collective")
            events.append(
                {
                    "ph": "X",
                    "cat": "exposed",
                    "name": f"exposed {kinds.get(coll, '')} {coll}",
                    "ts": ts,
                    "dur": dur,
                    "pid": pid,
                    "tid": base,
                    "args": {"collective": coll, "wait": n.get("name"), "exposed_us": dur, "graph": glabel},
                }
            )
            end = max(end, ts + dur)
        elif t == "collective":
            b, e = layout.get(n.get("name"), (float(n.get("start_us") or 0.0),) * 2)
            events.append(
                {
                    "ph": "X",
                    "cat": "communication",
                    "name": collective_slice_name(n),
                    "ts": offset + b,
                    "dur": max(0.0, e - b),
                    "pid": pid,
                    "tid": tracks.get(n.get("group"), base + 1),
                    "args": {
                        "collective": n.get("name"),
                        "kind": n.get("kind"),
                        "members": n.get("members"),
                        "bytes": n.get("input_bytes"),  # summarize's: one rank's input
                        "size_bytes": n.get("bytes"),  # torch's: input + output
                        "group": n.get("group"),
                        # on the slices' clock (the step's), as ts
                        "issued_us": round(offset + float(n.get("start_us") or 0.0), 3),
                        "estimate_us": n.get("dur_us"),
                        "exposed_us": n.get("exposed_us"),
                        "hidden_by": n.get("hidden_by"),
                        "graph": glabel,
                    },
                }
            )
    return end


def _process(
    events: list[dict[str, Any]],
    pid: int,
    name: str,
    graphs: list[dict[str, Any]],
    entry_of: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    """One process (a rank group, or a what-if of it): its graphs one after another, each with
    its compute, communication and memory tracks, from ``entry_of(graph)``'s timeline."""
    events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
    events.append(
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}}
    )
    offset = 0.0
    for gi, g in enumerate(graphs):
        glabel = _graph_label(g)
        groups = _groups_of([g])
        base = 1 + gi * TRACK_STRIDE
        tracks = {"compute": base}
        tracks.update({grp: base + 1 + k for k, grp in enumerate(groups)})
        names = {base: f"{glabel} compute"}
        names.update({base + 1 + k: f"{glabel} communication group {grp}" for k, grp in enumerate(groups)})
        for tid, tname in names.items():
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": tname}})
            events.append(
                {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}}
            )
        entry = entry_of(g)
        tl = entry.get("timeline") or {}
        nodes = tl.get("nodes") or []
        end = _graph_slices(events, nodes, pid, base, tracks, glabel, offset)
        for t_us, nbytes in tl.get("memory") or []:
            events.append(
                {
                    "ph": "C",
                    "name": f"{glabel} memory",
                    "ts": offset + float(t_us),
                    "pid": pid,
                    "args": {"bytes": nbytes},
                }
            )
        est = entry.get("est_ms")
        offset = max(end, offset + (float(est) * 1e3 if isinstance(est, (int, float)) else 0.0))


def _mesh_what_ifs(graphs: list[dict[str, Any]]) -> list[tuple[str, dict[int, dict[str, Any]]]]:
    """``(label, {id(graph): what-if entry})`` per what-if that ran on any of ``graphs``
    with a timeline (``not_prebucketed_on_mesh``: collectives pre-bucketing never handles on a
    mesh, :mod:`tracekit.replay.mesh_what_ifs`), in the order they ran."""
    out: dict[str, tuple[str, dict[int, dict[str, Any]]]] = {}
    for g in graphs:
        m = g.get("not_prebucketed_on_mesh") or {}
        groups = list(dict.fromkeys(c.get("group") for c in m.get("collectives") or []))
        for w in m.get("what_ifs") or []:
            if w.get("ok") and (w.get("timeline") or {}).get("nodes"):
                label = what_if_label(w, groups)
                slot = out.setdefault(w["name"], (label, {}))
                slot[1][id(g)] = w
    return list(out.values())


def _what_if_entry(entries: dict[int, dict[str, Any]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A graph's what-if entry where the what-if ran on it, else its recorded cap's."""

    def entry_of(g: dict[str, Any]) -> dict[str, Any]:
        return entries.get(id(g)) or _cap_entry(g, 0) or {}

    return entry_of


def trace_for_cap(doc: dict[str, Any], i: int) -> dict[str, Any]:
    """The trace-event document of cap ``i`` of ``totals.step`` (0: the recorded cap)."""
    step = (doc.get("totals") or {}).get("step") or []
    label = step[i].get("cap") if i < len(step) else str(i)
    events: list[dict[str, Any]] = []
    hw_what_if = any(v is not None for v in (doc.get("hardware") or {}).values())
    by_ranks: dict[str, list[dict[str, Any]]] = {}
    # the whole step: the pre-bucketed graphs, then those torch never pre-bucketed (scheduled)
    scheduled_never = [e for e in doc.get("not_prebucketed") or [] if "schedule" in e]
    for g in [*(doc.get("graphs") or []), *scheduled_never]:
        by_ranks.setdefault(str(g.get("ranks", g.get("rank"))), []).append(g)
    pid = 0
    for ranks, graphs in by_ranks.items():
        pid += 1
        _process(events, pid, f"ranks {ranks}", graphs, lambda g: _cap_entry(g, i, hw_what_if) or {})
    if i == 0 and not hw_what_if:  # the mesh what-ifs ran at the recorded cap, as logged
        for ranks, graphs in by_ranks.items():
            for what_if, entries in _mesh_what_ifs(graphs):  # ``label`` stays the cap's
                pid += 1
                _process(events, pid, f"ranks {ranks} what-if: {what_if}", graphs, _what_if_entry(entries))
    pid = _profile_processes(events, pid, doc.get("prediction"), label)
    _fit(events)
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "metadata": {
            "source": "tracekit replay --trace-out",
            "schema": doc.get("schema"),
            "cap": label,
            "bucket_cap_mb": step[i].get("bucket_cap_mb") if i < len(step) else None,
            "basis": "torch's estimates (overlap scheduler), not measurements",
            "units": UNITS,
        },
    }


def _slices_process(events: list[dict[str, Any]], pid: int, name: str, slices: list[Any]) -> None:
    """One process of ``[track, name, start ms, ms]`` slices, a thread a track."""
    events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
    tids: dict[str, int] = {}
    for track, what, start, ms in slices:
        if track not in tids:
            tids[track] = len(tids) + 1
            events.append(
                {"ph": "M", "name": "thread_name", "pid": pid, "tid": tids[track], "args": {"name": track}}
            )
        events.append(
            {
                "ph": "X",
                "name": str(what),
                "pid": pid,
                "tid": tids[track],
                "ts": start * 1e3,
                "dur": ms * 1e3,
                "args": {},
            }
        )


def _profile_processes(events: list[dict[str, Any]], pid: int, prediction: Any, label: Any) -> int:
    """A replay with ``--profile``: the cap's predicted step, and at the recorded cap the
    measured one, each a process after the rank groups'; returns the last pid used."""
    if not isinstance(prediction, dict):
        return pid
    row = next((c for c in prediction.get("caps") or [] if c.get("cap") == label), None)
    if row and row.get("timeline"):
        pid += 1
        _slices_process(events, pid, "predicted from the profile", row["timeline"])
    measured = prediction.get("measured_timeline")
    if label == "recorded" and isinstance(measured, dict) and measured.get("slices"):
        pid += 1
        who = f"measured: rank {measured.get('rank')}, {measured.get('step')}"
        _slices_process(events, pid, who, measured["slices"])
    return pid


def _fit(events: list[dict[str, Any]]) -> None:
    """Times to the nanosecond; a slice that runs into the next one on its track by rounding
    (the timeline's starts and durations are rounded apart, to 1 ns) ends where the next begins."""
    tracks: dict[tuple, list[dict[str, Any]]] = {}
    for e in events:
        if "ts" in e:
            e["ts"] = round(e["ts"], 3)
        if e["ph"] == "X":
            e["dur"] = round(e["dur"], 3)
            tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    for spans in tracks.values():
        spans.sort(key=lambda e: (e["ts"], e["dur"]))
        for a, b in zip(spans, spans[1:], strict=False):
            if a["ts"] + a["dur"] > b["ts"]:
                a["dur"] = round(max(0.0, b["ts"] - a["ts"]), 3)


def write_traces(doc: dict[str, Any], out_dir: str) -> list[str]:
    """Write one trace file per cap of ``totals.step`` into ``out_dir`` (made if missing); returns
    the paths. A cap whose file name is taken already (the same cap asked twice) is skipped."""
    os.makedirs(out_dir, exist_ok=True)
    paths: list[str] = []
    for i, s in enumerate((doc.get("totals") or {}).get("step") or []):
        path = os.path.join(out_dir, cap_file_name(s))
        if path in paths:
            continue
        with open(path, "w", encoding="utf-8") as f:
            json.dump(trace_for_cap(doc, i), f, separators=(",", ":"))
        paths.append(path)
    return paths


__all__ = ["cap_file_name", "collective_slice_name", "comm_layout", "trace_for_cap", "write_traces"]
