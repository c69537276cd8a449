"""The fast path's regex (:func:`tracekit.read.envelopes._interesting_line_re`) on real torch
envelope lines: the ordinary ones, nested metadata included, stay inside the regex engine;
the same lines damaged reach Python and are reported exactly as on the every-line path."""

from __future__ import annotations

import io

import pytest

from conftest import FIXTURE_LOGS
from tracekit.read import envelopes as ev
from tracekit.read.parsers import SUMMARY_PARSERS, by_key

SRC = next((FIXTURE_LOGS / "spmd_auto").glob("dedicated_log_torch_trace_rank_0_*.log"))
LINES = SRC.read_bytes().split(b"\n")
NAMES = frozenset(n.encode() for t, n in by_key(SUMMARY_PARSERS) if t == "artifact")


def first(key: bytes) -> bytes:
    return next(ln for ln in LINES if key in ln and not ln.startswith(b"\t"))


TENSOR = first(b'{"describe_tensor": ')  # metadata with "dynamo_hint_overrides": {} inside
START = first(b'{"dynamo_start": ')  # metadata with a list of frame objects
CHROMIUM = first(b'{"chromium_event": ')  # torch's usual keys, then has_payload


def skipped(line: bytes, follow: bytes = b"V") -> bool:
    """Whether the regex lets ``line`` (then a line starting with ``follow``) through unseen."""
    pat = ev._interesting_line_re(NAMES, 0)
    return pat.match(b"\n" + line + b"\n" + follow) is None


def test_torch_lines_stay_in_the_regex():
    assert skipped(TENSOR)
    assert skipped(START)
    assert skipped(CHROMIUM, follow=b"\t{}")


@pytest.mark.parametrize("line, follow", [
    (TENSOR.replace(b'"rank": 0', b'"rank": 1'), b"V"),  # another rank
    (TENSOR.replace(b'"attempt": 0', b'"attempt": 0.5'), b"V"),  # not torch's keys
    (TENSOR.replace(b"{}", b'{"a": {"b": {}}}'), b"V"),  # nested deeper
    (TENSOR, b"\t"),  # payload lines after an envelope without has_payload
    (CHROMIUM, b"V"),  # has_payload without payload lines
    (CHROMIUM.replace(b'"frame_id": 0', b'"frame_id": -1'), b"V"),
    (START[:-1], b"V"),  # cut short
    (CHROMIUM.replace(b'"rank": 0', b'"rank": 1'), b"\t{}"),  # another rank, common form
    (CHROMIUM.replace(b'{"chromium_event": {}', b'{"artifact": {}'), b"\t{}"),  # nameless artifact
])
def test_unusual_lines_reach_python(line, follow):
    assert not skipped(line, follow)


def scan(data: bytes, **kw):
    reports: list[tuple[str, int]] = []
    sc = ev.Scanner(lambda k, ln, d: reports.append((k, ln)), chunk_size=4096, **kw)
    sc.set_rank(0)
    kept = [(e.lineno, e.name) for e in sc.entries(io.BytesIO(data))]
    return kept, reports, sc.lines_read


def test_damaged_torch_lines_are_reported_as_on_the_every_line_path():
    payload = b"\t{}"
    data = b"\n".join([
        CHROMIUM, payload,
        TENSOR.replace(b'"rank": 0', b'"rank": 1'),  # line 3: other_rank
        TENSOR, payload,  # line 5: orphan_payload
        START.replace(b'"line": 454', b'"line": 454, "rank": 2'),  # rank inside the metadata
        CHROMIUM,  # line 7: missing_payload
        TENSOR[:-1] + b"]",  # line 8: bad_json (does not end with "}")
        START, b"",
    ])
    fast = scan(data, artifact_names=frozenset(n.decode() for n in NAMES))
    slow = scan(data, want=lambda t, n: t == b"artifact" and n in NAMES)
    assert fast == slow
    assert fast == ([], [("other_rank", 3), ("orphan_payload", 5), ("missing_payload", 7),
                         ("bad_json", 8)], 9)


def test_payloads_nobody_reads_are_counted_not_assembled():
    import hashlib

    reports: list[tuple[str, int]] = []
    sc = ev.Scanner(lambda k, ln, d: reports.append((k, ln)), chunk_size=4096,
                    artifact_names=frozenset(n.decode() for n in NAMES),
                    payload_for=lambda t, n: n != b"before_post_grad_graph")
    got = list(sc.entries(io.BytesIO(SRC.read_bytes())))
    graphs = [e for e in got if e.name == b"before_post_grad_graph"]
    others = [e for e in got if e.name != b"before_post_grad_graph"]
    # 2 x (sizes, sizes after, outcome, collectives estimation, post-grad graph, collective schedule)
    assert reports == [] and len(graphs) == 2 and len(others) == 13  # and torch_version
    assert all(e.payload is None and e.payload_lines > 50 for e in graphs)
    for e in others:
        md5 = ev.decode_envelope(e.line[e.start:])["has_payload"]
        assert hashlib.md5(e.payload).hexdigest() == md5
