"""The scanner reads a seekable stream by stepping back over each chunk's partial last line
instead of gluing it to the next chunk: it must see exactly what it sees on a stream that can
only be read (gzip), whatever the chunk size and whatever the damage."""

from __future__ import annotations

import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURE_LOGS
from tracekit.read import envelopes as ev
from tracekit.read.parsers import SUMMARY_PARSERS, by_key

SRC = next((FIXTURE_LOGS / "spmd_auto").glob("dedicated_log_torch_trace_rank_0_*.log"))
CLEAN = SRC.read_bytes()
HEAD = CLEAN[: CLEAN.index(b"\nV", 240_000) + 1]  # the forward graph's artifacts, whole entries
NAMES = frozenset(n for t, n in by_key(SUMMARY_PARSERS) if t == "artifact") | {"torch_version"}


class ReadOnly:
    """A stream with nothing but ``read``: the scanner cannot step back in it."""

    def __init__(self, data: bytes) -> None:
        self._f = io.BytesIO(data)
        self.read = self._f.read


def scan(stream, chunk_size: int):
    reports: list[tuple[str, int]] = []
    read: list[int] = []
    sc = ev.Scanner(lambda k, ln, d: reports.append((k, ln)), artifact_names=NAMES,
                    chunk_size=chunk_size, on_chunk=read.append)
    got = [(e.lineno, e.line, e.payload, e.payload_lines) for e in sc.entries(stream)]
    return got, reports, sc.lines_read, sum(read)


def test_stepping_back_is_used_on_files_and_bytesio(tmp_path):
    p = tmp_path / "x.log"
    p.write_bytes(HEAD)
    with open(p, "rb") as f:
        assert ev._rewinder(f) is not None
    assert ev._rewinder(io.BytesIO(HEAD)) is not None
    assert ev._rewinder(ReadOnly(HEAD)) is None


def test_real_log_head_reads_the_same_both_ways():
    got, reports, lines, nread = scan(io.BytesIO(HEAD), 4096)
    assert (got, reports, lines) == scan(ReadOnly(HEAD), 4096)[:3]
    assert lines == HEAD.count(b"\n") + (not HEAD.endswith(b"\n"))
    assert nread == len(HEAD)  # bytes read again after a step back are not counted twice
    assert [(g[0], g[1][g[1].index(b'"name": ') + 9:].split(b'"')[0]) for g in got] == EXPECTED
    assert reports == []


EXPECTED = [(13, b"torch_version"), (2887, b"before_post_grad_graph"),
            (3248, b"pre_bucketing_collective_sizes"), (3324, b"pre_bucketing_collective_sizes_after"),
            (3326, b"pre_bucketing_fsdp_collectives")]


pieces = st.sampled_from([b"\n", b"\t", b"\r\n", b"\x00", b"}", b"\n\t", b"\n\n", b"x" * 9000])


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.integers(1, 6000), st.lists(st.tuples(st.integers(0, len(HEAD)), pieces,
                                                st.integers(0, 400)), max_size=5),
       st.booleans())
def test_seekable_and_read_only_streams_agree(chunk_size, edits, cut):
    data = HEAD
    for pos, piece, n in edits:
        data = data[:pos] + piece + data[pos + n:]
    if cut:
        data = data[: len(data) * 2 // 3]  # ends inside an entry, maybe inside a line
    assert scan(io.BytesIO(data), chunk_size) == scan(ReadOnly(data), chunk_size)
