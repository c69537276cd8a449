"""Reading files in parallel: files and segments of large files, in worker processes.

The unit of work is a :class:`Segment`: a whole file, or a byte range of a large uncompressed
one cut at an entry boundary (:func:`file_segments`). :func:`read_segment` scans one segment
and parses its wanted entries into events (no pairing: that needs the file's segments in
order, and happens in :class:`tracekit.pairing.FileBuilder`). :func:`read_segments` reads a
list of segments with up to ``jobs`` processes: in this process for one job; otherwise
``jobs`` forked workers that each read every ``jobs``-th batch of consecutive segments and
send the results back on their own pipe (:func:`_read_piped`: no pool, no task messages, no
queue); a few segments (of one large file) are one a child, this process reading the first. A long
listing of files (:func:`read_listed`) is read by workers forked before the files' sizes are
taken, so that this process takes them while the workers read. Results come back in order.
"""

from __future__ import annotations

import functools
import os
import re
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from tracekit import envelopes as ev
from tracekit.entries import EnvelopeMemo, PayloadMemo, check_gzip, decode_entries
from tracekit.model import Diagnostics
from tracekit.pairing import NO_COMPILE_ID, Events, SegmentResult
from tracekit.parsers import SUMMARY_PARSERS, ArtifactError, EntryParser, key_table
from tracekit.sources import GZIP_MAGIC, LogFile, listed_size, open_log, sized

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

    def __reduce__(self):  # sent to a worker with every file: a tuple, not the slots' state
        return Segment, (self.log, self.start, self.end, self.rank)


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
) -> SegmentResult:
    """Scan one segment: the entries ``parsers`` want, parsed, as events (no pairing yet).

    ``validate_all`` (``--strict``): every line is decoded and checked, not only the wanted
    ones (see :func:`tracekit.entries.decode_entries`)."""
    path = seg.log.path
    ps = _parser_set(parsers)
    table, canonical = ps.table, ps.canonical
    diag = Diagnostics()
    events = Events()
    add_key, add_value, add_cid, add_line = (events.keys.append, events.values.append,
                                             events.cids.append, events.lines.append)
    pids: set[int] = set()
    try:
        stream, raw = open_log(path, seg.log.size if not seg.start and seg.end is None else None)
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
            for e in decode_entries(stream, path, diag, keys=ps.keys, on_chunk=progress_cb,
                                    payload_for=ps.payload_for, rank=rank, scanner_out=scanner_box,
                                    validate_all=validate_all, memo=ps.memo,
                                    envelopes=None if validate_all else ps.envelopes):
                key = canonical[e.key]  # one key object a kind, not one per event (a dense log holds
                parser = table[key]  # hundreds of thousands of events until its file is built)
                if e.pid is not None:
                    pids.add(e.pid)
                try:
                    value: Any = parser.parse(e.payload if parser.needs_payload else None, e.envelope)
                except ArtifactError as err:
                    diag.add("bad_artifact", path, e.line, f"{e.artifact_name or e.entry_type}: {err}"[:160])
                    continue
                add_key(key)  # the event, column by column
                add_value(value)
                add_cid(e.compile_id or NO_COMPILE_ID)
                add_line(e.line)
        except OSError as err:
            diag.add("unreadable_file", path, 0, str(err)[:120])
        check_gzip(stream if not isinstance(stream, _Range) else raw, path, diag)
    if seg.start and diag.counts.pop("crlf_line_ends", 0):  # reported once, by the first segment
        diag.examples = [x for x in diag.examples if x["kind"] != "crlf_line_ends"]
    sc = scanner_box[0] if scanner_box else None
    return SegmentResult(events, sc.rank if sc else rank, sc.lines_read if sc else 0, diag, pids=pids)


class _ParserSet(NamedTuple):
    """What reading with one parser set needs, made once per process (not once per file)."""

    table: dict  # entry key -> its parser (parsers.key_table)
    keys: frozenset  # the entry keys wanted
    canonical: dict  # entry key -> the same key: the one object every event of that kind holds
    payload_for: Callable[[str, str | None], bool]  # one function, so the Scanners of every
    # file share what they decided of each key
    memo: PayloadMemo  # the payloads checked before (a job's ranks check one they share once)
    envelopes: EnvelopeMemo  # the envelopes decoded before (a job's ranks log them but for the rank)


@functools.lru_cache(maxsize=8)
def _parser_set(parsers: tuple[EntryParser, ...]) -> _ParserSet:
    table = key_table(parsers)
    return _ParserSet(table, frozenset(table), {k: k for k in table},
                      lambda etype, name: table[(etype, name)].needs_payload, PayloadMemo(), EnvelopeMemo())


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
            r = ev.envelope_rank(ev.decode_envelope(line[m.end() :]))
        except ev.EntryError:
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
    if size < SPLIT_MIN_BYTES:
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
        yield [Segment(lg, a, b, rank) for a, b in zip(edges, edges[1:])]


#: Less than this in all is read in this process, like one file of that size (SPLIT_MIN_BYTES):
#: starting workers and sending their results back costs more than it saves (8,192 small
#: rank logs, 54 MB: 1.5 times the CPU time with 2 workers than in one process).
PARALLEL_MIN_BYTES = SPLIT_MIN_BYTES
#: A worker's task is a batch of consecutive segments of at most this many bytes (and
#: :data:`BATCH_SEGMENTS` segments): one message per batch, not per file.
BATCH_BYTES = 8 << 20
BATCH_SEGMENTS = 512
#: What a worker's pipe holds (Linux: ``F_SETPIPE_SZ``; at most ``/proc/sys/fs/pipe-max-size``,
#: 1 MiB by default): a worker reads that far ahead of this process (about nine batches of 512
#: small files), then waits for it.
PIPE_BYTES = 1 << 20


def _batch_plan(tasks: list[Segment], total: int, jobs: int) -> list[tuple[int, int]]:
    """``(segments, bytes)`` of each batch of consecutive segments: up to ``min(BATCH_BYTES,
    total / (8 * jobs))`` bytes (``total``: the segments' bytes) and :data:`BATCH_SEGMENTS`
    segments (at least one each): few messages, and batches of about the same weight, at least
    eight a worker, so that the workers, each given every ``jobs``-th batch, end together."""
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


def _read_batch(segs: list[Segment], validate_all: bool) -> list[SegmentResult]:
    return [read_segment(seg, SUMMARY_PARSERS, None, validate_all) for seg in segs]


def read_segments(
    tasks: list[Segment], jobs: int, tick: Callable[[int], None], progress: bool = False,
    validate_all: bool = False,
) -> Iterator[tuple[Segment, SegmentResult]]:
    """Every segment with its result, in order, read with up to ``jobs`` processes;
    ``tick(bytes)`` after each segment (``progress``: also per chunk, when reading in this
    process). A generator: results are used (and dropped) as they come, and ``tasks`` is
    emptied as it is read (its segments are dropped once read). Without ``os.fork`` (Windows),
    everything is read in this process."""
    total = sum(segment_bytes(seg) for seg in tasks)
    if jobs == 1 or len(tasks) <= 1 or total < PARALLEL_MIN_BYTES or not hasattr(os, "fork"):
        for seg in _drain(tasks):
            yield seg, read_segment(seg, on_chunk=tick if progress else None, validate_all=validate_all)
        return
    few = len(tasks) <= jobs  # a segment a child, the first read here meanwhile
    plan = [(1, segment_bytes(seg)) for seg in tasks] if few else _batch_plan(tasks, total, jobs)
    segs = _drain(tasks)
    batches: list[list[Segment] | None] = [[next(segs) for _ in range(n)] for n, _b in plan]
    for b, batch, part in _read_piped(batches, jobs, validate_all, _read_batch, first_here=few):
        yield from zip(batch, part)
        tick(plan[b][1])


#: A listing of at least this many files is read by workers forked before the files' sizes
#: are known (:func:`read_listed`): they read while this process takes the sizes.
EARLY_MIN_FILES = 16384


def read_listed(names: list[tuple[str, int | None]], jobs: int, tick: Callable[[int], None],
                on_total: Callable[[list[LogFile]], None], validate_all: bool = False,
                ) -> Iterator[tuple[Segment, SegmentResult]]:
    """:func:`read_segments` of a long listing (``(path, rank hint)``, :func:`tracekit.sources.
    find_log_names`), its workers forked before the files' sizes are known: batches of
    :data:`BATCH_SEGMENTS` files, each worker stat-ing and reading its own, while this process
    takes every file's size (``on_total(logs)`` gets the files, sized, before any result). A
    file a worker finds of :data:`SPLIT_MIN_BYTES` or more is left to this process, which reads
    it in its place, cut in segments as :func:`read_segments` cuts it. Whole files otherwise,
    in order, as :func:`read_segments` gives them."""
    batches: list[list[tuple[str, int | None]] | None] = [
        names[i : i + BATCH_SEGMENTS] for i in range(0, len(names), BATCH_SEGMENTS)]
    del names  # the batches hold the names, each dropped once read
    logs: list[LogFile | None] = []

    def sizes() -> None:  # while the workers read
        logs.extend(sized(name for batch in batches for name in batch))
        on_total(logs)

    for b, _batch, part in _read_piped(batches, jobs, validate_all, _read_named, between=sizes):
        done = 0
        for i, res in enumerate(part, b * BATCH_SEGMENTS):
            lg, logs[i] = logs[i], None  # held by its segment, no longer here
            if res is None:  # large: read here, in segments
                yield from read_segments(next(file_segments([lg], jobs)), jobs, tick, validate_all=validate_all)
                continue
            done += lg.size
            yield Segment(lg), res
        tick(done)


def _read_named(batch: list[tuple[str, int | None]], validate_all: bool) -> list[SegmentResult | None]:
    """A worker's batch of a listing (:func:`read_listed`): each file read whole, or None for a
    file large enough to be cut in segments (this process reads it)."""
    out: list[SegmentResult | None] = []
    for path, hint in batch:
        size = listed_size(path)
        out.append(None if size >= SPLIT_MIN_BYTES else
                   read_segment(Segment(LogFile(path, size, hint)), SUMMARY_PARSERS, None, validate_all))
    return out


def _read_piped(batches: list, jobs: int, validate_all: bool, read: Callable[[Any, bool], list],
                between: Callable[[], None] | None = None, first_here: bool = False,
                ) -> Iterator[tuple[int, Any, list]]:
    """``(b, batch, read(batch, validate_all))`` of each of ``batches`` in order, read in
    ``jobs`` forked workers: worker k reads batches k, k + jobs, k + 2 jobs... and writes each
    batch's results on its own pipe, pickled (our own data, never a log's), as a length and the
    bytes; this process takes them in order, batch b from worker b mod jobs. ``between()`` runs
    here once the workers are forked, before the first result is taken. ``first_here``: this
    process reads the first batch itself meanwhile (a few segments of one file: no pickle of
    that one), the workers the others, the first of them batch 1.

    Nothing is sent to a worker (it is forked with the plan) and nothing waits in a queue here:
    a worker is ahead by what its pipe holds (:data:`PIPE_BYTES`) and the batch it is writing,
    then waits. A worker that fails (killed, or a pickle cut short) is replaced by reading its
    batches here, where an error in the reading then shows as it would in one process."""
    import pickle

    here = 1 if first_here else 0  # batches read here before the workers' first
    n = min(jobs, len(batches) - here)
    workers: list[tuple[int, Any]] = []  # (pid, the pipe's reading end)
    try:
        for k in range(n):
            r, w = os.pipe()
            try:
                pid = os.fork()
            except OSError:  # no more processes: the batches of the workers not made are read here
                os.close(r)
                os.close(w)
                break
            if pid == 0:  # the child: Ctrl-C is the parent's to handle (it reads no result then)
                _ignore_sigint()
                status = 1
                try:
                    os.close(r)
                    for _pid, earlier in workers:
                        os.close(earlier.fileno())
                    _widen_pipe(w)
                    with os.fdopen(w, "wb") as out:
                        for b in range(here + k, len(batches), n):
                            data = pickle.dumps(read(batches[b], validate_all), protocol=pickle.HIGHEST_PROTOCOL)
                            out.write(len(data).to_bytes(8, "little"))
                            out.write(data)
                            out.flush()
                            del data
                    status = 0
                finally:
                    os._exit(status)
            os.close(w)
            workers.append((pid, os.fdopen(r, "rb")))
        if between is not None:
            between()
        for b in range(len(batches)):
            batch, batches[b] = batches[b], None  # dropped once its results are used
            k = b - here
            pipe = workers[k % n][1] if 0 <= k and k % n < len(workers) else None
            part = None if pipe is None or pipe.closed else _take(pipe, pickle.loads)
            if part is None or len(part) != len(batch):  # read here: the first, or a worker's that failed
                if pipe is not None:
                    pipe.close()
                part = read(batch, validate_all)
            yield b, batch, part
            del part
    except BaseException:  # Ctrl-C, or the consumer gone: the workers' work is not wanted
        for pid, _pipe in workers:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        raise
    finally:
        for pid, pipe in workers:
            pipe.close()
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass


def _take(pipe, loads: Callable[[bytes], Any]) -> list[SegmentResult] | None:
    """The next batch's results from a worker's pipe, or None when the pipe ends short of it
    (the worker failed) or what came is not a batch's results."""
    head = pipe.read(8)
    if len(head) < 8:
        return None
    size = int.from_bytes(head, "little")
    data = pipe.read(size)
    if len(data) < size:
        return None
    try:
        part = loads(data)
    except Exception:  # noqa: BLE001 - a broken worker: its batch is read here
        return None
    return part if isinstance(part, list) else None


def _widen_pipe(fd: int) -> None:
    """Let the pipe hold :data:`PIPE_BYTES` (where the system allows it)."""
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (ImportError, AttributeError, OSError):
        pass


def _ignore_sigint() -> None:
    """In a worker process: Ctrl-C (sent to the whole process group) is the parent's to handle
    (it kills the workers it no longer wants; a worker's half-written result is never read)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
