"""The reader's worker processes never outlive the read (a pool left running at interpreter exit
kept a CI run from ending): read with two workers over spmd_auto's four ranks copied to sixteen
files, then left half way in each way a caller can leave it, and no child process of this one
is left (read in /proc: every thread's ``children``).

- the iterator dropped without ``close()`` (its generator finalized), with the cyclic
  collector paused as ``load`` pauses it;
- ``load`` failing half way (an error or Ctrl-C in the merge) while the caller still holds the
  error, whose traceback holds ``load``'s frame;
- a worker's read failing: the error shows here and the pool ends.
"""

from __future__ import annotations

import gc
import multiprocessing
import os

import pytest

from conftest import FIXTURE_LOGS
from tracekit.model import Diagnostics
from tracekit.read import reader, segments
from tracekit.read.sources import find_logs, rank_from_name

SPMD = FIXTURE_LOGS / "spmd_auto"


def children() -> list[int]:
    """This process's child processes (every thread's, as /proc lists them), but those it had
    before the test (:data:`_BEFORE`: another module's helpers, as multiprocessing's resource
    tracker that a Dask cluster starts, which lives as long as this process)."""
    me = f"/proc/{os.getpid()}/task"
    out: list[int] = []
    for tid in os.listdir(me):
        try:
            with open(f"{me}/{tid}/children") as f:
                out += [int(pid) for pid in f.read().split()]
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
    return sorted(set(out) - _BEFORE)


_BEFORE: set[int] = set()


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    """spmd_auto's four ranks as sixteen files, each its own batch, read with workers."""
    d = tmp_path / "run"
    d.mkdir()
    for src in sorted(SPMD.glob("dedicated_log_torch_trace_rank_*.log")):
        r = rank_from_name(src.name)
        for copy in range(4):
            text = src.read_bytes().replace(b'"rank": %d,' % r, b'"rank": %d,' % (r + 4 * copy))
            (d / f"dedicated_log_torch_trace_rank_{r + 4 * copy}_c.log").write_bytes(text)
    monkeypatch.setattr(segments, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(segments, "BATCH_BYTES", 1)  # a file a batch
    _BEFORE.clear()
    _BEFORE.update(children())
    return d


def _tasks(run_dir) -> list[segments.Segment]:
    logs = find_logs([str(run_dir)], Diagnostics())
    return [seg for segs in segments.file_segments(logs, 2) for seg in segs]


def test_an_iterator_dropped_half_way_leaves_no_worker(run_dir):
    it = segments.read_segments(_tasks(run_dir), 2, lambda n: None)
    seg, part = next(it)
    assert (seg.log.rank_hint, part.rank, len(part.events)) == (0, 0, 16)
    assert len(children()) == 2  # the two workers
    was_on = gc.isenabled()
    gc.disable()  # as in load: only reference counting frees the generator
    try:
        del it
        assert children() == []
    finally:
        if was_on:
            gc.enable()


def _fail_after_first_file(monkeypatch, exc: BaseException) -> None:
    """``merge_files`` made to take one file from the reader, then raise ``exc``."""

    def merge(paths, files, diagnostics):
        first = next(iter(files))
        assert first.rank == 0 and len(children()) == 2  # the workers were reading
        raise exc

    monkeypatch.setattr(reader, "merge_files", merge)


def test_a_load_failing_half_way_leaves_no_worker_while_its_error_is_held(run_dir, monkeypatch):
    _fail_after_first_file(monkeypatch, ValueError("merge failed"))
    with pytest.raises(ValueError, match="merge failed") as held:
        reader.load(run_dir, jobs=2)
    assert held.value.__traceback__ is not None  # holds load's frame, and what it read with
    assert children() == []


def test_ctrl_c_half_way_through_a_load_leaves_no_worker(run_dir, monkeypatch):
    _fail_after_first_file(monkeypatch, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt) as held:
        reader.load(run_dir, jobs=2)
    assert held.value.__traceback__ is not None
    assert children() == []


def test_a_worker_whose_read_fails_ends_the_pool_and_the_error_shows_here(run_dir, monkeypatch):
    real = segments.read_segment

    def failing(seg, *args, **kwargs):
        if seg.log.rank_hint == 5 and os.getpid() != parent:  # a worker, on rank 5
            raise OSError(5, "worker failed")
        return real(seg, *args, **kwargs)

    parent = os.getpid()
    monkeypatch.setattr(segments, "read_segment", failing)  # the workers are forked with it
    with pytest.raises(OSError, match="worker failed") as held:
        reader.load(run_dir, jobs=2)
    assert held.value.errno == 5
    assert children() == []


def test_a_pool_that_could_fork_only_one_worker_leaves_none(run_dir, monkeypatch):
    # the second fork fails: the pool never starts the thread that would end the first worker
    # (left waiting for work, the interpreter's exit joined it forever: a CI run that never ended)
    real_fork, made = os.fork, []

    def fork():
        if made:
            raise BlockingIOError(11, "Resource temporarily unavailable")
        pid = real_fork()
        if pid:
            made.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", fork)
    got = [(seg.log.rank_hint, part.rank) for seg, part in segments.read_segments(_tasks(run_dir), 2, lambda n: None)]
    assert got == [(r, r) for r in range(16)] and len(made) == 1  # all read here
    assert children() == []
    assert multiprocessing.active_children() == []  # none left for the exit to join
