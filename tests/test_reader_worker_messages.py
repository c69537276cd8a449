"""What the reader's worker processes are sent and send back, and how many batches they hold
(issue 21: 100,000 small rank logs are as many messages each way).

- A :class:`SegmentResult` crosses the pipe as one flat tuple (``__reduce__``); a
  :class:`Segment` and its :class:`LogFile` as their constructors' arguments. Each must come
  back equal, with its own diagnostics.
- The pool holds a window of batches: with the window's bytes used up, one batch per worker
  stays in flight (and the one being handed out), and the files still come back in order, read as in this process.
- A directory's listing parses each name's rank once: the order (by rank, then name) and the
  rank hints are those of :func:`tracekit.sources.rank_from_name`.
"""

from __future__ import annotations

import concurrent.futures
import pickle

import pytest

from conftest import FIXTURE_LOGS
from tracekit import segments
from tracekit.model import Diagnostics, rank_to_dict
from tracekit.pairing import SegmentResult
from tracekit.reader import load
from tracekit.segments import Segment, read_segment
from tracekit.sources import LogFile, find_logs, rank_from_name

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


def test_with_the_window_full_one_batch_a_worker_stays_in_flight(run_dir, monkeypatch):
    here = load(run_dir, jobs=1)
    monkeypatch.setattr(segments, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(segments, "_POOL_WINDOW_BYTES", 1)  # every batch fills it
    monkeypatch.setattr(segments, "BATCH_BYTES", 1)  # a file a batch
    sent: list[int] = []
    taken = [0]
    submit = concurrent.futures.ProcessPoolExecutor.submit

    def counting_submit(pool, fn, batch, *args):
        sent.append(len(batch))
        # one batch a worker, and the one whose results are being handed out
        assert len(sent) - taken[0] <= 2 + 1, "more batches in flight than workers"
        return submit(pool, fn, batch, *args)

    monkeypatch.setattr(concurrent.futures.ProcessPoolExecutor, "submit", counting_submit)
    logs = find_logs([str(run_dir)], Diagnostics())
    tasks = [seg for segs in segments.file_segments(logs, 2) for seg in segs]
    order = [seg.log.rank_hint for seg in tasks]
    got = []
    for seg, part in segments.read_segments(tasks, 2, lambda n: None):
        taken[0] += 1
        got.append((seg.log.rank_hint, part.rank))
    assert sent == [1] * 16 and got == [(r, r) for r in order] and order == list(range(16))
    monkeypatch.setattr(concurrent.futures.ProcessPoolExecutor, "submit", submit)
    workers = load(run_dir, jobs=2)
    assert [rank_to_dict(r) for r in workers.ranks] == [rank_to_dict(r) for r in here.ranks]
    assert len(here.ranks) == 16 and here.diagnostics.counts == {}


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
