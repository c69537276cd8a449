"""A large file is read in segments of bounded size, each applied to its file's builder as it
comes (issue 21: memory grows with what is distinct, not with the log's size).

- :func:`tracekit.read.segments.segment_count`: one segment under ``SPLIT_MIN_BYTES``; ``jobs``
  segments of at least 32 MiB; above ``jobs * SEGMENT_MAX_BYTES``, whole rounds of ``jobs``
  segments of at most ``SEGMENT_MAX_BYTES``.
- A file read in more segments than jobs (the pool, in order) reads as one.
- :class:`tracekit.read.pairing.FileBuilder` holds the segments that come before any rank is known,
  and applies them once one is: the file reads as if whole.
"""

from __future__ import annotations

import pytest

from conftest import FIXTURE_LOGS
from tracekit.read import segments
from tracekit.model import Diagnostics
from tracekit.model.fields import rank_to_dict
from tracekit.read.pairing import FileBuilder, build_file
from tracekit.read.parsers import SUMMARY_PARSERS
from tracekit.read.reader import load, read_file
from tracekit.read.segments import Segment, read_segment, segment_count
from tracekit.read.sources import find_logs

MiB = 1 << 20
RANK0 = next((FIXTURE_LOGS / "spmd_auto").glob("dedicated_log_torch_trace_rank_0_*.log"))


@pytest.mark.parametrize("size_mib, jobs, count", [
    (10, 2, 1), (63, 8, 1),  # under SPLIT_MIN_BYTES: whole
    (64, 1, 1), (64, 2, 2), (64, 8, 2), (110, 2, 2), (110, 8, 3), (256, 2, 2), (256, 8, 8),  # a round
    (129, 1, 2), (300, 2, 4), (550, 2, 6), (1024, 2, 8), (1025, 2, 10), (4096, 8, 32),  # whole rounds
])
def test_segment_count(size_mib, jobs, count):
    assert segment_count(size_mib * MiB, jobs) == count
    if count > jobs:
        assert size_mib * MiB / count <= segments.SEGMENT_MAX_BYTES and count % jobs == 0


def test_a_file_in_more_segments_than_jobs_reads_as_one(tmp_path, monkeypatch):
    src = RANK0.read_bytes()
    p = tmp_path / "dedicated_log_torch_trace_rank_0_x.log"
    p.write_bytes(src * 4)  # four runs of 0/0 back to back: indices 0..7 for 0/0
    whole = load(p, jobs=1)
    monkeypatch.setattr(segments, "SPLIT_MIN_BYTES", 1 * MiB)
    monkeypatch.setattr(segments, "SEGMENT_MAX_BYTES", MiB // 2)  # 2.8 MiB: 6 segments for 2 jobs
    monkeypatch.setattr(segments, "PARALLEL_MIN_BYTES", 1 * MiB)  # read by the pool
    (segs,) = segments.file_segments(find_logs([str(p)], Diagnostics()), 2)
    assert len(segs) == 6 and all(s.rank == 0 for s in segs) and segs[-1].end is None
    assert [a.end for a in segs[:-1]] == [b.start for b in segs[1:]]
    for jobs in (2, 1):
        split = load(p, jobs=jobs)
        assert [g.graph_index for g in split.ranks[0].graphs] == list(range(8))
        assert rank_to_dict(split.ranks[0]) == rank_to_dict(whole.ranks[0])
        assert [g.line for g in split.ranks[0].graphs][6] == 3326 + 3 * 9441  # fourth copy's forward
        assert split.diagnostics.counts == whole.diagnostics.counts == {}


def test_segments_before_the_rank_is_known_are_held_until_it_is(tmp_path):
    data = RANK0.read_bytes()
    # the log's torch_version entry (no rank: torch writes it before any compile), moved to the
    # top: segment 0 is that entry, segment 1 the whole log
    a = data.index(b"\n", data.index(b'{"artifact": {"name": "torch_version"')) + 1
    start = data.rindex(b"\n", 0, a - 1) + 1
    end = a
    while data[end:end + 1] == b"\t":
        end = data.index(b"\n", end) + 1
    version = data[start:end]
    p = tmp_path / "dedicated_log_torch_trace_rank_0_x.log"
    p.write_bytes(version + data)
    [lg] = find_logs([str(p)], Diagnostics())
    cut = len(version)
    first, rest = read_segment(Segment(lg, 0, cut)), read_segment(Segment(lg, cut, None))
    assert first.rank is None and len(first.events) == 1 and rest.rank == 0
    fb = FileBuilder(lg, SUMMARY_PARSERS)
    fb.add(first)  # no rank yet: held, not applied
    assert fb.diag.counts == {} and fb._held == [first]
    fb.add(rest)
    res = fb.finish()
    alone = read_file(lg)
    assert res.rank == alone.rank == 0 and res.entries == alone.entries == len(first.events) + len(rest.events)
    assert res.graphs == alone.graphs and res.compile_ids == alone.compile_ids
    assert res.torch_version == alone.torch_version == "2.13.0+cpu"
    assert build_file(lg, [first, rest], SUMMARY_PARSERS).graphs == alone.graphs
    # a file no segment gives a rank to takes its name's
    named = FileBuilder(lg, SUMMARY_PARSERS)
    named.add(first)
    assert named.finish().rank == 0 and named._held == []
