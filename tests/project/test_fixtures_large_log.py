"""bench/make_large_log.py: repeated fixture entries, distinct compile ids, payloads intact."""

from __future__ import annotations

import importlib.util
import sys

import tracekit
from conftest import FIXTURE_LOGS, ROOT

_spec = importlib.util.spec_from_file_location("bench_make_large_log", ROOT / "bench" / "make_large_log.py")
make_large_log = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = make_large_log
_spec.loader.exec_module(make_large_log)


def test_parse_size():
    assert make_large_log.parse_size("100MB") == 100 * 2**20
    assert make_large_log.parse_size("2GB") == 2 * 2**30
    assert make_large_log.parse_size("1.5k") == 1536


def test_copies_get_distinct_compile_ids_and_keep_the_outcomes(tmp_path):
    source = sorted((FIXTURE_LOGS / "spmd_small_cap").glob("*rank_0_*.log"))[0]
    out = tmp_path / "big.log"
    written, copies = make_large_log.make_large_log([source], out, 3 * source.stat().st_size)

    assert copies == 4  # whole copies: the first one past 3 source sizes (minus torch_version)
    assert written == out.stat().st_size
    assert out.read_bytes().count(b'{"artifact": {"name": "torch_version"') == 1

    run = tracekit.load([out])
    assert run.diagnostics.total == 0, run.diagnostics.to_dict()  # every payload MD5 still valid
    (rank,) = run.ranks
    assert rank.rank == 0
    assert [g.label for g in rank.graphs] == [f"{k}/0:{i}" for k in range(4) for i in range(2)]
    original = tracekit.load([source]).rank(0).graphs
    for k in range(4):
        for i in range(2):
            g, o = rank.graph(f"{k}/0", i), original[i]
            assert (g.collectives, g.bucket_cap_mb, g.sizes_mb) == (o.collectives, o.bucket_cap_mb, o.sizes_mb)


def test_per_rank_makes_one_large_log_per_rank(tmp_path):
    results = make_large_log.make_large_rank_logs(FIXTURE_LOGS / "diverge_rank", tmp_path, 2 * 2**20)
    assert [copies for _, _, copies in results] == [3, 3, 3, 3]  # 2 MiB: three copies of ~0.7-0.8 MB
    run = tracekit.load([tmp_path])
    assert run.diagnostics.total == 0, run.diagnostics.to_dict()
    assert [r.rank for r in run.ranks] == [0, 1, 2, 3]
    # rank 3 (one more layer) gathers 10 in every copy's forward, the others 8
    assert [run.rank(3).graph(f"{k}/0", 0).collectives["all_gather"].before for k in range(3)] == [10] * 3
    assert [run.rank(0).graph(f"{k}/0", 0).collectives["all_gather"].before for k in range(3)] == [8] * 3
