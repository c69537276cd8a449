#!/usr/bin/env python
"""Benchmark ``tracekit summarize`` on thousands of rank logs against one log of the same bytes.

    python bench/bench_ranks.py                        # 1,024 and 8,192 small rank logs, 3 runs
    python bench/bench_ranks.py --ranks 1024 --runs 5
    python bench/bench_ranks.py --ranks '' --huge 100000   # 100,000 small rank logs against one log
    python bench/bench_ranks.py --full 1024            # and 1,024 full-size rank logs (0.75 GB)

For each N of ``--ranks``, ``bench/make_ranks.py`` writes N small rank logs (``--small``: the
entries summarize reads, ~9 KB a rank; ranks 300 and 777 diverging) and ``bench/make_large_log.py``
writes, of the same bytes, one log of one rank: the small rank-0 log repeated with new compile ids
(the same entries: what N files cost more than one is the per-file cost) and the full fixture log
repeated (mostly entries summarize skips). Each is summarized as
``tracekit summarize PATH --format json --output FILE`` (default jobs, then ``--jobs 1``), runs
interleaved, best wall time kept; peak RSS is ``/usr/bin/time -f %M``'s (the largest process),
JSON bytes the output file's size. ``load`` rows time the reader alone
(``tracekit.load(PATH)``, default jobs: files -> Run, no summary): the summary of one rank with
thousands of compile ids and of thousands of ranks with one are different work, the reading of
the same bytes should not be. Printed side by side, with the issue's targets:

- N files / one log of the same entries: <= 1.25 (time);
- 8,192 small rank logs: peak RSS < 64 MiB, JSON < 5 MB (what the summary's grouping of
  identical outcomes is for: printed here, met there);
- ``--huge N``: N (100,000) small rank logs must work (no fd exhaustion, no process per file):
  summarized, wall and CPU time, peak RSS (< 128 MiB wanted) and JSON bytes; and read
  (``load``) side by side with one log of the same entries (its summary is not run: one rank
  with 2 N graphs, a JSON of hundreds of MB), the ratio <= 1.25 wanted. Once (``--huge-runs``).

Logs and outputs are written in a temporary directory, deleted at the end (``--keep``): under
``--dir``, by default ``/dev/shm`` when it has room (else ``/tmp``). Every contender is read from
memory: each one's files are read once right before each of its runs, and on tmpfs the machine
cannot evict them between runs (a kernel that reclaims the page cache it finds cold, as DAMON
does on the CI machines, evicts some of 100,000 small files while the other contender runs, and
reading them again from disk is one small read each).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_summarize import TRACEKIT, run  # noqa: E402
from make_large_log import make_large_log  # noqa: E402
from make_ranks import DEFAULT_DIVERGE, DEFAULT_DIVERGE_RANK, make_ranks, rank_log  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DIVERGING = (300, 777)
MiB = 2**20


#: The reader alone (``tracekit.load``: files -> Run), without the summary and its output.
LOAD = "import sys, tracekit; tracekit.load(sys.argv[1])"


def _load(path: Path) -> list[str]:
    return [sys.executable, "-c", LOAD, str(path)]


def _summarize(path: Path, out: Path, jobs: int | None) -> list[str]:
    cmd = [sys.executable, "-c", TRACEKIT, "summarize", str(path), "--format", "json", "--output", str(out)]
    return cmd + (["--jobs", str(jobs)] if jobs else [])


def _warm(path: Path) -> None:
    """Read every file once, so that every contender finds them in the page cache."""
    files = sorted(path.iterdir()) if path.is_dir() else [path]
    for f in files:
        with open(f, "rb") as fh:
            while fh.read(1 << 24):
                pass


def _made(work: Path, n: int, small: bool) -> tuple[Path, int]:
    d = work / f"{'small' if small else 'full'}_{n}"
    src = rank_log(DEFAULT_DIVERGE, DEFAULT_DIVERGE_RANK)
    made = make_ranks(d, n, diverge={r: src for r in DIVERGING if r < n}, small=small)
    return d, made.bytes


def _one_log(work: Path, name: str, source: Path, size: int) -> Path:
    out = work / name
    make_large_log([source], out, size)
    return out


def _compare(work: Path, n: int, small: bool, runs: int, env: dict[str, str]) -> dict[str, tuple]:
    """Time N rank logs and the one-file logs of the same bytes; best of ``runs``."""
    d, size = _made(work, n, small)
    rank0 = next(d.glob("dedicated_log_torch_trace_rank_0_*.log"))
    contenders = {f"{n:,} files": d}
    if small:
        contenders["one log, same entries"] = _one_log(work, f"same_{n}.log", rank0, size)
    contenders["one full log"] = _one_log(work, f"full_{n}.log", rank_log("spmd_auto"), size)
    out = work / "out.json"
    best: dict[str, tuple] = {}
    for _ in range(runs):
        for name, path in contenders.items():
            for jobs in (None, 1, "load"):
                key = name + {None: "", 1: " -j1", "load": " load"}[jobs]
                cmd = _load(path) if jobs == "load" else _summarize(path, out, jobs)
                _warm(path)
                wall, rss, _pss, rc, cpu = run(cmd, env)
                if rc != 0:
                    sys.exit(f"{key}: exited {rc}")
                json_bytes = 0 if jobs == "load" else out.stat().st_size
                old = best.get(key)
                best[key] = (
                    min(wall, old[0]) if old else wall,
                    max(rss, old[1]) if old else rss,
                    min(cpu, old[2]) if old else cpu,
                    json_bytes,
                    path.stat().st_size if path.is_file() else size,
                )
    shutil.rmtree(d, ignore_errors=True)
    for p in contenders.values():
        if p.is_file():
            p.unlink()
    return best


def _print(title: str, best: dict[str, tuple]) -> None:
    print(f"\n{title}")
    print(f"  {'contender':<28}{'MiB':>8}{'best s':>9}{'cpu s':>8}{'max RSS MiB':>13}{'JSON MB':>10}")
    for name, (wall, rss, cpu, js, size) in best.items():
        print(f"  {name:<28}{size / MiB:>8.1f}{wall:>9.3f}{cpu:>8.3f}{rss / MiB:>13.1f}{js / 1e6:>10.2f}")


def _ratios(n: int, best: dict[str, tuple], small: bool) -> list[str]:
    files = f"{n:,} files"
    ref = "one log, same entries" if small else "one full log"
    out = []
    for sfx in ("", " -j1", " load"):
        a, b = best[files + sfx][0], best[ref + sfx][0]
        out.append(f"{files}{sfx} / {ref}{sfx}: {a / b:.2f} (<= 1.25 wanted)")
    if small:
        out.append(f"{files} / one full log: {best[files][0] / best['one full log'][0]:.2f}")
    return out


def _huge(work: Path, n: int, runs: int, env: dict[str, str]) -> dict[str, tuple]:
    """N small rank logs summarized (``--format json``, default jobs: wall, CPU, peak RSS
    against the target) and read (``load``), and one log of the same entries read, side by
    side; best of ``runs``, interleaved. The one log's summary is not run: it is one rank with
    2 N graphs, whose JSON (about 6.7 KB a copy: 670 MB at 100,000) is another job than the
    N ranks' grouped one (0.02 MB); the reader alone is the same work on the same bytes."""
    d, size = _made(work, n, True)
    rank0 = next(d.glob("dedicated_log_torch_trace_rank_0_*.log"))
    one = _one_log(work, f"same_{n}.log", rank0, size)
    out = work / "huge.json"
    cmds = {
        f"{n:,} files": (_summarize(d, out, None), d),
        f"{n:,} files load": (_load(d), d),
        "one log, same entries load": (_load(one), one),
    }
    best: dict[str, tuple] = {}
    for _ in range(runs):
        for key, (cmd, path) in cmds.items():
            _warm(path)
            wall, rss, _pss, rc, cpu = run(cmd, env, timeout=1800)
            if rc != 0:
                sys.exit(f"{key}: exited {rc}")
            js = out.stat().st_size if key == f"{n:,} files" else 0
            old = best.get(key)
            best[key] = (
                min(wall, old[0]) if old else wall,
                max(rss, old[1]) if old else rss,
                min(cpu, old[2]) if old else cpu,
                js,
                one.stat().st_size if path == one else size,
            )
    shutil.rmtree(d, ignore_errors=True)
    one.unlink()
    return best


def _huge_ratios(n: int, best: dict[str, tuple]) -> list[str]:
    files, load, one = best[f"{n:,} files"], best[f"{n:,} files load"], best["one log, same entries load"]
    return [
        f"{n:,} files load / one log, same entries load: {load[0] / one[0]:.2f} (<= 1.25 wanted; CPU "
        f"{load[2] / one[2]:.2f}; the one log's summary is not run: its JSON would be ~{n * 6.7e-3:.0f} MB)",
        f"{n:,} files: {files[0]:.1f} s, {files[0] / n * 1e3:.3f} ms a file, CPU {files[2]:.1f} s, peak RSS "
        f"{files[1] / MiB:.1f} MiB ({'<' if files[1] < 128 * MiB else 'not <'} 128 MiB wanted), JSON "
        f"{files[3] / 1e6:.2f} MB",
    ]


def _default_dir() -> str:
    """``/dev/shm`` (memory: nothing is evicted between runs) when it has room for the logs."""
    try:
        st = os.statvfs("/dev/shm")
        if st.f_bavail * st.f_frsize >= 4 << 30:
            return "/dev/shm"
    except OSError:
        pass
    return "/tmp"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", default="1024,8192", help="numbers of small rank logs (default 1024,8192)")
    ap.add_argument("--runs", type=int, default=3, help="runs of each contender; the best counts")
    ap.add_argument(
        "--huge",
        type=int,
        default=0,
        metavar="N",
        help="also N small rank logs (e.g. 100000) summarized, and read against one log of the same entries",
    )
    ap.add_argument(
        "--huge-runs",
        type=int,
        default=1,
        metavar="R",
        help="runs of each --huge contender (default 1); the best counts",
    )
    ap.add_argument(
        "--full",
        type=int,
        default=0,
        metavar="N",
        help="also N full-size rank logs (0.72 MiB each) against one full log of the same bytes",
    )
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument(
        "--dir",
        default=None,
        help="where to write the logs (default: /dev/shm when it has 4 GB free, else /tmp)",
    )
    args = ap.parse_args()
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "tracekit")],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores, runs={args.runs} (best wall time "
        f"counts); summarize PATH --format json --output FILE"
    )
    work = Path(tempfile.mkdtemp(prefix="tracekit_bench_ranks_", dir=args.dir or _default_dir()))
    print(f"logs in {work}")
    table: list[str] = []
    try:
        for n in [int(x) for x in args.ranks.split(",") if x]:
            best = _compare(work, n, True, args.runs, env)
            _print(
                f"{n:,} small rank logs (ranks {','.join(str(r) for r in DIVERGING if r < n)} diverge)", best
            )
            table += _ratios(n, best, True)
            if n == 8192:
                _, rss, _, js, _ = best[f"{n:,} files"]
                table.append(
                    f"{n:,} files: peak RSS {rss / MiB:.1f} MiB (< 64 MiB wanted), JSON "
                    f"{js / 1e6:.2f} MB (< 5 MB wanted)"
                )
        if args.full:
            best = _compare(work, args.full, False, args.runs, env)
            _print(f"{args.full:,} full-size rank logs", best)
            table += _ratios(args.full, best, False)
        if args.huge:
            best = _huge(work, args.huge, args.huge_runs, env)
            _print(f"{args.huge:,} small rank logs, best of {args.huge_runs}", best)
            table += _huge_ratios(args.huge, best)
        print("\nRatios and targets")
        for line in table:
            print(f"  {line}")
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
