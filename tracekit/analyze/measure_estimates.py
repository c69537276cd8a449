"""``measure --estimates REPLAY.json``: torch's exposed estimate of each graph, read from a saved
``tracekit replay LOGS --format json`` document of the same logs.

The compile log does not hold torch's exposed figure (torch writes it to its INFO log only);
``tracekit replay`` computes it by running torch's overlap scheduler at the recorded cap. In a
``tracekit.replay/3`` document, each ``graphs[]`` entry (a ``compile_id``, ``graph_index`` and the
``ranks`` it stands for) carries that cap's scheduler figures in ``reproduction`` (``cap_source``
``"recorded"``): ``exposed_ms`` is the one read here. Nothing is imported from torch and nothing
in the document is run: it is plain JSON, checked field by field.

The document must be of the same logs: every graph it names must be a graph of those ranks in
the logs, with the same recorded final schedule (kind and bytes of every collective, in order);
otherwise :class:`EstimatesError`, one line. A rank or graph of the logs the document does not
cover (a replay without ``--all-ranks`` covers the ranks whose outcome the lowest rank shares)
keeps ``exposed_est_ms`` None, and :func:`exposed_estimates` says which.
"""

from __future__ import annotations

from typing import Any

from tracekit.model import FinalSchedule, Run
from tracekit.model.rankset import rank_members

#: The replay documents that carry the recorded cap's scheduler figures (``exposed_ms``).
SCHEMAS = ("tracekit.replay/3",)

#: (rank, compile id, position of the graph) -> torch's exposed estimate, ms (None: the scheduler
#: could not run on that graph)
ExposedEstimates = dict[tuple[int | None, str, int], float | None]


class EstimatesError(ValueError):
    """The document is no replay document of these logs (one line, for the command to print)."""


def _field(d: Any, name: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(d, dict) or name not in d or not isinstance(d[name], kind) or isinstance(d[name], bool):
        raise EstimatesError(f"{where}: no {name!r} of the replay document's form")
    return d[name]


def _final_key(f: FinalSchedule | None) -> list[tuple[str, int | None]] | None:
    return None if f is None else [(c.kind, c.bytes) for c in f.collectives]


def _doc_final_key(d: Any, where: str) -> list[tuple[str, int | None]] | None:
    if d is None:
        return None
    colls = _field(d, "collectives", list, where + ": recorded_final")
    out: list[tuple[str, int | None]] = []
    for c in colls:
        kind = _field(c, "kind", str, where + ": recorded_final")
        b = c.get("bytes")
        out.append((kind, b if isinstance(b, int) and not isinstance(b, bool) else None))
    return out


def exposed_estimates(
    doc: Any, run: Run, source: str = "the replay document"
) -> tuple[ExposedEstimates, list[str]]:
    """torch's exposed estimate per rank and graph from a ``tracekit replay --format json``
    document ``doc`` (parsed JSON) of ``run``'s logs, and notes on what it does not cover.
    ``source`` names the document in messages. Raises :class:`EstimatesError` when ``doc`` is
    not a replay document (schema), or names a rank or graph the logs do not hold, or one whose
    recorded final schedule differs from the log's (another run or cap)."""
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if schema not in SCHEMAS:
        raise EstimatesError(
            f"{source} is no tracekit replay document (schema {schema!r}, not {' or '.join(SCHEMAS)}): "
            "make one with tracekit replay LOGS --all-ranks --format json -o REPLAY.json"
        )
    graphs = _field(doc, "graphs", list, source)
    logged: dict[int | None, dict[tuple[str, int], FinalSchedule | None]] = {
        r.rank: {(g.compile_id, g.graph_index): g.final for g in r.graphs} for r in run.ranks
    }
    out: ExposedEstimates = {}
    for i, g in enumerate(graphs):
        where = f"{source}: graphs[{i}]"
        cid = _field(g, "compile_id", str, where)
        index = _field(g, "graph_index", int, where)
        text = _field(g, "ranks", str, where)
        try:
            ranks = rank_members(text)
        except ValueError as e:
            raise EstimatesError(f"{where}: ranks {text!r}: {e}") from None
        label = f"{cid}:{index}"
        theirs = _doc_final_key(g.get("recorded_final"), where)
        repro = g.get("reproduction")
        exposed: float | None = None
        if repro is not None:
            if _field(repro, "cap_source", str, where + ": reproduction") != "recorded":
                raise EstimatesError(f"{where}: its reproduction is not at the recorded cap")
            value = repro.get("exposed_ms")
            if value is not None and (
                not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0
            ):
                raise EstimatesError(f"{where}: exposed_ms {value!r} is no duration")
            exposed = None if value is None else float(value)
        for rk in ranks:
            if rk not in logged:
                raise EstimatesError(
                    f"{source} holds rank {rk if rk is not None else '-'}, which the logs do not: "
                    "a replay of other logs?"
                )
            if (cid, index) not in logged[rk]:
                raise EstimatesError(
                    f"{source} holds graph {label} of rank {rk}, which its log does not: a replay of other logs?"
                )
            final = logged[rk][(cid, index)]
            if theirs != _final_key(final):
                raise EstimatesError(
                    f"{source}: graph {label} of rank {rk} has another recorded final schedule than the "
                    "log's (kinds or bytes differ): a replay of another run or cap?"
                )
            if final is not None:
                out[(rk, final.compile_id, final.position)] = exposed
    notes: list[str] = []
    for rk, finals in logged.items():
        missing = [
            f"{cid}:{gi}"
            for (cid, gi), f in finals.items()
            if f is not None and f.collectives and (rk, f.compile_id, f.position) not in out
        ]
        if missing:
            notes.append(
                f"rank {rk}: {source} gives no exposed estimate of graph {', '.join(missing)} "
                "(replay --all-ranks covers every rank)"
            )
    without = sorted(f"{cid}:{pos}" for (_rk, cid, pos), v in out.items() if v is None)
    if without:
        notes.append(f"{source}: torch's scheduler did not run on graph {', '.join(sorted(set(without)))}")
    return out, notes


def read_estimates(path: str, run: Run) -> tuple[ExposedEstimates, list[str]]:
    """:func:`exposed_estimates` of the replay document saved at ``path``; :class:`EstimatesError`
    also when the file cannot be read or holds no JSON (it is only decoded, never run)."""
    import json

    try:
        with open(path, "rb") as f:
            doc = json.load(f)
    except (OSError, ValueError, RecursionError) as e:
        raise EstimatesError(f"{path}: not a JSON document ({type(e).__name__}: {str(e)[:120]})") from None
    return exposed_estimates(doc, run, source=path)


__all__ = ["SCHEMAS", "EstimatesError", "ExposedEstimates", "exposed_estimates", "read_estimates"]
