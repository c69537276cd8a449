"""Huge logs: a 50 MB log (the real rank-0 fixture log repeated 70 times, so the reader cuts it
into segments read in parallel) gives exactly the same summary and diagnostics read whole
(jobs=1) as read in segments (jobs=2), clean and damaged."""

from __future__ import annotations

import gzip

import pytest

from conftest import FIXTURE_LOGS
from tracekit.read import segments
from tracekit.read.reader import load
from tracekit.render.summary_document import summary_document

SRC = next((FIXTURE_LOGS / "spmd_auto").glob("dedicated_log_torch_trace_rank_0_*.log")).read_bytes()
COPIES = 70
LINES = SRC.count(b"\n")  # 9441 lines per copy


def _md5_break(data: bytes) -> bytes:
    """The forward outcome of the copy in the middle edited (its MD5 no longer matches)."""
    start = len(SRC) * (COPIES // 2)
    i = data.index(b"\tfsdp_groups=['0'], group_size=4, nNodes=1, bucket_cap_mb=27.4, all_gather 8->1", start)
    return data[:i] + data[i:].replace(b"all_gather 8->1", b"all_gather 9->1", 1)


#: variant -> (damage, diagnostics counts, graphs, all-gathers before bucketing). Each copy has
#: a forward (8 all-gathers) and a backward (5) outcome.
VARIANTS = {
    "clean": (lambda d: d, {}, 140, 70 * 13),
    "crlf": (lambda d: d.replace(b"\n", b"\r\n"), {"crlf_line_ends": 1}, 140, 70 * 13),
    "cut": (lambda d: d[: -len(SRC) // 2], {"truncated_entry": 1}, 139, 70 * 13 - 5),  # last backward
    "nul": (lambda d: d[: len(d) // 2] + b"\x00" * 65536 + b"\n" + d[len(d) // 2 :], {"nul_bytes": 1},
            140, 70 * 13),
    "md5": (_md5_break, {"md5_mismatch": 1}, 139, 70 * 13 - 8),  # one forward
}


@pytest.fixture(scope="module")
def huge():
    return SRC * COPIES


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_huge_log_whole_and_in_segments_agree(tmp_path, huge, variant, monkeypatch):
    make, counts, graphs, all_gathers = VARIANTS[variant]
    monkeypatch.setattr(segments, "SPLIT_MIN_BYTES", 16 << 20)  # the 50 MB log is cut into segments
    monkeypatch.setattr(segments, "PARALLEL_MIN_BYTES", 16 << 20)  # read by forked workers
    p = tmp_path / "dedicated_log_torch_trace_rank_0_huge.log"
    p.write_bytes(make(huge))
    assert p.stat().st_size >= segments.SPLIT_MIN_BYTES  # big enough to be cut into segments
    whole = summary_document(load(str(p), jobs=1))
    parts = summary_document(load(str(p), jobs=2))
    assert parts == whole
    assert whole["diagnostics"]["counts"] == counts
    assert whole["totals"]["graphs"] == graphs
    assert whole["totals"]["collectives"]["all_gather"]["before"] == all_gathers
    if variant in ("nul", "md5"):
        (ex,) = whole["diagnostics"]["examples"]
        assert ex["line"] > LINES * (COPIES // 2 - 1)  # named at its line, deep in the file


def test_huge_gzip_log(tmp_path, huge):
    p = tmp_path / "dedicated_log_torch_trace_rank_0_huge.log.gz"
    p.write_bytes(gzip.compress(huge, compresslevel=1))
    run = load(str(p), jobs=2)
    assert run.diagnostics.counts == {} and len(run.ranks[0].graphs) == 140
    assert [g.graph_index for g in run.ranks[0].graphs[:4]] == [0, 1, 2, 3]  # 0/0 seen 140 times
