"""The summary document as pretty JSON, written as it is made (:func:`write_summary_json`).

``summarize --format json`` writes it. The graph lists of each rank group, and with
``--per-rank`` of each rank, are written one graph at a time, so memory holds neither the text of
the whole document nor, for ``ranks``, its dicts. What that earns (``bench/bench_summary_json.py``,
the same bytes either way, peak RSS of the process): a 1 GB log (2,916 graphs) peaks at 23.9 MiB,
42.1 MiB with one ``orjson.dumps`` of the whole document; 2,048 small rank logs with
``--per-rank`` at 22.5 MiB, 70.8 MiB whole. It costs time on a long graph list: 250 ms against
191 ms for the 1 GB log's summary and JSON (0.06 s of its 0.5 s run), the same on 2,048 ranks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import orjson

from tracekit.model import Rank, Run
from tracekit.model.fields import graph_to_dict, rank_to_dict
from tracekit.model.json_forms import DumpMemo
from tracekit.render.summary_document import summary_document


def write_summary_json(
    run: Run, write: Callable[[bytes], Any], *, per_rank: bool = False, head: dict[str, Any] | None = None
) -> None:
    """Write :func:`summary_document` as pretty JSON (sorted keys, 2-space indent, trailing
    newline: the same text as ``render.dumps_json(summary_document(run, per_rank=...))``). The
    graph lists (of each group, and with ``per_rank`` of each rank) are written one graph at a
    time, so memory holds neither the text of the whole document nor, for ``ranks``, its dicts:
    that of the Run, plus one graph's text. ``head``: the document without ``ranks``, when the
    caller has it already."""
    opt = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
    memo = DumpMemo()

    def dump(value: Any, indent: int) -> None:
        text = orjson.dumps(value, option=opt)
        write(text.replace(b"\n", b"\n" + b" " * indent) if indent and b"\n" in text else text)

    def items(values: list[Any], indent: int, each: Callable[[Any, int], None]) -> None:
        if not values:
            write(b"[]")
            return
        write(b"[\n")
        pad = b" " * (indent + 2)
        for i, v in enumerate(values):
            write(pad)
            each(v, indent + 2)
            write(b",\n" if i < len(values) - 1 else b"\n")
        write(b" " * indent + b"]")

    def obj(d: dict[str, Any], indent: int, special: dict[str, Callable[[Any, int], None]]) -> None:
        keys = sorted(d)
        write(b"{\n")
        pad = b" " * (indent + 2)
        for i, k in enumerate(keys):
            write(pad + orjson.dumps(k) + b": ")
            (special.get(k) or dump)(d[k], indent + 2)
            write(b",\n" if i < len(keys) - 1 else b"\n")
        write(b" " * indent + b"}")

    def graph_list(graphs: list[Any], indent: int) -> None:
        items(graphs, indent, lambda g, ind: dump(g if isinstance(g, dict) else graph_to_dict(g, memo), ind))

    def group(grp: dict[str, Any], indent: int) -> None:
        obj(grp, indent, {"graphs": graph_list})

    def rank(r: Rank, indent: int) -> None:
        rd = rank_to_dict(dataclasses.replace(r, graphs=[]))
        rd["graphs"] = r.graphs  # Graph objects: dumped one at a time
        obj(rd, indent, {"graphs": graph_list})

    if head is None:
        head = summary_document(run, per_rank=per_rank, with_ranks=False)
    top = dict(head)
    if per_rank:
        top["ranks"] = run.ranks
    obj(
        top,
        0,
        {"groups": lambda gs, ind: items(gs, ind, group), "ranks": lambda rs, ind: items(rs, ind, rank)},
    )
    write(b"\n")
