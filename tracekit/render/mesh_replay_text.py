"""Text for replay on a mesh (a ``tracekit.replay/3`` document whose graphs carry
``process_groups``): the process groups each graph registered before torch's passes ran, with
their role, size (and where it came from) and members. Renderers only: they work from the
document; a 1-D document has no such section."""

from __future__ import annotations

from typing import Any

from tracekit.render.text import heading, table

GROUP_HEADERS = ["group", "role", "size", "size from", "members", "collectives", "graphs"]


def process_groups_section(doc: dict[str, Any], fmt: str) -> str:
    """One row per process group the replayed graphs use; empty without a mesh."""
    seen: dict[str, tuple[dict[str, Any], list[str], list[str]]] = {}
    for g in doc["graphs"]:
        for pg in g.get("process_groups") or []:
            row = seen.setdefault(pg["name"], (pg, [], []))
            label = f"{g['compile_id']}:{g['graph_index']}"
            if label not in row[1]:
                row[1].append(label)
            row[2].extend(k for k in pg["kinds"] if k not in row[2])
    if not seen:
        return ""
    rows = [
        [
            name,
            pg["role"] or "-",
            pg["size"] if pg["size"] is not None else "UNKNOWN",
            pg["size_from"] or "-",
            pg["members"] or "-",
            ", ".join(kinds),
            ", ".join(graphs),
        ]
        for name, (pg, graphs, kinds) in sorted(seen.items(), key=lambda kv: _name_key(kv[0]))
    ]
    return (
        "\n"
        + heading("Process groups registered (fake, of each group's size) before torch's passes ran", fmt)
        + table(rows, GROUP_HEADERS, fmt)
        + "\nsize from: graph (its group_size argument), members (the ranks whose logs use the name),\n"
        "world (the log's '# World size' over the graph's other groups).\n"
    )


def _name_key(name: str) -> tuple[bool, int, str]:
    return (not name.isdigit(), int(name) if name.isdigit() else 0, name)


__all__ = ["process_groups_section"]
