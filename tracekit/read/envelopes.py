"""Lines -> entries: split a TORCH_TRACE stream into envelope lines and their payloads.

A log is a sequence of entries. An entry is one envelope line, a glog prefix and a JSON object,
then zero or more payload lines, each starting with one tab::

    V1202 12:55:04.644000 5659 torch/_inductor/compile_fx.py:1366] {"artifact": {"name": ...
    \tclass GraphModule(torch.nn.Module):
    \t    def forward(self, primals_1: "f32[64][1]cpu"):

The payload is the tab-stripped lines joined by ``\\n``; the envelope's ``has_payload`` is the MD5
of it. This module knows the line format and nothing about what an artifact means:

- :class:`Scanner` walks a binary stream in large chunks and yields one :class:`RawEntry` per
  wanted envelope line. Payload lines are skipped with a C-level search (``\\n`` followed by a non-tab)
  and only copied out when the caller's ``want`` predicate asks for them, so memory stays bounded
  by the chunk size plus the largest payload that is kept. On a seekable stream the partial
  line at the end of a chunk is read again with the next chunk (a short seek back) instead of
  being glued to it: no copy of every chunk, no fresh heap pages for it.
- :mod:`tracekit.read.envelope_fields` turns a wanted entry into Python values (its envelope,
  rank, compile id, checked payload), reporting what is wrong as a diagnostic kind.
"""

from __future__ import annotations

import functools
import io
import os
import re
from collections.abc import Callable, Iterator
from typing import IO

from tracekit.model.nouns import plural
from tracekit.read.envelope_fields import EntryError, decode_envelope, envelope_rank

try:  # the scanner's inner loop in C (tracekit/read/_scan.c), when it was built
    from tracekit.read._scan import block_end as _native_block_end
    from tracekit.read._scan import scan as _native_scan
except ImportError:  # pragma: no cover - an install without a C compiler: the regex decides alone
    _native_scan = _native_block_end = None
#: ``TRACEKIT_NO_NATIVE=1``: read with the regex alone, as an install without the C part does
#: (for comparing the two; tests run both).
NATIVE = _native_scan is not None and not os.environ.get("TRACEKIT_NO_NATIVE")

try:  # CPython's own MD5: no OpenSSL start-up (~3 ms) for the few small payloads checked
    from _md5 import md5 as _md5
except ImportError:  # pragma: no cover - a build without it
    from hashlib import md5 as _md5

#: tlparse's glog prefix: level, MMDD, time, pid, path:line, "] ".
PREFIX_RE = re.compile(rb"[VIWEC]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} \d+ [^:\n]+:\d+\] ")
#: End of a payload block: a newline followed by anything but a tab (next envelope, blank line).
_BLOCK_END_RE = re.compile(rb"\n[^\t]")
CHUNK_SIZE = 1 << 20
#: The first read of a stream: a small rank log is read whole, without a 1 MiB buffer (-18 us
#: a file, the price of the fresh pages of a large allocation).
FIRST_CHUNK_SIZE = 64 << 10


class RawEntry:
    """One wanted entry, before JSON decoding.

    ``line`` is the envelope line without its newline and ``start`` the offset of its JSON
    object; ``entry_type`` / ``name`` are what the byte checks read (``name`` only for
    artifacts). ``blocks`` are the payload's lines as read, each block a run of whole tab-led
    lines (None when the scanner was told the payload is not needed: ``payload_wanted`` says
    which; empty when no payload line followed); :attr:`payload` is the payload they make.
    An entry the stream ends inside is never yielded: the scanner reports it as
    ``truncated_entry``.
    """

    __slots__ = ("lineno", "line", "start", "entry_type", "name", "payload_lines", "blocks", "payload_wanted")

    def __init__(
        self,
        lineno: int,
        line: bytes,
        start: int,
        entry_type: bytes,
        name: bytes | None,
        payload_lines: int,
        blocks: list[bytes] | None,
        payload_wanted: bool = True,
    ) -> None:
        self.lineno, self.line, self.start = lineno, line, start
        self.entry_type, self.name = entry_type, name
        self.payload_lines, self.blocks, self.payload_wanted = payload_lines, blocks, payload_wanted

    @property
    def payload(self) -> bytes | None:
        """The payload bytes: the lines without their tabs, joined by newlines (None when not
        kept, or when no payload line followed)."""
        return _join(self.blocks) if self.blocks else None


#: The head of an envelope line: glog prefix, entry-type key, and for artifacts laid out the way
#: torch writes them (``{"artifact": {"name": "...``) the name.
_HEAD_RE = re.compile(rb"(" + PREFIX_RE.pattern + rb')(?:\{"([^"\n\\]+)": (?:\{"name": "([^"\n\\]*)")?)?')
#: Any line that does not start with a tab (the slow path: every line is looked at in Python).
_ANY_LINE_RE = re.compile(rb"\n(?!\t)")

_SKIP, _KEEP, _BAD, _NONE = 0, 1, 2, 3
_RANK_KEY = b'"rank": '
#: Bytes after which a scanner compiles the pattern of its file's rank (see :class:`Scanner`).
EXACT_RANK_AFTER = 2 << 20


#: JSON pieces, printable ASCII only (torch writes envelopes with ``ensure_ascii``).
_J_STR = rb'"[ !#-\[\]-~]*"'
_J_SCALAR = rb"(?:" + _J_STR + rb"|-?\d+(?:\.\d+)?|true|false|null)"
#: An object whose strings hold no braces, with objects one level inside it (torch's
#: ``describe_tensor`` has ``"dynamo_hint_overrides": {}``, ``dynamo_start`` a list of frames).
_J_OBJ = rb"\{[ -z|~]*+(?:\{[ -z|~]*+\}[ -z|~]*+)*+\}"
_J_META = rb"(?:" + _J_OBJ + rb"|\[[ -Z\\^-~]*\]|" + _J_SCALAR + rb")"
#: The keys torch writes after the metadata of most entries, in its order: matched as one
#: literal run before the general key loop (an alternation-free run sre matches fast).
_TORCH_KEYS = rb'(?:, "frame_id": \d++, "frame_compile_id": \d++, "attempt": \d++)?+'


#: ``rank`` for :func:`_interesting_line_re`: skip lines of any rank (the caller checks them:
#: see :meth:`Scanner._watch_ranks`).
ANY_RANK = "any"


@functools.lru_cache(maxsize=64)
def _interesting_line_re(
    names: frozenset[bytes], rank: int | str | None, types: frozenset[bytes] = frozenset()
) -> re.Pattern[bytes]:
    """A regex whose matches are the newlines before the lines Python must look at.

    A line is skipped inside the regex engine (it never reaches Python) when it is an
    ordinary envelope laid out the way torch writes it and is neither one of the wanted
    artifacts ``names`` nor of one of the wanted entry types ``types``::

        PREFIX {"TYPE": META[, "rank": RANK][, "KEY": SCALAR]...[, "has_payload": "MD5"]}

    with META an object (with objects one level inside it), a flat list or a scalar,
    printable ASCII only, followed by payload lines exactly when it has ``has_payload``; or a
    blank line not followed by payload lines. Everything else matches and is checked in
    Python: wanted artifacts, bad or unusual lines (metadata nested deeper, another rank,
    orphan or missing payloads), lines with a rank while the file's rank is unknown
    (``rank=None``), and the last line before the end of the buffer (its successor is not
    known yet). RANK is ``rank``; with ``rank=ANY_RANK`` any number: one pattern for every
    file (compiling one takes ~1 ms, as long as reading a 0.75 MB log), and lines of another
    rank than the file's are then found by :meth:`Scanner._watch_ranks`.
    """
    wanted = b"|".join(re.escape(n) for n in sorted(names)) or b"(?!)"
    # an entry type that is wanted is never skipped: the type key must not be one of them
    not_wanted_type = rb"(?!(?:" + b"|".join(re.escape(t) for t in sorted(types)) + rb')")' if types else rb""
    if rank is None:
        rank_part = rb""
    else:
        digits = rb"\d++" if rank == ANY_RANK else str(rank).encode()
        rank_part = rb'(?:, "rank": ' + digits + rb")?+"
    # Most envelopes (chromium events above all) are ``{"TYPE": {}`` then torch's keys and a
    # payload: one alternation-free run, tried before the general form (which accepts it too).
    common = (
        rb'\{"(?!artifact")'
        + not_wanted_type
        + rb'[A-Za-z0-9_]++": \{\}'
        + rank_part
        + _TORCH_KEYS
        + rb', "has_payload": "[0-9a-f]{32}"\}\n\t'
    )
    general = (
        rb'\{"(?!artifact": \{"name": "(?:'
        + wanted
        + rb')")(?!artifact"(?!: \{"name": "))'
        + not_wanted_type
        + rb'[A-Za-z0-9_]+": '
        + _J_META
        + rank_part
        # possessive (*+, ?+): no backtracking bookkeeping; the keys cannot match another way
        + _TORCH_KEYS
        + rb'(?:, "(?!has_payload"|rank")[A-Za-z0-9_]++": '
        + _J_SCALAR
        + rb")*+"
        + rb'(?:, "has_payload": "[0-9a-f]{32}"\}\n\t|\}\n(?!\t))'
    )
    # ``(?!\t)`` on its own first: a payload line's newline (most newlines) fails on one
    # opcode, before the alternation is entered.
    return re.compile(
        rb"\n(?!\t)(?!" + PREFIX_RE.pattern + rb"(?:" + common + rb"|" + general + rb")|\n(?!\t))"
    )


@functools.lru_cache(maxsize=64)
def _selection(
    names: frozenset[bytes] | None, types: frozenset[bytes], payload_for: Callable | None
) -> dict[tuple[bytes | None, bytes | None], tuple[bool, bool]]:
    """{(entry type, name): (wanted, payload kept)}: what a Scanner decided of each entry key,
    one dict shared by the Scanners of every file read the same way."""
    return {}


@functools.lru_cache(maxsize=16)
def _sorted(items: frozenset[bytes]) -> tuple[bytes, ...]:
    return tuple(sorted(items))


@functools.lru_cache(maxsize=16)
def _encoded(names: frozenset[str]) -> frozenset[bytes]:
    return frozenset(n.encode() for n in names)


class _OpenEntry:
    """The entry whose payload lines are being read."""

    __slots__ = ("kind", "lineno", "line", "start", "etype", "name", "has", "nlines", "parts")

    def __init__(self, kind: int, lineno: int) -> None:
        self.kind = kind
        self.lineno = lineno
        self.line = b""
        self.start = 0
        self.etype: bytes | None = None
        self.name: bytes | None = None
        self.has = False
        self.nlines = 0
        self.parts: list[bytes] | None = None  # the payload's blocks, when it is kept


class Scanner:
    """Walks a binary stream in large chunks; yields the wanted entries; checks the others cheaply.

    With ``artifact_names`` and/or ``entry_types`` (the fast path), one regex pass per chunk
    skips, inside the regex engine, every ordinary envelope that is neither one of those
    artifacts nor of one of those entry types, and every payload line;
    only wanted, unusual or bad lines reach Python (see :func:`_interesting_line_re`). With a
    ``want(entry_type, name)`` predicate instead, every envelope line reaches Python (slower,
    any selection). Wanted entries are yielded with their payload bytes, unless
    ``payload_for(entry_type, name)`` says the payload is not needed (it is then only counted:
    :attr:`RawEntry.payload` is None, :attr:`RawEntry.payload_lines` says whether there was
    one). Problems are passed to
    ``report(kind, lineno, detail)``: ``bad_prefix``, ``bad_json``/``bad_utf8``/
    ``not_an_object`` (skipped envelopes: only those that fail the shape check),
    ``orphan_payload``, ``missing_payload``, ``truncated_entry``, ``other_rank``.
    :attr:`rank` is the file's rank: the first rank an envelope carries (or ``rank=``, or
    :meth:`set_rank`).

    Per-file cost (a job of 1,024+ ranks is as many files): the regex is compiled once per set
    of names, not per rank. Until the rank is known, lines with a rank reach Python; then lines
    of any rank are skipped in the regex and :meth:`_watch_ranks` finds the skipped lines of
    another rank with a C-level search. After ``exact_rank_after`` bytes (a large file) the
    pattern of the file's own rank is compiled (cached per rank) and used instead: it sends
    other-rank lines to Python itself, and the search is no longer needed. With the C loop
    (:data:`NATIVE`), the file's own rank is checked from the moment it is known: nothing is
    compiled, so there is no any-rank pass and no search (``exact_rank_after`` is then moot).
    """

    def __init__(
        self,
        report: Callable[[str, int, str], None],
        *,
        artifact_names: frozenset[str] | None = None,
        entry_types: frozenset[str] | None = None,
        want: Callable[[bytes, bytes | None], bool] | None = None,
        payload_for: Callable[[bytes, bytes | None], bool] | None = None,
        chunk_size: int = CHUNK_SIZE,
        on_chunk: Callable[[int], None] | None = None,
        rank: int | None = None,
        exact_rank_after: int = EXACT_RANK_AFTER,
        native: bool | None = None,
    ) -> None:
        fast = artifact_names is not None or entry_types is not None
        self._native = NATIVE if native is None else (native and _native_scan is not None)
        self._native_args: tuple | None = None
        self._names = _encoded(frozenset(artifact_names or ())) if fast else None
        self._types = _encoded(frozenset(entry_types or ()))
        if want is None:
            names, types = self._names or frozenset(), self._types
            want = lambda etype, name: (etype == b"artifact" and name in names) or etype in types  # noqa: E731
            # one selection for every file read with the same names and payload_for
            self._cache = _selection(self._names, self._types, payload_for)
        else:
            self._cache = {}
        self._want = want
        self._payload_for = payload_for
        self.report = report
        self.chunk_size = chunk_size
        self.on_chunk = on_chunk
        self.rank: int | None = None
        self._tokens: tuple[bytes, bytes] | None = None
        self._exact_after = exact_rank_after
        self._bytes_seen = 0  # bytes of the stream read so far
        self._watching = False  # lines of any rank are skipped: _watch_ranks checks them
        if rank is None:
            self._pattern = self._make_pattern()
        else:  # known in advance (a segment of a file)
            self.set_rank(rank)
        self.lines_read = 0  # lines in the stream, once :meth:`entries` is exhausted
        #: once :meth:`entries` is exhausted: (the entry type, the line) of a whole last entry
        #: that closes no compile (the stream stops inside one: see :func:`_open_end`), else None
        self.open_end: tuple[str, int] | None = None

    def _make_pattern(self) -> re.Pattern[bytes] | None:
        self._watching = False
        if self._names is None:
            self._native_args = None
            return _ANY_LINE_RE
        rank: int | str | None = self.rank
        if self._native:  # the C loop decides: no regex is compiled (~1.5 ms a pattern), and it
            # checks the file's own rank from the moment it is known: no any-rank pass, no search
            self._native_args = (
                0 if rank is None else 1,
                b"" if rank is None else str(rank).encode(),
                _sorted(self._types),
                _sorted(self._names),
            )
            return None
        if rank is not None and self._bytes_seen < self._exact_after:
            self._watching = True
            rank = ANY_RANK
        return _interesting_line_re(self._names, rank, self._types)

    def _find(self, buf: bytes, pos: int, limit: int) -> tuple[int, int]:
        """``(p, n)``: the first newline ``p`` in ``buf[pos:limit]`` before a line Python must
        look at (-1: none), and ``n`` the newlines in ``buf[pos:p]`` (``buf[pos:limit]``).

        The regex decides; with the C part (:data:`NATIVE`), ``tracekit.read._scan.scan`` decides
        the same at memchr speed: it passes the payload lines and the ordinary unwanted
        envelopes the regex skips, and stops at the rest (a blank line too, which the regex
        skips: a line looked at in Python that could have been skipped costs time, never a
        diagnostic, as the every-line path shows)."""
        args = self._native_args
        if args is None:
            m = self._pattern.search(buf, pos, limit)  # type: ignore[union-attr]  # a pattern without the C loop (_make_pattern)
            p = -1 if m is None else m.start()
            return p, buf.count(b"\n", pos, limit if p < 0 else p)
        return _native_scan(buf, pos, limit, *args)

    def set_rank(self, rank: int) -> None:
        self.rank = rank
        self._tokens = (b'"rank": %d,' % rank, b'"rank": %d}' % rank)
        self._pattern = self._make_pattern()

    def _check_skipped_rank(self, line: bytes, start: int, lineno: int) -> None:
        if self._tokens is None:
            try:
                r = envelope_rank(decode_envelope(line[start:]))
            except EntryError:
                return
            if r is not None:
                self.set_rank(r)
        elif line.rfind(self._tokens[0]) < 0 and line.rfind(self._tokens[1]) < 0:
            try:
                r = envelope_rank(decode_envelope(line[start:]))
            except EntryError as e:
                self.report(e.kind, lineno, e.detail)
                return
            if r is not None and r != self.rank:  # a "rank" only inside the metadata is not one
                self.report("other_rank", lineno, f"rank {r} in a file of rank {self.rank}")

    def _watch_ranks(self, buf: bytes, a: int, b: int, cursor: int, cur_line: int) -> None:
        """Check the envelope lines in ``buf[a:b]`` that the any-rank pattern skipped and that
        carry a rank other than the file's (``"rank": `` not followed by it): found with
        ``bytes.find``, so only those lines (and payload lines quoting a rank) reach Python.

        ``buf[a]`` is a newline; ``cur_line`` is the number of the line after ``buf[cursor]``.
        """
        find = buf.find
        mine, mine_last = self._tokens  # type: ignore[misc]  # set with the rank, before any scan
        i = find(_RANK_KEY, a, b)
        while i >= 0:
            if not (buf.startswith(mine, i) or buf.startswith(mine_last, i)):
                ls = buf.rfind(b"\n", a, i) + 1
                if buf[ls] != 9:  # 9: tab, a payload line
                    le = buf.find(b"\n", i)
                    m = _HEAD_RE.match(buf, ls, le)
                    if m is not None:  # always: the pattern skips only lines with a prefix
                        lineno = cur_line + buf.count(b"\n", cursor, ls - 1)
                        self._check_skipped_rank(buf[ls:le], m.end(1) - ls, lineno)
                    i = le  # one check a line
            i = find(_RANK_KEY, i + 1, b)

    def _head(self, buf: bytes, p: int, le: int, lineno: int) -> _OpenEntry:
        """Classify the line ``buf[p+1:le]``; report what is wrong with it if skipped."""
        if le == p + 1:  # blank line: payload lines after it have no envelope
            return _OpenEntry(_NONE, lineno + 1)
        m = _HEAD_RE.match(buf, p + 1, le)
        if m is None:
            nuls = buf.count(b"\x00", p + 1, le)
            if nuls:  # a crash leaves zeroed blocks
                self.report("nul_bytes", lineno, f"{plural(nuls, 'NUL byte')} in the line")
            else:
                self.report("bad_prefix", lineno, buf[p + 1 : min(le, p + 61)].decode("utf-8", "replace"))
            return _OpenEntry(_BAD, lineno)
        prefix, etype, name = m.groups()
        line = buf[p + 1 : le]
        start = len(prefix)
        if etype == b"artifact" and name is None:
            name = _slow_artifact_name(line[start:])
        key = (etype, name)
        sel = self._cache.get(key)
        if sel is None:
            keep = etype is not None and bool(self._want(etype, name))
            collect = keep and (self._payload_for is None or bool(self._payload_for(etype, name)))
            sel = self._cache[key] = (keep, collect)
        keep, collect = sel
        pend = _OpenEntry(_KEEP if keep else _SKIP, lineno)
        pend.line, pend.start, pend.etype, pend.name = line, start, etype, name
        if collect:
            pend.parts = []
        if not keep:
            if etype is None or line[-1] != 125 or not line.isascii():  # 125: "}"
                try:
                    decode_envelope(line[start:])
                except EntryError as e:
                    self.report(e.kind, lineno, e.detail)
                    pend.kind = _BAD
                    return pend
            # torch writes the reserved keys last: searching from the end finds them at once
            # on long lines (compilation metrics run to 40 KB)
            pend.has = line.rfind(b'"has_payload": ') >= 0
            if line.rfind(_RANK_KEY) >= 0:
                self._check_skipped_rank(line, start, lineno)
        return pend

    @staticmethod
    def _envelope_whole(buf: bytes, p: int, le: int) -> bool:
        """The last line of a file without a final newline is an envelope: whole when it has a
        glog prefix and decodes (an envelope that promises a payload is judged with it)."""
        m = _HEAD_RE.match(buf, p + 1, le)
        if m is None:
            return False
        try:
            decode_envelope(buf[m.end(1) : le])
        except EntryError:
            return False
        return True

    @staticmethod
    def _whole_at_end(pend: _OpenEntry, block: bytes | None) -> bool:
        """The file ended, without a final newline, inside ``pend``: is the entry whole? Its
        envelope must decode, and its payload match its ``has_payload`` MD5 (none declared: no
        payload lines). ``block``: the payload lines read in this chunk, when the entry started
        in it; otherwise the payload is known only if it was kept (else: not whole)."""
        if pend.kind not in (_KEEP, _SKIP) or not pend.line:
            return False
        try:
            env = decode_envelope(pend.line[pend.start :])
        except EntryError:
            return False
        want = env.get("has_payload")
        if want is None:
            return pend.nlines == 0
        if pend.parts is not None:
            payload = _join(pend.parts) if pend.parts else None
        elif block:
            payload = _join([block])  # tab-led lines, as the scanner keeps them
        else:
            payload = None
        return (
            isinstance(want, str)
            and payload is not None
            and _md5(payload, usedforsecurity=False).hexdigest() == want
        )

    @classmethod
    def _tail_whole(cls, buf: bytes, limit: int) -> bool:
        """The file ended, without a final newline, at ``limit`` inside an entry the scan does
        not want: whole when its envelope line (the last line not led by a tab) is in ``buf``,
        decodes, and its payload lines match its MD5 (none declared: no payload lines)."""
        i = limit
        while True:
            i = buf.rfind(b"\n", 0, i)
            if i < 0 or i + 1 >= len(buf):
                return False
            if buf[i + 1] != 9:  # 9: tab; the envelope line starts at i + 1
                break
            if i == 0:
                return False  # the payload began in an earlier chunk: not known here
        le = buf.find(b"\n", i + 1)
        if not cls._envelope_whole(buf, i, le):
            return False
        pend = _OpenEntry(_SKIP, 0)
        pend.line, pend.start = buf[i + 1 : le], _HEAD_RE.match(buf, i + 1, le).end(1) - (i + 1)  # type: ignore[union-attr]  # _envelope_whole matched it
        pend.nlines = buf.count(b"\n", le, limit)
        return cls._whole_at_end(pend, buf[le + 1 : limit] if le < limit else b"")

    def _finish(self, pend: _OpenEntry) -> RawEntry | None:
        kind, n = pend.kind, pend.nlines
        if kind == _KEEP:
            parts = pend.parts
            return RawEntry(
                pend.lineno,
                pend.line,
                pend.start,
                pend.etype,  # type: ignore[arg-type]  # a kept entry has its type (_KEEP)
                pend.name,
                n,
                parts,
                parts is not None,
            )
        if kind == _SKIP:
            if n and not pend.has:
                self.report(
                    "orphan_payload", pend.lineno + 1, "payload lines after an envelope without has_payload"
                )
            elif pend.has and not n:
                self.report("missing_payload", pend.lineno, "has_payload set but no payload lines follow")
        elif kind == _NONE and n:
            self.report("orphan_payload", pend.lineno, f"{plural(n, 'payload line')} without an envelope")
        return None

    def _consume(self, pend: _OpenEntry, buf: bytes, a: int, limit: int, eof: bool) -> int:
        """Take the payload lines after the newline at ``a``; the index of the newline ending
        them, or -1 when they may go on past ``limit`` (the last complete line)."""
        if a >= limit:
            return a if eof else -1
        if buf[a + 1] != 9:  # 9: tab
            return a
        if self._native:  # the same search and count, in one memchr pass
            found, n = _native_block_end(buf, a, limit)
        else:
            m = _BLOCK_END_RE.search(buf, a, limit + 1)
            found = -1 if m is None else m.start()
            n = buf.count(b"\n", a + 1, limit if found < 0 else found)
        e = limit if found < 0 else found
        pend.nlines += n + 1
        if pend.parts is not None:
            pend.parts.append(buf[a + 1 : e])
        if found < 0 and not eof:
            return -1
        return e

    def entries(self, stream: IO[bytes]) -> Iterator[RawEntry]:
        read = stream.read
        rewind = _rewinder(stream)
        # a file or BytesIO returns less than asked only at its end: no read for the end, no
        # step back (a small rank log is read with one read)
        short_is_end = rewind is not None
        ended = False
        back = 0  # bytes stepped back after the last chunk, read again in this one
        on_chunk = self.on_chunk
        consume = self._consume
        pend: _OpenEntry | None = None
        cur_line = 1  # line number of the line that starts right after buf[cursor]
        cursor = 0
        buf = b"\n"  # sentinel: buf[0] is always the newline that ends the previous line
        eof = False
        first = True
        truncated_file = False
        last_whole = False  # the file ends without a newline, but its last entry is whole
        judged = False  # the last entry was one of the wanted ones, judged where it was read
        open_end: tuple[str, int] | None = None  # the file ends inside a compile (_open_end)
        crlf: bool | None = None  # CRLF line ends: known from the first chunk
        held = b""  # a "\r" at the end of a chunk, kept until the next one
        size = min(self.chunk_size, FIRST_CHUNK_SIZE)
        ahead: bytes | None = None  # the next chunk, read early where a short read says nothing (gzip)
        while not eof:
            if ahead is not None:
                data, ahead = ahead, None
            else:
                data = b"" if ended else read(size)
            ended = ended or (short_is_end and len(data) < size)
            size = self.chunk_size
            if not short_is_end and data and not ended:  # is this chunk the last? (for its last entry)
                ahead = read(size)
                ended = not ahead
            if on_chunk is not None:
                on_chunk(len(data) - back)
            self._bytes_seen += len(data) - back
            if self._watching and self._bytes_seen >= self._exact_after:
                self._pattern = self._make_pattern()  # a large file: the rank's own pattern
            back = 0
            if crlf is None and data and b"\n" in data:  # the first newline of the stream
                nl = data.find(b"\n")
                # nothing is consumed before the first newline: buf holds what came before it
                crlf = data[nl - 1] == 13 if nl > 0 else (len(buf) > 1 and buf[-1] == 13)  # "\r"
                if crlf:
                    self.report("crlf_line_ends", 1, "CRLF line ends (read as LF)")
                    if nl == 0:
                        buf, held = buf[:-1], b"\r"
            if crlf:
                rewind = None  # the chunks are rewritten: file offsets no longer match them
                data, held = _lf(held + data, final=not data)
                if not data and held:  # the chunk was a lone "\r", held back: not the end
                    continue
            if not buf and data:  # rewound: data starts with the newline the last chunk ended at
                buf = data
            elif not data:
                eof = True
                if first and len(buf) == 1:
                    self.report("empty_file", 0, "the file is empty")
                if len(buf) > 1 and buf[-1] != 10:
                    truncated_file = True
                    buf += b"\n"
            else:
                buf += data
            if ended and data and not held and not eof:  # a short read is the end: say so now, so
                eof = True  # that a last entry's payload lines are judged in this chunk
                if buf[-1] != 10:
                    truncated_file = True
                    buf += b"\n"
            limit = buf.rfind(b"\n")
            if limit <= 0:
                continue
            pos = 0
            if first:
                first = False
                if len(buf) > 1 and buf[1] == 9:
                    pend = _OpenEntry(_NONE, 1)
            if pend is not None:
                before = pend.nlines
                end = consume(pend, buf, 0, limit, eof)
                if end >= 0:
                    if truncated_file and end == limit:
                        judged = True
                        last_whole = self._whole_at_end(pend, None)
                        if not last_whole:
                            pend.kind = _BAD
                    e = self._finish(pend)
                    # the newlines in [0, end): buf[0]'s (it ended the last chunk) and the payload's
                    cur_line += pend.nlines - before
                    cursor = pos = end
                    pend = None
                    if e is not None:
                        yield e
            if pend is None:
                find = self._find
                while True:
                    p, n = find(buf, pos, limit)
                    if self._watching:
                        self._watch_ranks(buf, pos, limit if p < 0 else p, cursor, cur_line)
                    cur_line += n  # cursor is pos: every newline before it is counted
                    if p < 0:
                        cursor = limit  # counted to the end of the chunk
                        break
                    cursor = p
                    le = buf.find(b"\n", p + 1)
                    if truncated_file and le == limit and not self._envelope_whole(buf, p, le):
                        pend = _OpenEntry(_BAD, cur_line)  # reported below, once
                    else:
                        pend = self._head(buf, p, le, cur_line)
                    end = consume(pend, buf, le, limit, eof)
                    if end < 0:
                        break
                    if truncated_file and end == limit:
                        judged = True
                        last_whole = self._whole_at_end(pend, buf[le + 1 : limit] if le < limit else b"")
                        if not last_whole:
                            pend.kind = _BAD  # cut short: reported once, below
                    e = self._finish(pend)
                    # the newlines in [p, end): p's, the envelope's and the payload's, counted
                    cur_line += 1 + pend.nlines
                    cursor = pos = end
                    pend = None
                    if e is not None:
                        yield e
            if truncated_file and not judged:  # the last entry is one this scan skips: judge it here
                last_whole = self._tail_whole(buf, limit)
            if eof:
                open_end = _open_end(buf, limit)
            cur_line += buf.count(b"\n", cursor, limit)
            cursor = 0
            if rewind is not None and not eof and not ended:
                back = len(buf) - limit
                rewind(back)  # read buf[limit:] again, at the start of the next chunk
                buf = b""
            else:
                buf = buf[limit:]
        if pend is not None:
            e = self._finish(pend)
            if e is not None:
                yield e
        self.lines_read = cur_line - 1
        if truncated_file and not last_whole:
            self.report("truncated_entry", cur_line - 1, "the file ends inside this entry (no final newline)")
        elif open_end is not None:
            self.open_end = (open_end[0], cur_line - 1 - open_end[1])


#: The entries that end a compile: a frame's (``compilation_metrics``) and a backward's
#: (``bwd_compilation_metrics``). torch writes one last in every compile, failed ones included.
_CLOSING_RE = re.compile(rb'"(?:bwd_)?compilation_metrics": ')


def _open_end(buf: bytes, limit: int) -> tuple[str, int] | None:
    """Whether a file whose text ends at ``buf[limit]`` stops inside a compile: its last entry
    (the last line not led by a tab, in ``buf``) is an envelope that is not a compile's closing
    metrics. ``(its entry type, its payload lines)``; None when it closes a compile, or cannot
    be told here (no envelope in ``buf``: the payload began in an earlier chunk)."""
    i = limit
    while True:
        j = buf.rfind(b"\n", 0, i)
        if j < 0:
            return None
        if j + 1 < i and buf[j + 1] != 9:  # 9: tab; a non-empty line not led by one
            break
        if j == 0:
            return None
        i = j
    le = buf.find(b"\n", j + 1)
    m = _HEAD_RE.match(buf, j + 1, le)
    if m is None or m.group(2) is None or _CLOSING_RE.search(buf, j + 1, le):
        return None
    return m.group(2).decode("utf-8", "replace"), buf.count(b"\n", le, limit)


def _rewinder(stream: IO[bytes]) -> Callable[[int], object] | None:
    """``rewind(n)``: step back ``n`` bytes in ``stream``, when it can (a plain file, a
    :class:`io.BytesIO`, or a stream with a ``rewind`` method); None otherwise (gzip)."""
    rewind = getattr(stream, "rewind", None)
    if rewind is not None:
        return rewind
    if isinstance(stream, (io.BufferedReader, io.FileIO, io.BytesIO)) and stream.seekable():
        seek = stream.seek
        return lambda n: seek(-n, io.SEEK_CUR)
    return None


def _lf(data: bytes, final: bool) -> tuple[bytes, bytes]:
    """``data`` with CRLF turned into LF, and a trailing ``\r`` held back unless ``final``."""
    if not final and data.endswith(b"\r"):
        return data[:-1].replace(b"\r\n", b"\n"), b"\r"
    return data.replace(b"\r\n", b"\n"), b""


def _join(parts: list[bytes]) -> bytes:
    """Payload text from its tab-led lines (given as blocks of whole lines)."""
    if len(parts) == 1:
        return parts[0][1:].replace(b"\n\t", b"\n")
    return b"\n".join(p[1:].replace(b"\n\t", b"\n") for p in parts)


def _slow_artifact_name(json_bytes: bytes) -> bytes | None:
    """The artifact name of an envelope not laid out the way torch writes it (decodes it)."""
    try:
        meta = decode_envelope(json_bytes).get("artifact")
    except EntryError:
        return None
    nm = meta.get("name") if isinstance(meta, dict) else None
    return nm.encode("utf-8", "replace") if isinstance(nm, str) else None
