"""Lines -> decoded entries: the scanner's raw entries turned into :class:`Entry` values.

One step of the pipeline (files -> lines -> **entries** -> parsers -> per-rank model): the
:class:`tracekit.read.envelopes.Scanner` finds the wanted envelope lines and their payloads; here
each one is decoded (orjson), its entry type, artifact name, rank and compile id are read and
checked, and its payload is MD5-checked when it is kept. Whatever is wrong becomes a diagnostic
(kind, file, line) and the entry is dropped; nothing raises.

- :func:`decode_entries`: the wanted entries of an open stream, selected by entry key
  (the fast path: ``("artifact", NAME)`` or ``(TYPE, None)``) or by a ``want`` predicate.
- :func:`iter_entries`: the same for one file path (plain or gzip), for callers outside the
  reader.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any

from tracekit.model import Diagnostics
from tracekit.read import envelope_fields as ef
from tracekit.read import envelopes as ev
from tracekit.read.sources import open_log


@dataclass(slots=True)
class Entry:
    """One decoded, wanted entry."""

    file: str
    line: int
    rank: int | None
    compile_id: str | None
    entry_type: str
    artifact_name: str | None
    payload: str | None  # None when the payload was not asked for (or there is none)
    envelope: dict[str, Any]
    pid: int | None = None  # the process id of the glog prefix

    @property
    def key(self) -> tuple[str, str | None]:
        """``("artifact", NAME)`` for an artifact, ``(TYPE, None)`` for any other entry."""
        return (self.entry_type, self.artifact_name)


class PayloadMemo:
    """Payloads seen before: ``has_payload`` MD5 -> (the payload's lines as read, its text).

    A long log repeats its payloads (the same estimation, sizes and graph for thousands of
    graphs), and a job's ranks log the same ones. A payload whose MD5 and lines are byte for
    byte those of one already checked is the same text: it is not joined, hashed or decoded
    again, and the parsers get the very same ``str``, so their memos (:class:`ValueMemo
    <tracekit.read.parsers.ValueMemo>`) find its value without hashing it again. Comparing the lines
    (``memcmp``) is what makes this sound: a payload is taken from here only when it is the
    payload that was checked. Bounded like the parsers' memos: cleared when it holds ``limit``
    payloads or ``max_bytes`` of them, so memory grows with what is distinct, up to a bound."""

    __slots__ = ("_seen", "_bytes", "limit", "max_bytes")

    def __init__(self, limit: int = 1024, max_bytes: int = 8 << 20) -> None:
        self._seen: dict[str, tuple[bytes, str]] = {}
        self._bytes = 0
        self.limit = limit
        self.max_bytes = max_bytes

    def text(self, md5: Any, blocks: list[bytes] | None) -> str | None:
        """The checked text of this payload if it was seen (None: check it)."""
        if not blocks or type(md5) is not str:
            return None
        hit = self._seen.get(md5)
        if hit is None:
            return None
        raw = blocks[0] if len(blocks) == 1 else b"".join(blocks)
        return hit[1] if raw == hit[0] else None

    def add(self, md5: str, blocks: list[bytes], text: str) -> None:
        """Remember a payload just checked (its MD5 matched, its text decoded)."""
        raw = blocks[0] if len(blocks) == 1 else b"".join(blocks)
        if len(raw) > self.max_bytes // 4:
            return
        if len(self._seen) >= self.limit or self._bytes + len(raw) > self.max_bytes:
            self._seen.clear()
            self._bytes = 0
        self._seen[md5] = (raw, text)
        self._bytes += len(raw) + len(text)

    def __getstate__(self):  # travels to worker processes empty
        return {"limit": self.limit, "max_bytes": self.max_bytes}

    def __setstate__(self, state) -> None:
        self.__init__(**state)  # type: ignore[misc]  # the fresh, empty memo __init__ makes


def _every(entry_type: str, name: str | None) -> bool:
    """Every entry, with its payload (``validate_all``): one function, so the cached byte
    forms (:func:`_on_bytes`) of it are made once, not once a file."""
    return True


@functools.lru_cache(maxsize=16)
def _names_and_types(keys: frozenset[tuple[str, str | None]]) -> tuple[frozenset[str], frozenset[str]]:
    """The artifact names and the other entry types among entry keys (once per key set, not
    per file)."""
    return (
        frozenset(n for t, n in keys if t == "artifact" and n is not None),
        frozenset(t for t, n in keys if t != "artifact"),
    )


@functools.lru_cache(maxsize=16)
def _on_bytes(pred: Callable[[str, str | None], bool] | None) -> Callable[[bytes, bytes | None], bool] | None:
    """``pred(entry_type, name)`` for the scanner, which has them as bytes."""
    if pred is None:
        return None
    return lambda etype, name: pred(
        etype.decode("utf-8", "replace"), None if name is None else name.decode("utf-8", "replace")
    )


def decode_entries(
    stream,
    file: str,
    diagnostics: Diagnostics,
    *,
    keys: Collection[tuple[str, str | None]] | None = None,
    want: Callable[[str, str | None], bool] | None = None,
    on_chunk: Callable[[int], None] | None = None,
    payload_for: Callable[[str, str | None], bool] | None = None,
    rank: int | None = None,
    scanner_out: list | None = None,
    validate_all: bool = False,
    memo: PayloadMemo | None = None,
) -> Iterator[Entry]:
    """Decoded entries of one stream: those with one of the entry ``keys`` (fast path) or those
    ``want(entry_type, name)`` selects; everything else is checked cheaply (see
    :class:`tracekit.read.envelopes.Scanner`).

    ``payload_for(entry_type, name)`` says whether a wanted entry's payload is needed (default:
    all of them); entries kept without payload are still checked for the payload's presence.
    ``scanner_out``, when given, receives the scanner (its ``rank`` and ``lines_read``).
    ``validate_all``: every envelope is decoded and every payload MD5-checked, whatever is
    selected (``--strict``: slower, and nothing bad goes unseen); only the selected entries are
    yielded. ``memo``: payloads checked before (:class:`PayloadMemo`), not checked again."""
    add = diagnostics.add

    def report(kind: str, lineno: int, detail: str) -> None:
        add(kind, file, lineno, detail)

    names = types = None
    selected: Callable[[str, str | None], bool] | None = None
    if validate_all:
        if keys is not None:
            wanted = frozenset(keys)
            selected = lambda t, n: (t, n) in wanted  # noqa: E731
        else:
            selected = want
        want, keys, payload_for = _every, None, _every
    elif keys is not None:
        names, types = _names_and_types(keys if isinstance(keys, frozenset) else frozenset(keys))
    scanner = ev.Scanner(
        report,
        artifact_names=names,
        entry_types=types,
        want=_on_bytes(want),
        payload_for=_on_bytes(payload_for),
        on_chunk=on_chunk,
        rank=rank,
    )
    if scanner_out is not None:
        scanner_out.append(scanner)
    for raw in scanner.entries(stream):
        try:
            env = ef.decode_envelope(raw.line[raw.start :])
            etype = _TYPE_NAMES.get(raw.entry_type)
            if etype is None:
                etype = raw.entry_type.decode("utf-8")
                if len(_TYPE_NAMES) < 256:  # the entry types wanted: a handful
                    _TYPE_NAMES[raw.entry_type] = etype
            if etype not in env:
                raise ef.EntryError("bad_json", "entry-type key not found after decoding")
            name = None
            if etype == "artifact":
                meta = env[etype]
                if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
                    raise ef.EntryError("bad_field_type", "artifact without a string name")
                name = meta["name"]
                if raw.name is not None and name.encode("utf-8", "replace") != raw.name:
                    # duplicate keys: the bytes named one artifact, the decoded object another
                    raise ef.EntryError("bad_json", "the artifact name is given twice")
            r = ef.envelope_rank(env)
            cid = ef.compile_id(env)
        except (ef.EntryError, UnicodeDecodeError) as e:
            add(getattr(e, "kind", "bad_utf8"), file, raw.lineno, getattr(e, "detail", ""))
            continue
        if r is not None:
            if scanner.rank is None:
                scanner.set_rank(r)
            elif r != scanner.rank:
                add("other_rank", file, raw.lineno, f"rank {r} in a file of rank {scanner.rank}")
                continue
        payload = None
        has = env.get("has_payload")
        if raw.payload_wanted:  # the scanner asked payload_for once per entry type and name
            payload = None if memo is None else memo.text(has, raw.blocks)
            if payload is None:
                try:
                    payload = ef.check_payload(env, raw.payload)
                except ef.EntryError as e:
                    add(e.kind, file, raw.lineno, e.detail)
                    continue
                if memo is not None and payload and type(has) is str:
                    memo.add(has, raw.blocks, payload)  # type: ignore[arg-type]  # a checked payload has its blocks
        elif has is not None and not raw.payload_lines:
            add("missing_payload", file, raw.lineno, "has_payload set but no payload lines follow")
            continue
        if raw.payload_lines and has is None:
            add("orphan_payload", file, raw.lineno + 1, "payload lines after an envelope without has_payload")
        if selected is not None and not selected(etype, name):
            continue
        yield Entry(file, raw.lineno, r, cid, etype, name, payload, env, _pid(raw.line))


#: Entry types as read (bytes) -> as str.
_TYPE_NAMES: dict[bytes, str] = {}


def _pid(line: bytes) -> int | None:
    """The process id of a glog prefix (``V1202 12:55:04.644000 5659 path:line] ``)."""
    if line[21:22] == b" ":  # the prefix the scanner checked: the pid is at 22
        end = line.find(b" ", 22)
        if end > 22:
            try:
                return int(line[22:end])
            except ValueError:
                pass
    parts = line.split(b" ", 3)
    try:
        return int(parts[2])
    except (IndexError, ValueError):
        return None


def check_gzip(stream, path: str, diag: Diagnostics) -> None:
    """Report a corrupt or cut-short ``.gz`` (what was read before it is used)."""
    err = getattr(stream, "error", None)
    if err is not None:
        diag.add("bad_gzip", path, 0, err[:120])


def iter_entries(
    path: str,
    want: Callable[[str, str | None], bool] = lambda entry_type, artifact_name: True,
    *,
    diagnostics: Diagnostics | None = None,
    payload_for: Callable[[str, str | None], bool] | None = None,
) -> Iterator[Entry]:
    """The decoded entries of one log file (plain or gzip) that ``want`` selects.

    ``want(entry_type, artifact_name)`` gets e.g. ``("artifact", "before_post_grad_graph")`` or
    ``("dynamo_start", None)``; it is called once per distinct pair. Bad input is added to
    ``diagnostics`` (a throwaway one if not given) and never raises.

    >>> for e in iter_entries(path, lambda t, n: n == "pre_bucketing_fsdp_collectives"):
    ...     print(e.rank, e.compile_id, e.payload)
    """
    diag = diagnostics if diagnostics is not None else Diagnostics()
    try:
        stream, raw = open_log(path)
    except OSError as e:
        diag.add("unreadable_file", path, 0, e.strerror or str(e))
        return
    with raw:
        try:
            yield from decode_entries(stream, path, diag, want=want, payload_for=payload_for)
        except OSError as e:
            diag.add("unreadable_file", path, 0, str(e)[:120])
        check_gzip(stream, path, diag)
