"""The mesh of a summary document (its ``mesh`` section) as one line of text."""

from __future__ import annotations

from typing import Any


def mesh_line(doc: dict[str, Any]) -> str:
    """The ``mesh`` section in one line: ``world 4 = replicate 2 × shard 2; replicate groups
    17 (0,2) | 18 (1,3); shard groups 19 (0-1) | 20 (2-3)``."""
    by_role: dict[str, list[str]] = {}
    for g in doc.get("groups") or []:
        by_role.setdefault(g["role"], []).append(f"{g['name']} ({g['members']})")
    roles = [d["role"] for d in doc.get("dimensions") or []]
    parts = [
        f"{r} group{'s' if len(by_role.get(r, [])) != 1 else ''} {' | '.join(by_role.get(r, []))}"
        for r in roles
    ]
    return "; ".join([doc.get("text", ""), *parts])
