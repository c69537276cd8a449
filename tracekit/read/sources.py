"""Finding and opening log files: a file, a ``.gz`` file, a directory of rank logs, several PATHs.

- A file is read as is; gzip is recognised by its magic bytes, whatever its name.
- A directory contributes the logs directly inside it (one level, not recursive):
  ``dedicated_log_torch_trace_rank_N_*.log[.gz]`` first, by rank, then other
  ``dedicated_log_torch_trace_*.log[.gz]``, then any other file that holds log entries
  (:func:`holds_entries`: files are known by their content, not their name); if it holds none
  of those, any ``*.log[.gz]``. The other files are listed as no log (``skipped``).
- A path that does not exist, or a directory without logs, is a diagnostic
  (``unreadable_file``, ``no_log_files``), never an exception.
- Entries named like trace logs that are not regular files (dangling symlinks, symlink loops,
  directories, FIFOs), and a PATH that is a FIFO or a device, are ``unreadable_file``
  diagnostics and are never opened (opening a FIFO blocks until someone writes to it).
- Two files of one rank are compared byte by byte (:func:`same_log`): a copy of a rank's log,
  plain or ``.gz``, whole or cut short, is read once.
"""

from __future__ import annotations

import errno
import filecmp
import io
import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO

from tracekit.model import Diagnostics
from tracekit.model.rankset import MAX_RANK

#: ``dedicated_log_torch_trace_rank_N_SUFFIX.log``, or ``..._rank_N.log`` (no suffix), maybe ``.gz``.
_RANK_FILE_RE = re.compile(r"dedicated_log_torch_trace_rank_(\d+)(?:_[^/]*)?\.log(\.gz)?$")
_TRACE_FILE_RE = re.compile(r"dedicated_log_torch_trace_.*\.log(\.gz)?$")
_ANY_LOG_RE = re.compile(r".*\.log(\.gz)?$")
GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True, slots=True)
class LogFile:
    """A log file to read (100,000 rank logs are as many of these, so slots: no ``__dict__``)."""

    path: str
    size: int  # bytes on disk (compressed size for .gz), for progress
    rank_hint: int | None  # the N of ``..._rank_N_...`` in the name, if any

    def __reduce__(self):  # sent to a Dask worker with every file: a tuple, not the slots' state
        return LogFile, (self.path, self.size, self.rank_hint)


def rank_from_name(path: str) -> int | None:
    """The N of ``..._rank_N[_SUFFIX].log[.gz]`` (None when absent or not a plausible rank)."""
    m = _RANK_FILE_RE.search(os.path.basename(path))
    return None if m is None else _plausible(m.group(1))


def _plausible(digits: str) -> int | None:
    """The rank a name's digits give, or None when they are not a plausible rank."""
    return int(digits) if len(digits) < 8 and int(digits) < MAX_RANK else None


def _not_a_file(path: str) -> str:
    """Why a path named like a log is not read (it is never opened)."""
    try:
        st = os.stat(path)
    except OSError as e:
        if os.path.islink(path):
            return "symlink loop" if e.errno == errno.ELOOP else f"dangling symlink to {os.readlink(path)!r}"
        return e.strerror or str(e)
    if stat.S_ISDIR(st.st_mode):
        return "a directory, not a log file"
    if stat.S_ISFIFO(st.st_mode):
        return "a FIFO, not read (it could block)"
    return "not a regular file"


#: A glog-prefixed JSON envelope line, as torch's structured log writes each entry's first line.
_ENVELOPE_LINE_RE = re.compile(rb"(?m)^[VIWEC]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} \d+ [^:\n]+:\d+\] \{")
#: How much of a file (decompressed) :func:`holds_entries` looks at.
SNIFF_BYTES = 64 << 10


def holds_entries(path: str) -> bool:
    """Whether a file (plain or gzip) holds a log entry: an envelope line in its first
    :data:`SNIFF_BYTES` bytes. Unreadable files hold none."""
    try:
        stream, raw = open_log(path)
        try:
            head = stream.read(SNIFF_BYTES)
        finally:
            stream.close()
            raw.close()
    except (OSError, EOFError, ValueError):
        return False
    return _ENVELOPE_LINE_RE.search(head) is not None


def _dir_names(
    directory: str,
    diagnostics: Diagnostics | None = None,
    skipped: list[str] | None = None,
    subdirs: list[str] | None = None,
) -> tuple[list[tuple[str, int | None]], set[str]]:
    """The names of a directory's log files, in reading order, each with the rank its name
    gives (:func:`rank_from_name`), and those of them that are symlinks (or may be). One
    ``scandir``, no ``stat`` (the entries' types tell regular files apart), one regex search a
    name, and only names are kept, never the entries: 100,000 ranks are 100,000 files, and
    what is made here while they are listed must stay small next to what reading them keeps.
    Files not named like trace logs are opened to see whether they hold entries
    (:func:`holds_entries`); ``skipped`` gets the paths of those that hold none, ``subdirs``
    the directory's subdirectories (one level is read: they are not; hidden ones and links to
    directories, which can loop, left out)."""
    regular: list[str] = []
    links: set[str] = set()
    odd: list[tuple[str, str]] = []  # (name, path) named like a trace log, not a regular file
    try:
        with os.scandir(directory) as it:
            for e in it:
                if _is_file(e):
                    regular.append(e.name)
                    if _is_link(e):
                        links.add(e.name)
                elif diagnostics is not None and _TRACE_FILE_RE.search(e.name):
                    odd.append((e.name, e.path))
                elif subdirs is not None and not e.name.startswith(".") and _is_dir(e) and not _is_link(e):
                    subdirs.append(e.path)
    except OSError:
        return [], set()
    ranked: list[tuple[int, str, int | None]] = []  # (rank in the name, name, rank hint)
    other: list[str] = []
    for n in regular:
        m = _RANK_FILE_RE.search(n)
        if m is not None:
            digits = m.group(1)
            ranked.append((int(digits), n, _plausible(digits)))
        elif _TRACE_FILE_RE.search(n):
            other.append(n)
    ranked.sort()  # by rank, then by name (names are distinct: the hints are never compared)
    other.sort()
    named = {n for _r, n, _h in ranked} | set(other)
    rest = sorted(n for n in regular if n not in named)
    # files are known by their content: any other file that holds log entries is read too
    # (a rank log renamed node2.log); the rest are no log, and said (``skipped``)
    by_content = [n for n in rest if holds_entries(os.path.join(directory, n))]
    chosen = [(n, hint) for _r, n, hint in ranked] + [(n, None) for n in other + by_content]
    if not chosen:
        chosen = [(n, None) for n in rest if _ANY_LOG_RE.match(n)]
    if skipped is not None:
        read = {n for n, _h in chosen}
        skipped.extend(os.path.join(directory, n) for n in rest if n not in read)
    # entries named like trace logs that are not regular files: dangling symlinks, symlink
    # loops, directories, FIFOs (reported, never opened)
    for _name, path in sorted(odd):  # none without diagnostics (above)
        assert diagnostics is not None
        diagnostics.add("unreadable_file", path, 0, _not_a_file(path))
    return chosen, links


def _dir_files(
    directory: str, names: list[tuple[str, int | None]], links: set[str]
) -> Iterator[tuple[str, str | None, int | None]]:
    """``(path, real path, rank hint)`` of each named file of ``directory`` (the real path None
    for a symlink: it is resolved by the caller). A file that is not a symlink is its real
    directory's + its name: its path itself when the directory is given as its real path, so
    no second string is made for each of 100,000 files."""
    real_dir = os.path.realpath(directory)
    base, real_base = os.path.join(directory, ""), os.path.join(real_dir, "")
    as_given = base == real_base
    for n, hint in names:
        f = base + n  # os.path.join of a plain name, without its checks 100,000 times
        yield f, None if n in links else f if as_given else real_base + n, hint


def _is_file(entry: os.DirEntry) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _is_link(entry: os.DirEntry) -> bool:
    try:
        return entry.is_symlink()
    except OSError:
        return True  # resolved the slow way


def _no_logs_detail(directory: str) -> str:
    """Why a directory gave no logs, naming subdirectories that do hold some (one level is read:
    a folder of runs is given run by run)."""
    try:
        subdirs = sorted(n for n in os.listdir(directory) if os.path.isdir(os.path.join(directory, n)))
    except OSError:
        subdirs = []
    with_logs = [n for n in subdirs if _dir_names(os.path.join(directory, n))[0]]
    if not with_logs:
        return "directory holds no .log or .log.gz file"
    shown = ", ".join(with_logs[:5]) + (", ..." if len(with_logs) > 5 else "")
    return f"directory holds no .log or .log.gz file; its subdirectories {shown} do: pass them"


def find_logs(paths: list[str] | tuple[str, ...] | str, diagnostics: Diagnostics) -> list[LogFile]:
    """Expand PATHs into the log files to read, in order, each file once."""
    return sized(find_log_names(paths, diagnostics))


def sized(names: Iterable[tuple[str, int | None]]) -> list[LogFile]:
    """The files of ``(path, rank hint)`` names (:func:`find_log_names`), each with its size."""
    return [LogFile(path, listed_size(path), hint) for path, hint in names]


def listed_size(path: str) -> int:
    """A file's size for the reading plan and progress (0 when it cannot be stat'ed: reading
    it then says why)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def find_log_names(
    paths: list[str] | tuple[str, ...] | str,
    diagnostics: Diagnostics,
    skipped: list[str] | None = None,
    subdirs: list[str] | None = None,
) -> list[tuple[str, int | None]]:
    """:func:`find_logs` before the files' sizes: ``(path, rank hint)`` of each file to read,
    in order, each once (a directory's 100,000 files are listed without a ``stat`` each).
    ``skipped``: gets the directories' files that hold no log entry (not read); ``subdirs``:
    the subdirectories of the directories given that hold logs (not read: one level is)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[tuple[str, int | None]] = []
    seen: set[str] = set()  # real paths
    for p in paths:
        p = os.fspath(p)
        if os.path.isdir(p):
            inside: list[str] = []
            names, links = _dir_names(p, diagnostics, skipped, inside)
            if not names:
                diagnostics.add("no_log_files", p, 0, _no_logs_detail(p))
            elif subdirs is not None:  # beside logs: said in World when they hold logs too
                subdirs.extend(d for d in sorted(inside) if _dir_names(d)[0])
            files: Iterable[tuple[str, str | None, int | None]] = _dir_files(p, names, links)
        elif os.path.isfile(p):
            files = [(p, None, rank_from_name(p))]
        elif os.path.exists(p) or os.path.islink(p):  # a FIFO (open could block), a device...
            diagnostics.add("unreadable_file", p, 0, _not_a_file(p))
            files = []
        else:
            diagnostics.add("unreadable_file", p, 0, "no such file or directory")
            files = []
        for f, key, hint in files:
            key = key or os.path.realpath(f)
            if key in seen:
                continue
            seen.add(key)
            out.append((f, hint))
    return out


#: A file listed at most this size is read whole, in one ``read``, by :func:`open_log`.
WHOLE_READ_MAX = 64 << 10


def open_log(path: str, size: int | None = None) -> tuple[IO[bytes] | TolerantGzip, IO[bytes]]:
    """Open a log for binary reading, through gzip when it starts with the gzip magic.

    Returns ``(stream, raw)``: read from ``stream``; ``raw.tell()`` is the position on disk
    (progress). Raises ``OSError`` when the file cannot be opened (or its first read fails).

    ``size``: the file's size when it was listed. A small file (up to :data:`WHOLE_READ_MAX`:
    a rank log of a job's small ranks, 100,000 of them) is read whole at once, with three
    system calls (open, read, close) and no buffered file object, and served from memory; a
    file that grew since it was listed is read to its end all the same.
    """
    if size is not None and size <= WHOLE_READ_MAX:
        fd = os.open(path, os.O_RDONLY)
        try:
            data = os.read(fd, size + 1)
            if len(data) > size:  # it grew: read on to the end
                data += b"".join(iter(lambda: os.read(fd, 1 << 20), b""))
        finally:
            os.close(fd)
        return memory_log(data)
    raw = open(path, "rb")  # noqa: SIM115 - closed by the caller
    try:
        magic = raw.peek(2)[:2]  # no read and seek back: the bytes stay in the buffer
    except OSError:
        raw.close()
        raise
    if magic == GZIP_MAGIC:
        return TolerantGzip(raw), raw
    return raw, raw


def memory_log(data: bytes) -> tuple[IO[bytes] | TolerantGzip, IO[bytes]]:
    """:func:`open_log` of a file's bytes, already read (through gzip when they start with its
    magic)."""
    mem = io.BytesIO(data)
    return (TolerantGzip(mem) if data[:2] == GZIP_MAGIC else mem), mem


def read_small(path: str, limit: int = WHOLE_READ_MAX) -> tuple[int, bytes | None]:
    """``(size, its bytes)`` of a file of at most ``limit`` bytes, read whole: one ``read``, and
    one more that finds its end (a short read is not always the end); ``(size, None)`` for a
    larger file, its size from ``fstat``, left to be read in pieces. No ``stat`` of the path:
    100,000 small rank logs are read with four system calls each. Raises ``OSError``."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, limit + 1)
        if len(data) <= limit:
            while more := os.read(fd, 1 << 20):
                data += more
        if len(data) > limit:
            return max(os.fstat(fd).st_size, len(data)), None
        return len(data), data
    finally:
        os.close(fd)


class TolerantGzip:
    """A gzip stream that, when the data is corrupt or cut short, returns everything it could
    decompress before the damage, then ends; :attr:`error` says what went wrong."""

    PIECE = 1 << 16

    def __init__(self, raw: IO[bytes]) -> None:
        import gzip  # imported for .gz logs only
        import zlib

        self._gz = gzip.GzipFile(fileobj=raw, mode="rb")
        self._damage = (EOFError, OSError, zlib.error)  # gzip.BadGzipFile is an OSError
        self.error: str | None = None

    def read(self, n: int = -1) -> bytes:
        if self.error is not None:
            return b""
        out: list[bytes] = []
        got = 0
        while n < 0 or got < n:
            try:
                # read1: one decompression step per call, so what was decompressed before
                # the damage is returned (read() would drop its partly filled buffer).
                piece = self._gz.read1(self.PIECE if n < 0 else min(self.PIECE, n - got))
            except self._damage as e:
                self.error = str(e) or type(e).__name__
                break
            if not piece:
                break
            out.append(piece)
            got += len(piece)
        return b"".join(out)

    def close(self) -> None:
        self._gz.close()


def same_log(a: str, b: str) -> str:
    """Whether two files hold the same log (a copy of a rank's log is not another run):
    ``"bytes"`` for the same bytes, ``"content"`` for the same bytes once decompressed (a
    ``.gz`` of the plain log), ``"cut_b"`` when ``b`` holds the start of ``a``'s log and
    nothing else (a copy cut short: a backup that stopped, a ``.gz`` cut mid-stream), ``"cut_a"``
    when ``a`` is such a copy of ``b``, ``""`` otherwise."""
    try:
        if filecmp.cmp(a, b, shallow=False):
            return "bytes"
        return _same_content(a, b)
    except OSError:
        return ""


def _same_content(a: str, b: str) -> str:
    """How two logs compare read through :func:`open_log` (gzip undone),
    1 MiB at a time: ``"content"`` (the same log), ``"cut_a"`` / ``"cut_b"`` (one is a start of
    the other: a copy cut short), ``""`` (they differ)."""
    sa, ra = open_log(a)
    try:
        sb, rb = open_log(b)
        try:
            while True:
                x, y = sa.read(1 << 20), sb.read(1 << 20)
                if x == y:
                    if not x:
                        clean = not getattr(sa, "error", None) and not getattr(sb, "error", None)
                        return "content" if clean and not (sa is ra and sb is rb) else ""
                    continue
                # one ends inside the other: the shorter is a start of the longer, if it ends here
                if x and y.startswith(x) and not sa.read(1):
                    return "cut_a"
                if y and x.startswith(y) and not sb.read(1):
                    return "cut_b"
                return ""
        finally:
            sb.close()
            rb.close()
    finally:
        sa.close()
        ra.close()
