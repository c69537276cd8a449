"""What replay and explain print when the logs give them no graph to work on: a heading that
says so, then why (the document's notes: :func:`tracekit.replay.notes.nothing_selected`), in
place of an empty table. Nothing to do is no finding: the commands exit 0, as summarize's NO
DATA does."""

from __future__ import annotations

from typing import Any

from tracekit.render.text import heading, wrap_clauses


def nothing_text(doc: dict[str, Any], command: str, fmt: str) -> str:
    """``Nothing to replay: no recorded bucketing outcome`` (or ``explain``), then each note,
    kept to the text width."""
    out = [heading(f"Nothing to {command}: no recorded bucketing outcome", fmt)]
    for note in doc.get("notes", []):
        out.append(wrap_clauses(f"note: {note}") + "\n")
    return "".join(out)
