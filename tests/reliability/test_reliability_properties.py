"""Property tests of the reader (hypothesis, derandomized): random bytes, random mutations of a
real fixture log, random splits of it across files, chunk boundaries anywhere, and generated
valid logs that must round-trip to exactly the graphs they were written from."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURE_LOGS
from tracekit.read import envelopes as ev
from tracekit.read.parsers import SUMMARY_PARSERS, by_key
from tracekit.model import CollectiveSize, Counts, Sizes
from tracekit.read.reader import load
from tracekit.render.summary_document import summary_document

SRC = next((FIXTURE_LOGS / "spmd_auto").glob("dedicated_log_torch_trace_rank_0_*.log"))
CLEAN = SRC.read_bytes()
NAME = "dedicated_log_torch_trace_rank_0_x.log"
SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])


def _outcome_key(g) -> tuple:
    return (g.compile_id, tuple(g.fsdp_groups), g.group_size, g.n_nodes, g.bucket_cap_mb,
            tuple((t, c.before, c.after) for t, c in sorted(g.collectives.items())))


CLEAN_RUN = load(str(SRC), jobs=1)
CLEAN_OUTCOMES = {_outcome_key(g)[1:] for g in CLEAN_RUN.ranks[0].graphs}


def _read(tmp_path: Path, data: bytes, name: str = NAME):
    p = tmp_path / name
    p.write_bytes(data)
    return load(str(p), jobs=1)


# --- random bytes -------------------------------------------------------------------------------

_PIECES = [b"\n", b"\t", b"\r\n", b"\x00", b"\xff", b"{", b"}", b'"', b"\x1f\x8b",
           b'V1202 14:36:46.816000 8062 x.py:1] {"artifact": {"name": "pre_bucketing_fsdp_collectives"',
           b', "has_payload": "', b'"rank": ', b'{"str": ["a", 0]}', b'{"chromium_event": {}}']


@settings(max_examples=150, **SETTINGS)
@given(st.lists(st.one_of(st.binary(max_size=64), st.sampled_from(_PIECES)), max_size=40))
def test_random_bytes_never_raise(tmp_path, parts):
    data = b"".join(parts)
    run = _read(tmp_path, data)
    assert all(not r.graphs for r in run.ranks)  # no outcome can be made up from noise
    if not data:  # an empty file is no log, never a rank
        assert run.diagnostics.counts == {"no_entries": 1} and run.ranks == []


@settings(max_examples=40, **SETTINGS)
@given(st.binary(min_size=1, max_size=2048))
def test_random_gzip_bytes_never_raise(tmp_path, data):
    run = _read(tmp_path, b"\x1f\x8b" + data, NAME + ".gz")
    assert all(not r.graphs for r in run.ranks)  # no outcome can be made up from noise
    assert run.diagnostics.total >= 1  # and the damage is reported (bad_gzip, bad_prefix, ...)


# --- random mutations of a real log ------------------------------------------------------------


@st.composite
def mutations(draw, size: int):
    out = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["flip", "insert", "delete", "dup", "truncate"]))
        pos = draw(st.integers(0, size - 1))
        out.append((kind, pos, draw(st.one_of(st.binary(min_size=1, max_size=8),
                                              st.sampled_from(_PIECES))),
                    draw(st.integers(1, 400))))
    return out


def mutate(data: bytes, edits) -> bytes:
    for kind, pos, piece, n in edits:
        pos %= max(1, len(data))
        if kind == "flip":
            if not data:  # truncated to nothing by an earlier edit: no byte to flip
                continue
            data = data[:pos] + bytes([data[pos] ^ (1 << (n % 8))]) + data[pos + 1 :]
        elif kind == "insert":
            data = data[:pos] + piece + data[pos:]
        elif kind == "delete":
            data = data[:pos] + data[pos + n :]
        elif kind == "dup":
            data = data[:pos + n] + data[pos : pos + n] + data[pos + n :]
        else:
            data = data[:pos]
    return data


@settings(max_examples=60, **SETTINGS)
@given(mutations(len(CLEAN)))
def test_mutated_real_log_never_raises_nor_invents(tmp_path, edits):
    data = mutate(CLEAN, edits)
    run = _read(tmp_path, data)
    graphs = [g for r in run.ranks for g in r.graphs]
    assert len(graphs) <= 2
    # payloads are MD5-checked: every outcome read is one the clean log has
    assert {_outcome_key(g)[1:] for g in graphs} <= CLEAN_OUTCOMES
    summary_document(run)  # and it summarizes


# --- chunk boundaries anywhere ------------------------------------------------------------------

HEAD = CLEAN[: CLEAN.index(b"\n", 60_000) + 1]  # the head of the log: many kinds of entries
_NAMES = frozenset(n for t, n in by_key(SUMMARY_PARSERS) if t == "artifact") | {"torch_version"}


def _scan(data: bytes, chunk_size: int):
    reports: list[tuple] = []
    sc = ev.Scanner(lambda k, ln, d: reports.append((k, ln)), artifact_names=_NAMES,
                    chunk_size=chunk_size)
    got = [(e.lineno, e.line, e.payload) for e in sc.entries(io.BytesIO(data))]
    return got, reports


@settings(max_examples=60, **SETTINGS)
@given(st.integers(1, 5000), mutations(len(HEAD)), st.booleans())
def test_entries_do_not_depend_on_chunk_boundaries(chunk_size, edits, crlf):
    data = mutate(HEAD, edits)
    if crlf:
        data = data.replace(b"\n", b"\r\n")
    assert _scan(data, chunk_size) == _scan(data, ev.CHUNK_SIZE)


def test_crlf_split_across_chunks_reads_as_lf():
    data = HEAD.replace(b"\n", b"\r\n")
    cut = data.index(b"\r\n") + 1  # a chunk ends between "\r" and "\n"
    got, reports = _scan(data, cut)
    assert reports == [("crlf_line_ends", 1)]
    assert got == _scan(HEAD, cut)[0]


# --- random splits across files -----------------------------------------------------------------

_LINES = CLEAN.split(b"\n")[:-1]
_STARTS = [i for i, ln in enumerate(_LINES) if ln and not ln.startswith(b"\t")]  # entry starts


def _entry_line(name: str, nth: int) -> int:
    key = b'{"artifact": {"name": "' + name.encode() + b'"'
    return [i for i in _STARTS if key in _LINES[i]][nth]


_SIZES = {(gi, after): _entry_line("pre_bucketing_collective_sizes" + ("_after" if after else ""), gi)
          for gi in (0, 1) for after in (False, True)}
_OUTCOMES = [_entry_line("pre_bucketing_fsdp_collectives", gi) for gi in (0, 1)]


def _write_parts(tmp_path: Path, parts: list[bytes]) -> list[str]:
    paths = []
    for i, part in enumerate(parts):
        p = tmp_path / f"dedicated_log_torch_trace_rank_0_part{i:03d}.log"
        p.write_bytes(part)
        paths.append(str(p))
    return paths


@settings(max_examples=40, **SETTINGS)
@given(st.lists(st.sampled_from(_STARTS[1:]), min_size=1, max_size=6, unique=True))
def test_split_at_entry_boundaries_keeps_every_outcome(tmp_path, cuts):
    cuts = sorted(cuts)
    bounds = [0, *cuts, len(_LINES)]
    parts = [b"".join(ln + b"\n" for ln in _LINES[a:b]) for a, b in zip(bounds, bounds[1:])]
    run = load(_write_parts(tmp_path, parts), jobs=1)
    assert run.diagnostics.counts == {}
    (rank,) = run.ranks
    clean = CLEAN_RUN.ranks[0]
    assert rank.compiled_graphs == clean.compiled_graphs and len(rank.files) == len(parts)
    assert [_outcome_key(g) for g in rank.graphs] == [_outcome_key(g) for g in clean.graphs]
    assert [g.graph_index for g in rank.graphs] == [0, 1]
    for gi, (g, c) in enumerate(zip(rank.graphs, clean.graphs)):
        # the per-file reader pairs sizes with the next outcome of the same file: a split
        # between a size artifact and its outcome loses that size list (documented gap)
        kept = {after: not any(_SIZES[gi, after] < x <= _OUTCOMES[gi] for x in cuts)
                for after in (False, True)}
        if not kept[False] and not kept[True]:
            assert g.sizes_mb is None
        else:
            assert g.sizes_mb == Sizes(before=c.sizes_mb.before if kept[False] else [],
                                       after=c.sizes_mb.after if kept[True] else None)


@settings(max_examples=40, **SETTINGS)
@given(st.lists(st.integers(1, len(CLEAN) - 1), min_size=1, max_size=5, unique=True))
def test_split_anywhere_never_raises_and_reports_cut_entries(tmp_path, cuts):
    cuts = sorted(cuts)
    bounds = [0, *cuts, len(CLEAN)]
    parts = [CLEAN[a:b] for a, b in zip(bounds, bounds[1:])]
    run = load(_write_parts(tmp_path, parts), jobs=1)
    graphs = [g for r in run.ranks for g in r.graphs]
    assert len(graphs) <= 2
    assert {_outcome_key(g)[1:] for g in graphs} <= CLEAN_OUTCOMES
    starts = {sum(len(ln) + 1 for ln in _LINES[:i]) for i in _STARTS}
    # a cut at an entry's start, or just before the newline that ends an entry, loses nothing
    # (a last entry without its final newline is whole: its envelope decodes, its MD5 matches)
    if any(c not in starts and c + 1 not in starts for c in cuts):
        assert run.diagnostics.total >= 1


# --- generated valid logs round-trip ------------------------------------------------------------

_PREFIX = "V1202 14:36:46.816000 8062 site-packages/torch/_inductor/fx_passes/fsdp.py:566] "


def _entry(env: dict, payload: str | None) -> str:
    if payload is not None:
        env["has_payload"] = hashlib.md5(payload.encode()).hexdigest()
    out = _PREFIX + json.dumps(env) + "\n"
    if payload is not None:
        out += "".join("\t" + ln + "\n" for ln in payload.split("\n"))
    return out


def _art(name: str, rank: int, frame: int, fcid: int, payload: str) -> str:
    return _entry({"artifact": {"name": name, "encoding": "string"}, "rank": rank,
                   "frame_id": frame, "frame_compile_id": fcid, "attempt": 0}, payload)


_counts = st.tuples(st.integers(0, 300), st.integers(0, 300))
_size = st.builds(lambda t, mb, n: CollectiveSize(t, mb, n), st.sampled_from(["AG", "RS", "AR"]),
                  st.floats(0, 1e5, allow_nan=False).map(lambda x: round(x, 3)),
                  st.text("abcdefgh_0123456789", max_size=30))
_graph = st.fixed_dictionaries({
    "frame": st.integers(0, 3), "fcid": st.integers(0, 2),
    "groups": st.lists(st.text("0123456789", min_size=1, max_size=3), max_size=3),
    "group_size": st.one_of(st.none(), st.integers(1, 4096)), "nodes": st.integers(1, 512),
    "cap": st.floats(0.001, 1e4, allow_nan=False), "ag": _counts, "rs": _counts, "ar": _counts,
    "before": st.one_of(st.none(), st.lists(_size, max_size=5)),
    "after": st.one_of(st.none(), st.lists(_size, max_size=5)),
    "noise": st.lists(st.sampled_from(["chromium", "str", "blank", "graph", "big"]), max_size=4),
})


def _noise(kind: str, rank: int, frame: int) -> str:
    if kind == "chromium":
        return _entry({"chromium_event": {}, "rank": rank, "frame_id": frame,
                       "frame_compile_id": 0, "attempt": 0}, json.dumps({"ph": "B"}, indent=0))
    if kind == "str":
        return _entry({"str": ["/some/file.py", frame]}, None)
    if kind == "blank":
        return "\n"
    if kind == "big":
        return _art("inductor_output_code", rank, frame, 0, "x = 1\n" * 3000)
    return _art("before_post_grad_graph", rank, frame, 0, "class GraphModule(torch.nn.Module):\n    pass")


def _sizes_json(sizes: list[CollectiveSize]) -> str:
    return json.dumps([{"type": s.type, "size_mb": s.size_mb, "name": s.name} for s in sizes], indent=0)


@settings(max_examples=60, **SETTINGS)
@given(st.lists(_graph, max_size=8), st.integers(0, 7), st.sampled_from(["plain", "gz", "crlf"]))
def test_generated_valid_log_round_trips(tmp_path, graphs, rank, form):
    text = _entry({"artifact": {"name": "torch_version", "encoding": "json"}}, '"2.13.0"')
    expected, index, compiled = [], {}, 0
    for g in graphs:
        for n in g["noise"]:
            text += _noise(n, rank, g["frame"])
            compiled += n == "graph"
        args = (rank, g["frame"], g["fcid"])
        if g["before"] is not None:
            text += _art("pre_bucketing_collective_sizes", *args, _sizes_json(g["before"]))
        if g["after"] is not None:
            text += _art("pre_bucketing_collective_sizes_after", *args, _sizes_json(g["after"]))
        (a0, a1), (r0, r1), (x0, x1) = g["ag"], g["rs"], g["ar"]
        text += _art("pre_bucketing_fsdp_collectives", *args,
                     f"fsdp_groups={g['groups']!r}, group_size={g['group_size']}, nNodes={g['nodes']}, "
                     f"bucket_cap_mb={g['cap']}, all_gather {a0}->{a1}, reduce_scatter {r0}->{r1}, "
                     f"all_reduce {x0}->{x1}")
        cid = f"{g['frame']}/{g['fcid']}"
        gi = index[cid] = index.get(cid, -1) + 1
        sizes = None
        if g["before"] is not None or g["after"] is not None:
            sizes = Sizes(before=g["before"] or [], after=g["after"])
        expected.append((cid, gi, g["groups"], g["group_size"], g["nodes"], g["cap"],
                         {"all_gather": Counts(a0, a1), "reduce_scatter": Counts(r0, r1),
                          "all_reduce": Counts(x0, x1)}, sizes))
    data = text.encode()
    name = f"dedicated_log_torch_trace_rank_{rank}_x.log"
    if form == "gz":
        data, name = gzip.compress(data, mtime=0), name + ".gz"
    elif form == "crlf":
        data = data.replace(b"\n", b"\r\n")
    run = _read(tmp_path, data, name)
    assert run.diagnostics.counts == ({"crlf_line_ends": 1} if form == "crlf" else {})
    (r,) = run.ranks
    assert r.rank == rank and r.compiled_graphs == compiled
    got = [(g.compile_id, g.graph_index, g.fsdp_groups, g.group_size, g.n_nodes, g.bucket_cap_mb,
            g.collectives, g.sizes_mb) for g in r.graphs]
    assert got == expected


def test_fixture_round_trips_through_gzip_crlf_and_directory(tmp_path):
    want = summary_document(CLEAN_RUN, per_rank=True)
    for name, data in [(NAME + ".gz", gzip.compress(CLEAN)), (NAME, CLEAN.replace(b"\n", b"\r\n"))]:
        d = tmp_path / name.replace(".", "_")
        d.mkdir()
        run = _read(d, data, name)
        doc = summary_document(run, per_rank=True)
        for r in doc["ranks"] + want["ranks"]:
            r["files"] = []
            for g in r["graphs"]:
                g["file"] = ""
        assert doc["ranks"] == want["ranks"] and doc["totals"] == want["totals"]
        assert doc["totals"]["graphs"] == 2 and doc["totals"]["mb_before"] == 0.837


def test_duplicate_artifact_name_is_bad_json_not_a_crash(tmp_path):
    # found by fuzz/fuzz_reader.py: the bytes name one artifact, the decoded object another
    lines = CLEAN.split(b"\n")
    i = next(k for k, ln in enumerate(lines) if b'"name": "pre_bucketing_fsdp_collectives"' in ln)
    lines[i] = lines[i].replace(b'"name": "pre_bucketing_fsdp_collectives"',
                                b'"name": "pre_bucketing_fsdp_collectives", "name": "other"', 1)
    run = _read(tmp_path, b"\n".join(lines))
    assert run.diagnostics.counts == {"bad_json": 1}
    assert run.diagnostics.examples[0]["line"] == i + 1
    assert len(run.ranks[0].graphs) == 1
