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


class EnvelopeMemo:
    """Envelopes decoded before, known by their bytes with the file's own rank masked.

    A job's ranks log the same envelopes but for their rank: rank 7's
    ``{"artifact": {"name": "pre_bucketing_fsdp_collectives", ...}, "rank": 7, "frame_id": 0,
    ...}`` is rank 300's with 7 for 300. An envelope whose bytes, with each ``"rank": R,`` and
    ``"rank": R}`` of its file's rank R written ``"rank":,`` (and as many of them), are those of
    one decoded before, in any file, is that envelope with this file's rank for the other's:
    its entry type, artifact name and compile id are the same, its rank is its file's where the
    other's was its file's, and it is not decoded (orjson), checked and read again::

        rank 7:   {..., "rank": 7, "frame_id": 0, ...}    -> (1, b'{..., "rank":, "frame_id": 0, ...}')
        rank 300: {..., "rank": 300, "frame_id": 0, ...}  -> the same key: decoded once

    ``"rank":,`` is no JSON: in a key made of a valid envelope it stands only where a rank was
    masked, and the count tells apart a line that holds it itself. Before a file's rank is
    known (its first entry, ``torch_version``, logs none), an envelope with no ``"rank"`` in
    its bytes is known by them as they are, ``(0, bytes)``: the key a file of any rank makes
    of it. Only envelopes that decoded
    and passed every check are kept, and only those of no rank, or of their file's rank written
    as torch writes it, once: the one ``"rank"`` of the envelope is the one masked. An envelope
    of another rank, or whose rank is written otherwise (``"rank":7,``), is decoded each time.

    The :class:`Entry` then holds the earlier envelope, equal to its own but for the values of
    its ``"rank"`` keys (its :attr:`Entry.rank` is its own). Bounded: cleared when it holds
    ``limit`` envelopes (~1.4 KB each, 1.4 MiB in all)."""

    __slots__ = ("_seen", "limit", "_rank", "_tokens", "_step")

    #: Misses in one file after which it stops looking, unless a fifth of its lookups hit
    #: (:func:`decode_entries`): a long log's envelopes are new copy after copy.
    MISSES_BEFORE_GIVING_UP = 64

    def __init__(self, limit: int = 1024) -> None:
        self._seen: dict[tuple[int, bytes], tuple] = {}
        self.limit = limit
        self._rank: int | None = None
        self._tokens = (b"", b"")
        self._step = 1

    def key(self, body: bytes, rank: int) -> tuple[int, bytes]:
        """``(ranks masked, the bytes masked)`` of an envelope of a file of ``rank``."""
        if rank != self._rank:
            self._rank = rank
            self._tokens = (b'"rank": %d,' % rank, b'"rank": %d}' % rank)
            self._step = len(self._tokens[0]) - len(_MASK[0])  # 2 or more: '"rank": 0,' is the shortest
        masked = body.replace(self._tokens[0], _MASK[0]).replace(self._tokens[1], _MASK[1])
        return ((len(body) - len(masked)) // self._step, masked)

    def get(self, key: tuple[int, bytes]) -> tuple | None:
        """``(entry type, artifact name, compile id, envelope, ranked)`` or None."""
        return self._seen.get(key)

    def put(self, key: tuple[int, bytes], value: tuple) -> None:
        if len(self._seen) >= self.limit:
            self._seen.clear()
        self._seen[key] = value


_MASK = (b'"rank":,', b'"rank":}')


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
    envelopes: EnvelopeMemo | None = None,
    rank_hint: int | None = None,
) -> Iterator[Entry]:
    """Decoded entries of one stream: those with one of the entry ``keys`` (fast path) or those
    ``want(entry_type, name)`` selects; everything else is checked cheaply (see
    :class:`tracekit.read.envelopes.Scanner`).

    ``payload_for(entry_type, name)`` says whether a wanted entry's payload is needed (default:
    all of them); entries kept without payload are still checked for the payload's presence.
    ``scanner_out``, when given, receives the scanner (its ``rank`` and ``lines_read``).
    ``validate_all``: every envelope is decoded and every payload MD5-checked, whatever is
    selected (``--strict``: slower, and nothing bad goes unseen); only the selected entries are
    yielded. ``memo``: payloads checked before (:class:`PayloadMemo`), not checked again.
    ``envelopes``: envelopes decoded before, in this file or another rank's
    (:class:`EnvelopeMemo`), not decoded again once the file's rank is known, or before, when
    its bytes hold no rank, or the one ``rank_hint`` (the rank its name gives) gives them; a
    file that finds few there stops looking (a long log: each copy its own compile id)."""
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
    hits = misses = 0
    for raw in scanner.entries(stream):
        key = hit = None
        if envelopes is not None:
            body = raw.line[raw.start :]
            if scanner.rank is not None:
                key = envelopes.key(body, scanner.rank)
            elif b'"rank"' not in body:  # before the file's rank is known (its torch_version):
                key = (0, body)  # nothing to mask, the bytes themselves
            elif rank_hint is not None:  # its first ranked entry: the rank its name gives, if
                key = envelopes.key(body, rank_hint)  # that is the one rank the bytes hold
                if key[0] != 1:
                    key = None
        if key is not None and envelopes is not None:  # a key only with the memo (above)
            hit = envelopes.get(key)
            if hit is not None:
                hits += 1
            else:
                misses += 1
                if misses > envelopes.MISSES_BEFORE_GIVING_UP and misses > 4 * hits:
                    envelopes = None  # mostly new envelopes: this file stops looking
        if hit is not None:
            etype, name, cid, env, ranked = hit
            if ranked and scanner.rank is None:  # known by the rank its name gives: it is that one
                scanner.set_rank(rank_hint)  # type: ignore[arg-type]  # a ranked hit without a rank: keyed by the hint
            r = scanner.rank if ranked else None
        else:
            try:
                env = ev.decode_envelope(raw.line[raw.start :])
                etype = _TYPE_NAMES.get(raw.entry_type)
                if etype is None:
                    etype = raw.entry_type.decode("utf-8")
                    if len(_TYPE_NAMES) < 256:  # the entry types wanted: a handful
                        _TYPE_NAMES[raw.entry_type] = etype
                if etype not in env:
                    raise ev.EntryError("bad_json", "entry-type key not found after decoding")
                name = None
                if etype == "artifact":
                    meta = env[etype]
                    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
                        raise ev.EntryError("bad_field_type", "artifact without a string name")
                    name = meta["name"]
                    if raw.name is not None and name.encode("utf-8", "replace") != raw.name:
                        # duplicate keys: the bytes named one artifact, the decoded object another
                        raise ev.EntryError("bad_json", "the artifact name is given twice")
                r = ev.envelope_rank(env)
                cid = ev.compile_id(env)
            except (ev.EntryError, UnicodeDecodeError) as e:
                add(getattr(e, "kind", "bad_utf8"), file, raw.lineno, getattr(e, "detail", ""))
                continue
            if r is not None:
                if scanner.rank is None:
                    scanner.set_rank(r)
                elif r != scanner.rank:
                    add("other_rank", file, raw.lineno, f"rank {r} in a file of rank {scanner.rank}")
                    continue
            if (
                key is not None
                and envelopes is not None
                and (r is None or (key[0] == 1 and body.count(b'"rank"') == 1))
            ):
                # of no rank, or of the file's, written where the mask stands: its only "rank"
                envelopes.put(key, (etype, name, cid, env, r is not None))
        payload = None
        has = env.get("has_payload")
        if raw.payload_wanted:  # the scanner asked payload_for once per entry type and name
            payload = None if memo is None else memo.text(has, raw.blocks)
            if payload is None:
                try:
                    payload = ev.check_payload(env, raw.payload)
                except ev.EntryError as e:
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
