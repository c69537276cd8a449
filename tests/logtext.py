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


def edit_payloads(log_text: str, name: str, edit) -> str:
    """``log_text`` with the payload of every artifact named ``name`` replaced by
    ``edit(payload)`` and its envelope's ``has_payload`` MD5 made to match: a log as torch would
    have written it had the artifact held that."""
    import hashlib

    lines = log_text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        match = ENVELOPE.match(line)
        end = i + 1
        while end < len(lines) and lines[end].startswith("\t"):
            end += 1
        if match and json.loads(match.group(2)).get("artifact", {}).get("name") == name:
            payload = edit("\n".join(x[1:] for x in lines[i + 1 : end]))
            md5 = hashlib.md5(payload.encode()).hexdigest()
            out.append(re.sub(r'"has_payload": "[0-9a-f]{32}"', f'"has_payload": "{md5}"', line))
            out.extend("\t" + x for x in payload.split("\n"))
        else:
            out.extend(lines[i:end])
        i = end
    return "\n".join(out)
