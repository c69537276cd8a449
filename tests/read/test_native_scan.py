"""The scanner's inner loop in C (``tracekit/read/_scan.c``) against the regex it stands in for.

The C part may pass (skip without Python) only the lines the regex skips: on real logs it stops
at exactly the lines the regex stops at; on damaged ones never later. A Scanner with it reads
the same entries, payloads, line numbers and diagnostics as one without it (the install without
a C compiler), on the fixture logs and on randomly damaged ones, at any chunk size.
"""

from __future__ import annotations

import io
import random
import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIXTURE_LOGS, log_bytes
from test_reader_fastpath import CHROMIUM, START, TENSOR

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reliability"))
from test_reliability_properties import SETTINGS, mutate, mutations
from tracekit.read import envelopes as ev
from tracekit.read.parsers import SOURCE_PARSERS, SUMMARY_PARSERS, by_key

native = pytest.importorskip("tracekit.read._scan", reason="the C part is not built (no compiler)")

#: Every fixture log, plain or gzipped (spmd_auto_gz, a copy of spmd_auto, left out); read gunzipped.
LOGS = sorted(p for p in FIXTURE_LOGS.rglob("*.log*") if p.parent.name != "spmd_auto_gz")
CLEAN = next((FIXTURE_LOGS / "spmd_auto").glob("dedicated_log_torch_trace_rank_0_*.log")).read_bytes()


def _keys(parsers):
    table = by_key(parsers)
    names = frozenset(n.encode() for t, n in table if t == "artifact" and n)
    types = frozenset(t.encode() for t, n in table if t != "artifact")
    return names, types


KEYS = {"summary": _keys(SUMMARY_PARSERS), "source": _keys(SOURCE_PARSERS)}
RANKS = [None, 0, 3, 12]


def _args(names, types, rank):
    mode = 0 if rank is None else 1
    return mode, (str(rank).encode() if mode else b""), tuple(sorted(types)), tuple(sorted(names))


def stops(buf: bytes, names, types, rank) -> tuple[list[int], list[int]]:
    """Where the C loop stops and where the regex stops, over the whole of ``buf``; checks on
    the way that the C loop counts the newlines it passes."""
    limit = buf.rfind(b"\n")
    args = _args(names, types, rank)
    c_stops, pos = [], 0
    while True:
        p, n = native.scan(buf, pos, limit, *args)
        assert n == buf.count(b"\n", pos, limit if p < 0 else p)
        if p < 0:
            break
        c_stops.append(p)
        pos = p + 1
    pat = ev._interesting_line_re(names, rank, types)
    return c_stops, [m.start() for m in pat.finditer(buf, 0, limit)]


@pytest.mark.parametrize("log", LOGS, ids=lambda p: f"{p.parent.name}/{p.name[-12:]}")
@pytest.mark.parametrize("keys", sorted(KEYS))
def test_stops_where_the_regex_stops_on_real_logs(log, keys):
    buf = b"\n" + log_bytes(log)
    for rank in RANKS:
        c_stops, re_stops = stops(buf, *KEYS[keys], rank)
        assert c_stops == re_stops, rank
        assert len(c_stops) >= 1


def test_it_stops_at_the_lines_the_regex_sends_to_python():
    names, types = KEYS["summary"]
    payload = b"\t{}"
    cases = [  # (line, next line, the file's rank)
        (TENSOR.replace(b'"rank": 0', b'"rank": 1'), b"V", 0),  # another rank
        (TENSOR.replace(b'"attempt": 0', b'"attempt": 0.5'), b"V", 0),
        (TENSOR.replace(b"{}", b'{"a": {"b": {}}}'), b"V", 0),  # nested deeper
        (TENSOR, payload, 0),  # payload lines after an envelope without has_payload
        (CHROMIUM, b"V", 0),  # has_payload without payload lines
        (CHROMIUM.replace(b'"frame_id": 0', b'"frame_id": -1'), b"V", 0),
        (START[:-1], b"V", 0),  # cut short
        (CHROMIUM.replace(b'"rank": 0', b'"rank": 10'), payload, 1),  # rank 10 is not rank 1
        (CHROMIUM, payload, None),  # a rank, while the file's is not known
        (CHROMIUM.replace(b'{"chromium_event": {}', b'{"artifact": {}'), payload, 0),
        (CHROMIUM.replace(b'{"chromium_event": {}', b'{"dynamo_start": {}'), payload, 0),  # wanted
        (CHROMIUM.replace(b"V", b"X", 1), payload, 0),  # no glog prefix
    ]
    for line, follow, rank in cases:
        buf = b"\n" + line + b"\n" + follow + b"\n"
        assert ev._interesting_line_re(names, rank, types).match(buf, 0, len(buf) - 1)
        assert native.scan(buf, 0, len(buf) - 1, *_args(names, types, rank))[0] == 0, line[:80]
    # and passes the ordinary ones, but the last before the limit (its next line is not known)
    buf = b"\n" + CHROMIUM + b"\n" + payload + b"\n" + TENSOR + b"\n" + TENSOR + b"\nV\n"
    last = buf.rindex(b"\n", 0, len(buf) - 1)
    assert native.scan(buf, 0, len(buf) - 1, *_args(names, types, 0)) == (last, 4)
    assert ev._interesting_line_re(names, 0, types).search(buf, 0, len(buf) - 1).start() == last


@settings(max_examples=80, **SETTINGS)
@given(mutations(len(CLEAN)), st.sampled_from(RANKS))
def test_never_passes_a_line_the_regex_stops_at(edits, rank):
    buf = b"\n" + mutate(CLEAN, edits)
    names, types = KEYS["summary"]
    c_stops, re_stops = stops(buf, names, types, rank)
    assert set(re_stops) <= set(c_stops)
    # it stops anywhere else only at a blank line (the regex skips those; Python does too)
    assert all(buf[p + 1] == 10 for p in set(c_stops) - set(re_stops))


def _scan(data: bytes, native_on: bool, chunk_size: int, names) -> tuple:
    reports: list[tuple] = []
    sc = ev.Scanner(lambda k, ln, d: reports.append((k, ln, d)), artifact_names=names,
                    entry_types=frozenset({"dynamo_start"}), chunk_size=chunk_size, native=native_on,
                    payload_for=lambda t, n: n != b"before_post_grad_graph")
    got = [(e.lineno, e.line, e.start, e.name, e.payload_lines, e.payload) for e in sc.entries(io.BytesIO(data))]
    return got, reports, sc.rank, sc.lines_read


NAMES = frozenset(n.decode() for n in KEYS["summary"][0])


@pytest.mark.parametrize("log", LOGS[::3], ids=lambda p: f"{p.parent.name}/{p.name[-12:]}")
def test_a_scanner_reads_the_same_with_and_without_it(log):
    data = log_bytes(log)
    for chunk in (4096, ev.CHUNK_SIZE):
        with_c = _scan(data, True, chunk, NAMES)
        assert with_c == _scan(data, False, chunk, NAMES)
        assert len(with_c[0]) > 5 and with_c[3] == data.count(b"\n")


@settings(max_examples=60, **SETTINGS)
@given(mutations(len(CLEAN)), st.integers(1, 6000))
def test_a_scanner_reads_the_same_on_damaged_logs(edits, chunk_size):
    data = mutate(CLEAN[:200_000], edits)
    assert _scan(data, True, chunk_size, NAMES) == _scan(data, False, chunk_size, NAMES)


def test_block_end_is_the_regex_search_and_count():
    block = re.compile(rb"\n[^\t]")
    rng = random.Random(3)
    checked = 0
    for _ in range(5000):
        buf = bytes(rng.choice(b"\n\t\tab") for _ in range(rng.randrange(2, 40)))
        limit = buf.rfind(b"\n")
        starts = [i for i in range(limit) if buf[i] == 10]
        if not starts:
            continue
        a = rng.choice(starts)
        m = block.search(buf, a, limit + 1)
        e = limit if m is None else m.start()
        assert native.block_end(buf, a, limit) == (-1 if m is None else m.start(), buf.count(b"\n", a + 1, e))
        checked += 1
    assert checked > 3000


def _text(path: Path) -> bytes | None:
    """A log's bytes as the reader sees them (a ``.gz`` decompressed as far as it can be), None
    for a file that cannot be read (the corpus's unreadable one)."""
    from tracekit.read.sources import open_log

    try:
        stream, raw = open_log(str(path))
    except OSError:
        return None
    with raw:
        out = []
        try:
            while chunk := stream.read(1 << 20):
                out.append(chunk)
        except OSError:
            pass
    return b"".join(out)


def _corpus_logs(tmp_path_factory) -> list[Path]:
    from corpus.make_corpus import build_corpus

    out = tmp_path_factory.mktemp("corpus")
    build_corpus(out, FIXTURE_LOGS / "spmd_auto", big_mb=2)  # the long line: 2 MB, not 50
    return sorted(p for p in out.rglob("*") if p.is_file() and p.name != "manifest.json")


def test_the_c_loop_and_the_regex_read_alike_on_every_fixture_and_the_damaged_corpus(tmp_path_factory):
    """The one grammar kept twice (issue 40): a Scanner with the C loop and one with the regex
    alone read the same entries, payloads, line numbers, diagnostics and rank, on every fixture
    log and on every file of the damaged corpus (tests/corpus/make_corpus.py), at the reader's
    chunk size and at 4 KiB (lines cut across chunks)."""
    corpus = _corpus_logs(tmp_path_factory)
    assert len(LOGS) >= 30 and len(corpus) >= 20
    reports = unreadable = 0
    for path in LOGS + corpus:
        data = _text(path)
        if data is None:
            unreadable += 1
            continue
        for chunk in (4096, ev.CHUNK_SIZE):
            with_c = _scan(data, True, chunk, NAMES)
            assert with_c == _scan(data, False, chunk, NAMES), path
        reports += len(with_c[1])
    assert reports > 50 and unreadable == 1  # damaged: both report its damage alike
