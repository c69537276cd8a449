"""Envelopes decoded once for every rank (issue 21: 100,000 small rank logs of one job log the
same envelopes but for their rank; :class:`tracekit.read.entries.EnvelopeMemo`).

Real logs, edited at test time: spmd_auto's four ranks, one of them with a line whose rank is
written as the mask itself (no JSON), or another rank's; a long log made of rank 0 repeated.

- The ranks of a job find their envelopes decoded: every entry equals the one decoded anew
  (rank, compile id, payload, line, pid), its envelope equal but for its rank values.
- A line that holds ``"rank":,`` itself is no envelope of the file's rank: still ``bad_json``.
- An entry of another rank is never taken from the memo: ``other_rank`` in every file; nor is
  one whose rank is written otherwise than torch writes it (``"rank":1,``).
- A long log, whose envelopes are new copy after copy, stops looking after 64 misses.
- A small rank log finds its first entries there too, before its rank is known: an envelope
  with no rank by its bytes, the first ranked one by the rank the file's name gives, if its
  bytes hold that one.
"""

from __future__ import annotations

from pathlib import Path

from conftest import FIXTURE_LOGS, bench_module
from tracekit.read import segments
from tracekit.read.entries import EnvelopeMemo, PayloadMemo, decode_entries
from tracekit.model import Diagnostics, rank_to_dict
from tracekit.read.parsers import SUMMARY_PARSERS, key_table
from tracekit.read.reader import load
from tracekit.read.sources import rank_from_name

RUN = FIXTURE_LOGS / "spmd_auto"
RANKS = sorted(RUN.glob("dedicated_log_torch_trace_rank_*.log"))
KEYS = frozenset(key_table(SUMMARY_PARSERS))


class CountingMemo(EnvelopeMemo):
    __slots__ = ("hits", "lookups")

    def __init__(self, limit: int = 1024) -> None:
        super().__init__(limit)
        self.hits = self.lookups = 0

    def get(self, key):
        hit = super().get(key)
        self.lookups += 1
        self.hits += hit is not None
        return hit


def _entries(path: Path, envelopes: EnvelopeMemo | None, rank_hint: int | None = None) -> tuple[list, Diagnostics]:
    diag = Diagnostics()
    with open(path, "rb") as f:
        out = list(decode_entries(f, str(path), diag, keys=KEYS, memo=PayloadMemo(), envelopes=envelopes,
                                  rank_hint=rank_hint))
    return out, diag


def _same(a, b) -> bool:
    """Two entries equal but for the values of their envelopes' ``"rank"``."""
    return ((a.file, a.line, a.rank, a.compile_id, a.entry_type, a.artifact_name, a.payload, a.pid) ==
            (b.file, b.line, b.rank, b.compile_id, b.entry_type, b.artifact_name, b.payload, b.pid)
            and _without_rank(a.envelope) == _without_rank(b.envelope))


def _without_rank(env: dict) -> dict:
    return {k: v for k, v in env.items() if k != "rank"}


def test_the_ranks_of_a_job_find_their_envelopes_decoded_and_equal_their_own():
    memo = CountingMemo()
    hits = []
    for path in RANKS:
        before = memo.hits
        shared, diag = _entries(path, memo)
        own, own_diag = _entries(path, None)
        hits.append(memo.hits - before)
        assert diag.counts == own_diag.counts == {}
        assert len(shared) == len(own) == 16
        for a, b in zip(shared, own):
            assert (a.file, a.line, a.rank, a.compile_id, a.entry_type, a.artifact_name, a.payload, a.pid) == (
                b.file, b.line, b.rank, b.compile_id, b.entry_type, b.artifact_name, b.payload, b.pid)
            assert _without_rank(a.envelope) == _without_rank(b.envelope)
            assert b.envelope.get("rank") == b.rank
    # the rank is known from the skipped lines before the first entry: all 16 are looked up;
    # ranks 1-3 find 14 of rank 0's, all but their two inductor_post_grad_graph, whose payloads
    # (and so the MD5 in their envelopes) are each rank's own
    assert hits == [0, 14, 14, 14]
    assert [e.rank for e in shared] == [None] + [3] * 15  # torch_version carries no rank


def test_a_small_rank_log_finds_its_envelopes_before_its_rank_is_known(tmp_path):
    # bench/make_ranks.py --small: torch_version first (no rank), then dynamo_start (the first
    # ranked entry). torch_version is known by its bytes; dynamo_start by the rank the file's
    # name gives, which its bytes hold: every entry of ranks 1 and 2 comes from the memo
    d = tmp_path / "run"
    bench_module("make_ranks").make_ranks(d, 3, base=RUN, small=True)
    paths = sorted(d.iterdir(), key=lambda p: rank_from_name(p.name))
    memo = CountingMemo()
    hits = []
    for r, path in enumerate(paths):
        before = memo.hits
        shared, diag = _entries(path, memo, rank_hint=r)
        hits.append(memo.hits - before)
        own, own_diag = _entries(path, None)
        assert diag.counts == own_diag.counts == {} and len(shared) == len(own) == 12
        assert all(_same(a, b) for a, b in zip(shared, own))
        assert [e.rank for e in shared] == [None] + [r] * 11
    assert hits == [0, 12, 12]
    # a file named rank 5 that holds rank 2's entries: its name's rank is no key of its bytes
    # (nothing masked), so its first ranked entry is decoded, and its entries say rank 2
    named = tmp_path / "dedicated_log_torch_trace_rank_5_x.log"
    named.write_bytes(paths[2].read_bytes())
    before = memo.hits
    shared, diag = _entries(named, memo, rank_hint=5)
    own, _ = _entries(named, None)
    assert diag.counts == {} and all(_same(a, b) for a, b in zip(shared, own)) and len(shared) == 12
    assert [e.rank for e in shared] == [None] + [2] * 11 and memo.hits - before == 11  # all but dynamo_start


def _edited(tmp_path: Path, rank: int, old: bytes, new: bytes, nth_wanted: int = 5) -> tuple[Path, int]:
    """Rank ``rank``'s log with ``old`` written ``new`` on its ``nth_wanted`` line that has
    ``old`` and names a pre_bucketing artifact; the file and that line's number."""
    src = RANKS[rank]
    lines = src.read_bytes().split(b"\n")
    seen = 0
    for i, line in enumerate(lines):
        if old in line and b'"name": "pre_bucketing' in line:
            seen += 1
            if seen == nth_wanted:
                lines[i] = line.replace(old, new)
                out = tmp_path / src.name
                out.write_bytes(b"\n".join(lines))
                return out, i + 1
    raise AssertionError("no such line")


def test_a_line_that_holds_the_mask_itself_is_still_bad_json(tmp_path):
    memo = CountingMemo()
    _entries(RANKS[0], memo)  # rank 0's envelopes, masked, in the memo
    # rank 1's line equals one of rank 0's with '"rank": 0,' written '"rank":,' (masked, it
    # is rank 1's own line with '"rank": 1,' masked): no JSON, whatever the memo holds
    path, lineno = _edited(tmp_path, 1, b'"rank": 1,', b'"rank":,')
    entries, diag = _entries(path, memo)
    assert diag.counts == {"bad_json": 1} and diag.examples[0]["line"] == lineno
    assert len(entries) == 15 and lineno not in [e.line for e in entries]


def test_an_entry_of_another_rank_is_reported_in_every_file_that_has_it(tmp_path):
    memo = CountingMemo()
    _entries(RANKS[0], memo)
    path, lineno = _edited(tmp_path, 1, b'"rank": 1,', b'"rank": 9,')
    for _ in range(3):  # the same line read three times: decoded and reported each time
        entries, diag = _entries(path, memo)
        assert diag.counts == {"other_rank": 1} and diag.examples[0]["line"] == lineno
        assert diag.examples[0]["detail"] == "rank 9 in a file of rank 1" and len(entries) == 15
    assert memo._seen and all(value[4] in (True, False) for value in memo._seen.values())


def test_a_rank_written_otherwise_is_read_from_each_line_not_from_the_memo(tmp_path):
    memo = CountingMemo()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    # rank 1's line with its rank written without the space (JSON all the same: rank 1), then
    # rank 2's same line with that very text: rank 1 in a file of rank 2
    a, _ = _edited(tmp_path / "a", 1, b'"rank": 1,', b'"rank":1,')
    b, lineno = _edited(tmp_path / "b", 2, b'"rank": 2,', b'"rank":1,')
    entries, diag = _entries(a, memo)
    assert diag.counts == {} and len(entries) == 16 and {e.rank for e in entries} == {None, 1}
    entries, diag = _entries(b, memo)
    assert diag.counts == {"other_rank": 1} and diag.examples[0]["line"] == lineno
    assert diag.examples[0]["detail"] == "rank 1 in a file of rank 2" and len(entries) == 15


def test_a_long_log_of_new_envelopes_stops_looking_after_64_misses(tmp_path):
    make_large_log = bench_module("make_large_log")
    out = tmp_path / "long.log"
    make_large_log.make_large_log([RANKS[0]], out, 8 * RANKS[0].stat().st_size)
    memo = CountingMemo()
    entries, diag = _entries(out, memo)
    assert diag.counts == {} and len(entries) == 136  # 8 copies of 17, one torch_version
    # every copy its own compile ids: each lookup misses; the 65th is the last, not kept
    assert (memo.lookups, memo.hits, len(memo._seen)) == (65, 0, 64)


def test_a_directory_of_ranks_reads_as_each_rank_read_alone():
    segments._parser_set.cache_clear()
    run = load(RUN, jobs=1)  # one process, one memo: ranks 1 to 3 take their envelopes from it
    assert len(segments._parser_set(SUMMARY_PARSERS).envelopes._seen) == 16 + 3 * 2  # as above
    assert [r.rank for r in run.ranks] == [0, 1, 2, 3] and run.diagnostics.counts == {}
    for r in run.ranks:
        segments._parser_set.cache_clear()  # a fresh memo: nothing from another rank
        (alone,) = load(r.files[0], jobs=1).ranks
        assert rank_to_dict(alone) == rank_to_dict(r)
