#!/usr/bin/env python
"""Make an N-rank TORCH_TRACE directory from real fixture logs, for tests and benchmarks.

    python bench/make_ranks.py /tmp/run1024 --ranks 1024 --diverge 300,777
    python bench/make_ranks.py /tmp/run8k --ranks 8192 --diverge 300,777 --small
    python bench/make_ranks.py /tmp/cap --ranks 64 --base spmd_small_cap

Every rank's file, ``dedicated_log_torch_trace_rank_{r}_{suffix}.log``, is a real log written by
torch.compile with the ``"rank": K`` of every envelope rewritten to ``r``: by default rank 0 of
``fixtures/logs/spmd_auto`` (``--base`` takes another scenario, a directory or a log file). The
ranks given to ``--diverge`` get rank 3 of ``fixtures/logs/diverge_rank`` instead (it builds two
more FSDP parameters, a 5th layer's weight and scale: forward AG 10->1 instead of 8->1), or the
log given to ``--diverge-source``. ``suffix`` is the random part of the source file's name.

Only envelope lines change: payload lines are copied byte for byte, so every ``has_payload``
MD5 stays valid. (Payloads may name a rank, e.g. ``fx_graph_runnable``'s
``setup_fake_process_groups({'0': {'size': 4, 'rank': 3}})``; they keep the source's, since the
MD5 covers them, and no reader uses them.)

``--small`` keeps only the entries summarize reads, each one whole (envelope and every payload
line), in their order: every entry kind of ``tracekit.read.parsers.SUMMARY_PARSERS`` (``torch_version``,
``dynamo_start``, the ``pre_bucketing_*`` sizes and outcome, the collective schedule and
estimates, cache events, ``tracekit_fsdp_buckets``...) but the graph texts it only counts
(:data:`SMALL_DROP`: ``before_post_grad_graph``, 17 KB each, so ``compiled_graphs`` is 0 in
small logs), plus the ``str`` intern table and the ``fx_bucketing_passes_*`` bucket plans. That is
a real torch log with fewer entries, about 9 KB a rank instead of 0.75 MB, and summarize reads
the same outcomes from it. Dropped: graphs, generated code, guards, metrics, chromium events.

Speed: each source is read and checked once and cut into constant pieces around its envelopes'
rank digits; a rank's file is one ``bytes.join`` of those pieces with its rank number (no JSON
encoding), so 1,024 full ranks (0.75 GB) are written in a few seconds, 100,000 small ones in
seconds more than the file system needs to create them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

if str(Path(__file__).resolve().parent) not in sys.path:  # run as a script, or imported by path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_large_log import _ENVELOPE_RE, _entries, _read_bytes  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "logs"
DEFAULT_BASE = "spmd_auto"
#: The diverging rank: it builds a 5th layer (two more FSDP parameters) than the others.
DEFAULT_DIVERGE = FIXTURES / "diverge_rank"
DEFAULT_DIVERGE_RANK = 3

#: Graph texts summarize only counts, or reads dtypes from (17 KB each): not kept by ``small=True``.
SMALL_DROP = frozenset({"before_post_grad_graph", "tracekit_fsdp_input_graph", "inductor_post_grad_graph"})


def _small_keep() -> tuple[frozenset[str], frozenset[str]]:
    """What ``small=True`` keeps: (entry types, artifact names). Every entry kind summarize
    reads (``tracekit.read.parsers.SUMMARY_PARSERS``) but :data:`SMALL_DROP`, plus the ``str``
    intern table and the bucket plans (``fx_bucketing_passes_*``)."""
    sys.path.insert(0, str(ROOT))
    from tracekit.read.parsers import SUMMARY_PARSERS, by_key

    keys = by_key(SUMMARY_PARSERS)
    types = {t for t, n in keys if t != "artifact"} | {"str"}
    names = {n for t, n in keys if t == "artifact"} - SMALL_DROP
    names |= {"fx_bucketing_passes_all_gather_buckets", "fx_bucketing_passes_reduce_scatter_buckets"}
    return frozenset(types), frozenset(names)


SMALL_KEEP_TYPES, SMALL_KEEP = _small_keep()

_RANK_NAME_RE = re.compile(r"^dedicated_log_torch_trace_rank_(\d+)_(.+?)\.log(?:\.gz)?$")
_RANK_KEY = b'"rank": '
_SENTINEL = 987654321  # an envelope rank no source has: proves each cut is the rank key


@dataclass
class RankTemplate:
    """One source log cut around the digits of its envelopes' ranks.

    ``pieces``: constant bytes; a rank's file is ``pieces[0] + r + pieces[1] + r + ...``.
    ``suffix``: the random part of the source's file name.
    """

    source: str
    suffix: str
    pieces: list[bytes]

    def render(self, rank: int) -> bytes:
        return (b"%d" % rank).join(self.pieces)

    @property
    def ranked_envelopes(self) -> int:
        return len(self.pieces) - 1


def _entry_kind(obj: dict) -> str | None:
    """The entry's type, or its artifact name for artifacts."""
    etype = next(iter(obj), None)
    if etype == "artifact" and isinstance(obj["artifact"], dict):
        return obj["artifact"].get("name")
    return etype


def _kept_small(obj: dict | None) -> bool:
    if obj is None:
        return False
    etype = next(iter(obj), None)
    return (
        etype in SMALL_KEEP_TYPES
        or (etype == "artifact" and _entry_kind(obj) in SMALL_KEEP)
        or (etype in CLOSING and obj[etype] == {"small": True})
    )


#: The entries torch ends a compile with: a log's last entry is one (a log that ends otherwise
#: stops inside a compile, and reads as cut: tracekit.read.envelopes._open_end).
CLOSING = ("compilation_metrics", "bwd_compilation_metrics")


def _closing_kept_small(data: bytes) -> bytes:
    """``data`` with its last entry, when it ends a compile, made small (its metrics, 40 KB of
    configs and tracebacks, replaced by ``{"small": true}``, its reserved keys kept), so that a
    small log ends where torch's does; the other metrics entries are dropped as before."""
    last = None
    for start, stop in _entries(data):
        last = (start, stop)
    if last is None:
        return data
    start, stop = last
    line_end = data.index(b"\n", start)
    prefix = _ENVELOPE_RE.match(data, start, line_end)
    if prefix is None:
        return data
    try:
        obj = json.loads(data[prefix.end() : line_end])
    except ValueError:
        return data
    etype = next(iter(obj), None) if isinstance(obj, dict) else None
    if etype not in CLOSING:
        return data
    small = {etype: {"small": True}, **{k: v for k, v in obj.items() if k != etype}}
    return data[: prefix.end()] + json.dumps(small).encode() + b"\n" + data[stop:]


def cut(path: Path, small: bool = False) -> RankTemplate:
    """Read one log (plain or gzip) and cut it around its envelopes' rank digits.

    ``small``: keep only the entries :data:`SMALL_KEEP_TYPES` / :data:`SMALL_KEEP` name.
    Raises ``ValueError`` when an envelope's rank key cannot be told apart from its other text.
    """
    data = _read_bytes(path)
    if data and not data.endswith(b"\n"):
        data += b"\n"
    if small:
        data = _closing_kept_small(data)
    pieces: list[bytes] = []
    body: list[bytes] = []  # constant bytes since the last cut
    for start, stop in _entries(data):
        line_end = data.index(b"\n", start)
        prefix = _ENVELOPE_RE.match(data, start, line_end)
        obj = None
        if prefix is not None:
            try:
                obj = json.loads(data[prefix.end() : line_end])
            except ValueError:
                obj = None
        if not isinstance(obj, dict):
            obj = None
        if small and not _kept_small(obj):
            continue
        rank = None if obj is None else obj.get("rank")
        if type(rank) is not int:
            body.append(data[start:stop])
            continue
        # torch writes the reserved keys (rank among them) after the entry's own metadata
        key = data.rfind(_RANK_KEY, prefix.end(), line_end)
        digits = key + len(_RANK_KEY)
        if key < 0 or data[digits:line_end].split(b",", 1)[0].rstrip(b"}") != b"%d" % rank:
            raise ValueError(f"{path}: line at byte {start}: rank {rank} not found as the last rank key")
        end = digits + len(b"%d" % rank)
        probe = data[prefix.end() : digits] + b"%d" % _SENTINEL + data[end:line_end]
        if json.loads(probe) != {**obj, "rank": _SENTINEL}:
            raise ValueError(f"{path}: line at byte {start}: the last rank key is not the envelope's")
        body.append(data[start:digits])
        pieces.append(b"".join(body))
        body = [data[end:stop]]
    pieces.append(b"".join(body))
    m = _RANK_NAME_RE.match(path.name)
    return RankTemplate(str(path), m.group(2) if m else "bench", pieces)


def rank_log(source: str | Path, rank: int | None = None) -> Path:
    """A log file: ``source`` itself, a fixture scenario name or a directory's log of ``rank``
    (default: its lowest rank)."""
    p = Path(source)
    if not p.exists() and (FIXTURES / str(source)).is_dir():
        p = FIXTURES / str(source)
    if p.is_file():
        return p
    if not p.is_dir():
        raise FileNotFoundError(f"{source}: no such log, directory or fixture scenario")
    found = []
    for f in p.iterdir():
        m = _RANK_NAME_RE.match(f.name)
        if m and f.is_file():
            found.append((int(m.group(1)), f))
    if rank is not None:
        found = [x for x in found if x[0] == rank]
    if not found:
        raise FileNotFoundError(
            f"{p}: no dedicated_log_torch_trace_rank_{rank if rank is not None else 'N'}_*.log"
        )
    return min(found)[1]


@dataclass
class Made:
    """What :func:`make_ranks` wrote."""

    out_dir: Path
    ranks: int
    diverged: list[int]
    bytes: int


def make_ranks(
    out_dir: str | Path,
    n: int,
    *,
    base: str | Path = DEFAULT_BASE,
    diverge: dict[int, str | Path] | None = None,
    small: bool = False,
) -> Made:
    """Write ``n`` rank logs (ranks ``0..n-1``) into ``out_dir`` (created; must hold no log yet).

    ``base``: the log every rank is made from (a file, a directory's lowest rank, or a fixture
    scenario name); ``diverge``: ``{rank: log}`` for the ranks made from another log (e.g.
    ``{5: rank_log(DEFAULT_DIVERGE, 3)}``); ``small``: keep only the entries summarize reads
    (see the module docstring).
    """
    diverge = dict(diverge or {})
    bad = [r for r in diverge if not 0 <= r < n]
    if bad:
        raise ValueError(f"diverging rank(s) {bad} not in 0..{n - 1}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if any(_RANK_NAME_RE.match(name) for name in os.listdir(out)):
        raise FileExistsError(f"{out} already holds rank logs: give an empty or new directory")
    templates: dict[Path, RankTemplate] = {}

    def template(src: str | Path) -> RankTemplate:
        path = rank_log(src)
        if path not in templates:
            templates[path] = cut(path, small)
        return templates[path]

    base_t = template(base)
    by_rank = {r: template(src) for r, src in diverge.items()}
    base_name = f"_{base_t.suffix}.log"
    base_prefix = "dedicated_log_torch_trace_rank_"
    total = 0
    d = str(out)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)
    for r in range(n):
        t = by_rank.get(r, base_t)
        name = base_prefix + str(r) + (base_name if t is base_t else f"_{t.suffix}.log")
        data = t.render(r)
        fd = os.open(os.path.join(d, name), flags, 0o644)
        try:
            os.write(fd, data)  # a few MB at most: one write
        finally:
            os.close(fd)
        total += len(data)
    return Made(out, n, sorted(diverge), total)


def _rank_list(text: str) -> list[int]:
    try:
        return sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of ranks: {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path, help="output directory (created; must hold no rank log yet)")
    ap.add_argument("--ranks", type=int, required=True, help="number of ranks (0..N-1)")
    ap.add_argument(
        "--diverge",
        type=_rank_list,
        default=[],
        metavar="R,R,...",
        help="ranks made from the diverging log (default source: diverge_rank's rank 3)",
    )
    ap.add_argument(
        "--base",
        default=DEFAULT_BASE,
        metavar="SCENARIO",
        help=f"fixture scenario, directory (its lowest rank) or log file (default {DEFAULT_BASE})",
    )
    ap.add_argument(
        "--diverge-source",
        default=None,
        metavar="LOG",
        help="log (or scenario/directory: its lowest rank) for the --diverge ranks",
    )
    ap.add_argument(
        "--small", action="store_true", help="keep only the entries summarize reads (a few KB a rank)"
    )
    args = ap.parse_args(argv)
    if args.ranks < 1:
        ap.error("--ranks must be at least 1")
    try:
        src = (
            rank_log(args.diverge_source)
            if args.diverge_source
            else rank_log(DEFAULT_DIVERGE, DEFAULT_DIVERGE_RANK)
        )
        start = time.perf_counter()
        made = make_ranks(
            args.out, args.ranks, base=args.base, diverge={r: src for r in args.diverge}, small=args.small
        )
    except (OSError, ValueError) as e:
        print(f"make_ranks: {e}", file=sys.stderr)
        return 2
    secs = time.perf_counter() - start
    print(
        f"wrote {made.ranks} rank logs to {made.out_dir}: {made.bytes / 2**20:.1f} MiB "
        f"({made.bytes / made.ranks / 1024:.1f} KiB a rank), diverging ranks "
        f"{','.join(map(str, made.diverged)) or 'none'}, in {secs:.2f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
