"""What the reader's worker processes are sent and send back, and how many batches they hold
(issue 21: 100,000 small rank logs are as many messages each way).

- A batch's results cross the pipe as columns (``segments._Batch``), each file's or segment's
  given back equal to its own read, with its own diagnostics; a :class:`SegmentResult`, a
  :class:`Segment` and its :class:`LogFile` pickle back equal too (Dask sends files).
- The workers (a standard ProcessPoolExecutor, forked; a free one takes the next batch) are
  given only a few batches past the one taken; a slow batch holds no other worker back; a
  worker that dies ends the pool and the rest is read here, as when no worker can be made; a
  read given up shuts the pool down and reaps the workers. The files come back in order,
  read as in this process.
- A directory's listing parses each name's rank once: the order (by rank, then name) and the
  rank hints are those of :func:`tracekit.read.sources.rank_from_name`.
"""

from __future__ import annotations

import os
import pickle
import time
from collections.abc import Callable

import pytest

from conftest import FIXTURE_LOGS, bench_module
from tracekit.read import segments
from tracekit.model import Diagnostics
from tracekit.model.fields import rank_to_dict
from tracekit.read.pairing import SegmentResult
from tracekit.read.reader import load
from tracekit.read.segments import Segment, read_segment
from tracekit.read.sources import LogFile, find_logs, rank_from_name

SPMD = FIXTURE_LOGS / "spmd_auto"
RANK0 = next(SPMD.glob("dedicated_log_torch_trace_rank_0_*.log"))


def _columns(res: SegmentResult) -> tuple:
    e = res.events
    return (list(e.keys), list(e.values), list(e.cids), list(e.lines), res.rank, res.lines,
            res.diagnostics.counts, res.diagnostics.examples, res.readable, res.pids)


def _damaged(tmp_path) -> LogFile:
    """Rank 0 of spmd_auto with a line that is no envelope and a cut-short last line."""
    data = RANK0.read_bytes()
    p = tmp_path / "dedicated_log_torch_trace_rank_0_x.log"
    p.write_bytes(b"not a log line\n" + data + b"V1202 12:00:00.000000 1 x.py:1] {\"dynamo_start\"")
    [lg] = find_logs([str(p)], Diagnostics())
    return lg


def test_a_segment_result_comes_back_equal_with_its_own_diagnostics(tmp_path):
    clean = read_segment(Segment(find_logs([str(RANK0)], Diagnostics())[0]))
    damaged = read_segment(Segment(_damaged(tmp_path)))
    assert damaged.diagnostics.counts == {"bad_prefix": 1, "truncated_entry": 1}
    assert clean.diagnostics.counts == {} and len(clean.events) == 16 and clean.rank == 0
    for res in (clean, damaged):
        back = pickle.loads(pickle.dumps(res, protocol=pickle.HIGHEST_PROTOCOL))
        assert type(back) is SegmentResult and _columns(back) == _columns(res)
        assert back.events.lines.typecode == "L"
    # two clean results sent in one message do not share a Diagnostics: one file's problems
    # never land on another's
    again = read_segment(Segment(find_logs([str(RANK0)], Diagnostics())[0]))
    a, b = pickle.loads(pickle.dumps([clean, again]))
    a.diagnostics.add("bad_json", "x", 1)
    assert b.diagnostics.counts == {} and a.diagnostics.counts == {"bad_json": 1}


def test_a_batch_of_a_listing_comes_back_as_each_file_read_alone(tmp_path, monkeypatch):
    # a long listing's worker sends a batch as columns (segments._Batch): every file's events,
    # rank, lines, pids, diagnostics and readability as read_segment gives them, a large file
    # as None
    clean = find_logs([str(RANK0)], Diagnostics())[0]
    gone = LogFile(str(tmp_path / "dedicated_log_torch_trace_rank_9_x.log"), 0, 9)
    monkeypatch.setattr(segments, "SPLIT_MIN_BYTES", clean.size)  # rank 0's full log is large here
    bench_module("make_ranks").make_ranks(tmp_path / "small", 2, base=SPMD, small=True)
    data = next((tmp_path / "small").glob("*rank_1_*")).read_bytes()
    small = tmp_path / "dedicated_log_torch_trace_rank_1_x.log"
    small.write_bytes(data)
    bad = tmp_path / "dedicated_log_torch_trace_rank_0_x.log"  # a bad line and a cut-short end
    bad.write_bytes(b"not a log line\n" + data.replace(b'"rank": 1,', b'"rank": 0,')
                    + b"V1202 12:00:00.000000 1 x.py:1] {\"dynamo_start\"")
    [one] = find_logs([str(small)], Diagnostics())
    [damaged] = find_logs([str(bad)], Diagnostics())
    batch = [(one.path, 1), (damaged.path, 0), (clean.path, 0), (gone.path, 9), (one.path, 1)]
    sent = segments._read_named(batch, False)
    back = pickle.loads(pickle.dumps(sent, protocol=pickle.HIGHEST_PROTOCOL))
    assert type(back) is segments._Batch and len(back) == 5
    got = list(back.results())
    assert [size for size, _r in got] == [one.size, damaged.size, clean.size, 0, one.size]
    assert got[2][1] is None  # large: read by this process, in segments
    for (size, res), lg in zip(got, [one, damaged, None, gone, one]):
        if lg is None:
            continue
        alone = read_segment(Segment(lg))
        assert _columns(res)[:8] == _columns(alone)[:8]
        assert (res.readable, set(res.pids)) == (alone.readable, alone.pids)
    assert got[1][1].diagnostics.counts == {"bad_prefix": 1, "truncated_entry": 1}
    assert got[3][1].diagnostics.counts == {"unreadable_file": 1} and not got[3][1].readable
    assert got[0][1].diagnostics.counts == {} and len(got[0][1].events) == 12


def test_a_segment_and_its_file_come_back_equal():
    lg = LogFile("/logs/dedicated_log_torch_trace_rank_7_x.log", 8758, 7)
    for seg in (Segment(lg), Segment(lg, 100, 2000, 7), Segment(LogFile("a.log", 0, None), 5)):
        back = pickle.loads(pickle.dumps(seg))
        assert back == seg and type(back.log) is LogFile and back.log.rank_hint == seg.log.rank_hint


@pytest.fixture
def run_dir(tmp_path):
    """spmd_auto's four ranks, each also as three more files of other ranks' names (16 files)."""
    d = tmp_path / "run"
    d.mkdir()
    for src in sorted(SPMD.glob("dedicated_log_torch_trace_rank_*.log")):
        for copy in range(4):
            r = rank_from_name(src.name)
            text = src.read_bytes().replace(b'"rank": %d,' % r, b'"rank": %d,' % (r + 4 * copy))
            (d / f"dedicated_log_torch_trace_rank_{r + 4 * copy}_c.log").write_bytes(text)
    return d


def _counting_reads(monkeypatch, tmp_path) -> Callable[[], int]:
    """``read_segment`` made to leave a byte in a file for each segment read, in the workers
    too (they are forked with it): the function returned counts them."""
    log = tmp_path / "reads"
    log.write_bytes(b"")
    real = segments.read_segment

    def counted(seg, *args, **kwargs):
        fd = os.open(log, os.O_WRONLY | os.O_APPEND)
        os.write(fd, b".")
        os.close(fd)
        return real(seg, *args, **kwargs)

    monkeypatch.setattr(segments, "read_segment", counted)
    return lambda: log.stat().st_size


def _read_all(run_dir, jobs: int = 2, pause: float = 0.0) -> list[tuple]:
    logs = find_logs([str(run_dir)], Diagnostics())
    tasks = [seg for segs in segments.file_segments(logs, jobs) for seg in segs]
    got = []
    for seg, part in segments.read_segments(tasks, jobs, lambda n: None):
        got.append((seg.log.rank_hint, part.rank, len(part.events)))
        time.sleep(pause)
    return got


def test_the_pool_is_given_only_a_few_batches_past_the_one_taken(run_dir, monkeypatch, tmp_path):
    monkeypatch.setattr(segments, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(segments, "BATCH_BYTES", 1)  # a file a batch
    monkeypatch.setattr(segments, "AHEAD", 1)  # a batch a worker submitted past the one taken
    reads = _counting_reads(monkeypatch, tmp_path)
    logs = find_logs([str(run_dir)], Diagnostics())
    tasks = [seg for segs in segments.file_segments(logs, 2) for seg in segs]
    ahead = []
    taken = 0
    for seg, part in segments.read_segments(tasks, 2, lambda n: None):
        taken += 1
        assert part.rank == seg.log.rank_hint == taken - 1
        time.sleep(0.05)  # a slow consumer: the workers would read everything meanwhile
        ahead.append(reads() - taken)
    # two submitted past the one taken (AHEAD * jobs), whatever the consumer's pace; with all
    # sixteen submitted at once, 15 would be read ahead while the first is used
    assert taken == 16 and reads() == 16
    assert max(ahead) <= 2, ahead


def test_a_worker_that_dies_ends_the_workers_and_the_rest_is_read_here(run_dir, monkeypatch):
    here = load(run_dir, jobs=1)
    monkeypatch.setattr(segments, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(segments, "BATCH_BYTES", 1)
    parent = os.getpid()
    real = segments.read_segment

    read_here = []

    def dying(seg, *args, **kwargs):  # the worker that takes rank 5's batch is killed there
        if os.getpid() != parent and seg.log.rank_hint == 5:
            os._exit(9)
        if os.getpid() == parent:
            read_here.append(seg.log.rank_hint)
        return real(seg, *args, **kwargs)

    monkeypatch.setattr(segments, "read_segment", dying)
    assert _read_all(run_dir) == [(r, r, 16) for r in range(16)]
    # the batches from where the pool broke on (results not yet taken from a broken pool are
    # lost with it: from rank 5 at the latest), and no other
    assert read_here and read_here == list(range(read_here[0], 16)) and 1 <= read_here[0] <= 5
    workers = load(run_dir, jobs=2)
    assert [rank_to_dict(r) for r in workers.ranks] == [rank_to_dict(r) for r in here.ranks]
    assert workers.diagnostics.counts == here.diagnostics.counts == {}


def _reads_by_process(monkeypatch, tmp_path, slow_rank: int | None = None) -> Callable[[], dict[int, list[int]]]:
    """``read_segment`` made to note which process reads which rank (in a file: the workers are
    forked with it), sleeping 1 s on ``slow_rank``; the function returned gives ``{pid: ranks}``."""
    log = tmp_path / "who"
    log.write_bytes(b"")
    real = segments.read_segment

    def noted(seg, *args, **kwargs):
        fd = os.open(log, os.O_WRONLY | os.O_APPEND)
        os.write(fd, b"%d %d\n" % (os.getpid(), seg.log.rank_hint))
        os.close(fd)
        if seg.log.rank_hint == slow_rank:
            time.sleep(1.0)
        return real(seg, *args, **kwargs)

    monkeypatch.setattr(segments, "read_segment", noted)

    def who() -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for line in log.read_text().splitlines():
            pid, rank = map(int, line.split())
            out.setdefault(pid, []).append(rank)
        return out

    return who


def test_a_free_worker_takes_the_next_batch_so_a_slow_one_holds_nobody_back(run_dir, monkeypatch, tmp_path):
    # rank 0's batch takes a second: its worker reads nothing else meanwhile, and the other
    # reads the other fifteen (given every other batch each, it would read 7 and wait for it)
    monkeypatch.setattr(segments, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(segments, "BATCH_BYTES", 1)
    monkeypatch.setattr(segments, "AHEAD", 8)  # all sixteen submitted (two workers): none waits for rank 0
    who = _reads_by_process(monkeypatch, tmp_path, slow_rank=0)
    assert _read_all(run_dir) == [(r, r, 16) for r in range(16)]
    by_pid = who()
    assert os.getpid() not in by_pid and len(by_pid) == 2
    assert sorted(by_pid.values()) == [[0], list(range(1, 16))]


def _forks(monkeypatch, allowed: int | None = None) -> list[int]:
    """``os.fork`` made to list the workers it makes (here), and to fail once ``allowed`` are."""
    real_fork = os.fork
    made: list[int] = []

    def fork():
        if allowed is not None and len(made) >= allowed:
            raise BlockingIOError(11, "Resource temporarily unavailable")
        pid = real_fork()
        if pid:
            made.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", fork)
    return made


def test_without_a_second_process_everything_is_read_here(run_dir, monkeypatch):
    monkeypatch.setattr(segments, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(segments, "BATCH_BYTES", 1)
    made = _forks(monkeypatch, allowed=1)
    assert _read_all(run_dir) == [(r, r, 16) for r in range(16)]
    assert len(made) == 1


def test_a_read_given_up_kills_and_reaps_its_workers(run_dir, monkeypatch):
    monkeypatch.setattr(segments, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(segments, "BATCH_BYTES", 1)
    pids = _forks(monkeypatch)
    logs = find_logs([str(run_dir)], Diagnostics())
    tasks = [seg for segs in segments.file_segments(logs, 2) for seg in segs]
    it = segments.read_segments(tasks, 2, lambda n: None)
    seg, part = next(it)
    assert part.rank == 0 and len(pids) == 2
    it.close()  # the consumer gone (Ctrl-C, a broken pipe downstream)
    for pid in pids:
        with pytest.raises(ChildProcessError):  # reaped: no zombie left behind
            os.waitpid(pid, os.WNOHANG)


def test_the_batches_weigh_alike_and_hold_every_segment_once():
    logs = [LogFile(f"/l/dedicated_log_torch_trace_rank_{r}_x.log", 9000 if r % 7 else 90_000, r) for r in range(3000)]
    tasks = [Segment(lg) for lg in logs]
    plan = segments._batch_plan(tasks, sum(lg.size for lg in logs), 2)
    assert sum(n for n, _b in plan) == 3000 and sum(b for _n, b in plan) == sum(lg.size for lg in logs)
    assert all(n <= segments.BATCH_SEGMENTS for n, _b in plan)
    target = sum(lg.size for lg in logs) // 16  # under BATCH_BYTES: at least 8 batches a worker
    assert len(plan) >= 16 and all(b < target + 90_000 for _n, b in plan[:-1])


def test_a_directory_is_listed_by_rank_then_name_with_each_names_rank(tmp_path):
    names = ["dedicated_log_torch_trace_rank_10_a.log", "dedicated_log_torch_trace_rank_2_b.log",
             "dedicated_log_torch_trace_rank_2_a.log.gz", "dedicated_log_torch_trace_rank_99999999_a.log",
             "dedicated_log_torch_trace_rank_1.log", "dedicated_log_torch_trace_other.log", "notes.log",
             "readme.txt"]
    for n in names:
        (tmp_path / n).write_bytes(b"")
    logs = find_logs([str(tmp_path)], Diagnostics())
    assert [(lg.path.rsplit("/", 1)[1], lg.rank_hint) for lg in logs] == [
        ("dedicated_log_torch_trace_rank_1.log", 1),
        ("dedicated_log_torch_trace_rank_2_a.log.gz", 2),
        ("dedicated_log_torch_trace_rank_2_b.log", 2),
        ("dedicated_log_torch_trace_rank_10_a.log", 10),
        ("dedicated_log_torch_trace_rank_99999999_a.log", None),  # named like a rank, not one
        ("dedicated_log_torch_trace_other.log", None),
    ]
    assert all(lg.rank_hint == rank_from_name(lg.path) for lg in logs)
    # without trace logs, any .log, by name
    for n in names[:6]:
        (tmp_path / n).unlink()
    (tmp_path / "a.log").write_bytes(b"")
    assert [lg.path.rsplit("/", 1)[1] for lg in find_logs([str(tmp_path)], Diagnostics())] == ["a.log", "notes.log"]


def test_a_long_listing_is_read_by_workers_forked_before_its_sizes_are_taken(tmp_path, monkeypatch):
    """Six small rank logs and two full ones (736 KB: large here, so this process reads them,
    in segments), read by workers forked with the names only: as read in one process."""
    d = tmp_path / "listing"
    bench_module("make_ranks").make_ranks(d, 6, base=SPMD, small=True)
    for r, src in ((6, 2), (7, 3)):
        full = next(SPMD.glob(f"dedicated_log_torch_trace_rank_{src}_*.log")).read_bytes()
        (d / f"dedicated_log_torch_trace_rank_{r}_f.log").write_bytes(
            full.replace(b'"rank": %d,' % src, b'"rank": %d,' % r))
    here = load(d, jobs=1)
    monkeypatch.setattr(segments, "EARLY_MIN_FILES", 1)
    monkeypatch.setattr(segments, "BATCH_SEGMENTS", 3)  # three batches: 0-2, 3-5, 6-7
    monkeypatch.setattr(segments, "SPLIT_MIN_BYTES", 256 << 10)  # the full logs are large
    monkeypatch.setattr(segments, "PARALLEL_MIN_BYTES", 0)
    listed, cut = [], []
    read_listed, read_segments = segments.read_listed, segments.read_segments

    def listed_read(names, *args, **kwargs):
        listed.append(len(names))
        return read_listed(names, *args, **kwargs)

    def cut_read(tasks, *args, **kwargs):
        cut.append((tasks[0].log.rank_hint, len(tasks)))
        return read_segments(tasks, *args, **kwargs)

    monkeypatch.setattr(segments, "read_listed", listed_read)
    monkeypatch.setattr(segments, "read_segments", cut_read)
    ticks: list[tuple[int, int]] = []
    workers = load(d, jobs=2, progress=lambda done, total: ticks.append((done, total)))
    assert listed == [8] and cut == [(6, 2), (7, 2)]  # each full log in two segments, here
    assert [rank_to_dict(r) for r in workers.ranks] == [rank_to_dict(r) for r in here.ranks]
    assert workers.diagnostics.counts == here.diagnostics.counts == {} and len(here.ranks) == 8
    total = sum(p.stat().st_size for p in d.iterdir())
    assert ticks[-1] == (total, total) and all(t == total for _d, t in ticks)
    assert [done for done, _t in ticks] == sorted(done for done, _t in ticks)
    # the workers take the files' sizes; this process stats them only for a progress total
    parent, stats_here = os.getpid(), []
    real_size = segments.listed_size

    def listed_size(path):
        if os.getpid() == parent:
            stats_here.append(path)
        return real_size(path)

    monkeypatch.setattr(segments, "listed_size", listed_size)
    quiet = load(d, jobs=2)
    assert stats_here == [] and [rank_to_dict(r) for r in quiet.ranks] == [rank_to_dict(r) for r in here.ranks]
    load(d, jobs=2, progress=lambda done, total: None)
    assert sorted(stats_here) == sorted(str(p) for p in d.iterdir())


def test_progress_reaches_the_whole_file_when_it_is_read_in_forked_segments(monkeypatch):
    # one file cut in two segments, one read here, one by a forked child: the last tick, the
    # child's, came after the reader's last result and was lost (progress stopped at ~half)
    monkeypatch.setattr(segments, "SPLIT_MIN_BYTES", 256 << 10)
    monkeypatch.setattr(segments, "PARALLEL_MIN_BYTES", 0)
    ticks: list[tuple[int, int]] = []
    run = load(RANK0, jobs=2, progress=lambda done, total: ticks.append((done, total)))
    size = RANK0.stat().st_size
    assert len(ticks) == 2 and ticks[-1] == (size, size) and ticks[0][0] < size
    assert rank_to_dict(run.ranks[0]) == rank_to_dict(load(RANK0, jobs=1).ranks[0])
