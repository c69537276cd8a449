"""Finding and opening log files: a file, a ``.gz`` file, a directory of rank logs, several PATHs.

- A file is read as is; gzip is recognised by its magic bytes, whatever its name.
- A directory contributes the logs directly inside it (one level, not recursive):
  ``dedicated_log_torch_trace_rank_N_*.log[.gz]`` first, by rank, then other
  ``dedicated_log_torch_trace_*.log[.gz]``; if it holds none of those, any ``*.log[.gz]``.
- A path that does not exist, or a directory without logs, is a diagnostic
  (``unreadable_file``, ``no_log_files``), never an exception.
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from dataclasses import dataclass
from typing import IO

from tracekit.model import Diagnostics

_RANK_FILE_RE = re.compile(r"dedicated_log_torch_trace_rank_(\d+)_.*\.log(\.gz)?$")
_TRACE_FILE_RE = re.compile(r"dedicated_log_torch_trace_.*\.log(\.gz)?$")
_ANY_LOG_RE = re.compile(r".*\.log(\.gz)?$")
GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class LogFile:
    path: str
    size: int  # bytes on disk (compressed size for .gz), for progress
    rank_hint: int | None  # the N of ``..._rank_N_...`` in the name, if any


def rank_from_name(path: str) -> int | None:
    m = _RANK_FILE_RE.search(os.path.basename(path))
    return int(m.group(1)) if m else None


def _dir_logs(directory: str) -> list[str]:
    try:
        names = sorted(n for n in os.listdir(directory) if os.path.isfile(os.path.join(directory, n)))
    except OSError:
        return []
    ranked = [n for n in names if _RANK_FILE_RE.search(n)]
    ranked.sort(key=lambda n: (rank_from_name(n), n))
    other = [n for n in names if _TRACE_FILE_RE.search(n) and n not in ranked]
    chosen = ranked + other or [n for n in names if _ANY_LOG_RE.match(n)]
    return [os.path.join(directory, n) for n in chosen]


def find_logs(paths: list[str] | tuple[str, ...] | str, diagnostics: Diagnostics) -> list[LogFile]:
    """Expand PATHs into the log files to read, in order, each file once."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[LogFile] = []
    seen: set[str] = set()
    for p in paths:
        p = os.fspath(p)
        if os.path.isdir(p):
            files = _dir_logs(p)
            if not files:
                diagnostics.add("no_log_files", p, 0, "directory holds no .log or .log.gz file")
        elif os.path.exists(p):
            files = [p]
        else:
            diagnostics.add("unreadable_file", p, 0, "no such file or directory")
            files = []
        for f in files:
            key = os.path.realpath(f)
            if key in seen:
                continue
            seen.add(key)
            try:
                size = os.path.getsize(f)
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
        magic = raw.read(2)
        raw.seek(0)
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
        self._gz = gzip.GzipFile(fileobj=raw, mode="rb")
        self.error: str | None = None

    def read(self, n: int = -1) -> bytes:
        if self.error is not None:
            return b""
        out: list[bytes] = []
        got = 0
        while n < 0 or got < n:
            try:
                piece = self._gz.read(self.PIECE if n < 0 else min(self.PIECE, n - got))
            except (EOFError, OSError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
                self.error = str(e) or type(e).__name__
                break
            if not piece:
                break
            out.append(piece)
            got += len(piece)
        return b"".join(out)

    def close(self) -> None:
        self._gz.close()
