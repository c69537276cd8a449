"""A few lines that list a log's artifacts, for the bucketing tests: they check what torch.compile
wrote with our pass installed, independently of tracekit's own reader."""

from __future__ import annotations

import json
import re

ENVELOPE = re.compile(r"^[VIWEC]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} \d+ ([^:]+):\d+\] (\{.*\})$")


def artifacts(log_text: str) -> list[tuple[str, str, str]]:
    """(name, source file of the log call, payload) of every artifact entry, in order."""
    out: list[tuple[str, str, str]] = []
    lines = log_text.split("\n")
    for i, line in enumerate(lines):
        match = ENVELOPE.match(line)
        if not match:
            continue
        entry = json.loads(match.group(2))
        if "artifact" not in entry:
            continue
        payload = []
        for following in lines[i + 1 :]:
            if not following.startswith("\t"):
                break
            payload.append(following[1:])
        out.append((entry["artifact"]["name"], match.group(1), "\n".join(payload)))
    return out
