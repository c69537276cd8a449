"""A small rank log (up to ``sources.WHOLE_READ_MAX``) is read whole, in one ``read``, and served
from memory (issue 21: 100,000 small rank logs). What is read must be exactly what the buffered
path reads: the same entries, lines and diagnostics, for plain and gzip logs, a file that grew
after it was listed, and a file whose reads fail."""

from __future__ import annotations

import gzip
import importlib.util
import io
import os
import sys

import pytest

from conftest import FIXTURE_LOGS, ROOT
from tracekit.model import Diagnostics
from tracekit.read.reader import load, read_file
from tracekit.read.segments import Segment, read_segment
from tracekit.read.sources import WHOLE_READ_MAX, LogFile, find_logs, open_log

SRC = next((FIXTURE_LOGS / "spmd_auto").glob("dedicated_log_torch_trace_rank_0_*.log"))
_spec = importlib.util.spec_from_file_location("bench_make_ranks", ROOT / "bench" / "make_ranks.py")
_make_ranks = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _make_ranks
_spec.loader.exec_module(_make_ranks)


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> bytes:
    """spmd_auto's rank 0 as ``bench/make_ranks.py --small`` writes it: the entries summarize
    reads (two graphs), a few KB."""
    d = tmp_path_factory.mktemp("small")
    _make_ranks.make_ranks(d / "run", 1, small=True)
    [p] = (d / "run").iterdir()
    return p.read_bytes()


def _events(result) -> list[tuple]:
    ev = result.events
    return [(k, v, c, ln) for k, v, c, ln in ev], result.rank, result.lines, result.diagnostics.counts


def _small(tmp_path, data: bytes, name: str = "dedicated_log_torch_trace_rank_0_x.log") -> LogFile:
    p = tmp_path / name
    p.write_bytes(data)
    [lg] = find_logs([str(p)], Diagnostics())
    return lg


def test_a_small_log_is_read_whole_from_memory(tmp_path, small):
    lg = _small(tmp_path, small)
    assert 4_000 < lg.size <= WHOLE_READ_MAX
    stream, raw = open_log(lg.path, lg.size)
    assert isinstance(raw, io.BytesIO) and stream is raw
    assert raw.read() == small
    buffered, braw = open_log(lg.path)  # no size given: the buffered file
    assert isinstance(braw, io.BufferedReader)
    braw.close()


def test_a_log_over_the_size_is_read_buffered(tmp_path):
    data = SRC.read_bytes()
    lg = _small(tmp_path, data)
    assert lg.size > WHOLE_READ_MAX
    stream, raw = open_log(lg.path, lg.size)
    assert isinstance(raw, io.BufferedReader)
    raw.close()


def test_the_same_events_as_the_buffered_path(tmp_path, monkeypatch, small):
    lg = _small(tmp_path, small + b"V1204 not a glog line\n\n\tan orphan payload line\n")
    whole = read_segment(Segment(lg))
    monkeypatch.setattr("tracekit.read.sources.WHOLE_READ_MAX", -1)
    buffered = read_segment(Segment(lg))
    assert _events(whole) == _events(buffered)
    assert whole.rank == 0 and len(whole.events) == 12
    assert whole.diagnostics.counts == {"bad_prefix": 1, "orphan_payload": 1}


def test_a_small_gzip_log(tmp_path, small):
    lg = _small(tmp_path, gzip.compress(small), "dedicated_log_torch_trace_rank_0_x.log.gz")
    assert lg.size <= WHOLE_READ_MAX
    plain = _small(tmp_path, small)
    assert _events(read_segment(Segment(lg))) == _events(read_segment(Segment(plain)))


def test_a_log_that_grew_after_it_was_listed_is_read_to_its_end(tmp_path, small):
    lg = _small(tmp_path, small)
    first = read_file(lg)
    with open(lg.path, "ab") as f:  # another compile's entries appended since the listing
        f.write(small.replace(b'"frame_id": 0', b'"frame_id": 9'))
    assert os.path.getsize(lg.path) == 2 * lg.size  # the listed size is now half the file
    grown = read_file(lg)
    assert len(grown.graphs) == 2 * len(first.graphs) == 4
    assert grown.diagnostics.counts == {}


def test_a_file_whose_reads_fail_is_unreadable(tmp_path):
    eio = tmp_path / "dedicated_log_torch_trace_rank_5_x.log"
    os.symlink("/proc/self/mem", eio)  # opens, then every read fails with EIO
    run = load([str(tmp_path)], jobs=1)
    assert run.diagnostics.counts == {"unreadable_file": 1}
    assert run.diagnostics.examples[0]["detail"] == "Input/output error"


@pytest.mark.parametrize("size", [0, 1])
def test_empty_and_one_byte_logs(tmp_path, size):
    lg = _small(tmp_path, b"\n"[:size])
    res = read_segment(Segment(lg))
    assert len(res.events) == 0
    assert res.diagnostics.counts == ({"empty_file": 1} if size == 0 else {})


def test_a_listed_file_is_read_by_its_worker_without_a_stat(tmp_path, small, monkeypatch):
    # a long listing's workers (segments._read_named) take each file's size from the read
    # itself: open, read, read (its end), close; fstat only for a file over WHOLE_READ_MAX
    from tracekit.read import segments

    lg = _small(tmp_path, small)
    big = _small(tmp_path, SRC.read_bytes(), "dedicated_log_torch_trace_rank_1_x.log")
    gone = str(tmp_path / "dedicated_log_torch_trace_rank_2_x.log")
    stats: list[str] = []
    real_stat = os.stat
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: stats.append(p) or real_stat(p, *a, **k))
    got = list(segments._read_named([(lg.path, 0), (big.path, 1), (gone, 2)], False).results())
    monkeypatch.undo()
    assert stats == []
    assert [size for size, _res in got] == [len(small), big.size, 0] and big.size > WHOLE_READ_MAX
    assert _events(got[0][1]) == _events(read_segment(Segment(lg)))
    assert _events(got[1][1]) == _events(read_segment(Segment(big)))
    assert got[2][1].diagnostics.counts == {"unreadable_file": 1} and not got[2][1].readable


def test_read_small_reads_past_a_short_read_to_the_end(tmp_path, small, monkeypatch):
    from tracekit.read.sources import read_small

    lg = _small(tmp_path, small)
    assert read_small(lg.path) == (len(small), small)
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: real_read(fd, min(n, 1000)))  # a file system of short reads
    assert read_small(lg.path) == (len(small), small)
    assert read_small(lg.path, limit=len(small) - 1) == (len(small), None)  # over the limit: left to be read in pieces
    with pytest.raises(OSError):
        read_small(str(tmp_path / "missing.log"))
