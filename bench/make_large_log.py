#!/usr/bin/env python
"""Build a large TORCH_TRACE log for benchmarks from the real fixture logs.

    python bench/make_large_log.py --size 100MB --out /tmp/big.log
    python bench/make_large_log.py --size 4GB --out /tmp/huge.log --source fixtures/logs/diverge_rank

The output is the source log's entries repeated until the file reaches ``--size``, each repetition
with its own compile ids: the ``frame_id`` of every envelope is shifted by ``copy * span`` (span:
the largest frame id of the sources + 1), so copy 0 holds ``0/0``, copy 1 ``1/0``, ... as if one
long job had compiled that many frames. ``frame_compile_id`` and ``attempt`` are kept, so
recompiles stay recompiles. Payloads are copied byte for byte, so every ``has_payload`` MD5 stays
valid. The file's first entries that have no ``frame_id`` (``torch_version``, intern-table
``str`` entries before the first compile) are written once, at the top.

``--per-rank`` makes one large log per rank log of a source directory (same file names), for
multi-rank benchmarks: ``--source fixtures/logs/spmd_auto --per-rank --out /tmp/big_run``.
Several ``--source`` are used in turn, one per copy (``.gz`` sources are read too).

Speed and memory: the sources are read once and cut into constant pieces around the frame-id
digits; a copy is one ``bytes.join`` of those pieces with fresh numbers, written through a large
buffer. Memory is the size of the sources plus one copy, whatever ``--size`` is.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = ROOT / "fixtures" / "logs" / "spmd_auto"

_UNITS = {
    "": 1,
    "B": 1,
    "K": 1024,
    "KB": 1024,
    "KIB": 1024,
    "M": 1024**2,
    "MB": 1024**2,
    "MIB": 1024**2,
    "G": 1024**3,
    "GB": 1024**3,
    "GIB": 1024**3,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")
_FRAME_ID_RE = re.compile(rb'"frame_id": (\d+)')
_TORCH_VERSION = b'{"artifact": {"name": "torch_version"'
_ENVELOPE_RE = re.compile(rb"[VIWEC]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} \d+ [^:\n]+:\d+\] ")


def parse_size(text: str) -> int:
    """``"100MB"`` -> bytes; units K/M/G (powers of 1024, ``B``/``iB`` suffix optional)."""
    m = _SIZE_RE.match(text)
    unit = m.group(2).upper() if m else None
    if m is None or unit not in _UNITS:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (try 100MB, 2GB)")
    return int(float(m.group(1)) * _UNITS[unit])


@dataclass
class Template:
    """One source log cut for fast repetition.

    ``header``: the ``torch_version`` entry (written once, at the top).
    ``pieces``: the constant bytes of the rest, between the frame-id numbers.
    ``frame_ids``: the original frame id at each cut (``len(pieces) == len(frame_ids) + 1``).
    """

    name: str
    header: bytes
    pieces: list[bytes]
    frame_ids: list[int]

    def copy(self, offset: int) -> bytes:
        """The body once, with every frame id shifted by ``offset``."""
        parts = [self.pieces[0]]
        for fid, piece in zip(self.frame_ids, self.pieces[1:], strict=True):
            parts.append(b"%d" % (fid + offset))
            parts.append(piece)
        return b"".join(parts)


def _read_bytes(path: Path) -> bytes:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        return f.read()


def _entries(data: bytes):
    """Yield (start, end) of each entry: a non-tab line and the tab / blank lines after it."""
    start = 0
    pos = 0
    n = len(data)
    while pos < n:
        end = data.index(b"\n", pos) + 1
        if pos > start and data[pos : pos + 1] not in (b"\t", b"\n"):
            yield start, pos
            start = pos
        pos = end
    if start < n:
        yield start, n


def cut_template(path: Path) -> Template:
    """Cut one log around the frame id of every envelope line (payload lines are left alone).

    The ``torch_version`` entry (no frame id, once per file) goes to the header; every other
    entry, with or without a frame id, is part of the repeated body.
    """
    data = _read_bytes(path)
    if data and not data.endswith(b"\n"):
        data += b"\n"
    header = b""
    pieces: list[bytes] = []
    frame_ids: list[int] = []
    body: list[bytes] = []  # constant bytes since the last cut
    for start, stop in _entries(data):
        line_end = data.index(b"\n", start) + 1
        prefix = _ENVELOPE_RE.match(data, start, line_end)
        m = _FRAME_ID_RE.search(data, prefix.end(), line_end) if prefix else None
        if m is not None and _frame_id_is_key(data[prefix.end() : line_end], int(m.group(1))):
            body.append(data[start : m.start(1)])
            pieces.append(b"".join(body))
            frame_ids.append(int(m.group(1)))
            body = [data[m.end(1) : stop]]
        elif prefix and not header and data.startswith(_TORCH_VERSION, prefix.end()):
            header = data[start:stop]
        else:
            body.append(data[start:stop])
    if not frame_ids:
        raise SystemExit(f"{path}: no envelope with a frame_id")
    pieces.append(b"".join(body))
    return Template(str(path), header, pieces, frame_ids)


def _frame_id_is_key(envelope_json: bytes, frame_id: int) -> bool:
    """The regex hit is the envelope's own ``frame_id`` key, not text inside a value."""
    try:
        obj = json.loads(envelope_json)
    except ValueError:
        return False
    return isinstance(obj, dict) and obj.get("frame_id") == frame_id


def source_files(sources: list[Path], first_rank_only: bool = True) -> list[Path]:
    """The log files named: a file as is; a directory, its first rank's log (or all of them)."""
    files: list[Path] = []
    for src in sources:
        if src.is_dir():
            found = sorted(
                p
                for p in src.iterdir()
                if p.name.startswith("dedicated_log_torch_trace")
                and (p.suffix == ".log" or p.name.endswith(".log.gz"))
            )
            if not found:
                raise SystemExit(f"{src}: no dedicated_log_torch_trace*.log files")
            files += found[:1] if first_rank_only else found
        elif src.is_file():
            files.append(src)
        else:
            raise SystemExit(f"{src}: no such file or directory")
    return files


def make_large_log(sources: list[Path], out: Path, size: int) -> tuple[int, int]:
    """Write at least ``size`` bytes (whole copies) to ``out``; return (bytes, copies).

    Several sources are used in turn, one per copy (a directory stands for its first rank's
    log). Sources of different ranks give a file holding several ranks' entries, which readers
    that take a file's rank from its first entry (tracekit, tlparse) count as other-rank lines.
    """
    templates = [cut_template(p) for p in source_files(sources)]
    span = 1 + max(max(t.frame_ids) for t in templates)
    written = 0
    copies = 0
    with open(out, "wb", buffering=8 << 20) as f:
        f.write(templates[0].header)
        written += len(templates[0].header)
        while written < size:
            body = templates[copies % len(templates)].copy(copies * span)
            f.write(body)
            written += len(body)
            copies += 1
    return written, copies


def make_large_rank_logs(source_dir: Path, out_dir: Path, size: int) -> list[tuple[Path, int, int]]:
    """One large log per rank log of ``source_dir``, same file names, in ``out_dir``.

    Returns (path, bytes, copies) per file; every rank gets the same compile ids, as a job does.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    done = []
    for src in source_files([source_dir], first_rank_only=False):
        target = out_dir / src.name.removesuffix(".gz")
        written, copies = make_large_log([src], target, size)
        done.append((target, written, copies))
    return done


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Build a large TORCH_TRACE log from the real fixture logs, repeating their "
        "entries with distinct compile ids (payloads and MD5s kept)."
    )
    parser.add_argument(
        "--size",
        type=parse_size,
        default=parse_size("100MB"),
        help="target size of each log, e.g. 100MB, 2GB (powers of 1024; default 100MB)",
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="output log file (with --per-rank: output directory)"
    )
    parser.add_argument(
        "--source",
        type=Path,
        action="append",
        help="source log file or directory of rank logs (repeatable, used in turn; "
        "a directory means its first rank's log; default: fixtures/logs/spmd_auto)",
    )
    parser.add_argument(
        "--per-rank",
        action="store_true",
        help="one large log per rank log of the (single, directory) --source, into --out",
    )
    args = parser.parse_args(argv)
    sources = args.source or [DEFAULT_SOURCE]
    start = time.monotonic()
    if args.per_rank:
        if len(sources) != 1 or not sources[0].is_dir():
            parser.error("--per-rank takes one --source directory")
        results = make_large_rank_logs(sources[0], args.out, args.size)
    else:
        results = [(args.out, *make_large_log(sources, args.out, args.size))]
    secs = time.monotonic() - start
    total = sum(w for _, w, _ in results)
    for path, written, copies in results:
        print(
            f"wrote {path}: {written / 2**20:.1f} MiB, {copies} copies (compile ids 0/* .. {copies - 1}/*)",
            file=sys.stderr,
        )
    print(
        f"{total / 2**20:.1f} MiB in {secs:.1f} s ({total / 2**20 / max(secs, 1e-9):.0f} MiB/s)",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
