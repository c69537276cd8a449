"""Flat records for a notebook: one dict per row, plain values only, and a pandas DataFrame of
them when pandas is installed (pandas stays optional; nothing here imports torch).

- :func:`outcomes`: one row per rank and graph of the model, the graphs torch never
  pre-bucketed included (``prebucketed`` False, their counts as the schedule runs them);
- :func:`schedules`: one row per collective that runs (``inductor_collective_schedule``);
- :func:`replays`: one row per graph and cap of a replay document (:func:`tracekit.replay_run`);
- :func:`measured_collectives` and :func:`measured_graphs`: one row per collective (per graph)
  and step of a measurement (:func:`tracekit.analyze.measure.measure`, ``tracekit measure``).

    >>> import tracekit
    >>> run = tracekit.load("fixtures/logs/saved_params")
    >>> [(r["graph"], r["prebucketed"], r["rs_before"], r["rs_after"]) for r in tracekit.records.outcomes(run)][:2]
    [('forward', True, 0, 0), ('backward', False, 8, 8)]
"""

from __future__ import annotations

from typing import Any

from tracekit.model import COLLECTIVE_TYPES, SHORT_NAMES, FinalSchedule, Run

_PHASES = {0: "forward", 1: "backward"}


def _phase(index: int) -> str:
    return _PHASES.get(index, f"graph {index}")


def _counts(row: dict[str, Any], before: dict[str, int], after: dict[str, int]) -> None:
    for kind in COLLECTIVE_TYPES:
        short = SHORT_NAMES[kind].lower()
        row[f"{short}_before"] = before.get(kind, 0)
        row[f"{short}_after"] = after.get(kind, 0)


def outcomes(run: Run) -> list[dict[str, Any]]:
    """One row per rank and graph: ``rank``, ``compile_id``, ``graph_index``, ``graph``
    (forward, backward), ``prebucketed``, ``fsdp_groups`` (``"0,1"``), ``group_size``,
    ``bucket_cap_mb``, ``ag_before`` ... ``ar_after``, ``scheduled`` (collectives that run),
    ``scheduled_bytes`` and ``scheduled_est_ms`` (None when not logged). A graph torch never
    pre-bucketed has no outcome: ``prebucketed`` False, its counts the schedule's (before =
    after), ``bucket_cap_mb`` and ``fsdp_groups`` None."""
    rows: list[dict[str, Any]] = []
    for rank in run.ranks:
        for g in rank.graphs:
            row: dict[str, Any] = {
                "rank": rank.rank,
                "compile_id": g.compile_id,
                "graph_index": g.graph_index,
                "graph": _phase(g.graph_index),
                "prebucketed": True,
                "fsdp_groups": ",".join(map(str, g.fsdp_groups)),
                "group_size": g.group_size,
                "bucket_cap_mb": g.bucket_cap_mb,
            }
            _counts(
                row,
                {k: c.before for k, c in g.collectives.items()},
                {k: c.after for k, c in g.collectives.items()},
            )
            rows.append({**row, **_scheduled(g.final)})
        for f in rank.schedules_without_outcome:
            row = {
                "rank": rank.rank,
                "compile_id": f.compile_id,
                "graph_index": f.position,
                "graph": _phase(f.position),
                "prebucketed": False,
                "fsdp_groups": None,
                "group_size": next((c.group_size for c in f.collectives if c.group_size), None),
                "bucket_cap_mb": None,
            }
            _counts(row, f.counts, f.counts)
            rows.append({**row, **_scheduled(f)})
    return rows


def _scheduled(f: FinalSchedule | None) -> dict[str, Any]:
    if f is None:
        return {"scheduled": None, "scheduled_bytes": None, "scheduled_est_ms": None}
    sizes = [c.bytes for c in f.collectives]
    ests = [c.est_ms for c in f.collectives]
    return {
        "scheduled": len(f.collectives),
        "scheduled_bytes": None if None in sizes else sum(s for s in sizes if s is not None),
        "scheduled_est_ms": None if None in ests else round(sum(e for e in ests if e is not None), 4),
    }


def schedules(run: Run) -> list[dict[str, Any]]:
    """One row per collective that runs, in run order: ``rank``, ``compile_id``,
    ``graph_index``, ``prebucketed``, ``position`` (its place in the graph's schedule), ``kind``,
    ``op``, ``group``, ``group_size``, ``bytes``, ``dtype``, ``est_ms`` (torch's NCCL estimate)."""
    rows: list[dict[str, Any]] = []
    for rank in run.ranks:
        finals = [(g.final, True) for g in rank.graphs if g.final is not None]
        finals += [(f, False) for f in rank.schedules_without_outcome]
        for f, pre in finals:
            assert f is not None  # filtered above; for the type checker
            for i, c in enumerate(f.collectives):
                rows.append(
                    {
                        "rank": rank.rank,
                        "compile_id": f.compile_id,
                        "graph_index": f.position,
                        "prebucketed": pre,
                        "position": i,
                        "kind": c.kind,
                        "op": c.op,
                        "group": c.group,
                        "group_size": c.group_size,
                        "bytes": c.bytes,
                        "dtype": c.dtype,
                        "est_ms": c.est_ms,
                    }
                )
    return rows


_REPLAY_FIELDS = (
    "bucket_cap_mb",
    "cap_source",
    "estimated_comm_ms",
    "comm_ms",
    "exposed_ms",
    "compute_ms",
    "est_ms",
    "peak_memory_bytes",
    "largest_bucket_mb",
)


def replays(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per graph and cap of a ``tracekit.replay`` document: ``ranks``, ``compile_id``,
    ``graph_index``, ``cap`` (``recorded`` for the reproduction, else the cap's label),
    ``bucket_cap_mb``, ``cap_source``, the estimates (``estimated_comm_ms``, ``comm_ms``,
    ``exposed_ms``, ``compute_ms``, ``est_ms``; None where the scheduler did not run),
    ``peak_memory_bytes``, ``largest_bucket_mb`` and ``ag_before`` ... ``ar_after``."""
    rows: list[dict[str, Any]] = []
    caps = doc.get("caps") or []
    for g in doc.get("graphs") or []:
        entries = [("recorded", g.get("reproduction")), *zip(caps, g.get("replays") or [], strict=False)]
        for cap, r in entries:
            if not isinstance(r, dict):
                continue
            row = {
                "ranks": g.get("ranks"),
                "compile_id": g.get("compile_id"),
                "graph_index": g.get("graph_index"),
            }
            row["cap"] = cap
            row.update({k: r.get(k) for k in _REPLAY_FIELDS})
            counts = r.get("collectives") or {}
            _counts(
                row,
                {k: (v or {}).get("before", 0) for k, v in counts.items()},
                {k: (v or {}).get("after", 0) for k, v in counts.items()},
            )
            rows.append(row)
    return rows


def _graph_run_keys(p: Any, r: Any) -> dict[str, Any]:
    """The keys a measured row starts with: which rank, step and graph run it is."""
    return {
        "rank": p.rank,
        "step": r.step,
        "compile_id": r.compile_id,
        "graph_index": r.position,
        "graph": _phase(r.position or 0),
    }


def measured_collectives(measurement: Any) -> list[dict[str, Any]]:
    """One row per paired collective and graph run of a :class:`tracekit.analyze.measure.Measurement`:
    ``rank``, ``step``, ``compile_id``, ``graph_index``, ``graph``, ``position``, ``kind``,
    ``bytes`` (one rank's input, the log's), ``est_ms`` (torch's), ``measured_ms`` (the transfer's
    span), ``issue_ms``, ``exposed_ms`` (its wait on the main thread, or on the GPU form the compute
    stream idle during its kernel; None when not measured), ``ratio`` (measured / est)."""
    rows: list[dict[str, Any]] = []
    for p in measurement.pairings:
        for r in p.runs:
            if r.final is None:
                continue
            for pc in r.paired:
                c = r.final.collectives[pc.position]
                ms = None if pc.transfer is None else round(pc.transfer.span.dur_us / 1e3, 4)
                rows.append(
                    _graph_run_keys(p, r)
                    | {
                        "position": pc.position,
                        "kind": c.kind,
                        "bytes": c.bytes,
                        "est_ms": c.est_ms,
                        "measured_ms": ms,
                        "issue_ms": round(pc.issued.span.dur_us / 1e3, 4),
                        "exposed_ms": None if pc.exposed_us is None else round(pc.exposed_us / 1e3, 4),
                        "ratio": None if ms is None or not c.est_ms else round(ms / c.est_ms, 1),
                    }
                )
    return rows


def measured_graphs(measurement: Any) -> list[dict[str, Any]]:
    """One row per compiled graph run of a measurement: ``rank``, ``step``, ``compile_id``,
    ``graph_index``, ``graph``, ``run_ms``, ``collectives`` (paired), ``est_ms`` (torch's
    estimate of its collectives), ``measured_ms`` (their transfers), ``exposed_ms`` (the main
    thread's waits in the run, or the compute stream idle during its collectives), ``problem`` (why it was not paired, else None)."""
    rows: list[dict[str, Any]] = []
    for p in measurement.pairings:
        for r in p.runs:
            if r.final is None and not r.issued:
                continue
            ests = [r.final.collectives[pc.position].est_ms for pc in r.paired] if r.final else []
            spans = [pc.transfer.span.dur_us for pc in r.paired if pc.transfer is not None]
            rows.append(
                _graph_run_keys(p, r)
                | {
                    "run_ms": round(r.span.dur_us / 1e3, 4),
                    "collectives": len(r.paired),
                    "est_ms": None
                    if not ests or None in ests
                    else round(sum(e for e in ests if e is not None), 4),
                    "measured_ms": round(sum(spans) / 1e3, 4)
                    if spans and len(spans) == len(r.paired)
                    else None,
                    "exposed_ms": None if r.exposed_us is None else round(r.exposed_us / 1e3, 4),
                    "problem": r.problem,
                }
            )
    return rows


def frame(rows: list[dict[str, Any]]) -> Any:
    """``rows`` as a pandas DataFrame (columns in the rows' order); ImportError with the install
    line when pandas is not installed (tracekit itself never needs it)."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError(
            "records.frame needs pandas: pip install pandas (the rows are plain dicts)"
        ) from None
    return pd.DataFrame.from_records(rows)


__all__ = ["frame", "measured_collectives", "measured_graphs", "outcomes", "replays", "schedules"]
