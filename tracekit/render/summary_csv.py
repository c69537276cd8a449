"""``summarize --format csv``: every section of a summary document in one CSV, numbers as numbers.

One header, one ``section`` column saying what a row is, and the other columns filled where they
apply (a spreadsheet filters on ``section``; pandas reads it with ``read_csv``):

- ``verdict``: ``field`` status (``value`` agree|diverge|incomplete|no_data) and text;
- ``world``: ``field`` expected, found, ranks, missing, duplicated (rank sets as ranges);
- ``mesh`` (a 2-D mesh only): field ``world`` with the mesh's text, then one row per process group:
  field its role (shard, replicate, tp), value its name, ranks its members, group_size, detail
  why that role (a dimension no group shows, inferred: value ``inferred``, detail why);
  ``mesh_not_prebucketed``: collectives pre-bucketing never handles on the mesh,
  field the kind, value the count, fsdp_groups the FSDP groups the pass saw, bytes and est_ms one
  rank's, detail the groups it never saw and the reason;
- ``outcome``: one row per graph and distinct outcome (or per rank and graph with ``--per-rank``):
  ``ranks``, ``count``, ``compile_id``, ``graph``, the FSDP groups, group size, machines, cap
  (MB), each type's count before and after (``AG_before``, ``AG_after``, ...) and the MB before
  and after;
- ``outcome`` rows of graphs torch never pre-bucketed: ``field`` ``outcome``, ``value`` "not
  pre-bucketed", their scheduled counts before = after and the MB their schedule logs;
- ``total``: the same columns summed over every row's ranks (not one job's bytes), the graphs
  never pre-bucketed included as in the table's total (a second ``total`` row, ``field``
  ``not_prebucketed``, counts those graphs);
- ``collectives_run``: the collectives that run per graph and group of ranks
  (``inductor_collective_schedule``, as the table's section): ``AG_after`` ... ``AR_after`` and
  ``other`` by kind, ``bytes`` (one rank's input) and ``est_ms`` summed, ``detail`` sizes=...;
- ``divergence``, ``schedule``, ``compile``: one row per differing value, the ranks and value
  beside the majority's (``field`` names it: ``all_gather.before``, ``bytes``, ...), the
  position or first difference in ``detail``;
- ``did_nothing``: the graphs where bucketing merged nothing; ``diagnostic``: each kind of bad
  input and its count; ``note``: each note.

MB are 2^20 bytes, as in every format (docs/output.md, "Units"). The document is the one
:func:`tracekit.render.summary_document.summary_document` makes; nothing here reads a file.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

from tracekit.model import COLLECTIVE_TYPES, SHORT_NAMES
from tracekit.model.nouns import graph_label
from tracekit.model.rankset import format_ranks
from tracekit.render.cells import first_diff_text, total_mb
from tracekit.render.mesh_text import mesh_csv_rows
from tracekit.render.schedule_text import final_groups, final_totals

COUNT_COLUMNS = [f"{SHORT_NAMES[t]}_{when}" for t in COLLECTIVE_TYPES for when in ("before", "after")]
COLUMNS = [
    "section",
    "ranks",
    "count",
    "compile_id",
    "graph",
    "field",
    "value",
    "majority_ranks",
    "majority_value",
    "fsdp_groups",
    "group_size",
    "machines",
    "cap_mb",
    *COUNT_COLUMNS,
    "mb_before",
    "mb_after",
    "other",
    "bytes",
    "est_ms",
    "detail",
]


#: The world's lists of files (paths, not ranks): one cell, joined by "; ".
WORLD_PATHS = ("unplaced", "not_logs", "copies", "subdirectories")


def _ranks(v: Any) -> str:
    if v is None:
        return ""
    return v if isinstance(v, str) else format_ranks(v)


def _scalar(v: Any) -> Any:
    """A cell: numbers and text as they are, a list of sizes as its MB, anything else compact."""
    if v is None or isinstance(v, (int, float, str)):
        return "" if v is None else v
    if isinstance(v, list) and all(isinstance(x, dict) and "size_mb" in x for x in v):
        return total_mb(v)
    if isinstance(v, list) and all(isinstance(x, int) for x in v):
        return format_ranks(v)
    import orjson

    return orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode()


def _flat(prefix: str, v: Any) -> dict[str, Any]:
    """``{"before": 10, "after": 1}`` under ``all_gather``: ``all_gather.before``, ``all_gather.after``."""
    at = -1 if "sizes" in prefix else 2  # [type, MB] pairs; a schedule's [kind, group, bytes, dtype]
    if (
        isinstance(v, list)
        and v
        and all(
            isinstance(x, list)
            and len(x) > max(at, 0)
            and isinstance(x[at], (int, float))
            and not isinstance(x[at], bool)
            for x in v
        )
    ):
        # a size list or a schedule: its count and sum
        unit = "mb" if "sizes" in prefix else "bytes"
        total = sum(x[at] for x in v)
        return {f"{prefix}.count": len(v), f"{prefix}.{unit}": round(total, 3) if unit == "mb" else total}
    if isinstance(v, dict):
        out: dict[str, Any] = {}
        for k in sorted(v):
            out.update(_flat(f"{prefix}.{k}" if prefix else str(k), v[k]))
        return out
    return {prefix or "value": _scalar(v)}


def _outcome(g: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "compile_id": g.get("compile_id"),
        "graph": graph_label(g.get("graph_index")),
        "fsdp_groups": " ".join(str(x) for x in g.get("mesh_fsdp_groups") or g.get("fsdp_groups") or []),
        "group_size": g.get("group_size"),
        "machines": g.get("n_nodes"),
        "cap_mb": g.get("bucket_cap_mb"),
    }
    for t in COLLECTIVE_TYPES:
        c = (g.get("collectives") or {}).get(t) or {}
        row[f"{SHORT_NAMES[t]}_before"], row[f"{SHORT_NAMES[t]}_after"] = c.get("before"), c.get("after")
    sz = g.get("sizes_mb")
    if sz:
        row["mb_before"], row["mb_after"] = total_mb(sz.get("before")), total_mb(sz.get("after"))
    return row


def _not_prebucketed_rows(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The outcome rows of graphs torch never pre-bucketed, as the table's (one per rank with
    ``--per-rank``)."""
    from tracekit.model.rankset import rank_members

    for d in doc.get("did_nothing") or []:
        if not d.get("outcome"):
            continue
        mb = None if d.get("total_bytes") is None else round(d["total_bytes"] / 2**20, 3)
        row: dict[str, Any] = {
            "section": "outcome",
            "compile_id": d.get("compile_id"),
            "graph": graph_label(d.get("graph_index")),
            "field": "outcome",
            "value": d["outcome"],
            "group_size": d.get("group_size"),
            "mb_before": mb,
            "mb_after": mb,
        }
        for typ in COLLECTIVE_TYPES:
            n = (d.get("counts") or {}).get(typ, 0)
            row[f"{SHORT_NAMES[typ]}_before"] = row[f"{SHORT_NAMES[typ]}_after"] = n
        members = rank_members(d["ranks"])
        if doc.get("ranks") is not None:
            for r in sorted(members, key=lambda r: -1 if r is None else r):
                yield {**row, "ranks": "" if r is None else str(r), "count": 1}
        else:
            yield {**row, "ranks": _ranks(d["ranks"]), "count": len(members)}


def _outcome_rows(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if doc.get("ranks") is not None:
        for r in doc["ranks"]:
            for g in r["graphs"]:
                yield {
                    "section": "outcome",
                    "ranks": "" if r["rank"] is None else str(r["rank"]),
                    "count": 1,
                    **_outcome(g),
                }
        return
    for grp in doc.get("groups") or []:
        for g in grp["graphs"]:
            yield {
                "section": "outcome",
                "ranks": _ranks(grp["ranks"]),
                "count": grp.get("count"),
                **_outcome(g),
            }


def _detail(rest: dict[str, Any]) -> str:
    """What else an item says, short: its first difference as the table's cell says it."""
    fd = rest.pop("first_difference", None)
    parts = [f"first difference {first_diff_text(fd)}"] if fd else []
    parts += [f"{k}={v}" for k, v in sorted(_flat("", rest).items()) if v != ""] if rest else []
    return "; ".join(parts)


def _paired(section: str, item: dict[str, Any], base: str) -> Iterator[dict[str, Any]]:
    """One row per differing scalar of ``value`` against ``majority_value``."""
    value, majority = _flat(base, item.get("value")), _flat(base, item.get("majority_value"))
    detail = {
        k: v
        for k, v in item.items()
        if k
        not in ("value", "majority_value", "ranks", "majority_ranks", "compile_id", "graph_index", "field")
    }
    common = {
        "section": section,
        "ranks": _ranks(item.get("ranks")),
        "compile_id": item.get("compile_id"),
        "graph": graph_label(item["graph_index"]) if item.get("graph_index") is not None else "",
        "majority_ranks": _ranks(item.get("majority_ranks")),
        "detail": _detail(detail),
    }
    for key in list(dict.fromkeys([*value, *majority])):
        if value.get(key) != majority.get(key) or len(value) == 1:
            yield {
                **common,
                "field": key,
                "value": value.get(key, ""),
                "majority_value": majority.get(key, ""),
            }


def summary_rows(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The rows of the CSV (see the module docstring), as dicts keyed by :data:`COLUMNS`."""
    v = doc.get("verdict") or {}
    if v:
        yield {"section": "verdict", "field": "status", "value": v.get("status")}
        yield {"section": "verdict", "field": "text", "value": v.get("text")}
    for k, val in (doc.get("world") or {}).items():
        yield {
            "section": "world",
            "field": k,
            "value": _scalar(val)
            if not isinstance(val, list)
            else "; ".join(val)
            if k in WORLD_PATHS
            else _ranks(val),
        }
    yield from mesh_csv_rows(doc)
    yield from _outcome_rows(doc)
    yield from _not_prebucketed_rows(doc)
    t = doc.get("totals") or {}
    if t:
        row = {
            "section": "total",
            "ranks": "",
            "count": t.get("ranks"),
            "field": "graphs",
            "value": t.get("graphs"),
            **{k: t.get(k) for k in ("mb_before", "mb_after")},
        }
        for typ in COLLECTIVE_TYPES:
            c = (t.get("collectives") or {}).get(typ) or {}
            for when in ("before", "after"):
                row[f"{SHORT_NAMES[typ]}_{when}"] = c.get(when)
        yield row
        if t.get("not_prebucketed"):
            yield {"section": "total", "field": "not_prebucketed", "value": t["not_prebucketed"]}
    for ranks, f in (
        final_groups(doc) if doc.get("groups") is not None or doc.get("ranks") is not None else []
    ):
        nbytes, ms = final_totals(f)
        counts = f.get("counts") or {}
        yield {
            "section": "collectives_run",
            "ranks": ranks,
            "compile_id": f["compile_id"],
            "graph": graph_label(f["position"]),
            **{f"{SHORT_NAMES[typ]}_after": counts.get(typ, 0) for typ in COLLECTIVE_TYPES},
            "other": counts.get("other", 0),
            "bytes": nbytes,
            "est_ms": ms,
            "detail": f"sizes={f.get('sizes')}",
        }
    for item in doc.get("divergence") or []:
        yield from _paired("divergence", item, item.get("field", ""))
    for item in doc.get("schedule_divergence") or []:
        yield from _paired("schedule", item, "")
    for item in doc.get("compile_divergence") or []:
        yield from _paired("compile", item, item.get("what", ""))
    for item in doc.get("did_nothing") or []:
        yield {
            "section": "did_nothing",
            "compile_id": item.get("compile_id"),
            "graph": graph_label(item["graph_index"]) if item.get("graph_index") is not None else "",
            "ranks": _ranks(item.get("ranks")),
            "detail": "; ".join(
                f"{k}={v}"
                for k, v in sorted(
                    _flat(
                        "", {k: v for k, v in item.items() if k not in ("compile_id", "graph_index", "ranks")}
                    ).items()
                )
            ),
        }
    for kind, n in sorted(((doc.get("diagnostics") or {}).get("counts") or {}).items()):
        yield {"section": "diagnostic", "field": kind, "value": n}
    for note in doc.get("notes") or []:
        yield {"section": "note", "value": note}


def summary_csv(doc: dict[str, Any]) -> str:
    """The whole summary as one CSV (see the module docstring)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n", extrasaction="ignore", restval="")
    w.writeheader()
    for row in summary_rows(doc):
        w.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return buf.getvalue()
