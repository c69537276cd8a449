#!/usr/bin/env python
"""Benchmark ``tracekit summarize`` against tlparse 0.4.3 and a bare orjson loop, side by side.

    python bench/bench_summarize.py                      # 110MB, 550MB and 1GB, 3 runs each
    python bench/bench_summarize.py --sizes 100MB --runs 5
    python bench/bench_summarize.py --no-tlparse-above 100MB   # tlparse only at 100MB

For each size, a log is made from the fixture logs (``bench/make_large_log.py``, falling back to
concatenating the fixture logs) in /tmp, warmed into the page cache, and each contender is run as
a subprocess, interleaved, ``--runs`` times; the best wall time counts. Contenders:

- ``tracekit``: ``tracekit summarize FILE --format json --output /dev/null`` (default jobs);
- ``tracekit -j1``: the same with ``--jobs 1`` (one process);
- ``tracekit no C``: the default command with ``TRACEKIT_NO_NATIVE=1``: the scanner's decisions
  made by its regex alone, as on an install where the C part (``tracekit/read/_scan.c``) was not
  compiled;
- ``bare loop``: a Python loop that reads the file's lines (binary) and ``orjson.loads`` every
  envelope, nothing else: the floor for any reader that decodes every envelope;
- ``tlparse``: ``tlparse FILE -o DIR --overwrite --no-browser`` (tlparse 0.4.3, pip package);
- ``python start``: ``python -c pass``, for reference: the interpreter's own start-up, which
  every Python contender pays (site-packages ``.pth`` hooks included).
- ``tracekit clean`` and ``python clean``: the same two commands run by a clean interpreter, a
  virtual environment made in the work directory whose site-packages holds only a ``.pth`` file
  of path lines (this interpreter's site-packages, then the checkout). Paths listed in a
  ``.pth`` file are searched but their own ``.pth`` files are not run: what is left out is
  whatever start-up hooks this machine's site-packages runs in every Python process (on this
  project's machines, a sandbox's certifi hook, ~30 ms, and the editable install's finder), as
  on a user's machine with tracekit installed. Both columns are printed; neither hides the other.

tracekit's modules are byte-compiled first (``compileall``), as in an installed package (pip
byte-compiles on install): where ``PYTHONDONTWRITEBYTECODE`` is set, as on this project's
machines, a source checkout would otherwise be compiled again on every run (~35 ms).

Memory: the peak RSS of the largest process, as ``/usr/bin/time -f %M`` reports it (each
contender runs under it: ``os.wait4`` on a direct child would count the benchmark's own image,
which the child had before its ``exec``), and the peak of the proportional set size summed over
the process tree (sampled from /proc every 20 ms; forked workers share pages). The logs and
tlparse's output are deleted at the end (``--keep`` keeps the logs).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "logs"

BARE_LOOP = r"""
import sys, orjson
n = 0
with open(sys.argv[1], "rb") as f:
    for line in f:
        if line[:1] == b"\t" or line == b"\n":
            continue
        i = line.find(b"] {")
        if i >= 0:
            orjson.loads(line[i + 2:])
            n += 1
print(n)
"""
TRACEKIT = "from tracekit.cli import run; run()"  # what the tracekit command runs
TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None


def parse_size(text: str) -> int:
    units = {"KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "B": 1}
    t = text.strip().upper()
    for u, m in units.items():
        if t.endswith(u):
            return int(float(t[: -len(u)]) * m)
    return int(t)


def make_log(size: int, out: Path) -> None:
    maker = ROOT / "bench" / "make_large_log.py"
    if maker.exists():
        src = next((FIXTURES / "spmd_auto").glob("dedicated_log_torch_trace_rank_0_*"))
        r = subprocess.run(
            [sys.executable, str(maker), "--size", str(size), "--out", str(out), "--source", str(src)],
            capture_output=True,
            text=True,
        )
        if r.returncode == 0 and out.exists():
            return
        print(f"make_large_log.py failed ({r.stderr.strip()[-200:]}); concatenating instead", file=sys.stderr)
    src = next((FIXTURES / "spmd_auto").glob("dedicated_log_torch_trace_rank_0_*")).read_bytes()
    with open(out, "wb") as f:
        written = 0
        while written < size:
            f.write(src)
            written += len(src)


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            pass
    return out


def _tree_pss(pid: int) -> int:
    """Memory (bytes) of ``pid`` and its descendants: the RSS of a lone process, else the sum of
    proportional set sizes (forked workers share pages; PSS splits them between the sharers).
    Only the cheap ``statm`` is read for a lone process, so sampling does not slow the machine."""
    procs = _tree(pid)
    total = 0
    if len(procs) == 1:
        try:
            with open(f"/proc/{pid}/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError):
            return 0
    for p in procs:
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except (OSError, ValueError):
            pass
    return total


def run(
    cmd: list[str], env: dict[str, str], timeout: float | None = None
) -> tuple[float, int, int, int, float]:
    """(wall seconds, peak RSS of the largest process, peak PSS of the tree, exit status, CPU
    seconds of the tree: user + system, workers included).

    A run longer than ``timeout`` is killed; its time is then the timeout (a lower bound) and
    its status -9."""
    rss_file = None
    if TIME is not None:
        fd, rss_file = tempfile.mkstemp(prefix="tracekit_bench_rss_")
        os.close(fd)
        cmd = [TIME, "-f", "%M", "-o", rss_file, *cmd]
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True
    )
    peak = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _tree_pss(proc.pid))
            if timeout is not None and time.perf_counter() - start > timeout:
                os.killpg(proc.pid, 9)
                return
            stop.wait(0.02)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    stop.set()
    t.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    maxrss = usage.ru_maxrss * 1024
    if rss_file is not None:
        try:
            with open(rss_file) as f:  # time passes the command's exit status on
                maxrss = int(f.read().split()[-1]) * 1024
        except (OSError, ValueError, IndexError):
            pass
        os.unlink(rss_file)
    if proc.returncode != 0:
        print(f"  {cmd[0]} ... exited {proc.returncode}: {proc.stderr.read()[-300:]!r}", file=sys.stderr)
    return wall, maxrss, peak[0], proc.returncode, usage.ru_utime + usage.ru_stime


def clean_python(work: Path) -> str | None:
    """A Python without this machine's start-up hooks (see the module docstring): a virtual
    environment whose only ``.pth`` file lists paths, no code. None if it cannot be made."""
    import site
    import sysconfig

    venv = work / "clean_venv"
    r = subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], capture_output=True)
    if r.returncode != 0:
        print(
            f"no clean interpreter (venv failed: {r.stderr.decode()[-200:]}): its columns are skipped",
            file=sys.stderr,
        )
        return None
    py = venv / "bin" / "python"
    target = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    ours = dict.fromkeys([*site.getsitepackages(), sysconfig.get_paths()["purelib"], str(ROOT)])
    Path(target, "_tracekit_bench_paths.pth").write_text("".join(f"{p}\n" for p in ours))
    return str(py)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="110MB,550MB,1GB")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--no-tlparse-above", default=None, metavar="SIZE", help="skip tlparse on logs larger than SIZE"
    )
    ap.add_argument("--keep", action="store_true", help="keep the generated logs")
    ap.add_argument(
        "--tlparse-timeout",
        type=float,
        default=900.0,
        metavar="S",
        help="kill tlparse after S seconds; its time is then a lower bound",
    )
    args = ap.parse_args()
    tlparse = shutil.which("tlparse")
    if tlparse is None:
        print("tlparse not found (pip install tlparse==0.4.3): its column is skipped", file=sys.stderr)
    else:
        v = subprocess.run([tlparse, "--version"], capture_output=True, text=True).stdout.strip()
        print(f"tlparse: {v}")
    tl_max = parse_size(args.no_tlparse_above) if args.no_tlparse_above else None
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "tracekit")],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("TRACEKIT_NO_NATIVE", None)
    env_no_c = dict(env, TRACEKIT_NO_NATIVE="1")
    native = subprocess.run(
        [sys.executable, "-c", "import tracekit.read.envelopes as e; print(e.NATIVE)"],
        env=env,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if native != "True":
        print(
            "tracekit's C part is not built (python setup.py build_ext --inplace): 'tracekit' "
            "reads with the regex alone",
            file=sys.stderr,
        )
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores, runs={args.runs} (best wall time counts)"
    )
    work = Path(tempfile.mkdtemp(prefix="tracekit_bench_", dir="/tmp"))
    rows = []
    try:
        clean = clean_python(work)
        if clean is not None:
            subprocess.run(
                [clean, "-m", "compileall", "-q", str(ROOT / "tracekit")],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        for size_text in args.sizes.split(","):
            size = parse_size(size_text)
            log = work / f"big_{size_text}.log"
            make_log(size, log)
            real = log.stat().st_size
            with open(log, "rb") as f:  # warm the page cache
                while f.read(1 << 24):
                    pass
            contenders = {
                "tracekit": [
                    sys.executable,
                    "-c",
                    TRACEKIT,
                    "summarize",
                    str(log),
                    "--format",
                    "json",
                    "--output",
                    "/dev/null",
                ],
                "tracekit -j1": [
                    sys.executable,
                    "-c",
                    TRACEKIT,
                    "summarize",
                    str(log),
                    "--format",
                    "json",
                    "--output",
                    "/dev/null",
                    "--jobs",
                    "1",
                ],
                "tracekit no C": [
                    sys.executable,
                    "-c",
                    TRACEKIT,
                    "summarize",
                    str(log),
                    "--format",
                    "json",
                    "--output",
                    "/dev/null",
                ],
                "bare loop": [sys.executable, "-c", BARE_LOOP, str(log)],
                "python start": [sys.executable, "-c", "pass"],
            }
            if clean is not None:
                contenders["tracekit clean"] = [clean, *contenders["tracekit"][1:]]
                contenders["python clean"] = [clean, "-c", "pass"]
            if tlparse and (tl_max is None or real <= tl_max):
                contenders["tlparse"] = [
                    tlparse,
                    str(log),
                    "-o",
                    str(work / "tl_out"),
                    "--overwrite",
                    "--no-browser",
                ]
            best: dict[str, tuple[float, int, int]] = {}
            for i in range(args.runs):
                for name, cmd in contenders.items():
                    if name == "tlparse" and i > 0 and best.get(name, (0,))[0] > 60:
                        continue  # one run of a minute-long tlparse is enough
                    wall, maxrss, tree, rc, cpu = run(
                        cmd,
                        env_no_c if name == "tracekit no C" else env,
                        args.tlparse_timeout if name == "tlparse" else None,
                    )
                    if rc == -9:
                        print(
                            f"  tlparse killed after {wall:.0f} s: its time is a lower bound", file=sys.stderr
                        )
                    shutil.rmtree(work / "tl_out", ignore_errors=True)
                    if rc != 0 and name != "tlparse":
                        sys.exit(f"{name} failed")
                    old = best.get(name)
                    best[name] = (
                        min(wall, old[0]) if old else wall,
                        max(maxrss, old[1] if old else 0),
                        max(tree, old[2] if old else 0),
                        min(cpu, old[3]) if old else cpu,
                    )
            tk = best["tracekit"][0]
            print(f"\n{size_text} log: {real / 2**20:.1f} MiB")
            print(
                f"  {'contender':<16}{'best s':>9}{'MiB/s':>9}{'cpu s':>9}{'max RSS MiB':>13}{'tree PSS MiB':>14}"
            )
            for name, (wall, maxrss, tree, cpu) in best.items():
                print(
                    f"  {name:<16}{wall:>9.3f}{real / 2**20 / wall:>9.0f}{cpu:>9.3f}{maxrss / 2**20:>13.1f}{tree / 2**20:>14.1f}"
                )
            bare = best["bare loop"][0]
            bare_cpu = best["bare loop"][3]
            line = (
                f"  tracekit / bare loop time: {tk / bare:.2f} (<= 0.5 wanted); no C: "
                f"{best['tracekit no C'][0] / bare:.2f}; -j1: "
                f"{best['tracekit -j1'][0] / bare:.2f}; cpu -j1 / bare: {best['tracekit -j1'][3] / bare_cpu:.2f}"
            )
            if "tlparse" in best:
                line += f"; tracekit throughput / tlparse: {best['tlparse'][0] / tk:.0f}x (>= 100x wanted)"
                if "tracekit clean" in best:
                    line += f", clean python: {best['tlparse'][0] / best['tracekit clean'][0]:.0f}x"
            print(line)
            print(f"  tracekit peak RSS: {best['tracekit'][1] / 2**20:.1f} MiB (< 64 MiB wanted)")
            rows.append((size_text, best))
            if not args.keep:
                log.unlink()
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"logs kept in {work}")


if __name__ == "__main__":
    main()
