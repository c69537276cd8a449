"""bench/make_ranks.py: N-rank directories from real fixture logs, chosen ranks diverging."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

import pytest

import tracekit
from conftest import FIXTURE_LOGS, ROOT

_spec = importlib.util.spec_from_file_location("bench_make_ranks", ROOT / "bench" / "make_ranks.py")
make_ranks = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = make_ranks
_spec.loader.exec_module(make_ranks)

DIVERGE_3 = make_ranks.rank_log(FIXTURE_LOGS / "diverge_rank", 3)
#: (AG, RS) before->after of 0/0 forward and backward: spmd_auto's ranks and diverge_rank's rank 3.
SPMD_AUTO = [((8, 1), (0, 0)), ((5, 1), (8, 1))]
DIVERGING = [((10, 1), (0, 0)), ((7, 1), (10, 1))]


def _outcomes(rank):
    return [((g.collectives["all_gather"].before, g.collectives["all_gather"].after),
             (g.collectives["reduce_scatter"].before, g.collectives["reduce_scatter"].after))
            for g in rank.graphs]


def _check_16(run):
    assert run.diagnostics.total == 0, run.diagnostics.to_dict()  # every MD5, no other_rank
    assert [r.rank for r in run.ranks] == list(range(16))
    for r in run.ranks:
        assert [g.label for g in r.graphs] == ["0/0:0", "0/0:1"]
        assert _outcomes(r) == (DIVERGING if r.rank in (5, 9) else SPMD_AUTO), r.rank
        assert len(r.files) == 1 and f"_rank_{r.rank}_" in r.files[0]


@pytest.fixture(scope="module")
def full16(tmp_path_factory):
    out = tmp_path_factory.mktemp("ranks16")
    made = make_ranks.make_ranks(out, 16, base="spmd_auto", diverge={5: DIVERGE_3, 9: DIVERGE_3})
    return out, made


def test_sixteen_ranks_two_diverging(full16):
    out, made = full16
    assert (made.ranks, made.diverged) == (16, [5, 9])
    names = sorted(p.name for p in out.iterdir())
    assert len(names) == 16
    assert "dedicated_log_torch_trace_rank_0_owd9xe1r.log" in names  # spmd_auto rank 0's suffix
    assert "dedicated_log_torch_trace_rank_5_8qky075x.log" in names  # diverge_rank rank 3's
    run = tracekit.load([out])
    _check_16(run)
    assert [r.compiled_graphs for r in run.ranks] == [2] * 16
    assert made.bytes == sum(p.stat().st_size for p in out.iterdir())


def test_only_envelope_ranks_change(full16):
    out, _ = full16
    source = make_ranks.rank_log("spmd_auto").read_bytes().split(b"\n")
    made = (out / "dedicated_log_torch_trace_rank_12_owd9xe1r.log").read_bytes().split(b"\n")
    assert len(made) == len(source) == 9068 + 373 + 1  # payload lines, envelopes, the final ""
    changed = [(a, b) for a, b in zip(source, made) if a != b]
    assert len(changed) == 368  # spmd_auto rank 0: 368 envelopes carry a rank, torch_version none
    for a, b in changed:
        assert not a.startswith(b"\t")
        assert a.replace(b'"rank": 0', b'"rank": 12') == b


def test_small_logs_give_the_same_outcomes(tmp_path):
    made = make_ranks.make_ranks(tmp_path, 16, diverge={5: DIVERGE_3, 9: DIVERGE_3}, small=True)
    run = tracekit.load([tmp_path])
    _check_16(run)
    assert [r.compiled_graphs for r in run.ranks] == [0] * 16  # before_post_grad_graph dropped
    sizes = sorted(p.stat().st_size for p in tmp_path.iterdir())
    assert 8000 < sizes[0] and sizes[-1] < 10000, sizes
    assert made.bytes == sum(sizes)
    # sizes are kept: the small logs' graphs are the full fixture's, field for field
    full = tracekit.load([DIVERGE_3]).ranks[0].graphs
    for small, orig in zip(run.rank(9).graphs, full):
        assert (small.collectives, small.sizes_mb, small.bucket_cap_mb) == (orig.collectives, orig.sizes_mb,
                                                                             orig.bucket_cap_mb)


def test_small_keeps_whole_entries_in_order():
    t = make_ranks.cut(make_ranks.rank_log("spmd_auto"), small=True)
    text = t.render(0)  # rank 0: the source's own bytes
    source = make_ranks.rank_log("spmd_auto").read_bytes()
    entries = re.split(rb"\n(?=[^\t])", text.rstrip(b"\n"))
    # torch_version, 4 str, dynamo_start; sizes, sizes after, outcome, collective estimates and
    # schedule of both graphs, AG plans of both, the backward's RS plan; and the last entry,
    # the backward's bwd_compilation_metrics, made small (the log ends a compile, as torch's)
    assert len(entries) == 1 + 4 + 1 + 5 * 2 + 2 + 1 + 1
    last = entries.pop()
    assert last.startswith(b"V") and last.endswith(
        b'] {"bwd_compilation_metrics": {"small": true}, "rank": 0, "frame_id": 0, "frame_compile_id": 0, '
        b'"attempt": 0}'
    )
    pos = 0
    for e in entries:  # every other kept entry is one of the source's, whole, in the source's order
        i = source.index(e + b"\n", pos)
        assert source[i - 1 : i] in (b"", b"\n") and source[i + len(e) + 1 : i + len(e) + 2] != b"\t"
        pos = i + len(e)
    assert t.ranked_envelopes == len(entries) + 1 - 5  # torch_version and the str table carry no rank


def test_tracekit_pass_source_stays_tracekit(tmp_path):
    make_ranks.make_ranks(tmp_path, 4, base="tracekit_pass", small=True)  # a world of 4, as logged
    run = tracekit.load([tmp_path])
    assert run.diagnostics.total == 0
    assert {g.source for r in run.ranks for g in r.graphs} == {"tracekit"}


def test_refuses_a_directory_with_rank_logs_and_bad_ranks(full16, tmp_path):
    out, _ = full16
    with pytest.raises(FileExistsError):
        make_ranks.make_ranks(out, 2)
    with pytest.raises(ValueError, match="16"):
        make_ranks.make_ranks(tmp_path, 16, diverge={16: DIVERGE_3})


def test_cli(tmp_path):
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "make_ranks.py"), str(out), "--ranks", "6",
                        "--diverge", "1,4", "--small", "--base", "spmd_small_cap"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "wrote 6 rank logs" in r.stderr and "diverging ranks 1,4" in r.stderr
    run = tracekit.load([out])
    assert run.diagnostics.total == 0
    # spmd_small_cap's 0.1 MB cap splits the buckets: forward AG 8->5
    assert [r.graphs[0].collectives["all_gather"].before for r in run.ranks] == [8, 10, 8, 8, 10, 8]
    assert [r.graphs[0].collectives["all_gather"].after for r in run.ranks][0] == 5
    bad = subprocess.run([sys.executable, str(ROOT / "bench" / "make_ranks.py"), str(out), "--ranks", "6"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "already holds rank logs" in bad.stderr
