"""The reader: log files -> entries -> artifacts -> the per-rank model (:class:`tracekit.model.Run`).

Public functions:

- :func:`load` ``(paths, *, jobs=None, strict=False, progress=None) -> Run``: every file, in
  parallel processes (up to ``jobs``, default the machine's cores; a large uncompressed file
  is cut into segments at entry boundaries), merged per rank.
- :func:`iter_entries` ``(path, want=..., diagnostics=None)``: the decoded entries of one file
  for which ``want(entry_type, artifact_name)`` is true, as :class:`Entry` values.
- :func:`graph_sources` ``(paths, diagnostics=None)``: for every recorded bucketing outcome, the
  graph text it was computed from (see its docstring), for replay.

How a file is read (one pass, constant memory; see :class:`tracekit.envelopes.Scanner`): the
file is read in 1 MiB chunks; one regex pass per chunk skips, inside the regex engine, payload
lines (a leading tab) and every ordinary envelope that is not a wanted artifact (valid glog
prefix, the entry-type key first after ``{"``, the artifact name, the file's rank, payload
present exactly when ``has_payload`` says so); only wanted, unusual or bad lines reach Python.
Only the envelopes of wanted artifacts are decoded with orjson, and only their payloads are
assembled and MD5-checked. Parsed artifacts become events; events are applied to a per-file
builder in log order (so a file cut into segments pairs exactly as when read whole).

Pairing (per rank and compile id, never by adjacency: other frames' graphs often come between a
frame's forward and its lazily compiled backward):

- ``graph_index`` is the position of a ``pre_bucketing_fsdp_collectives`` outcome among the
  outcomes of its compile id in log order: 0 is the forward, 1 the backward.
- ``pre_bucketing_collective_sizes`` / ``..._after`` attach to the next outcome of the same rank
  and compile id; ``tracekit_fsdp_buckets`` / ``tracekit_fsdp_input_graph`` before an outcome
  mark it ``source="tracekit"`` (our pass, ``bucketing.install()``).
- ``before_post_grad_graph`` is counted per rank (``Rank.compiled_graphs``), ``fx_graph_cache_hit``
  too (``Rank.cache_hits``).
- Entries with no compile id (a pass called outside torch.compile) get compile id ``"-"``.
- A file's rank is the first ``rank`` an envelope carries (else the ``rank_N`` of its name);
  entries of another rank in that file are counted as ``other_rank`` and not used. Several files
  of one rank are merged in the order given; graph indices continue across them.

Diagnostics kinds (stable strings; each counted, first few with file and line; valid entries
around a bad one are still used; ``--strict`` makes any of them exit status 1):

- ``bad_prefix``: an envelope line without a valid glog prefix.
- ``bad_json``: an envelope that is not JSON (checked for every wanted envelope, and for any
  envelope that fails the cheap shape check: not ending in ``}``, or non-ASCII).
- ``bad_utf8``: an envelope or kept payload that is not UTF-8.
- ``not_an_object``: an envelope that is JSON but not an object.
- ``bad_field_type``: ``rank``/``frame_id``/... not an int, an artifact without a string name,
  ``has_payload`` not a string.
- ``orphan_payload``: payload lines no envelope owns (after a blank line, at the start of the
  file, or after an envelope without ``has_payload``).
- ``missing_payload``: ``has_payload`` set but no payload line follows.
- ``md5_mismatch``: a kept payload whose MD5 is not its ``has_payload``.
- ``truncated_entry``: the file ends inside an entry (no final newline).
- ``other_rank``: an entry of another rank than the file's.
- ``unreadable_file``: a path that does not exist or cannot be read.
- ``no_log_files``: a directory without log files.
- ``bad_gzip``: a ``.gz`` file that is corrupt or cut short (what was read before is used).
- ``bad_artifact``: an artifact payload its parser could not parse (e.g. a malformed
  ``pre_bucketing_fsdp_collectives`` line or sizes JSON).
- ``nul_bytes``: a line with NUL bytes (a crash leaves zeroed blocks), instead of ``bad_prefix``.
- ``crlf_line_ends``: the file has CRLF line ends (read as LF; reported once).
- ``empty_file``: the file is empty.

Not detected, on purpose (speed): bad JSON or bad UTF-8 inside envelopes and payloads summarize
skips, when the envelope still has the shape of one.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tracekit import envelopes as ev
from tracekit.artifacts import (
    SOURCE_PARSERS,
    SUMMARY_PARSERS,
    ArtifactError,
    ArtifactParser,
    Outcome,
    by_name,
)
from tracekit.gc_paused import gc_paused
from tracekit.model import CollectiveSize, Diagnostics, Graph, Rank, Run, Sizes
from tracekit.sources import GZIP_MAGIC, LogFile, find_logs, open_log, rank_from_name

NO_COMPILE_ID = "-"


class StrictError(Exception):
    """Raised by ``load(strict=True)`` when the logs had any bad input; carries the Run."""

    def __init__(self, run: Run) -> None:
        super().__init__(f"{run.diagnostics.total} bad input(s): {run.diagnostics.counts}")
        self.run = run


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


# --- the core loop ------------------------------------------------------------------------------


def _on_bytes(pred: Callable[[str, str | None], bool] | None) -> Callable[[bytes, bytes | None], bool] | None:
    """``pred(entry_type, name)`` for the scanner, which has them as bytes."""
    if pred is None:
        return None
    return lambda etype, name: pred(etype.decode("utf-8", "replace"),
                                    None if name is None else name.decode("utf-8", "replace"))


def _entries(
    stream,
    file: str,
    diagnostics: Diagnostics,
    *,
    names: frozenset[str] | None = None,
    want: Callable[[str, str | None], bool] | None = None,
    on_chunk: Callable[[int], None] | None = None,
    payload_for: Callable[[str, str | None], bool] | None = None,
    rank: int | None = None,
    scanner_out: list | None = None,
) -> Iterator[Entry]:
    """Decoded entries of one stream: the artifacts ``names`` (fast path) or those ``want``
    selects; everything else is checked cheaply (see :class:`tracekit.envelopes.Scanner`).

    ``payload_for(entry_type, name)`` says whether a wanted entry's payload is needed (default:
    all of them); entries kept without payload are still checked for the payload's presence."""
    add = diagnostics.add

    def report(kind: str, lineno: int, detail: str) -> None:
        add(kind, file, lineno, detail)

    scanner = ev.Scanner(report, artifact_names=names, want=_on_bytes(want),
                         payload_for=_on_bytes(payload_for), on_chunk=on_chunk, rank=rank)
    if scanner_out is not None:
        scanner_out.append(scanner)
    for raw in scanner.entries(stream):
        if raw.truncated:
            add("truncated_entry", file, raw.lineno, "the file ends inside this entry")
            continue
        try:
            env = ev.decode_envelope(raw.line[raw.start :])
            etype = raw.entry_type.decode("utf-8")
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
        payload = None
        has = env.get("has_payload")
        if raw.payload_wanted:  # the scanner asked payload_for once per entry type and name
            try:
                payload = ev.check_payload(env, raw.payload)
            except ev.EntryError as e:
                add(e.kind, file, raw.lineno, e.detail)
                continue
        elif has is not None and not raw.payload_lines:
            add("missing_payload", file, raw.lineno, "has_payload set but no payload lines follow")
            continue
        if raw.payload_lines and has is None:
            add("orphan_payload", file, raw.lineno + 1, "payload lines after an envelope without has_payload")
        yield Entry(file, raw.lineno, r, cid, etype, name, payload, env)


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
            yield from _entries(stream, path, diag, want=want, payload_for=payload_for)
        except OSError as e:
            diag.add("unreadable_file", path, 0, str(e)[:120])
        _check_gzip(stream, path, diag)


def _check_gzip(stream, path: str, diag: Diagnostics) -> None:
    err = getattr(stream, "error", None)
    if err is not None:
        diag.add("bad_gzip", path, 0, err[:120])


# --- per-rank model building --------------------------------------------------------------------


@dataclass
class _Pending:
    """What was seen for one compile id since its last outcome."""

    sizes_before: list[CollectiveSize] | None = None
    sizes_after: list[CollectiveSize] | None = None
    tracekit: bool = False
    tracekit_text: str | None = None
    graph_text: str | None = None


@dataclass
class GraphSource:
    """One outcome and the graph text it was computed from (see :func:`graph_sources`)."""

    rank: int | None
    compile_id: str
    graph_index: int
    graph: Graph
    text: str | None
    text_artifact: str | None  # "before_post_grad_graph" | "tracekit_fsdp_input_graph" | None


class RankBuilder:
    """Builds one file's graphs from its artifacts; the parsers call the methods below."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.rank: int | None = None
        self.graphs: list[Graph] = []
        self.compiled_graphs = 0
        self.cache_hits = 0
        self.cid = NO_COMPILE_ID
        self._pending: dict[str, _Pending] = {}
        self._index: dict[str, int] = {}
        self.sources: list[GraphSource] = []  # filled only when texts are kept

    def _p(self) -> _Pending:
        p = self._pending.get(self.cid)
        if p is None:
            p = self._pending[self.cid] = _Pending()
        return p

    def set_sizes(self, after: bool, sizes: list[CollectiveSize]) -> None:
        if after:
            self._p().sizes_after = sizes
        else:
            self._p().sizes_before = sizes

    def count_compiled_graph(self, text: str | None) -> None:
        self.compiled_graphs += 1
        if text is not None:
            self._p().graph_text = text

    def count_cache_hit(self) -> None:
        self.cache_hits += 1

    def mark_tracekit(self, buckets: Any = None, input_graph: str | None = None) -> None:
        p = self._p()
        p.tracekit = True
        if input_graph is not None:
            p.tracekit_text = input_graph

    def add_outcome(self, o: Outcome, file: str, line: int) -> None:
        cid = self.cid
        p = self._pending.pop(cid, None) or _Pending()
        idx = self._index.get(cid, 0)
        self._index[cid] = idx + 1
        sizes = None
        if p.sizes_before is not None or p.sizes_after is not None:
            sizes = Sizes(before=p.sizes_before or [], after=p.sizes_after)
        g = Graph(
            compile_id=cid,
            graph_index=idx,
            fsdp_groups=o.fsdp_groups,
            group_size=o.group_size,
            n_nodes=o.n_nodes,
            bucket_cap_mb=o.bucket_cap_mb,
            collectives=o.collectives,
            sizes_mb=sizes,
            source="tracekit" if p.tracekit else "torch",
            file=file,
            line=line,
        )
        self.graphs.append(g)
        if p.tracekit_text is not None:
            text, art = p.tracekit_text, "tracekit_fsdp_input_graph"
        elif p.graph_text is not None:
            text, art = p.graph_text, "before_post_grad_graph"
        else:
            text, art = None, None
        self.sources.append(GraphSource(self.rank, cid, idx, g, text, art))


@dataclass
class FileResult:
    """What one file gave; small, so it travels back from a worker process cheaply."""

    path: str
    rank: int | None
    graphs: list[Graph] = field(default_factory=list)
    compiled_graphs: int = 0
    cache_hits: int = 0
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    readable: bool = True  # False when the file could not be opened at all


@dataclass
class Segment:
    """A byte range of one file, the unit of work of :func:`load` (a whole file, or a part of
    a large uncompressed one: it starts at a line that does not start with a tab)."""

    log: LogFile
    start: int = 0
    end: int | None = None  # None: to the end of the file
    rank: int | None = None  # the file's rank when known in advance


@dataclass
class SegmentResult:
    """The parsed artifacts of one segment, in order, to be applied to the file's builder."""

    events: list[tuple[str, Any, str, int]]  # (artifact name, parsed value, compile id, line)
    rank: int | None
    lines: int  # lines in the segment: the next segment's line numbers start after them
    diagnostics: Diagnostics
    readable: bool = True


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


@functools.lru_cache(maxsize=8)  # once per parser set, not per file
def _parser_table(parsers: tuple[ArtifactParser, ...]) -> dict[str, ArtifactParser]:
    return {k.decode(): p for k, p in by_name(parsers).items()}


def _read_segment(
    seg: Segment,
    parsers: tuple[ArtifactParser, ...] = SUMMARY_PARSERS,
    on_chunk: Callable[[int], None] | None = None,
) -> SegmentResult:
    """Scan one segment: the wanted artifacts, parsed, as events (no model building yet)."""
    path = seg.log.path
    table = _parser_table(parsers)
    diag = Diagnostics()
    events: list[tuple[str, Any, str, int]] = []
    try:
        stream, raw = open_log(path)
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

        payload_for = lambda etype, name: table[name].needs_payload  # noqa: E731
        try:
            for e in _entries(stream, path, diag, names=frozenset(table), on_chunk=progress_cb,
                              payload_for=payload_for, rank=rank, scanner_out=scanner_box):
                parser = table[e.artifact_name]
                value: Any = e.payload
                if parser.needs_payload:
                    try:
                        value = parser.parse(e.payload or "")
                    except ArtifactError as err:
                        diag.add("bad_artifact", path, e.line, f"{e.artifact_name}: {err}"[:160])
                        continue
                events.append((e.artifact_name, value, e.compile_id or NO_COMPILE_ID, e.line))
        except OSError as err:
            diag.add("unreadable_file", path, 0, str(err)[:120])
        _check_gzip(stream if not isinstance(stream, _Range) else raw, path, diag)
    if seg.start and diag.counts.pop("crlf_line_ends", 0):  # reported once, by the first segment
        diag.examples = [x for x in diag.examples if x["kind"] != "crlf_line_ends"]
    sc = scanner_box[0] if scanner_box else None
    return SegmentResult(events, sc.rank if sc else rank, sc.lines_read if sc else 0, diag)


def _apply(
    log: LogFile,
    parts: list[SegmentResult],
    parsers: tuple[ArtifactParser, ...] = SUMMARY_PARSERS,
    sink: Callable[[GraphSource], None] | None = None,
) -> FileResult:
    """Build one file's graphs from its segments' events, in order (pairing happens here)."""
    table = _parser_table(parsers)
    diag = Diagnostics()
    b = RankBuilder(log.path)
    b.rank = next((p.rank for p in parts if p.rank is not None), log.rank_hint)
    offset = 0
    for part in parts:
        if offset:
            for ex in part.diagnostics.examples:
                if ex["line"]:
                    ex["line"] += offset
        diag.merge(part.diagnostics)
        for name, value, cid, line in part.events:
            b.cid = cid
            n_before = len(b.sources)
            table[name].apply(b, name, value, log.path, line + offset)
            if len(b.sources) > n_before:
                src = b.sources.pop()
                if sink is not None:
                    sink(src)
        offset += part.lines
    readable = all(p.readable for p in parts)
    return FileResult(log.path, b.rank, b.graphs, b.compiled_graphs, b.cache_hits, diag, readable)


def read_file(log: LogFile | str, on_chunk: Callable[[int], None] | None = None) -> FileResult:
    """Read one whole file into a :class:`FileResult`, in this process."""
    if isinstance(log, str):
        log = LogFile(log, 0, rank_from_name(log))
    return _apply(log, [_read_segment(Segment(log), on_chunk=on_chunk)])


def _merge(paths: list[str], results: Iterable[FileResult], diagnostics: Diagnostics) -> Run:
    ranks: dict[int | None, Rank] = {}
    next_index: dict[int | None, dict[str, int]] = {}
    for res in results:
        diagnostics.merge(res.diagnostics)
        if not res.readable:
            continue
        r = ranks.get(res.rank)
        if r is None:
            r = ranks[res.rank] = Rank(rank=res.rank)
            next_index[res.rank] = {}
        r.files.append(res.path)
        r.compiled_graphs += res.compiled_graphs
        r.cache_hits += res.cache_hits
        offsets = next_index[res.rank]
        base = dict(offsets)
        for g in res.graphs:
            g.graph_index += base.get(g.compile_id, 0)
            offsets[g.compile_id] = max(offsets.get(g.compile_id, 0), g.graph_index + 1)
            r.graphs.append(g)
    order = sorted(ranks, key=lambda k: (k is None, -1 if k is None else k))
    return Run(paths=list(paths), ranks=[ranks[k] for k in order], diagnostics=diagnostics)


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


#: Uncompressed files at least this large are split into segments read in parallel.
SPLIT_MIN_BYTES = 64 << 20
_BOUNDARY_RE = re.compile(rb"\n[^\t]")


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


def _first_rank(f, limit: int = 4 << 20) -> int | None:
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


def _seg_bytes(seg: Segment) -> int:
    return (seg.log.size if seg.end is None else seg.end) - seg.start


def plan(logs: list[LogFile], jobs: int) -> list[list[Segment]]:
    """The segments of every file: one per file, or ``jobs`` for a large uncompressed one."""
    out: list[list[Segment]] = []
    for lg in logs:
        k = min(jobs, lg.size // (SPLIT_MIN_BYTES // 2)) if lg.size >= SPLIT_MIN_BYTES else 1
        if k <= 1:
            out.append([Segment(lg)])
            continue
        try:
            with open(lg.path, "rb") as f:
                if f.read(2) == GZIP_MAGIC:
                    out.append([Segment(lg)])
                    continue
                rank = _first_rank(f)
                cuts = sorted({_boundary(f, lg.size * i // k, lg.size) for i in range(1, k)})
        except OSError:
            out.append([Segment(lg)])
            continue
        edges = [0] + [c for c in cuts if 0 < c < lg.size] + [None]
        out.append([Segment(lg, a, b, rank) for a, b in zip(edges, edges[1:])])
    return out


def _read_forked(tasks: list[Segment], tick: Callable[[int], None]) -> list[SegmentResult]:
    """Read ``tasks[1:]`` in forked children and ``tasks[0]`` here, at the same time.

    Cheaper to start than a process pool (no executor, no imports): each child reads its
    segment, sends back the pickled :class:`SegmentResult` (our own data, never a log's) on a
    pipe and exits. A child that fails is replaced by reading its segment here."""
    import pickle

    children: list[tuple[int, int]] = []
    for seg in tasks[1:]:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child
            status = 1
            try:
                os.close(r)
                data = pickle.dumps(_read_segment(seg), protocol=pickle.HIGHEST_PROTOCOL)
                with os.fdopen(w, "wb") as f:
                    f.write(data)
                status = 0
            finally:
                os._exit(status)
        os.close(w)
        children.append((pid, r))
    parts = [_read_segment(tasks[0])]
    tick(_seg_bytes(tasks[0]))
    for seg, (pid, r) in zip(tasks[1:], children):
        with os.fdopen(r, "rb") as f:
            data = f.read()
        part = None
        if data:  # decoded while the child exits (its teardown is not waited for first)
            try:
                part = pickle.loads(data)
            except Exception:  # noqa: BLE001 - a broken child: read its segment here
                part = None
        _, status = os.waitpid(pid, 0)
        if status != 0:
            part = None
        parts.append(part if isinstance(part, SegmentResult) else _read_segment(seg))
        tick(_seg_bytes(seg))
    return parts


#: Less than this in all is read in this process, like one file of that size (SPLIT_MIN_BYTES):
#: starting workers and sending their results back costs more than it saves (8,192 small
#: rank logs, 54 MB: 1.5 times the CPU time with 2 workers than in one process).
PARALLEL_MIN_BYTES = SPLIT_MIN_BYTES

#: A worker's task is a batch of consecutive segments of about this many bytes at most (one
#: message each way per batch, not per file: a job of 8,192 small rank logs is 8,192 files).
BATCH_BYTES = 8 << 20


def _batches(tasks: list[Segment], jobs: int) -> list[list[Segment]]:
    """Consecutive segments in batches of up to ``min(BATCH_BYTES, total / (8 * jobs))`` bytes
    (at least one segment each): few enough messages, enough batches to keep every worker busy."""
    target = min(BATCH_BYTES, sum(_seg_bytes(seg) for seg in tasks) // (8 * jobs))
    out: list[list[Segment]] = []
    size = 0
    for seg in tasks:
        if not out or size >= target:
            out.append([])
            size = 0
        out[-1].append(seg)
        size += _seg_bytes(seg)
    return out


def _read_batch(segs: list[Segment]) -> list[SegmentResult]:
    return [_read_segment(seg) for seg in segs]


@gc_paused
def load(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    *,
    jobs: int | None = None,
    strict: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Run:
    """Read log files, ``.gz`` logs or directories of rank logs into a :class:`Run`.

    ``jobs``: worker processes (default: the machine's cores). Files are read in parallel, and
    a large uncompressed file is cut into ``jobs`` segments at entry boundaries, read in
    parallel and stitched back in order (pairing by compile id happens after stitching).
    ``strict``: raise :class:`StrictError` (carrying the Run) if any bad input was seen.
    ``progress(done_bytes, total_bytes)`` is called as files are read (bytes on disk).
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    path_list = [os.fspath(p) for p in paths]
    diagnostics = Diagnostics()
    logs = find_logs(path_list, diagnostics)
    total = sum(lg.size for lg in logs)
    jobs = default_jobs() if jobs is None else max(1, int(jobs))
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(done, total)

    segments = plan(logs, jobs)
    tasks = [seg for segs in segments for seg in segs]
    parts: list[SegmentResult]
    if jobs == 1 or len(tasks) <= 1 or total < PARALLEL_MIN_BYTES:
        parts = [_read_segment(seg, on_chunk=tick if progress else None) for seg in tasks]
    elif len(tasks) <= jobs and hasattr(os, "fork"):
        parts = _read_forked(tasks, tick)
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        ctx = multiprocessing.get_context("fork") if hasattr(os, "fork") else None
        # With no more tasks than jobs, this process reads the first one itself.
        local = 1 if len(tasks) <= jobs else 0
        batches = [[seg] for seg in tasks[local:]] if local else _batches(tasks, jobs)
        with ProcessPoolExecutor(max_workers=min(jobs, len(batches)), mp_context=ctx) as pool:
            futures = [pool.submit(_read_batch, batch) for batch in batches]
            parts = [_read_segment(tasks[0])] if local else []
            if local:
                tick(_seg_bytes(tasks[0]))
            for batch, fut in zip(batches, futures):
                parts.extend(fut.result())
                tick(sum(_seg_bytes(seg) for seg in batch))
    results = []
    i = 0
    for lg, segs in zip(logs, segments):
        results.append(_apply(lg, parts[i : i + len(segs)]))
        i += len(segs)
    run = _merge(path_list, results, diagnostics)
    if strict and run.diagnostics.total:
        raise StrictError(run)
    return run


def graph_sources(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    diagnostics: Diagnostics | None = None,
) -> Iterator[GraphSource]:
    """Every recorded bucketing outcome with the graph text it was computed from, streaming.

    Yields :class:`GraphSource` ``(rank, compile_id, graph_index, graph, text, text_artifact)``
    in file order, files one after another (no parallelism: texts can be large). The text is:

    - for our pass (``source == "tracekit"``): the ``tracekit_fsdp_input_graph`` logged just
      before the outcome;
    - for stock torch: the nearest preceding ``before_post_grad_graph`` of the same rank and
      compile id (the graph before post-grad passes; pre-bucketing runs on it after the
      earlier post-grad passes, so node names match but a few nodes may differ);
    - ``None`` when neither was logged (``text_artifact`` is then ``None``).

    Graph indices are per file (as in :func:`load` for a rank with one file).
    """
    diag = diagnostics if diagnostics is not None else Diagnostics()
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    logs = find_logs([os.fspath(p) for p in paths], diag)
    for lg in logs:
        out: list[GraphSource] = []
        res = _apply(lg, [_read_segment(Segment(lg), SOURCE_PARSERS)], SOURCE_PARSERS, sink=out.append)
        diag.merge(res.diagnostics)
        yield from out
