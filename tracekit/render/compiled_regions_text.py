"""The "Compiled regions" section of summarize's report: the frames dynamo compiled, when no
graph has a bucketing outcome (:func:`tracekit.analyze.compiled_regions.compiled_regions`); and
the sentences the verdict and notes say of them (:func:`no_collective_text`, :func:`fsdp2_text`,
:func:`failures_text`)."""

from __future__ import annotations

from typing import Any

from tracekit.analyze.compiled_regions import FSDP2_PATH, failed_frames, holds_no_collective
from tracekit.model.nouns import plural
from tracekit.render.text import heading, ranks_cell, table

#: A frame compile's status, as the table says it.
STATUS_TEXT = {"compiled": "compiled", "eager": "fell back to eager", "failed": "failed to compile"}
HEADERS = ["compile id", "frame", "status", "params (bytes)", "collectives", "graph break at", "why"]
#: A graph break's or failure's reason is cut at this many characters in the table (JSON has it whole).
MAX_REASON = 48
#: A graph break's place is cut (at its start) to this many characters.
MAX_AT = 64


def _frame_cell(f: dict[str, Any]) -> str:
    where = f.get("where") or ""
    tail = where.replace("\\", "/").rsplit("/", 1)[-1]  # file.py:line, not the whole path (JSON has it)
    return f"{f.get('name') or '-'} ({tail})" if tail else f.get("name") or "-"


def shortened(text: str | None, limit: int, from_start: bool = False) -> str:
    """``text`` cut to ``limit`` characters, ``...`` where it was cut (at its end, or at its
    start with ``from_start``: a path's tail is its file and line); ``-`` when empty."""
    if not text:
        return "-"
    if len(text) <= limit:
        return text
    return "..." + text[-(limit - 3) :] if from_start else text[: limit - 3] + "..."


def _at(where: str | None) -> str:
    return shortened(where, MAX_AT, from_start=True)


def _reason(f: dict[str, Any]) -> str:
    return shortened(f.get("reason"), MAX_REASON)


def _bytes(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def render_compiled_regions(regions: dict[str, Any], fmt: str) -> str:
    """The section: a table per group of ranks, then one line of totals (the first group's)."""
    out = ["\n" + heading("Compiled regions (compilation_metrics, dynamo_output_graph, graph breaks)", fmt)]
    many = len(regions["groups"]) > 1
    for g in regions["groups"]:
        if many or fmt == "table":
            cell = ranks_cell(g["ranks"])
            out.append(f"{cell if cell == 'rank not logged' else 'ranks ' + cell}:\n")
        rows = [
            [
                f["compile_id"],
                _frame_cell(f),
                STATUS_TEXT.get(f["status"], f["status"]),
                f"{f['params']} ({_bytes(f['param_bytes'])})" if f["status"] == "compiled" else "-",
                f["collectives"] if f["status"] == "compiled" else "-",
                _at(f.get("break_at")),
                _reason(f),
            ]
            for f in g["frames"]
        ]
        out.append(table(rows, HEADERS, fmt))
    total = regions["param_bytes"]
    parts = [
        f"{plural(regions['compiled'], 'region')} compiled, taking in "
        + (f"{total:,} bytes of parameters" if total is not None else "parameters of symbolic size"),
        f"{plural(regions['eager'], 'frame')} fell back to eager",
        f"{regions['failed']} failed to compile",
        f"{plural(regions['collectives'], 'collective')} in compiled graphs",
    ]
    out.append("\n" + "; ".join(parts) + "; params (bytes): the graph's parameter inputs and their size\n")
    return "".join(out)


def no_collective_text(regions: dict[str, Any]) -> str | None:
    """Why there is nothing to pre-bucket, when no compiled graph holds a collective: e.g.
    ``no compiled graph holds a collective (2 compiled regions, 1 frame fell back to eager), so
    pre-bucketing has nothing to merge``. None when some graph holds one, or none compiled (a
    failed compile is said by :func:`failures_text`)."""
    if not holds_no_collective(regions):
        return None
    parts = [plural(regions["compiled"], "compiled region")]
    if regions["eager"]:
        parts.append(f"{plural(regions['eager'], 'frame')} fell back to eager")
    if regions["failed"]:
        parts.append(f"{regions['failed']} failed to compile")
    return f"no compiled graph holds a collective ({', '.join(parts)}), so pre-bucketing has nothing to merge"


def fsdp2_text(regions: dict[str, Any]) -> str | None:
    """What the frame compiles say of FSDP2, when they show it (:func:`tracekit.analyze.compiled_regions.is_fsdp2`); else None:
    its graph breaks (a whole-model compile), or, with none, the ``fully_shard`` modules whose
    forwards compiled on their own (a per-block compile: FSDP2's hooks run around them)."""
    if regions["fsdp2_breaks"]:
        return (
            f"FSDP2 (fully_shard): dynamo skips its hooks (graph breaks at {FSDP2_PATH}), so its "
            "collectives run in eager code, one fully_shard unit at a time"
        )
    if not regions.get("fsdp2_modules"):
        return None
    names = sorted({f["fsdp2_module"] for f in regions["groups"][0]["frames"] if f.get("fsdp2_module")})
    n = regions["fsdp2_modules"]
    return (
        f"FSDP2 (fully_shard), compiled per block: {plural(n, 'compiled region')} "
        f"{'is the forward' if n == 1 else 'are forwards'} of fully_shard modules ({', '.join(names)}, "
        "as the guards name them); FSDP2's hooks run around each in eager code, so its all-gathers "
        "and reduce-scatters run outside compiled graphs, one fully_shard unit at a time"
    )


def failures_text(regions: dict[str, Any], limit: int = 3) -> str | None:
    """The frame compiles that failed (the first group's), what and where: e.g. ``1 frame compile
    failed: 0/0 fn (test_misc.py:9589): BackendCompilerFailed: backend='broken_backend' raised:
    RuntimeError: broken backend``; the first ``limit``, then how many more. None if none failed."""
    failed = failed_frames(regions)
    if not failed:
        return None
    items = []
    for f in failed[:limit]:
        where = (f["where"] or "").replace("\\", "/").rsplit("/", 1)[-1]
        frame = f"{f['name'] or '?'} ({where})" if where else f["name"] or "?"
        items.append(f"{f['compile_id']} {frame}: {f['reason'] or 'no reason logged'}")
    more = f"; and {len(failed) - limit} more" if len(failed) > limit else ""
    n = len(failed)
    return f"{n} frame compile{' failed' if n == 1 else 's failed'}: " + "; ".join(items) + more
