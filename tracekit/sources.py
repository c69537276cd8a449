"""Finding and opening log files: a file, a ``.gz`` file, a directory of rank logs, several PATHs.

- A file is read as is; gzip is recognised by its magic bytes, whatever its name.
- A directory contributes the logs directly inside it (one level, not recursive):
  ``dedicated_log_torch_trace_rank_N_*.log[.gz]`` first, by rank, then other
  ``dedicated_log_torch_trace_*.log[.gz]``; if it holds none of those, any ``*.log[.gz]``.
- A path that does not exist, or a directory without logs, is a diagnostic
  (``unreadable_file``, ``no_log_files``), never an exception.
- Entries named like trace logs that are not regular files (dangling symlinks, symlink loops,
  directories, FIFOs), and a PATH that is a FIFO or a device, are ``unreadable_file``
  diagnostics and are never opened (opening a FIFO blocks until someone writes to it).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass
from typing import IO

from tracekit.model import Diagnostics
from tracekit.rankset import MAX_RANK

#: ``dedicated_log_torch_trace_rank_N_SUFFIX.log``, or ``..._rank_N.log`` (no suffix), maybe ``.gz``.
_RANK_FILE_RE = re.compile(r"dedicated_log_torch_trace_rank_(\d+)(?:_[^/]*)?\.log(\.gz)?$")
_TRACE_FILE_RE = re.compile(r"dedicated_log_torch_trace_.*\.log(\.gz)?$")
_ANY_LOG_RE = re.compile(r".*\.log(\.gz)?$")
GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class LogFile:
    path: str
    size: int  # bytes on disk (compressed size for .gz), for progress
    rank_hint: int | None  # the N of ``..._rank_N_...`` in the name, if any


def rank_from_name(path: str) -> int | None:
    """The N of ``..._rank_N[_SUFFIX].log[.gz]`` (None when absent or not a plausible rank)."""
    m = _RANK_FILE_RE.search(os.path.basename(path))
    return int(m.group(1)) if m and len(m.group(1)) < 8 and int(m.group(1)) < MAX_RANK else None


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


def _dir_entries(directory: str, diagnostics: Diagnostics | None = None) -> list[os.DirEntry]:
    """The log files of a directory, in reading order, as :class:`os.DirEntry` values (one
    ``scandir``: no ``stat`` per file just to tell regular files apart, 100,000 ranks are
    100,000 files)."""
    try:
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return []
    files = [e for e in entries if _is_file(e)]
    ranked = []
    other = []
    for e in files:
        m = _RANK_FILE_RE.search(e.name)
        if m:
            ranked.append((int(m.group(1)), e.name, e))
        elif _TRACE_FILE_RE.search(e.name):
            other.append(e)
    ranked.sort(key=lambda x: x[:2])
    chosen = [e for _, _, e in ranked] + other or [e for e in files if _ANY_LOG_RE.match(e.name)]
    if diagnostics is not None:
        # entries named like trace logs that are not regular files: dangling symlinks, symlink
        # loops, directories, FIFOs (reported, never opened)
        regular = {e.name for e in files}
        for e in entries:
            if _TRACE_FILE_RE.search(e.name) and e.name not in regular:
                diagnostics.add("unreadable_file", e.path, 0, _not_a_file(e.path))
    return chosen


def _is_file(entry: os.DirEntry) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def _is_link(entry: os.DirEntry) -> bool:
    try:
        return entry.is_symlink()
    except OSError:
        return True  # resolved the slow way


def _dir_logs(directory: str, diagnostics: Diagnostics | None = None) -> list[str]:
    return [e.path for e in _dir_entries(directory, diagnostics)]


def _no_logs_detail(directory: str) -> str:
    """Why a directory gave no logs, naming subdirectories that do hold some (one level is read:
    a folder of runs is given run by run)."""
    try:
        subdirs = sorted(n for n in os.listdir(directory) if os.path.isdir(os.path.join(directory, n)))
    except OSError:
        subdirs = []
    with_logs = [n for n in subdirs if _dir_logs(os.path.join(directory, n))]
    if not with_logs:
        return "directory holds no .log or .log.gz file"
    shown = ", ".join(with_logs[:5]) + (", ..." if len(with_logs) > 5 else "")
    return f"directory holds no .log or .log.gz file; its subdirectories {shown} do: pass them"


def find_logs(paths: list[str] | tuple[str, ...] | str, diagnostics: Diagnostics) -> list[LogFile]:
    """Expand PATHs into the log files to read, in order, each file once."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[LogFile] = []
    seen: set[str] = set()
    for p in paths:
        p = os.fspath(p)
        if os.path.isdir(p):
            entries = _dir_entries(p, diagnostics)
            if not entries:
                diagnostics.add("no_log_files", p, 0, _no_logs_detail(p))
            real_dir = os.path.realpath(p)
            # the real path of a file that is not a symlink is its real directory's, + its name
            files = [(e.path, e, None if _is_link(e) else os.path.join(real_dir, e.name))
                     for e in entries]
        elif os.path.isfile(p):
            files = [(p, None, None)]
        elif os.path.exists(p) or os.path.islink(p):  # a FIFO (open could block), a device...
            diagnostics.add("unreadable_file", p, 0, _not_a_file(p))
            files = []
        else:
            diagnostics.add("unreadable_file", p, 0, "no such file or directory")
            files = []
        for f, entry, key in files:
            key = key or os.path.realpath(f)
            if key in seen:
                continue
            seen.add(key)
            try:
                size = entry.stat().st_size if entry is not None else os.path.getsize(f)
            except OSError:
                size = 0
            out.append(LogFile(path=f, size=size, rank_hint=rank_from_name(f)))
    return out


def open_log(path: str) -> tuple[IO[bytes], IO[bytes]]:
    """Open a log for binary reading, through gzip when it starts with the gzip magic.

    Returns ``(stream, raw)``: read from ``stream``; ``raw.tell()`` is the position on disk
    (progress). Raises ``OSError`` when the file cannot be opened.
    """
    raw = open(path, "rb")  # noqa: SIM115 - closed by the caller
    try:
        magic = raw.peek(2)[:2]  # no read and seek back: the bytes stay in the buffer
    except OSError:
        raw.close()
        raise
    if magic == GZIP_MAGIC:
        return TolerantGzip(raw), raw
    return raw, raw


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
