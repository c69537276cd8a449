"""Pairing by compile id (never by adjacency), and the fast path (regex skipping ordinary
envelopes) agreeing with the slow path (every envelope looked at in Python) on damaged logs."""

from __future__ import annotations

import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURE_LOGS
from tracekit.read import envelopes as ev
from tracekit.model import Counts
from tracekit.read.reader import load

SRC = next((FIXTURE_LOGS / "spmd_auto").glob("dedicated_log_torch_trace_rank_0_*"))
WANTED = frozenset({"pre_bucketing_fsdp_collectives", "pre_bucketing_collective_sizes",
                    "pre_bucketing_collective_sizes_after", "before_post_grad_graph"})
WANTED_BYTES = frozenset(n.encode() for n in WANTED)


def entry_spans(ls: list[str], name: str) -> list[tuple[int, int]]:
    """(first, end) line indexes of each entry of artifact ``name``, envelope and payload."""
    out = []
    for i, line in enumerate(ls):
        if f'"name": "{name}"' in line and not line.startswith("\t"):
            j = i + 1
            while j < len(ls) and ls[j].startswith("\t"):
                j += 1
            out.append((i, j))
    return out


def test_interleaved_frames_pair_by_compile_id(tmp_path):
    ls = SRC.read_text(encoding="utf-8").split("\n")
    fwd = [entry_spans(ls, n)[0] for n in ("pre_bucketing_collective_sizes",
                                          "pre_bucketing_collective_sizes_after",
                                          "pre_bucketing_fsdp_collectives")]
    # frame 1's forward (a copy of 0/0's, frame_id changed: payloads and MD5s stay valid) ...
    frame1 = [x.replace('"frame_id": 0,', '"frame_id": 1,') for a, b in fwd for x in ls[a:b]]
    # ... logged between 0/0's backward sizes and 0/0's backward outcome
    a, b = entry_spans(ls, "pre_bucketing_collective_sizes")[1]
    ls[b:b] = frame1
    p = tmp_path / "dedicated_log_torch_trace_rank_0_x.log"
    p.write_text("\n".join(ls), encoding="utf-8")
    run = load(p)
    assert run.diagnostics.counts == {}
    got = [(g.compile_id, g.graph_index, g.collectives["all_gather"], len(g.sizes_mb.before))
           for g in run.ranks[0].graphs]
    assert got == [("0/0", 0, Counts(8, 1), 8), ("1/0", 0, Counts(8, 1), 8),
                   ("0/0", 1, Counts(5, 1), 13)]


HEAD = SRC.read_bytes().split(b"\n")[:3400] + [b""]  # the forward's artifacts end at line 3327
ENVELOPES = [i for i, x in enumerate(HEAD) if x[:1] not in (b"\t", b"")]


def both_paths(data: bytes):
    out = []
    for kw in ({"artifact_names": WANTED},
               {"want": lambda t, n: t == b"artifact" and n in WANTED_BYTES}):
        diags: list[tuple[str, int]] = []
        sc = ev.Scanner(lambda kind, line, detail: diags.append((kind, line)), chunk_size=4096, **kw)
        sc.set_rank(0)
        kept = [(e.lineno, e.name, e.payload, e.payload_lines) for e in sc.entries(io.BytesIO(data))]
        out.append((kept, sorted(diags), sc.lines_read))
    return out


damage = st.lists(
    st.tuples(st.one_of(st.sampled_from(ENVELOPES), st.integers(0, len(HEAD) - 1)),
              st.sampled_from(["drop", "blank", "cut", "tab", "rank", "byte", "dup"]),
              st.integers(0, 300)),
    min_size=1, max_size=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damage)
def test_fast_path_agrees_with_slow_path_on_damaged_logs(edits):
    ls = list(HEAD)
    for i, what, k in edits:
        i %= len(ls)
        line = ls[i]
        if what == "drop":
            del ls[i]
        elif what == "blank":
            ls.insert(i, b"")
        elif what == "cut":
            ls[i] = line[: k % (len(line) + 1)]
        elif what == "tab":
            ls.insert(i, b"\tstray")
        elif what == "rank":
            ls[i] = line.replace(b'"rank": 0', b'"rank": 2')
        elif what == "byte" and line:
            j = k % len(line)
            ls[i] = line[:j] + bytes([(line[j] + 1 + k) % 256]) + line[j + 1 :]
        elif what == "dup":
            ls.insert(i, line)
    fast, slow = both_paths(b"\n".join(ls))
    assert fast == slow
