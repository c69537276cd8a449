"""What reading thousands of small rank logs keeps, a rank: the model after reading, the peak
while the files are listed, read and merged, and the summary's transient (issue 21: 100,000
rank logs under 128 MiB). Bytes are counted, never timed: logs written at test time by
bench/make_ranks.py --small, 500 and 2,500 ranks, and the difference taken, so what any run
costs once (imports, caches, free lists) cancels out."""

from __future__ import annotations

import gc
import importlib.util
import json
import subprocess
import sys
import textwrap
from types import FunctionType, ModuleType

import pytest

import tracekit
import tracekit.read.segments as segments
from conftest import FIXTURE_LOGS, ROOT
from tracekit.model.fields import rank_to_dict
from tracekit.read.sources import find_logs

_spec = importlib.util.spec_from_file_location("bench_make_ranks", ROOT / "bench" / "make_ranks.py")
make_ranks = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = make_ranks
_spec.loader.exec_module(make_ranks)

SMALL, LARGE = 500, 2_500
DIVERGING = (300, LARGE - 1)

#: Bytes a rank of a small log may keep, its path apart: two Graph objects (128 B each), the
#: Rank (112 B), its lists of files and graphs, its rank number. Measured: 545 B (before
#: issue 21's merge records: 641 B: a list of schedules without outcome a rank, lists made
#: with room to grow).
KEPT_PER_RANK = 600
#: Traced peak while reading, a rank (measured: 1,010-1,030 B in one process, 1,150-1,230 B
#: through worker processes; before: 2,600 B and 2,880-2,920 B: a copy of each rank's first
#: file result, its pid set, two dicts a rank, the directory listing's entries and their
#: stats, the whole plan).
PEAK_PER_RANK = 1_600
#: Traced transient of the JSON summary, a rank (measured: 88-92 B; 127-131 B before divergence
#: made one list of the majority's ranks for every differing field, not one a field; before
#: that: 990-1,000 B, a dict of final schedules and a list of sequences a rank).
SUMMARY_PER_RANK = 200


@pytest.fixture(scope="module")
def rank_dirs(tmp_path_factory):
    diverge = make_ranks.rank_log(FIXTURE_LOGS / "diverge_rank", 3)
    out = {}
    for n in (SMALL, LARGE):
        d = tmp_path_factory.mktemp(f"ranks{n}")
        make_ranks.make_ranks(d, n, diverge={r: diverge for r in DIVERGING if r < n}, small=True)
        out[n] = d
    return out


@pytest.fixture(scope="module")
def open_rank_dirs(rank_dirs, tmp_path_factory):
    """The same logs, each without its last line (the compile's closing metrics): every log
    ends inside a compile, as all of a job's logs do when it is killed in a hang."""
    out = {}
    for n, src in rank_dirs.items():
        d = tmp_path_factory.mktemp(f"open{n}")
        for f in src.iterdir():
            data = f.read_bytes()
            (d / f.name).write_bytes(data[: data.rindex(b"\n", 0, len(data) - 1) + 1])
        out[n] = d
    return out


def _retained(roots) -> int:
    """Bytes of every object reachable from ``roots`` (each counted once: shared values once)."""
    seen: set[int] = set()
    todo = list(roots)
    total = 0
    while todo:
        o = todo.pop()
        if id(o) in seen or isinstance(o, (type, ModuleType, FunctionType)):
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        todo.extend(gc.get_referents(o))
    return total


def test_a_small_rank_log_keeps_under_600_bytes_and_its_path(rank_dirs):
    run = tracekit.load(rank_dirs[LARGE], jobs=1)
    assert len(run.ranks) == LARGE
    paths = sum(sys.getsizeof(r.files[0]) for r in run.ranks)
    per_rank = (_retained([run.ranks]) - paths) / LARGE
    assert per_rank < KEPT_PER_RANK, per_rank


#: In a child (a clean process): read the small directory once (imports, caches), then each
#: directory with tracemalloc on; print the peak and kept bytes while reading, and the peak of
#: the JSON summary over what the Run keeps.
CHILD = textwrap.dedent("""
    import gc, json, sys, tracemalloc
    import tracekit, tracekit.read.segments
    from tracekit.render.summary_json import write_summary_json

    small, large, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    tracekit.read.segments.PARALLEL_MIN_BYTES = 0  # worker processes whatever the bytes, with jobs > 1
    write_summary_json(tracekit.load(small, jobs=jobs), lambda b: None)

    def measure(path):
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        run = tracekit.load(path, jobs=jobs)
        kept, peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        write_summary_json(run, lambda b: None)
        summary = tracemalloc.get_traced_memory()[1] - kept
        tracemalloc.stop()
        return len(run.ranks), peak - base, summary

    print(json.dumps([measure(small), measure(large)]))
""")


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_peak_while_reading_and_summarizing_grows_by_under_1600_bytes_a_rank(rank_dirs, jobs):
    r = subprocess.run([sys.executable, "-c", CHILD, str(rank_dirs[SMALL]), str(rank_dirs[LARGE]), str(jobs)],
                       capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    (n1, peak1, sum1), (n2, peak2, sum2) = json.loads(r.stdout)
    assert (n1, n2) == (SMALL, LARGE)
    peak, summary = (peak2 - peak1) / (n2 - n1), (sum2 - sum1) / (n2 - n1)
    assert peak < PEAK_PER_RANK, (peak, summary)
    assert summary < SUMMARY_PER_RANK, (peak, summary)


#: Traced peak while reading logs that all end inside a compile, a rank (measured: 1,129 B in one
#: process; before: 1,432 B, a dict and its message kept for every rank's open end until the
#: merge ends, where a (path, line, kind) tuple is kept now).
PEAK_PER_RANK_OPEN = 1_250


def test_logs_that_all_end_inside_a_compile_peak_under_1250_bytes_a_rank(open_rank_dirs):
    r = subprocess.run(
        [sys.executable, "-c", CHILD, str(open_rank_dirs[SMALL]), str(open_rank_dirs[LARGE]), "1"],
        capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    (n1, peak1, _s1), (n2, peak2, _s2) = json.loads(r.stdout)
    assert (n1, n2) == (SMALL, LARGE)
    peak = (peak2 - peak1) / (n2 - n1)
    assert peak < PEAK_PER_RANK_OPEN, peak
    run = tracekit.load(open_rank_dirs[SMALL], jobs=1)  # no log ends a compile: none is called cut
    assert run.cut == [] and "cut_between_entries" not in run.diagnostics.counts


def test_read_through_workers_or_here_or_file_by_file_the_ranks_are_the_same(rank_dirs, monkeypatch):
    here = tracekit.load(rank_dirs[LARGE], jobs=1)
    monkeypatch.setattr(segments, "PARALLEL_MIN_BYTES", 0)
    workers = tracekit.load(rank_dirs[LARGE], jobs=2)
    assert [rank_to_dict(r) for r in workers.ranks] == [rank_to_dict(r) for r in here.ranks]
    assert workers.diagnostics.counts == here.diagnostics.counts == {}
    for r in (0, 1, DIVERGING[0], DIVERGING[1]):
        (alone,) = tracekit.load(here.ranks[r].files[0], jobs=1).ranks
        assert rank_to_dict(here.ranks[r]) == rank_to_dict(alone)
    # the diverging ranks read as such: the rest share every value, interned
    same = {id(r.graphs[0].collectives) for r in here.ranks if r.rank not in DIVERGING}
    assert len(same) == 1 and here.ranks[300].graphs[0].collectives["all_gather"].before == 10


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_plan_is_emptied_as_it_is_read(rank_dirs, monkeypatch, jobs):
    monkeypatch.setattr(segments, "PARALLEL_MIN_BYTES", 0)
    logs = find_logs([str(rank_dirs[SMALL])], tracekit.Diagnostics())
    tasks = [seg for segs in segments.file_segments(logs, jobs) for seg in segs]
    first = tasks[:]
    seen = []
    for seg, part in segments.read_segments(tasks, jobs, lambda n: None):
        seen.append(seg)
        assert part.rank == seg.log.rank_hint and len(tasks) <= len(first) - len(seen)
    assert seen == first and tasks == []
