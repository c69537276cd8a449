"""Reading files in parallel: files and segments of large files, in worker processes.

The unit of work is a :class:`Segment`: a whole file, or a byte range of a large uncompressed
one cut at an entry boundary (:func:`file_segments`). :func:`read_segment` scans one segment
and parses its wanted entries into events (no pairing: that needs the file's segments in
order, and happens in :class:`tracekit.read.pairing.FileBuilder`). :func:`read_segments` reads a
list of segments with up to ``jobs`` processes: in this process for one job or a little
work; otherwise by a standard :class:`concurrent.futures.ProcessPoolExecutor` over batches of
consecutive segments (:func:`_read_pooled`); a few segments (of one large file) are one a
worker, this process reading the first. A long listing of files (:func:`read_listed`) is sent
to the workers as names only, each file sized by its read
(:func:`tracekit.read.sources.read_small`). A batch's results come back as columns
(:class:`_Batch`), in order.
"""

from __future__ import annotations

import functools
import os
import re
from collections import deque
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import IO, Any, NamedTuple

from tracekit.model import Diagnostics
from tracekit.read import envelope_fields as ef
from tracekit.read import envelopes as ev
from tracekit.read import speed_switches
from tracekit.read.entries import PayloadMemo, check_gzip, decode_entries
from tracekit.read.pairing import NO_COMPILE_ID, Events, SegmentResult
from tracekit.read.parsers import SUMMARY_PARSERS, ArtifactError, EntryParser, key_table
from tracekit.read.process_pools import end_pool, fork_context, ignore_sigint
from tracekit.read.sources import (
    GZIP_MAGIC,
    LogFile,
    TolerantGzip,
    listed_size,
    memory_log,
    open_log,
    read_small,
)

#: Uncompressed files at least this large are split into segments read in parallel.
SPLIT_MIN_BYTES = 64 << 20
#: ... and, above ``jobs`` times this, into segments of at most this much (whole rounds of
#: ``jobs`` of them): a segment's events are held until its file's builder takes them, so
#: memory grows with this, not with the file.
SEGMENT_MAX_BYTES = 128 << 20
_BOUNDARY_RE = re.compile(rb"\n[^\t]")


@dataclass(slots=True)
class Segment:
    """A byte range of one file, the unit of work of :func:`read_segments` (a whole file, or a
    part of a large uncompressed one: it starts at a line that does not start with a tab)."""

    log: LogFile
    start: int = 0
    end: int | None = None  # None: to the end of the file (the file's last segment)
    rank: int | None = None  # the file's rank when known in advance


class _Range:
    """Reads ``raw`` from its current position up to ``end`` (None: to the end)."""

    def __init__(self, raw, remaining: int | None) -> None:
        self.raw = raw
        self.remaining = remaining

    def read(self, n: int) -> bytes:
        if self.remaining is None:
            return self.raw.read(n)
        if self.remaining <= 0:
            return b""
        data = self.raw.read(min(n, self.remaining))
        self.remaining -= len(data)
        return data

    def rewind(self, n: int) -> None:
        """Step back ``n`` bytes (they are read again)."""
        self.raw.seek(-n, os.SEEK_CUR)
        if self.remaining is not None:
            self.remaining += n


def read_segment(
    seg: Segment,
    parsers: tuple[EntryParser, ...] = SUMMARY_PARSERS,
    on_chunk: Callable[[int], None] | None = None,
    validate_all: bool = False,
    data: bytes | None = None,
    into: Events | None = None,
) -> SegmentResult:
    """Scan one segment: the entries ``parsers`` want, parsed, as events (no pairing yet).

    ``validate_all`` (``--strict``): every line is decoded and checked, not only the wanted
    ones (see :func:`tracekit.read.entries.decode_entries`). ``data``: the whole file's bytes, when
    they are already read (:func:`tracekit.read.sources.read_small`). ``into``: the events are added
    to these (a worker's batch, :class:`_Batch`), which the result then holds."""
    path = seg.log.path
    ps = _parser_set(parsers)
    table, canonical = ps.table, ps.canonical
    diag = Diagnostics()
    events = Events() if into is None else into
    add_key, add_value, add_cid, add_line = (
        events.keys.append,
        events.values.append,
        events.cids.append,
        events.lines.append,
    )
    pids: set[int] = set()
    try:
        stream: IO[bytes] | TolerantGzip | _Range
        stream, raw = (
            memory_log(data)
            if data is not None
            else open_log(path, seg.log.size if not seg.start and seg.end is None else None)
        )
    except OSError as e:
        diag.add("unreadable_file", path, 0, e.strerror or str(e))
        return SegmentResult(events, seg.rank, 0, diag, readable=False)
    scanner_box: list[ev.Scanner] = []
    rank = seg.rank
    with raw:
        if stream is raw and (seg.start or seg.end is not None):
            raw.seek(seg.start)
            stream = _Range(raw, None if seg.end is None else seg.end - seg.start)
        progress_cb = None
        if on_chunk is not None:
            last = [raw.tell()]

            def progress_cb(_n: int) -> None:
                pos = raw.tell()
                on_chunk(pos - last[0])
                last[0] = pos

        try:
            for ent in decode_entries(
                stream,
                path,
                diag,
                keys=ps.keys,
                on_chunk=progress_cb,
                payload_for=ps.payload_for,
                rank=rank,
                scanner_out=scanner_box,
                validate_all=validate_all,
                memo=ps.memo,
            ):
                key = canonical[ent.key]  # one key object a kind, not one per event (a dense log holds
                parser = table[key]  # hundreds of thousands of events until its file is built)
                if ent.pid is not None:
                    pids.add(ent.pid)
                try:
                    value: Any = parser.parse(ent.payload if parser.needs_payload else None, ent.envelope)
                except ArtifactError as err:
                    diag.add(
                        "bad_artifact", path, ent.line, f"{ent.artifact_name or ent.entry_type}: {err}"[:160]
                    )
                    continue
                add_key(key)  # the event, column by column
                add_value(value)
                add_cid(ent.compile_id or NO_COMPILE_ID)
                add_line(ent.line)
        except OSError as err:
            diag.add("unreadable_file", path, 0, str(err)[:120])
        check_gzip(stream if not isinstance(stream, _Range) else raw, path, diag)
    if seg.start and diag.counts.pop("crlf_line_ends", 0):  # reported once, by the first segment
        diag.examples = [x for x in diag.examples if x["kind"] != "crlf_line_ends"]
    sc = scanner_box[0] if scanner_box else None
    open_end = sc.open_end if sc is not None and seg.end is None else None  # only the file's end says it
    return SegmentResult(
        events, sc.rank if sc else rank, sc.lines_read if sc else 0, diag, pids=pids, open_end=open_end
    )


class _ParserSet(NamedTuple):
    """What reading with one parser set needs, made once per process (not once per file)."""

    table: dict  # entry key -> its parser (parsers.key_table)
    keys: frozenset  # the entry keys wanted
    canonical: dict  # entry key -> the same key: the one object every event of that kind holds
    payload_for: Callable[[str, str | None], bool]  # one function, so the Scanners of every
    # file share what they decided of each key
    memo: PayloadMemo  # the payloads checked before (a job's ranks check one they share once)


@functools.lru_cache(maxsize=8)
def _parser_set(parsers: tuple[EntryParser, ...]) -> _ParserSet:
    table = key_table(parsers)
    return _ParserSet(
        table,
        frozenset(table),
        {k: k for k in table},
        lambda etype, name: table[(etype, name)].needs_payload,
        PayloadMemo(),
    )


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _boundary(f, offset: int, size: int) -> int:
    """The first line start at or after ``offset`` that does not start with a tab."""
    pos = max(0, offset - 1)
    f.seek(pos)
    carry = b""
    while True:
        data = f.read(1 << 20)
        if not data:
            return size
        buf = carry + data
        m = _BOUNDARY_RE.search(buf)
        if m is not None:
            return pos - len(carry) + m.start() + 1
        carry = buf[-1:]
        pos += len(data)


def first_rank(f, limit: int = 4 << 20) -> int | None:
    """The ``rank`` of the first envelope that has one, from the first MiBs of the file (read
    64 KiB at a time: it is usually on the first lines)."""
    f.seek(0)
    tail = b""  # the partial line at the end of what was read
    done = 0
    while done < limit:
        data = f.read(min(64 << 10, limit - done))
        if not data:
            break
        done += len(data)
        text = tail + data
        cut = text.rfind(b"\n") + 1
        r = _rank_in_lines(text[:cut])
        if r is not None:
            return r
        tail = text[cut:]
    return None


def _rank_in_lines(text: bytes) -> int | None:
    """The ``rank`` of the first envelope line in ``text`` (whole lines) that has one."""
    for line in text.split(b"\n")[:-1]:
        if line[:1] in (b"\t", b"") or b'"rank": ' not in line:
            continue
        m = ev.PREFIX_RE.match(line)
        if m is None:
            continue
        try:
            r = ef.envelope_rank(ef.decode_envelope(line[m.end() :]))
        except ef.EntryError:
            continue
        if r is not None:
            return r
    return None


def segment_bytes(seg: Segment) -> int:
    return (seg.log.size if seg.end is None else seg.end) - seg.start


def segment_count(size: int, jobs: int) -> int:
    """How many segments a plain file of ``size`` bytes is read in: one under
    :data:`SPLIT_MIN_BYTES`; else ``jobs`` (at least 32 MiB each), or more, a multiple of
    ``jobs``, to keep each under :data:`SEGMENT_MAX_BYTES`."""
    if size < SPLIT_MIN_BYTES or not speed_switches.SEGMENTS:
        return 1
    per_round = jobs * SEGMENT_MAX_BYTES  # a round: a segment a job
    if size <= per_round:
        return min(jobs, size // (SPLIT_MIN_BYTES // 2))  # at least 2: size is 64 MiB or more
    return jobs * -(-size // per_round)  # whole rounds: no job idles in the last one


def file_segments(logs: list[LogFile], jobs: int) -> Iterator[list[Segment]]:
    """The segments of every file, one file at a time: one for a file, or several for a large
    uncompressed one (:func:`segment_count`)."""
    for lg in logs:
        k = segment_count(lg.size, jobs)
        if k <= 1:
            yield [Segment(lg)]
            continue
        try:
            with open(lg.path, "rb") as f:
                if f.read(2) == GZIP_MAGIC:
                    yield [Segment(lg)]
                    continue
                rank = first_rank(f)
                cuts = sorted({_boundary(f, lg.size * i // k, lg.size) for i in range(1, k)})
        except OSError:
            yield [Segment(lg)]
            continue
        edges = [0] + [c for c in cuts if 0 < c < lg.size] + [None]
        # only the last edge is None, and it ends a segment: it never starts one
        yield [Segment(lg, a, b, rank) for a, b in zip(edges, edges[1:], strict=False)]  # type: ignore[arg-type]


#: Less than this in all is read in this process, like one file of that size (SPLIT_MIN_BYTES):
#: starting workers and sending their results back costs more than it saves (8,192 small
#: rank logs, 54 MB: 1.5 times the CPU time with 2 workers than in one process).
PARALLEL_MIN_BYTES = SPLIT_MIN_BYTES
#: A worker's task is a batch of consecutive segments of at most this many bytes (and
#: :data:`BATCH_SEGMENTS` segments): one message per batch, not per file.
BATCH_BYTES = 8 << 20
BATCH_SEGMENTS = 512


def _batch_plan(tasks: list[Segment], total: int, jobs: int) -> list[tuple[int, int]]:
    """``(segments, bytes)`` of each batch of consecutive segments: up to ``min(BATCH_BYTES,
    total / (8 * jobs))`` bytes (``total``: the segments' bytes) and :data:`BATCH_SEGMENTS`
    segments (at least one each): few messages, and batches of about the same weight, at least
    eight a worker, so that the workers, each taking the next batch when free, end together."""
    target = min(BATCH_BYTES, total // (8 * jobs))
    out: list[tuple[int, int]] = []
    n = size = 0
    for seg in tasks:
        if n and (size >= target or n >= BATCH_SEGMENTS):
            out.append((n, size))
            n = size = 0
        n += 1
        size += segment_bytes(seg)
    if n:
        out.append((n, size))
    return out


def _drain(tasks: list[Segment]) -> Iterator[Segment]:
    """The segments of ``tasks`` in order, each taken out of the list as it is handed out (the
    list is empty at the end): the plan of 100,000 files is freed as it is read."""
    tasks.reverse()
    while tasks:
        yield tasks.pop()


def _read_batch(segs: list[Segment], validate_all: bool) -> _Batch:
    """A worker's batch of segments (:func:`read_segments`), as columns."""
    out = _Batch()
    for seg in segs:
        out.add(segment_bytes(seg), read_segment(seg, SUMMARY_PARSERS, None, validate_all, into=out.events))
    return out


def read_segments(
    tasks: list[Segment],
    jobs: int,
    tick: Callable[[int], None],
    progress: bool = False,
    validate_all: bool = False,
) -> Generator[tuple[Segment, SegmentResult], None, None]:
    """Every segment with its result, in order, read with up to ``jobs`` processes;
    ``tick(bytes)`` after each segment (``progress``: also per chunk, when reading in this
    process). A generator: results are used (and dropped) as they come, and ``tasks`` is
    emptied as it is read (its segments are dropped once read)."""
    total = sum(segment_bytes(seg) for seg in tasks)
    if jobs == 1 or len(tasks) <= 1 or total < PARALLEL_MIN_BYTES:
        for seg in _drain(tasks):
            yield seg, read_segment(seg, on_chunk=tick if progress else None, validate_all=validate_all)
        return
    few = len(tasks) <= jobs  # a segment a child, the first read here meanwhile
    plan = [(1, segment_bytes(seg)) for seg in tasks] if few else _batch_plan(tasks, total, jobs)
    segs = _drain(tasks)
    batches: list[list[Segment] | None] = [[next(segs) for _ in range(n)] for n, _b in plan]
    for b, batch, part in _read_pooled(batches, jobs, validate_all, _read_batch, first_here=few):
        yield from zip(batch, (res for _size, res in part.results()), strict=False)
        tick(plan[b][1])


#: A listing of at least this many files is sent to the workers before the files' sizes
#: are known (:func:`read_listed`): each file is sized by its worker's read.
EARLY_MIN_FILES = 16384


def read_listed(
    names: list[tuple[str, int | None]],
    jobs: int,
    tick: Callable[[int], None],
    on_total: Callable[[int], None] | None,
    validate_all: bool = False,
) -> Generator[tuple[Segment, SegmentResult], None, None]:
    """:func:`read_segments` of a long listing (``(path, rank hint)``, :func:`tracekit.read.sources.
    find_log_names`), sent to the workers before the files' sizes are known: batches of
    :data:`BATCH_SEGMENTS` files, each worker reading the ones it takes, and
    sending each file's size back with its result. ``on_total(bytes)``, when given (a progress
    bar wants the total before any result), is called with the files' sizes summed, taken here
    while the workers read; without it no file is stat-ed here. A file a worker finds of
    :data:`SPLIT_MIN_BYTES` or more is left to this process, which reads it in its place, cut
    in segments as :func:`read_segments` cuts it. Whole files otherwise, in order, as
    :func:`read_segments` gives them."""
    batches: list[list[tuple[str, int | None]] | None] = [
        names[i : i + BATCH_SEGMENTS] for i in range(0, len(names), BATCH_SEGMENTS)
    ]
    del names  # the batches hold the names, each dropped once read

    def total() -> None:  # while the workers read
        # given only with on_total (below); every batch is there before the first is read
        on_total(sum(listed_size(path) for batch in batches for path, _hint in batch))  # type: ignore[misc,union-attr]

    for _b, batch, part in _read_pooled(
        batches, jobs, validate_all, _read_named, between=None if on_total is None else total
    ):
        done = 0
        for (path, hint), (size, res) in zip(batch, part.results(), strict=False):
            lg = LogFile(path, size, hint)
            if res is None:  # large: read here, in segments
                yield from read_segments(
                    next(file_segments([lg], jobs)), jobs, tick, validate_all=validate_all
                )
                continue
            done += size
            yield Segment(lg), res
        tick(done)


def _read_named(batch: list[tuple[str, int | None]], validate_all: bool) -> _Batch:
    """A worker's batch of a listing (:func:`read_listed`): each file's size, and the file read
    whole, or None for a file large enough to be cut in segments (this process reads it). A
    small file is read in one ``read``, with no ``stat`` (:func:`tracekit.read.sources.read_small`);
    a file that cannot be read is given to :func:`read_segment`, which says why."""
    out = _Batch()
    for path, hint in batch:
        try:
            size, data = read_small(path)
        except OSError:
            size, data = 0, None
        if size >= SPLIT_MIN_BYTES:
            out.add(size, None)
        else:
            out.add(
                size,
                read_segment(
                    Segment(LogFile(path, size, hint)),
                    SUMMARY_PARSERS,
                    None,
                    validate_all,
                    data,
                    into=out.events,
                ),
            )
    return out


class _Batch:
    """A worker's results of a batch (:func:`_read_batch`, :func:`_read_named`), as columns:
    the events of all its files or segments one after another (one :class:`Events`; each one's
    end in ``ends``), and each one's size, rank, lines and pids, its diagnostics (most have
    none) and whether it was readable. One object a batch crosses the pipe, not 512 results
    (a quarter of the pickling); :meth:`results` gives them back one at a time. ``None`` for a
    large file of a listing (this process reads it)."""

    __slots__ = ("events", "sizes", "ends", "ranks", "lines", "pids", "odd")

    def __init__(self) -> None:
        self.events = Events()
        self.sizes: list[int] = []
        self.ends: list[int] = []  # each file's events end here (a large file: -1)
        self.ranks: list[int | None] = []
        self.lines: list[int] = []
        self.pids: list[tuple[int, ...]] = []
        #: file -> (counts, examples, readable, open_end): files with diagnostics, or ending open
        self.odd: dict[int, tuple] = {}

    def add(self, size: int, res: SegmentResult | None) -> None:
        i = len(self.sizes)
        self.sizes.append(size)
        if res is None:
            self.ends.append(-1)
            self.ranks.append(None)
            self.lines.append(0)
            self.pids.append(())
            return
        self.ends.append(len(self.events.keys))
        self.ranks.append(res.rank)
        self.lines.append(res.lines)
        self.pids.append(tuple(res.pids))
        if res.diagnostics.counts or not res.readable or res.open_end is not None:
            self.odd[i] = (res.diagnostics.counts, res.diagnostics.examples, res.readable, res.open_end)

    def __len__(self) -> int:
        return len(self.sizes)

    def results(self) -> Iterator[tuple[int, SegmentResult | None]]:
        """``(size, result)`` of each file or segment, in order (None: a large file); given
        once (one that holds all the batch's events is given the batch's columns, not a copy:
        a segment of a large file holds hundreds of thousands)."""
        ev, odd = self.events, self.odd
        keys, values, cids, lines = ev.keys, ev.values, ev.cids, ev.lines
        start = 0
        for i, (size, end, rank, nlines, pids) in enumerate(
            zip(self.sizes, self.ends, self.ranks, self.lines, self.pids, strict=False)
        ):
            if end < 0:
                yield size, None
                continue
            if start == 0 and end == len(keys):
                events = ev
            else:
                events = Events.__new__(Events)
                events.keys, events.values, events.cids, events.lines = (
                    keys[start:end],
                    values[start:end],
                    cids[start:end],
                    lines[start:end],
                )
            start = end
            if i in odd:
                counts, examples, readable, open_end = odd[i]
                yield (
                    size,
                    SegmentResult(
                        events, rank, nlines, Diagnostics(counts, examples), readable, pids, open_end
                    ),
                )
            else:  # a clean file: its builder only reads diagnostics that count something
                yield size, SegmentResult(events, rank, nlines, _CLEAN, True, pids)

    def __reduce__(self):
        e = self.events
        return _batch, (
            e.keys,
            e.values,
            e.cids,
            e.lines,
            self.sizes,
            self.ends,
            self.ranks,
            self.lines,
            self.pids,
            self.odd or None,
        )


#: The diagnostics of every clean file of a batch (:meth:`_Batch.results`): none, read only.
_CLEAN = Diagnostics()


def _batch(keys, values, cids, lines, sizes, ends, ranks, nlines, pids, odd) -> _Batch:
    """A :class:`_Batch` from its pickled form."""
    out = _Batch.__new__(_Batch)
    out.events = Events.__new__(Events)
    out.events.keys, out.events.values, out.events.cids, out.events.lines = keys, values, cids, lines
    out.sizes, out.ends, out.ranks, out.lines, out.pids, out.odd = sizes, ends, ranks, nlines, pids, odd or {}
    return out


def _read_pooled(
    batches: list,
    jobs: int,
    validate_all: bool,
    read: Callable[[Any, bool], _Batch],
    between: Callable[[], None] | None = None,
    first_here: bool = False,
) -> Iterator[tuple[int, Any, _Batch]]:
    """``(b, batch, read(batch, validate_all))`` of each of ``batches`` in order, read by a
    :class:`concurrent.futures.ProcessPoolExecutor` of ``jobs`` workers (forked where the
    system can: they start with this process's modules, and tests' patches). A free worker
    takes the next batch submitted; at most :data:`AHEAD` batches a worker are submitted past
    the one taken here, so results wait in this process for a few batches only, however slow
    the consumer. ``between()`` runs here once the first batches are submitted, before the
    first result is taken. ``first_here``: this process reads the first batch itself meanwhile
    (a few segments of one file: no pickle of that one), the workers the others.

    A worker that dies (the pool is broken), or a pool that cannot start, leaves the batches
    not yet taken to this process, where an error in the reading then shows as it would in one
    process. The consumer gone (Ctrl-C, a broken pipe downstream): the batches not started are
    cancelled and the pool shut down (the workers ignore Ctrl-C: the parent handles it)."""
    here = 1 if first_here else 0  # batches read here before the workers' first
    pool: ProcessPoolExecutor | None = None
    pending: deque[Future] = deque()
    window = AHEAD * jobs
    submitted = here

    def submit_upto(b: int) -> None:
        nonlocal submitted, pool
        while pool is not None and submitted < min(len(batches), b + window):
            try:
                pending.append(pool.submit(read, batches[submitted], validate_all))
            except (OSError, BrokenProcessPool, RuntimeError):  # no process could be made
                _shutdown(pool, pending)
                pool = None
                return
            submitted += 1

    try:
        if len(batches) > here:
            pool = ProcessPoolExecutor(
                min(jobs, len(batches) - here), mp_context=fork_context(), initializer=ignore_sigint
            )
            submit_upto(here)
        if between is not None:
            between()
        for b in range(len(batches)):
            batch, batches[b] = batches[b], None  # dropped once its results are used
            part = None
            if b >= here and pool is not None:
                try:
                    part = pending.popleft().result()
                except BrokenProcessPool:  # a worker died: the rest is read here
                    _shutdown(pool, pending)
                    pool = None
                else:
                    submit_upto(b + 1)
            if part is None:  # read here: the first, or all once the pool failed
                part = read(batch, validate_all)
            yield b, batch, part
            del part
    finally:
        if pool is not None:
            _shutdown(pool, pending)


#: Batches submitted ahead of the one this process takes next, a worker (:func:`_read_pooled`).
AHEAD = 4


def _shutdown(pool: ProcessPoolExecutor, pending: deque[Future]) -> None:
    """Cancel the batches not started and end the pool (a batch being read is let finish), and
    every worker it made (:func:`tracekit.read.process_pools.end_pool`)."""
    for fut in pending:
        fut.cancel()
    pending.clear()
    end_pool(pool)
