"""Reading torch.profiler traces (Chrome-trace JSON, one per rank) into :class:`RankTrace`.

    find_trace_files(PATHs) -> [Path]         .json / .json.gz files, directories of them
    read_trace(path)        -> RankTrace      one file, streamed event by event
    read_traces(PATHs, jobs=, progress=, dask=) -> [RankTrace], sorted by rank

How a file is read:

- Gzip is known by its magic bytes (:func:`tracekit.read.sources.open_log`); a cut ``.gz`` gives
  what was decompressed before the damage (:class:`tracekit.read.sources.TolerantGzip`).
- Kineto writes each event as a block of lines that opens with a line ``  {`` and closes with a
  line ``  }`` (2 spaces; everything inside is indented further, and a JSON string holds no raw
  newline). The file is read in pieces of :data:`PIECE` bytes; in each, the names that mark an
  event the model keeps (:data:`NAME_MARKERS`) and kernels (:data:`KERNEL_MARKER`) are looked for,
  and only the events around a hit are decoded (orjson). All other events are counted, never decoded. The
  JSON around the event array (``distributedInfo``, ``baseTimeNanoseconds``, ...) is decoded
  on its own.
- A file not in that layout (one line of JSON, another writer) is parsed whole: the
  ``layout`` is then ``"whole"``, and a note says so (it takes the file's size in memory).
- What is kept (see :mod:`tracekit.model.profile`): ``ProfilerStep#N`` (CPU ``user_annotation``),
  compiled regions, ``_c10d_functional::*`` issue ops and ``wait_tensor``, gloo's
  ``gloo:*`` events, with ``host_ops`` CPU matmuls and copies (``aten::mm``, ``addmm``, ``bmm``,
  ``baddbmm``, ``copy_``: :class:`HostOp`, for ``replay --profile``'s prediction; they double
  the events decoded on a CPU trace, so only that asks for them), and every ``kernel``: NCCL ones (``Collective name``, or a name starting
  ``nccl``) as :class:`Transfer`, the others as ``compute`` spans (GPU form: one span a kernel,
  names shared, enough for an analysis of what ran beside a transfer; a kernel's ``External id``
  links it to the CPU op that launched it). The GPU timeline's own copies of annotations
  (``gpu_user_annotation``) are not kept. Events are sorted by start time at the end.
- The rank is ``distributedInfo.rank``. Without it, a ``rankN`` / ``rank_N`` in the file name is
  used, with a note saying so; otherwise the rank is None.

What is wrong with a file is said, never guessed over:

- cut short (a truncated ``.gz`` or JSON): what was read is kept, ``complete`` is False and a
  problem says where it stopped (the decompressed byte offset and the events read);
- not readable, or not a trace at all: :class:`TraceError` (one line, naming the file), which a
  command turns into exit status 2;
- no ``ProfilerStep#N`` (no profiler schedule): ``steps`` is empty;
- recorded without ``record_shapes``: ``has_shapes`` is False, and the issued collectives have no
  ``numel`` / ``dtype`` / ``bytes``.

Nothing from a trace is ever evaluated: it is decoded as JSON and read as strings and numbers.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from tracekit.model.profile import (
    GPU_FORM,
    HostOp,
    IssuedCollective,
    ProcessGroupInfo,
    RankTrace,
    Span,
    Transfer,
)
from tracekit.read.process_pools import end_pool, fork_context, ignore_sigint
from tracekit.read.sources import open_log

#: Bytes (decompressed) read at a time.
PIECE = 4 << 20
#: What every event the model keeps has, in Kineto's layout: its name starts with one of these
#: (one regular expression, its common prefix found fast) ...
_KEPT_NAMES = (
    rb"ProfilerStep#|Torch-Compiled Region|CompiledFunction|## Call CompiledFxGraph"
    rb"|_c10d_functional::|gloo:|thread_name"
)
NAME_MARKERS = re.compile(rb'"name": "(?:' + _KEPT_NAMES + rb'")')
#: The same, and the CPU ops kept as :class:`HostOp` (``read_trace(host_ops=True)``: what
#: ``replay --profile`` calibrates on; measure does not decode them).
HOST_OP_MARKERS = re.compile(rb'"name": "(?:' + _KEPT_NAMES + rb'|aten::(?:mm|addmm|bmm|baddbmm|copy_)")')
#: ... or it is a kernel. A hit is then decoded and checked exactly: a false hit costs a decode.
KERNEL_MARKER = b'"cat": "kernel"'
#: How much of a file's start may come before ``"traceEvents"`` (device properties and such).
HEAD_MAX = 16 << 20

_OPEN = b"\n  {"  # the line an event opens with (Kineto's layout) ...
_CLOSE = b"\n  }"  # ... and the line it closes with
_EVENTS_KEY = b'"traceEvents"'
_EVENTS_START_RE = re.compile(rb'"traceEvents"\s*:\s*\[')
_KINETO_FIRST_RE = re.compile(rb"[ \t\r]*(?:\n[ \t\r]*)*?\n  \{\n")
_EMPTY_EVENTS_RE = re.compile(rb"\s*\]")
_RANK_NAME_RE = re.compile(r"rank[_-]?(\d{1,7})(?!\d)", re.IGNORECASE)
_RANKS_RE = re.compile(r"-?\d+")
_TRACE_NAME_RE = re.compile(r"\.json(\.gz)?$", re.IGNORECASE)

_REGION_NAMES = ("CompiledFunction", "CompiledFunctionBackward")
_C10D = "_c10d_functional::"

#: Bytes an element of each dtype takes, in the profiler's spelling (``Input type``) and NCCL's
#: (``dtype`` of a kernel).
DTYPE_BYTES = {
    "float": 4,
    "double": 8,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1,
    "bool": 1,
    "signed char": 1,
    "unsigned char": 1,
    "short int": 2,
    "int": 4,
    "long int": 8,
    "long long int": 8,
    "Float": 4,
    "Double": 8,
    "Half": 2,
    "BFloat16": 2,
    "Int": 4,
    "Long": 8,
    "Byte": 1,
    "Char": 1,
}


class TraceError(Exception):
    """A trace that cannot be read at all (missing, unreadable, not a Chrome trace): one line
    that names the file. A command turns it into exit status 2."""


# -- finding files ---------------------------------------------------------------------------


def find_trace_files(
    paths: str | os.PathLike | Iterable[str | os.PathLike], skipped: list[Path] | None = None
) -> list[Path]:
    """The trace files PATHs name, each once, in order: a file as given, a directory's
    ``*.json`` / ``*.json.gz`` files that hold a trace (one level, sorted by name;
    ``tensorboard_trace_handler``'s ``HOST_PID.TIMESTAMP.pt.trace.json[.gz]`` among them). A
    directory's JSON file without ``"traceEvents"`` in its first :data:`SNIFF_BYTES` bytes
    (decompressed) is no trace (a run's ``steps.json``): it goes to ``skipped``, unread. Raises
    :class:`TraceError` for a path that does not exist or a directory without traces.

    >>> find_trace_files("fixtures/traces/nccl_2gpu")
    [PosixPath('fixtures/traces/nccl_2gpu/rank0.json.gz')]
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[Path] = []
    seen: set[str] = set()
    for given in paths:
        p = Path(given)
        if p.is_dir():
            named = sorted(c for c in p.iterdir() if _TRACE_NAME_RE.search(c.name) and c.is_file())
            found = [c for c in named if holds_trace(c)]
            if skipped is not None:
                skipped.extend(c for c in named if c not in found)
            if not found:
                n = len(named)
                detail = f" ({n} JSON file{'' if n == 1 else 's'} without traceEvents)" if n else ""
                raise TraceError(f"{p}: directory holds no .json or .json.gz trace{detail}")
        elif p.is_file():
            found = [p]
        elif p.exists():
            raise TraceError(f"{p}: not a regular file")
        else:
            raise TraceError(f"{p}: no such file or directory")
        for f in found:
            key = os.path.realpath(f)
            if key not in seen:
                seen.add(key)
                out.append(f)
    return out


#: How much of a directory's JSON file (decompressed) :func:`holds_trace` looks at.
SNIFF_BYTES = 256 << 10


def holds_trace(path: str | os.PathLike) -> bool:
    """Whether a file (plain or gzip) has ``"traceEvents"`` in its first :data:`SNIFF_BYTES`
    bytes. A file that cannot be read is kept (reading it says why)."""
    try:
        stream, raw = open_log(os.fspath(path))
    except OSError:
        return True
    try:
        head = stream.read(SNIFF_BYTES)
        cut = getattr(stream, "error", None) is not None  # a .gz cut short: reading it says so
    except (OSError, EOFError, ValueError):
        return True
    finally:
        stream.close()
        if raw is not stream:
            raw.close()
    return _EVENTS_KEY in head or cut


def rank_from_trace_name(path: str | os.PathLike) -> int | None:
    """The N of ``rankN`` / ``rank_N`` / ``rank-N`` in a file's name, or None
    (``tensorboard_trace_handler``'s names hold no rank)."""
    m = _RANK_NAME_RE.search(os.path.basename(os.fspath(path)))
    return None if m is None else int(m.group(1))


# -- reading one file ------------------------------------------------------------------------


def read_trace(path: str | os.PathLike, host_ops: bool = False) -> RankTrace:
    """Read one trace file (``.json`` or ``.json.gz``) into a :class:`RankTrace`; with
    ``host_ops``, its CPU matmuls and copies too (``host_ops``).

    Raises :class:`TraceError` when it cannot be opened or is not a Chrome trace; a file cut
    short gives what was read, with ``complete=False`` and a problem saying where it stopped.

    >>> t = read_trace("fixtures/traces/nccl_2gpu/rank0.json.gz")
    >>> t.rank, t.world_size, t.form, len(t.transfers), len(t.steps)
    (0, 2, 'gpu', 21, 3)
    >>> t.transfers[0].kind, t.transfers[0].numel_in, t.transfers[0].group_ranks
    ('broadcast', 53120, (0, 1))
    """
    name = os.fspath(path)
    try:
        stream, raw = open_log(name)
    except OSError as e:
        raise TraceError(f"{name}: cannot open: {e.strerror or e}") from None
    try:
        return _read_stream(name, stream, host_ops)
    except OSError as e:
        raise TraceError(f"{name}: cannot read: {e.strerror or e}") from None
    finally:
        stream.close()
        if raw is not stream:
            raw.close()


class _Builder:
    """What one file's kept events make, added one decoded event at a time."""

    def __init__(self, trace: RankTrace, host_ops: bool = False) -> None:
        self.t = trace
        self.host_ops = host_ops
        self.markers = HOST_OP_MARKERS if host_ops else NAME_MARKERS
        self.strings: dict[str, str] = {}  # one string per name, dtype, op: however many events
        self.shapes_seen = False
        self.kernels = 0

    def add(self, ev: dict[str, Any]) -> None:
        name = ev.get("name")
        if not isinstance(name, str):
            return
        name = self.strings.setdefault(name, name)
        ph = ev.get("ph")
        if ph == "M":
            if name == "thread_name":
                tid, args = ev.get("tid"), ev.get("args") or {}
                if isinstance(tid, int) and isinstance(args.get("name"), str):
                    self.t.threads[tid] = args["name"]
            return
        if ph != "X":
            return
        cat = ev.get("cat") or ""
        if cat == "kernel":
            self._kernel(ev, name)
            return
        if cat.startswith("gpu_"):  # the GPU timeline's copy of an annotation
            return
        if name.startswith("ProfilerStep#"):
            if cat in ("user_annotation", "cpu_instant_event", ""):
                self.t.steps.append(_span(ev, name))
        elif name.startswith(_C10D):
            self._c10d(ev, name)
        elif name.startswith("gloo:"):
            self._gloo(ev, name)
        elif self.host_ops and name in _HOST_OPS and cat == "cpu_op":
            self._host_op(ev, name)
        elif (
            name.startswith("Torch-Compiled Region")
            or name in _REGION_NAMES
            or name.startswith("## Call CompiledFxGraph")
        ):
            self.t.regions.append(_span(ev, name))

    def _kernel(self, ev: dict[str, Any], name: str) -> None:
        self.kernels += 1
        args = ev.get("args") or {}
        stream = args.get("stream", ev.get("tid"))
        span = _span(ev, name, stream)
        coll = args.get("Collective name")
        if coll is None and not name.startswith("nccl"):
            self.t.compute.append(span)
            return
        ranks = args.get("Process Group Ranks")
        self.t.transfers.append(
            Transfer(
                span=span,
                kind=self._shared(collective_kind(coll if isinstance(coll, str) else _nccl_kernel_op(name))),
                numel_in=_int(args.get("In msg nelems")),
                numel_out=_int(args.get("Out msg nelems")),
                dtype=self._shared(args["dtype"]) if isinstance(args.get("dtype"), str) else None,
                group_size=_int(args.get("Group size")),
                group=self._shared(str(args["Process Group Name"])) if "Process Group Name" in args else None,
                group_ranks=_ranks(ranks),
            )
        )

    def _c10d(self, ev: dict[str, Any], name: str) -> None:
        op = self._shared(name[len(_C10D) :])
        span = _span(ev, name)
        if op == "wait_tensor":
            self.t.waits.append(span)
            return
        args = ev.get("args") or {}
        dims = args.get("Input Dims")
        types = args.get("Input type")
        numel = dtype = nbytes = None
        if isinstance(dims, list) and dims:
            self.shapes_seen = True
            numel = _numel(dims[0])
            dtype = self._first_dtype(types)
            if numel is not None and dtype in DTYPE_BYTES:
                nbytes = numel * DTYPE_BYTES[dtype]
        kind = self._shared(collective_kind(op))
        self.t.issued.append(
            IssuedCollective(
                span=span,
                op=op,
                kind=kind,
                numel=numel,
                dtype=dtype,
                bytes=nbytes,
                group_size=_group_size(kind, args.get("Concrete Inputs")),
            )
        )

    def _gloo(self, ev: dict[str, Any], name: str) -> None:
        args = ev.get("args") or {}
        dims, types = args.get("Input Dims"), args.get("Input type")
        numel = _numel(dims[0]) if isinstance(dims, list) and dims else None
        dtype = self._first_dtype(types)
        kind = self._shared(collective_kind(name[5:]))
        self.t.transfers.append(Transfer(span=_span(ev, name), kind=kind, numel_in=numel, dtype=dtype))

    def _host_op(self, ev: dict[str, Any], name: str) -> None:
        args = ev.get("args") or {}
        dims, types = args.get("Input Dims"), args.get("Input type")
        kind = _HOST_OPS[name]
        flops: float | None = None
        nbytes: int | None = None
        if isinstance(dims, list) and dims:
            if kind == "matmul":
                flops = matmul_flops(name, dims)
            else:  # copy_(self, src): the source's bytes
                src = dims[1] if len(dims) > 1 else dims[0]
                numel = _numel(src)
                dtype = types[1] if isinstance(types, list) and len(types) > 1 else None
                if numel is not None and isinstance(dtype, str) and dtype in DTYPE_BYTES:
                    nbytes = numel * DTYPE_BYTES[dtype]
        self.t.host_ops.append(HostOp(span=_span(ev, name), kind=kind, flops=flops, bytes=nbytes))

    def _shared(self, s: str) -> str:
        return self.strings.setdefault(s, s)

    def _first_dtype(self, types: object) -> str | None:
        """The first input's dtype of an ``Input type`` list (shared), or None."""
        if isinstance(types, list) and types and isinstance(types[0], str) and types[0]:
            return self._shared(types[0])
        return None

    def finish(self) -> RankTrace:
        t = self.t
        for spans in (t.steps, t.regions, t.waits, t.compute):
            spans.sort(key=_start)
        t.host_ops.sort(key=lambda o: o.span.ts_us)
        t.issued.sort(key=lambda c: c.span.ts_us)
        t.transfers.sort(key=lambda x: x.span.ts_us)
        if self.kernels:
            t.form = GPU_FORM
        elif t.backend is not None and "nccl" in t.backend.lower():
            t.form = GPU_FORM
        if not t.has_shapes and self.shapes_seen:
            t.has_shapes = True
        elif t.has_shapes and t.issued and all(c.numel is None for c in t.issued):
            t.has_shapes = False  # the header says record_shapes, but no collective has its sizes
            t.notes.append(
                "record_shapes is on in the trace's header, but no issued collective has its sizes"
            )
        cpu = [s.tid for s in t.regions] + [c.span.tid for c in t.issued] + [s.tid for s in t.waits]
        tids = Counter(cpu or [s.tid for s in t.steps])
        if tids:
            t.main_tid = tids.most_common(1)[0][0]
        if t.rank is None:
            hint = rank_from_trace_name(t.path)
            if hint is not None:
                t.rank = hint
                t.notes.append(f"rank {hint} taken from the file name: the trace has no distributedInfo.rank")
            else:
                t.notes.append("no rank: the trace has no distributedInfo.rank and its name gives none")
        return t


def _start(s: Span) -> float:
    return s.ts_us


def _span(ev: dict[str, Any], name: str, tid: object = None) -> Span:
    tid = ev.get("tid") if tid is None else tid
    ext = (ev.get("args") or {}).get("External id")
    return Span(
        name=name,
        ts_us=float(ev.get("ts") or 0.0),
        dur_us=float(ev.get("dur") or 0.0),
        tid=tid if isinstance(tid, int) else -1,
        external_id=ext if isinstance(ext, int) else None,
    )


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _ranks(v: object) -> tuple[int, ...] | None:
    """``Process Group Ranks``: a string ``"[0, 1]"`` (as NCCL kernels carry it) or a list."""
    if isinstance(v, list):
        return tuple(int(r) for r in v if isinstance(r, int))
    if isinstance(v, str):
        return tuple(int(r) for r in _RANKS_RE.findall(v))
    return None


def _numel(dims: object) -> int | None:
    """Elements of a tensor's ``Input Dims`` entry (a list of ints), or of a tensor list's (a
    list of such lists, summed); None when the entry is not a shape."""
    if not isinstance(dims, list) or not dims:
        return None
    if all(isinstance(d, int) for d in dims):
        n = 1
        for d in dims:
            n *= d
        return n
    if all(isinstance(d, list) for d in dims):
        parts = [_numel(d) if d else 1 for d in dims]
        return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)
    return None


#: The CPU ops kept as :class:`HostOp`, and their kind.
_HOST_OPS = {
    "aten::mm": "matmul",
    "aten::addmm": "matmul",
    "aten::bmm": "matmul",
    "aten::baddbmm": "matmul",
    "aten::copy_": "copy",
}


def matmul_flops(name: str, dims: list[Any]) -> float | None:
    """Multiply-adds times two of a matmul op from its ``Input Dims``: ``mm(a[m,k], b[k,n])``,
    ``addmm(c, a, b)``, ``bmm(a[B,m,k], b[B,k,n])``, ``baddbmm(c, a, b)``; None when the
    shapes are not those.

    >>> matmul_flops("aten::mm", [[128, 1024], [1024, 512]])
    134217728.0
    """
    args = dims[1:3] if name in ("aten::addmm", "aten::baddbmm") else dims[:2]
    if len(args) != 2 or not all(isinstance(a, list) and all(isinstance(x, int) for x in a) for a in args):
        return None
    a, b = args
    if len(a) == 2 and len(b) == 2 and a[1] == b[0]:
        return 2.0 * a[0] * a[1] * b[1]
    if len(a) == 3 and len(b) == 3 and a[0] == b[0] and a[2] == b[1]:
        return 2.0 * a[0] * a[1] * a[2] * b[2]
    return None


#: Where the group size is among a ``_c10d_functional`` op's arguments (``Concrete Inputs``).
_GROUP_SIZE_ARG = {"all_gather": 1, "reduce_scatter": 2}


def _group_size(kind: str, concrete: object) -> int | None:
    i = _GROUP_SIZE_ARG.get(kind)
    if i is None or not isinstance(concrete, list) or len(concrete) <= i:
        return None
    v = concrete[i]
    return int(v) if isinstance(v, str) and v.isdigit() else None


def collective_kind(op: str) -> str:
    """The kind of collective an op, a gloo event or an NCCL ``Collective name`` names:
    ``"all_gather"``, ``"reduce_scatter"``, ``"all_reduce"``, ``"all_to_all"``, ``"broadcast"``,
    or the name itself.

    >>> collective_kind("all_gather_into_tensor_out"), collective_kind("allreduce")
    ('all_gather', 'all_reduce')
    >>> collective_kind("_reduce_scatter_base"), collective_kind("barrier")
    ('reduce_scatter', 'barrier')
    """
    s = op.lower().replace("_", "")
    for key, kind in (
        ("allgather", "all_gather"),
        ("reducescatter", "reduce_scatter"),
        ("allreduce", "all_reduce"),
        ("alltoall", "all_to_all"),
        ("broadcast", "broadcast"),
    ):
        if s.startswith(key):
            return kind
    return op


def _nccl_kernel_op(name: str) -> str:
    """``AllReduce`` of ``ncclKernel_AllReduce_RING_LL_Sum_float(...)`` / ``ncclDevKernel_...``."""
    parts = name.split("(")[0].split("_")
    return parts[1] if len(parts) > 1 else name


def _header(t: RankTrace, doc: dict[str, Any]) -> None:
    """What the JSON around the event array says: ``distributedInfo``, ``baseTimeNanoseconds``,
    ``record_shapes``."""
    info = doc.get("distributedInfo")
    if isinstance(info, dict):
        if _int(info.get("rank")) is not None:
            t.rank = info["rank"]
        t.world_size = _int(info.get("world_size"))
        t.backend = info.get("backend") if isinstance(info.get("backend"), str) else None
        for pg in info.get("pg_config") or []:
            if isinstance(pg, dict):
                t.process_groups.append(
                    ProcessGroupInfo(
                        name=str(pg.get("pg_name", "")),
                        desc=str(pg.get("pg_desc", "")),
                        size=_int(pg.get("pg_size")) or 0,
                        ranks=_ranks(pg.get("ranks")) or (),
                        backend=str(pg.get("backend_config", "")),
                    )
                )
    base = doc.get("baseTimeNanoseconds")
    if _int(base) is not None:
        t.base_time_ns = base
    if "record_shapes" in doc:
        t.has_shapes = bool(doc["record_shapes"])


def _read_stream(name: str, stream: Any, host_ops: bool = False) -> RankTrace:
    trace = RankTrace(path=name, rank=None)
    b = _Builder(trace, host_ops)
    head = b""
    while True:  # the start, up to the event array's first event
        piece = stream.read(PIECE)
        head += piece
        m = _EVENTS_START_RE.search(head)
        if m is not None or not piece or len(head) > HEAD_MAX:
            break
    if m is None:
        if not head.lstrip()[:1] == b"{":
            raise TraceError(f"{name}: not a Chrome trace (no JSON object{_gz_note(stream)})")
        if len(head) > HEAD_MAX:
            raise TraceError(f"{name}: not a Chrome trace (no traceEvents in its first {HEAD_MAX >> 20} MiB)")
        # a whole-file parse says whether it is JSON without the key, or cut before it
        return _read_whole(name, head, stream, b, reason="no traceEvents key found")
    while len(head) - m.end() < 256:  # enough of the array to see its layout
        piece = stream.read(PIECE)
        if not piece:
            break
        head += piece
    rest = head[m.end() :]
    if not _KINETO_FIRST_RE.match(rest) and not _EMPTY_EVENTS_RE.match(rest):
        return _read_whole(name, head, stream, b, reason="its events are not one block of lines each")
    try:
        _header(trace, orjson.loads(head[: m.end()] + b"]}"))
    except orjson.JSONDecodeError:
        return _read_whole(name, head, stream, b, reason="the JSON before traceEvents is not Kineto's")
    _scan_events(name, head, m.end(), stream, b)
    return b.finish()


def _gz_note(stream: Any) -> str:
    err = getattr(stream, "error", None)
    return f"; gzip: {err}" if err else ""


def _scan_events(name: str, buf: bytes, pos: int, stream: Any, b: _Builder) -> None:
    """The event array, piece by piece, from ``buf[pos:]`` on. What is scanned always ends at an
    event's opening line, so every event in it is whole; the last event, and what follows the
    array, are left to :func:`_finish_events`."""
    done = pos  # decompressed bytes before buf
    buf = buf[pos:]
    while True:
        cut = buf.rfind(_OPEN)
        if cut > 0:  # else one event larger than what is held: read on
            _scan(buf, cut, b, done)
            done += cut
            buf = buf[cut:]
        piece = stream.read(PIECE)
        if not piece:
            break
        buf += piece
    _finish_events(name, buf, done, b, _gz_note(stream))


def _scan(buf: bytes, cut: int, b: _Builder, done: int) -> None:
    """Decode the events of ``buf[:cut]`` that a marker is in; count them all. ``done``: the
    bytes before ``buf`` (where a malformed event is, said)."""
    trace = b.t
    trace.events_read += buf.count(_OPEN, 0, cut)
    starts: set[int] = set()
    for m in b.markers.finditer(buf, 0, cut):
        s = buf.rfind(_OPEN, 0, m.start())
        if s != -1:  # else before the first event: not in one
            starts.add(s)
    i = buf.find(KERNEL_MARKER, 0, cut)
    while i != -1:
        s = buf.rfind(_OPEN, 0, i)
        if s != -1:
            starts.add(s)
        i = buf.find(KERNEL_MARKER, i + len(KERNEL_MARKER), cut)
    for s in sorted(starts):
        e = buf.find(_CLOSE, s + 4)
        try:
            ev = orjson.loads(buf[s + 1 : e + 4])
        except orjson.JSONDecodeError as err:
            trace.problems.append(
                f"{trace.path}: the event at byte {done + s + 1:,} is not valid JSON ({err}): skipped"
            )
            continue
        if isinstance(ev, dict):
            b.add(ev)


def _finish_events(name: str, tail: bytes, done: int, b: _Builder, gz: str) -> None:
    """After the last piece: ``tail`` starts at the last event's opening line (or holds no
    event). That event, whether the array (and the JSON) closed, and the JSON after the array
    (``baseTimeNanoseconds`` and such), or where the file stopped."""
    trace = b.t
    at = f"{done + len(tail):,} bytes into its JSON{gz}"
    s = tail.find(_OPEN)
    after = tail
    if s != -1:
        e = tail.find(_CLOSE, s + 4)
        ev = _decoded(tail[s + 1 : e + 4]) if e != -1 else None
        if ev is None:
            trace.complete = False
            trace.problems.append(
                f"{name}: the file stops inside an event, {at}; the {trace.events_read:,} events before it were read"
            )
            return
        trace.events_read += 1
        if isinstance(ev, dict):
            b.add(ev)
        after = tail[e + 4 :]
    close = after.find(b"]")
    if close == -1 or after[:close].strip(b" \t\r\n,"):
        trace.complete = False
        trace.problems.append(
            f"{name}: the file stops after {trace.events_read:,} events, {at}, before the event array closes"
        )
        return
    try:
        _header(trace, orjson.loads(b'{"traceEvents": []' + after[close + 1 :]))
    except orjson.JSONDecodeError:
        trace.complete = False
        trace.problems.append(
            f"{name}: the JSON after the event array is cut or malformed, {at}; all {trace.events_read:,} events were read"
        )
        return
    if gz:
        trace.complete = False
        trace.problems.append(f"{name}: the gzip stream is damaged after the JSON's end{gz}")


def _decoded(event: bytes) -> object | None:
    try:
        return orjson.loads(event)
    except orjson.JSONDecodeError:
        return None


def _read_whole(name: str, head: bytes, stream: Any, b: _Builder, reason: str) -> RankTrace:
    """A file not in Kineto's layout: parsed whole (its size in memory), then its events kept."""
    trace = b.t
    trace.layout = "whole"
    trace.notes.append(f"read whole, not event by event: {reason}")
    data = head + stream.read()
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        if not data.lstrip()[:1] == b"{":
            raise TraceError(f"{name}: not a Chrome trace (not a JSON object{_gz_note(stream)})") from None
        trace.complete = False
        trace.problems.append(
            f"{name}: not valid JSON ({e}){_gz_note(stream)}, and not in Kineto's layout: no event could be read"
        )
        return b.finish()
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceError(f"{name}: not a Chrome trace (no traceEvents list)")
    _header(trace, doc)
    events = doc["traceEvents"]
    trace.events_read = len(events)
    for ev in events:
        if isinstance(ev, dict):
            b.add(ev)
    gz = _gz_note(stream)
    if gz:
        trace.complete = False
        trace.problems.append(f"{name}: the gzip stream is damaged after the JSON's end{gz}")
    return b.finish()


# -- many files ------------------------------------------------------------------------------


def _read_batch(paths: list[str], host_ops: bool = False) -> list[RankTrace | TraceError]:
    """On a worker: each file read, or the :class:`TraceError` it raised."""
    out: list[RankTrace | TraceError] = []
    for p in paths:
        try:
            out.append(read_trace(p, host_ops))
        except TraceError as e:
            out.append(e)
    return out


def _batches(files: list[Path], n: int) -> list[list[str]]:
    size = max(1, min(64, -(-len(files) // max(1, n))))
    return [[os.fspath(f) for f in files[i : i + size]] for i in range(0, len(files), size)]


def read_traces(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    jobs: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    *,
    dask: str | None = None,
    host_ops: bool = False,
) -> list[RankTrace]:
    """Read every trace PATHs name (:func:`find_trace_files`), sorted by rank (a rank of None
    last, then by path).

    ``jobs``: worker processes (default: the machine's cores; 1 reads here, in this process).
    ``progress(done_files, total_files)`` is called as files are read. ``dask``: a Dask
    scheduler's address (``tcp://HOST:8786``): the files are read on its workers, which must see
    them at the same absolute paths (:mod:`tracekit.read.dask_reader`'s pattern;
    :class:`tracekit.read.dask_reader.DaskReadError` when the cluster cannot be used).
    ``host_ops``: keep the CPU matmuls and copies (:func:`read_trace`; not on Dask).
    Raises :class:`TraceError` for the first file (in PATH order) that cannot be read.

    >>> [t.rank for t in read_traces(["fixtures/traces/nccl_2gpu"], jobs=1)]
    [0]
    """
    files = find_trace_files(paths)
    if dask is not None:
        got = _read_on_dask(files, dask, progress)
    else:
        got = list(_read_local(files, jobs, progress, host_ops))
    for r in got:
        if isinstance(r, TraceError):
            raise r
    traces = [r for r in got if isinstance(r, RankTrace)]
    traces.sort(key=lambda t: (t.rank is None, t.rank if t.rank is not None else 0, t.path))
    return traces


def require_events(traces: list[RankTrace]) -> list[RankTrace]:
    """``traces`` when one of them holds an event; else :class:`TraceError` saying why (each
    file's first problem): no profiler trace could be read."""
    if not any(t.events_read for t in traces):
        why = "; ".join(p for t in traces for p in t.problems[:1]) or "no events"
        raise TraceError(f"no profiler trace could be read: {why}")
    return traces


def _read_local(
    files: list[Path], jobs: int | None, progress: Callable[[int, int], None] | None, host_ops: bool = False
) -> Iterator[RankTrace | TraceError]:
    from concurrent.futures import ProcessPoolExecutor
    from functools import partial

    from tracekit.read.segments import default_jobs

    jobs = default_jobs() if jobs is None else max(1, int(jobs))
    total = len(files)
    if jobs == 1 or total <= 1:
        for i, f in enumerate(files):
            yield from _read_batch([os.fspath(f)], host_ops)
            if progress is not None:
                progress(i + 1, total)
        return
    batches = _batches(files, jobs * 4)
    pool = ProcessPoolExecutor(min(jobs, len(batches)), mp_context=fork_context(), initializer=ignore_sigint)
    interrupted = True
    try:
        done = 0
        for batch, part in zip(
            batches, pool.map(partial(_read_batch, host_ops=host_ops), batches), strict=True
        ):
            done += len(batch)
            if progress is not None:
                progress(done, total)
            yield from part
        interrupted = False
    finally:
        end_pool(pool, kill=interrupted)


def _read_on_dask(
    files: list[Path], address: str, progress: Callable[[int, int], None] | None
) -> list[RankTrace | TraceError]:
    """The files read on the workers of the Dask scheduler at ``address``, in order, as
    :func:`tracekit.read.dask_reader.load_with_dask` reads logs: batches of absolute paths,
    gathered as they finish, results named as the caller named the files."""
    import time

    from tracekit.read.dask_reader import (
        BATCHES_PER_THREAD,
        CONNECT_TIMEOUT_S,
        DaskReadError,
        bounded,
        check_address,
        connect,
        gathered,
        require_distributed,
    )

    address = check_address(address)
    started = time.monotonic()
    require_distributed()

    wait = CONNECT_TIMEOUT_S
    client = connect(address, wait, started)
    try:
        try:
            bounded(lambda: client.wait_for_workers(1, timeout=wait), wait + 1)
        except Exception:  # noqa: BLE001 - no worker joined, however distributed says it
            raise DaskReadError(
                f"the Dask scheduler at {address} has no workers (none joined within {wait:g} s)"
            ) from None
        threads = sum(client.nthreads().values()) or 1
        sent = _batches([Path(os.path.abspath(f)) for f in files], threads * BATCHES_PER_THREAD)
        futures = client.map(_read_batch, sent, pure=False)
        results: list[list[RankTrace | TraceError]] = gathered(
            futures, client, [len(batch) for batch in sent], len(files), progress, "traces"
        )
    finally:
        client.close()
    out = [r for batch in results for r in batch]
    for r, f in zip(out, files, strict=True):  # named as the caller named them
        if isinstance(r, RankTrace) and r.path != os.fspath(f):
            r.problems = [p.replace(r.path, os.fspath(f), 1) for p in r.problems]
            r.path = os.fspath(f)
    return out


__all__ = [
    "DTYPE_BYTES",
    "TraceError",
    "collective_kind",
    "find_trace_files",
    "holds_trace",
    "rank_from_trace_name",
    "read_trace",
    "read_traces",
    "require_events",
]
