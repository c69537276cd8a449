"""Reading thousands of rank logs: one scanner regex for every rank (not one compiled per
file), and lines of another rank still reported, whichever pattern a scanner uses."""

from __future__ import annotations

import importlib.util
import io
import sys

import pytest

import tracekit
from conftest import FIXTURE_LOGS, ROOT
from tracekit.read import envelopes as ev
from tracekit.read.parsers import SUMMARY_PARSERS, by_key

_spec = importlib.util.spec_from_file_location("bench_make_ranks", ROOT / "bench" / "make_ranks.py")
make_ranks = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = make_ranks
_spec.loader.exec_module(make_ranks)

SRC = next((FIXTURE_LOGS / "spmd_auto").glob("dedicated_log_torch_trace_rank_0_*.log"))
NAMES = frozenset(n for t, n in by_key(SUMMARY_PARSERS) if t == "artifact")


@pytest.mark.parametrize("native", [False, True])
def test_one_regex_compiled_for_sixteen_ranks(tmp_path, monkeypatch, native):
    if native and ev._native_scan is None:
        pytest.skip("the C part is not built")
    monkeypatch.setattr(ev, "NATIVE", native)
    make_ranks.make_ranks(tmp_path, 16, small=True)
    ev._interesting_line_re.cache_clear()
    run = tracekit.load([tmp_path], jobs=1)
    assert [r.rank for r in run.ranks] == list(range(16)) and run.diagnostics.total == 0
    # the regex alone: one pattern until a file's rank is known, one for any rank after, not
    # one per rank; with the C loop, none at all
    assert ev._interesting_line_re.cache_info().misses == (0 if native else 2)


def _other_rank_log() -> tuple[bytes, list[int]]:
    """spmd_auto rank 0 with three skipped envelopes made rank 5, 1 and 12 (a chromium event,
    a describe_tensor, the compilation metrics), and a skipped payload quoting a rank."""
    lines = SRC.read_bytes().split(b"\n")
    idx = [i for i, ln in enumerate(lines) if ln.startswith(b"V")]
    chrom = next(i for i in idx if b'{"chromium_event": {}, "rank": 0' in lines[i] and i > 100)
    tensor = next(i for i in idx if b'{"describe_tensor": ' in lines[i])
    metrics = next(i for i in idx if b'{"compilation_metrics": ' in lines[i])
    lines[chrom] = lines[chrom].replace(b'"rank": 0,', b'"rank": 5,')
    lines[tensor] = lines[tensor].replace(b'"rank": 0,', b'"rank": 1,')
    lines[metrics] = lines[metrics].replace(b'"rank": 0,', b'"rank": 12,')
    payload = next(i for i in range(chrom + 1, len(lines)) if lines[i].startswith(b"\t{"))
    lines[payload] = b'\t{"rank": 7, ' + lines[payload][2:]  # nobody reads it: not checked
    return b"\n".join(lines), sorted(i + 1 for i in (chrom, tensor, metrics))


def _scan(data: bytes, **kw) -> list[tuple[str, int]]:
    reports: list[tuple[str, int]] = []
    sc = ev.Scanner(lambda k, ln, d: reports.append((k, ln)), **kw)
    kept = [e.lineno for e in sc.entries(io.BytesIO(data))]
    assert len(kept) == 15 and sc.rank == 0  # the artifacts summarize reads, in spmd_auto rank 0 (2 post-grad graphs)
    return reports


@pytest.mark.parametrize("native", [False, True], ids=["regex", "C"])
@pytest.mark.parametrize("kw", [
    {},  # regex: any-rank pattern and the rank search, all along (a 0.7 MB file); C: own rank
    {"exact_rank_after": 0},  # the rank's own pattern from the first chunk
    {"exact_rank_after": 300_000, "chunk_size": 65536},  # one, then the other, mid-file
    {"chunk_size": 4096},
])
def test_other_rank_lines_reported_by_either_pattern(kw, native):
    data, where = _other_rank_log()
    assert where == [62, 104, 5803]  # bytes 3,548, 12,803 and 437,494 of 736,366
    assert _scan(data, artifact_names=NAMES, native=native, **kw) == [("other_rank", n) for n in where]


def test_with_the_c_loop_no_line_of_the_own_rank_is_searched_for_another():
    """With the C loop the file's own rank is checked from the start: the any-rank pass and its
    rank search (``_watch_ranks``) are never used, whatever the file's size."""
    if not ev.NATIVE:
        pytest.skip("tracekit.read._scan is not built")
    data, _ = _other_rank_log()
    sc = ev.Scanner(lambda k, ln, d: None, artifact_names=NAMES)
    calls = []
    sc._watch_ranks = lambda *a: calls.append(a)  # type: ignore[method-assign]
    assert sum(1 for _ in sc.entries(io.BytesIO(data))) == 15
    assert calls == [] and sc._native_args[0] == 1  # mode 1: this rank's digits


def test_the_every_line_path_agrees():
    data, where = _other_rank_log()
    names = frozenset(n.encode() for n in NAMES)
    assert _scan(data, want=lambda t, n: t == b"artifact" and n in names) == [("other_rank", n) for n in where]


def test_a_rank_only_inside_the_metadata_is_not_another_rank():
    lines = SRC.read_bytes().split(b"\n")
    i = next(i for i, ln in enumerate(lines) if b'{"dynamo_start": ' in ln)
    # no rank of its own, a frame that mentions one: skipped by the any-rank pattern, found
    # by the rank search, and not reported (it is no other rank's line)
    lines[i] = lines[i].replace(b', "rank": 0,', b",").replace(b'"line": 454', b'"line": 454, "rank": 2')
    assert b'"rank": 2' in lines[i] and b'"rank": 0' not in lines[i]
    for kw in ({}, {"exact_rank_after": 0}):
        for native in (False, True):
            assert _scan(b"\n".join(lines), artifact_names=NAMES, native=native, **kw) == []


def test_the_any_rank_pattern_skips_lines_of_every_rank():
    pat = ev._interesting_line_re(frozenset(n.encode() for n in NAMES), ev.ANY_RANK)
    line = next(ln for ln in SRC.read_bytes().split(b"\n") if ln.startswith(b"V") and b"describe_tensor" in ln)
    for r in (b"0", b"1", b"8191", b"99999"):
        assert pat.match(b"\n" + line.replace(b'"rank": 0', b'"rank": ' + r) + b"\nV") is None
    assert pat.match(b"\n" + line.replace(b'"rank": 0', b'"rank": -1') + b"\nV") is not None


def test_the_collector_is_paused_while_reading_and_resumed_after():
    import gc

    from bucketing.gc_pause import gc_paused
    from tracekit.read.reader import load

    seen = []

    @gc_paused()
    def read(fail: bool) -> int:
        seen.append(gc.isenabled())
        if fail:
            raise ValueError("boom")
        return 7

    assert gc.isenabled()
    assert read(False) == 7
    with pytest.raises(ValueError):
        read(True)
    assert seen == [False, False] and gc.isenabled()
    gc.disable()
    try:
        read(False)
        assert not gc.isenabled()  # left off for a caller that had turned it off
    finally:
        gc.enable()
    assert load.__wrapped__.__name__ == "load"  # tracekit.load reads with it paused
