"""Two torches: the one that wrote a log and the one that replays it, and what differs between
them where it changes a replay's answer.

torch 2.13, 2.14 and 2.15 run the same FSDP pre-bucketing pass (``fx_passes/fsdp.py``), but:

- from 2.14, inductor's ``simple_overlap`` (``aten_distributed_optimizations.enable_simple_overlap``,
  on by default) runs in inductor's scheduler after the FX passes: it moves waits later, never
  reorders collectives. A 2.14+ log's ``inductor_collective_schedule`` has its wait positions;
  replay runs the FX overlap scheduler only, so its exposed ms is the figure before it;
- 2.15 changed ``fx_passes/bucketing.py`` (foreach grouping by contiguity, duplicate waits
  removed, padded cats matched) and ``overlap_scheduling.py`` (other scheduling decisions with
  the same estimates: a wait handled while another one is no longer hides that other one, nor
  re-enters it), so a replay on 2.15 of an older log, or the reverse, can lay buckets out
  otherwise and expose other times (fixtures nested_waits and nested_waits_torch2.15: 0.0956
  against 0.1063 ms on one graph). Replay runs the replaying torch's own scheduler, so it gives
  that torch's figures.

Used by the replay document (``torch``) and its text view; never imports torch itself (the
replaying version is handed in)."""

from __future__ import annotations

import textwrap
from typing import Any

#: What the replayed "exposed ms" is, said in every schedule legend and in the JSON.
EXPOSED_BASIS = (
    "exposed ms: torch's FX overlap scheduler's figure (the one torch logs as 'Overlap scheduling "
    "results'), before inductor's simple_overlap, which torch 2.14 and later run on lowered nodes "
    "afterwards; replay cannot run it (it needs inductor's lowering), and since it only moves waits "
    "later it can only hide more: on a 2.14+ run the figure is an upper bound"
)


def release(version: str | None) -> tuple[int, int] | None:
    """``"2.14.1+cu132"`` -> ``(2, 14)``; None when unknown or unreadable."""
    if not version:
        return None
    parts = version.split("+")[0].split(".")
    try:
        return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or "x")
    except (ValueError, IndexError):
        return None


def differences(log: str | None, replay: str) -> list[str]:
    """What differs between the torch that wrote a log (``log``) and the one replaying it, where
    it matters to a replay: [] when they are the same line or the log did not say."""
    a, b = release(log), release(replay)
    if a is None or b is None or a == b:
        return []
    out = []
    if (a >= (2, 14)) != (b >= (2, 14)):
        newer = log if a >= (2, 14) else replay
        out.append(
            f"simple_overlap: torch {newer} runs inductor's simple_overlap after the FX passes (on by "
            "default from 2.14), the other torch does not; it moves waits later, so the recorded "
            "inductor_collective_schedule's wait positions differ, and exposed ms here is the FX "
            "scheduler's, before it, under both"
        )
    if (a >= (2, 15)) != (b >= (2, 15)):
        out.append(
            f"bucket layouts: torch 2.15 changed fx_passes/bucketing.py (foreach all-gather inputs "
            f"grouped by contiguity, duplicate waits removed, padded cats matched) and the overlap "
            f"scheduler's decisions (a wait handled inside another's handling no longer hides the "
            f"other); the replay buckets and schedules as torch {replay} does, the log as torch "
            f"{log} did"
        )
    return out


def torch_section(
    graphs: list[Any], replay: str, never_prebucketed: tuple[str | None, ...] = ()
) -> dict[str, Any]:
    """The replay (and explain) document's ``torch``: the replaying torch, each log torch with
    the graphs it wrote and how many of those reproduced (counts, and the final sequence where
    recorded; explain's documents have no final sequence), and what differs between each log
    torch and the replaying one. ``graphs``: the document's graph dicts (``log_torch``,
    ``counts_reproduced`` or ``reproduced``, ``final_reproduced``). ``never_prebucketed``: the
    log torch of each graph torch never pre-bucketed that replay rebuilt beside them; a torch
    that wrote only such graphs is listed too (with 0 graphs), so the section says which torch
    wrote every log even when none was pre-bucketed."""
    logs: dict[str, dict[str, Any]] = {}
    for g in graphs:
        v = g.get("log_torch") or "not logged"
        e = logs.setdefault(
            v,
            {
                "version": None if v == "not logged" else v,
                "graphs": 0,
                "counts_reproduced": 0,
                "final_recorded": 0,
                "final_reproduced": 0,
                "differences": differences(None if v == "not logged" else v, replay),
            },
        )
        e["graphs"] += 1
        e["counts_reproduced"] += bool(g.get("counts_reproduced", g.get("reproduced")))
        e["final_recorded"] += g.get("final_reproduced") is not None
        e["final_reproduced"] += bool(g.get("final_reproduced"))
    for v in dict.fromkeys(v or "not logged" for v in never_prebucketed):
        if v not in logs:
            logs[v] = {
                "version": None if v == "not logged" else v,
                "graphs": 0,
                "counts_reproduced": 0,
                "final_recorded": 0,
                "final_reproduced": 0,
                "differences": differences(None if v == "not logged" else v, replay),
            }
    for v, e in logs.items():
        if e["differences"] and e["graphs"]:
            e.update(measured_differences([g for g in graphs if (g.get("log_torch") or "not logged") == v]))
    return {"replay": replay, "logs": list(logs.values()), "exposed_ms": EXPOSED_BASIS}


def _final_est_ms(final: dict[str, Any] | None) -> tuple[float, int] | None:
    """Sum of the collectives' estimated ms of a final sequence, and their number; None when
    there is none or an estimate is missing."""
    collectives = (final or {}).get("collectives")
    if not collectives or any(c.get("est_ms") is None for c in collectives):
        return None
    return sum(c["est_ms"] for c in collectives), len(collectives)


def measured_differences(graphs: list[dict[str, Any]]) -> dict[str, Any]:
    """By how much the two torches differ on a log's graphs, in ms, from what both gave: the
    collectives' estimates of the final sequence (the log's, from its
    ``fx_collectives_analytical_estimation``, by the torch that wrote it; the replay's, by the
    replaying torch's NCCL model, over the sequence it scheduled at the recorded cap), and the
    replaying torch's exposed ms (the log holds no exposed figure of its own torch). Keys only
    for what was measured: ``collective_ms`` ({"graphs", "log", "replay", "delta"}, over graphs
    whose two sequences have the same length), ``exposed_ms`` ({"replay": {graph: ms}})."""
    log_ms = replay_ms = 0.0
    compared = 0
    exposed: dict[str, float] = {}
    for g in graphs:
        repro = g.get("reproduction") or {}
        if repro.get("exposed_ms") is not None:
            graph = f"{g.get('compile_id')}:{g.get('graph_index')}"
            exposed[f"ranks {g.get('ranks')} {graph}" if graph in exposed else graph] = repro["exposed_ms"]
        recorded, replayed = _final_est_ms(g.get("recorded_final")), _final_est_ms(repro.get("final"))
        if recorded is None or replayed is None or recorded[1] != replayed[1]:
            continue
        log_ms += recorded[0]
        replay_ms += replayed[0]
        compared += 1
    out: dict[str, Any] = {}
    if compared:
        out["collective_ms"] = {
            "graphs": compared,
            "log": round(log_ms, 4),
            "replay": round(replay_ms, 4),
            "delta": round(replay_ms - log_ms, 4),
        }
    if exposed:
        out["exposed_ms"] = {"replay": exposed}
    return out


def torch_lines(section: dict[str, Any] | None) -> list[str]:
    """The text view: one line per log torch, then one per difference with what it changed."""
    if not section:
        return []
    out = []
    for e in section["logs"]:
        wrote = (
            "an unknown torch (no torch_version entry)" if e["version"] is None else f"torch {e['version']}"
        )
        line = f"torch: logs written by {wrote}, replayed by torch {section['replay']}"
        if e["differences"] and e["graphs"]:
            final = (
                f", final sequence {e['final_reproduced']} of {e['final_recorded']}"
                if e["final_recorded"]
                else ""
            )
            line += f"; counts reproduced on {e['counts_reproduced']} of {e['graphs']} graph{'s' if e['graphs'] != 1 else ''}{final}"
        out.append(line)
        out += [wrapped_line(f"  differs: {d}") for d in e["differences"]]
        out += [wrapped_line(ln) for ln in _measured_lines(e, section["replay"])]
    return out


#: Columns of the text's lines (the 200-column rule of every command's output).
MAX_COLUMNS = 200


def wrapped_line(line: str) -> str:
    """A line over :data:`MAX_COLUMNS` goes on, at word breaks, on lines four spaces in."""
    if len(line) <= MAX_COLUMNS:
        return line
    return textwrap.fill(
        line, MAX_COLUMNS, subsequent_indent="    ", break_long_words=False, break_on_hyphens=False
    )


def _measured_lines(e: dict[str, Any], replay: str) -> list[str]:
    """The text of :func:`measured_differences`: what differs in ms, and what cannot be told."""
    out = []
    wrote = f"torch {e['version']}" if e["version"] else "the log's torch"
    comm = e.get("collective_ms")
    if comm:
        out.append(
            f"  by how much: collective estimates {comm['log']:.4f} ms by {wrote} (in the log), "
            f"{comm['replay']:.4f} ms by torch {replay}: {comm['delta']:+.4f} ms "
            f"({comm['graphs']} graph{'s' * (comm['graphs'] != 1)})"
        )
    exposed = e.get("exposed_ms")
    if exposed:
        per_graph = ", ".join(f"{k} {v:.4f}" for k, v in exposed["replay"].items())
        out.append(
            f"  by how much: exposed ms by torch {replay}'s FX scheduler: {per_graph}; the log holds no "
            f"exposed figure of {wrote}, so the schedulers' own difference is not measured"
        )
    return out


__all__ = [
    "EXPOSED_BASIS",
    "differences",
    "measured_differences",
    "release",
    "torch_lines",
    "torch_section",
    "wrapped_line",
]
