"""Saved ``tracekit.summary`` documents: read from a file, checked, and turned back into a Run.

A document is untrusted input, as a log is: every value is checked before it is used, and what
is wrong with one is said in one line (:class:`InputError`, :class:`DocumentError`).

- :func:`sniff_json`: whether a file (plain or gzipped) holds JSON, not a compile log.
- :func:`load_json`: the JSON value of such a file.
- :func:`summary_major`, :func:`run_from_summary`: a ``tracekit.summary/1.x`` or ``/2.x``
  document checked and rebuilt into a Run (:func:`run_from_document`), as ``diff`` and
  ``report`` both judge one.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable
from typing import Any

import orjson

from tracekit.model import Diagnostics, Run, rank_from_dict
from tracekit.model.rankset import rank_members
from tracekit.read.sources import GZIP_MAGIC

SUMMARY_PREFIX = "tracekit.summary/"
#: The summary majors this version reads: /1 (per rank) and /2 (ranks grouped by outcome).
SUPPORTED_SUMMARY_MAJORS = (1, 2)


class InputError(Exception):
    """An input that cannot be used; the message is one line meant for the user."""


class DocumentError(ValueError):
    """A JSON document that is not a ``tracekit.summary`` document."""


def sniff_json(path: str) -> Callable[..., Any] | None:
    """How to open the file (``open`` or ``gzip.open``) when its first non-space byte is ``{``
    (looked at through gzip when the file is gzipped): a JSON document, not a glog-prefixed
    compile log. None for anything else."""
    with open(path, "rb") as f:
        head = f.read(4096)
    opener: Callable[..., Any] = open
    if head[:2] == GZIP_MAGIC:
        opener = gzip.open
        with gzip.open(path, "rb") as f:
            head = f.read(4096)
    head = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    return opener if head[:1] == b"{" else None


def load_json(path: str, opener: Callable[..., Any]) -> Any:
    """The JSON value of the file at ``path``, opened with ``opener`` (:func:`sniff_json`);
    :class:`InputError` (``PATH: bad JSON summary: ...``, ``PATH: cannot read: ...``) when it
    cannot be read or is not JSON."""
    try:
        with opener(path, "rb") as f:
            return orjson.loads(f.read())
    except orjson.JSONDecodeError as e:
        raise InputError(f"{path}: bad JSON summary: {e}") from None
    except (OSError, EOFError) as e:
        raise InputError(f"{path}: cannot read: {e}") from None


def summary_major(schema: Any, path: str) -> int:
    """The major version of a ``tracekit.summary/MAJOR[.MINOR]`` schema string, or InputError."""
    if not isinstance(schema, str) or not schema.startswith(SUMMARY_PREFIX):
        raise InputError(
            f"{path}: JSON with schema {schema!r} is not a tracekit summary "
            f"(expected {SUMMARY_PREFIX}{SUPPORTED_SUMMARY_MAJORS[-1]})"
        )
    version = schema[len(SUMMARY_PREFIX) :]
    major = version.split(".", 1)[0]
    if not major.isdigit():
        raise InputError(f"{path}: unreadable summary schema version {schema!r}")
    return int(major)


def run_from_summary(doc: Any, path: str) -> Run:
    """A :class:`Run` rebuilt from a ``tracekit.summary/1.x`` or ``/2.x`` document; keys this
    version does not know are ignored, missing optional ones take their defaults."""
    if not isinstance(doc, dict) or "schema" not in doc:
        raise InputError(f'{path}: JSON without a "schema" key is not a tracekit summary')
    major = summary_major(doc["schema"], path)
    if major not in SUPPORTED_SUMMARY_MAJORS:
        readable = " and ".join(f"{SUMMARY_PREFIX}{m}.x" for m in SUPPORTED_SUMMARY_MAJORS)
        raise InputError(
            f"{path}: summary schema {doc['schema']!r} is not supported (this tracekit reads {readable})"
        )
    for key in ("ranks", "groups"):
        if not isinstance(doc.get(key) or [], list):
            raise InputError(f'{path}: bad summary: "{key}" is not a list')
    try:
        run = run_from_document(doc)  # the model keeps only the keys it knows
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise InputError(f"{path}: bad summary: {e}") from None
    problem = summary_problem(run)
    if problem:
        raise InputError(f"{path}: bad summary: {problem}")
    if not run.paths:
        run.paths = [path]
    return run


def summary_problem(run: Run) -> str:
    """What makes a rebuilt summary unusable (values of the wrong type), or "" when it is fine.
    A summary is untrusted input, like a log."""
    seen: set[Any] = set()
    for r in run.ranks:
        if r.rank is not None and (not isinstance(r.rank, int) or isinstance(r.rank, bool)):
            return f"rank {r.rank!r} is not an integer"
        if r.rank in seen:
            return f"rank {r.rank} appears twice"
        seen.add(r.rank)
        for g in r.graphs:
            if g.group_size is not None and not isinstance(g.group_size, int):
                return f"rank {r.rank} graph {g.label}: group_size {g.group_size!r}"
    return ""


def run_from_document(doc: Any) -> Run:
    """A Run back from a ``tracekit.summary/1`` or ``/2`` document (graphs, counters,
    diagnostics): per-rank entries when the document has them, else every rank of every group
    (``/2``'s default), each with the group's graphs."""
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith("tracekit.summary/"):
        raise DocumentError("not a tracekit.summary document (no 'schema': 'tracekit.summary/2')")
    try:
        if doc.get("ranks") is not None or "groups" not in doc:
            ranks = [rank_from_dict(r) for r in doc.get("ranks") or []]
        else:
            ranks = []
            for grp in doc["groups"]:
                for rk in rank_members(str(grp["ranks"])):
                    ranks.append(rank_from_dict({**grp, "rank": rk, "files": []}))
            ranks.sort(key=lambda r: (r.rank is None, -1 if r.rank is None else r.rank))
        diag = Diagnostics()
        d = doc.get("diagnostics") or {}
        diag.counts = {str(k): int(v) for k, v in (d.get("counts") or {}).items()}
        diag.examples = list(d.get("examples") or [])
    except (KeyError, TypeError, ValueError) as e:
        raise DocumentError(f"malformed summary document: {e}") from None
    w = doc.get("world") or {}
    dup_v = w.get("duplicated") or []
    try:
        dup: list[int | None] = [
            r for r in (rank_members(dup_v) if isinstance(dup_v, str) else dup_v) if isinstance(r, int)
        ]
    except (TypeError, ValueError):
        raise DocumentError("malformed summary document: world.duplicated is not a rank set") from None
    return Run(paths=list(doc.get("paths", [])), ranks=ranks, diagnostics=diag, duplicated=dup)
