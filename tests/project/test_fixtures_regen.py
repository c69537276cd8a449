"""Regenerate one fixture scenario with the installed torch and compare its bucketing outcome.

Catches a torch upgrade (or a generator change) that changes what pre-bucketing does: the
scenario ``spmd_small_cap`` (4 ranks, cap 0.1 MB, buckets split in both graphs) is compiled
again into a temporary directory by ``fixtures/generate.py`` and read back with
``tracekit.load``; per rank and graph, the groups, group size, nNodes, cap, counts before and
after and every per-collective size must equal the committed logs'. Timestamps, process ids,
file names and line numbers are not compared.

Runtime: 4 rank processes, 2 at a time, about 35 s each on an idle core (80-135 s in all), so it
is marked slow (``SLOW_MODULES`` in tests/conftest.py): out of the quick loop, in CI's whole run.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import asdict

import tracekit
from conftest import FIXTURE_LOGS, ROOT

SCENARIO = "spmd_small_cap"


def bucketing_outcome(run: tracekit.Run) -> dict:
    """What pre-bucketing did, per rank and graph, without where it was read."""
    out = {}
    for rank in run.ranks:
        graphs = {}
        for g in rank.graphs:
            graphs[g.label] = {
                "fsdp_groups": g.fsdp_groups,
                "group_size": g.group_size,
                "n_nodes": g.n_nodes,
                "bucket_cap_mb": g.bucket_cap_mb,
                "collectives": {t: asdict(c) for t, c in g.collectives.items()},
                "sizes_mb": None if g.sizes_mb is None else asdict(g.sizes_mb),
                "source": g.source,
            }
        out[rank.rank] = {
            "compiled_graphs": rank.compiled_graphs,
            "cache_hits": rank.cache_hits,
            "graphs": graphs,
        }
    return out


def test_regenerated_spmd_small_cap_matches_committed(tmp_path):
    subprocess.run(
        [sys.executable, str(ROOT / "fixtures" / "generate.py"), "--scenario", SCENARIO,
         "--out", str(tmp_path)],
        check=True, cwd=ROOT, stdout=subprocess.DEVNULL,
    )
    fresh = tracekit.load([tmp_path / SCENARIO])
    committed = tracekit.load([FIXTURE_LOGS / SCENARIO])

    assert fresh.diagnostics.total == 0, fresh.diagnostics.to_dict()
    assert sorted(bucketing_outcome(fresh)) == [0, 1, 2, 3]
    assert bucketing_outcome(fresh) == bucketing_outcome(committed)
    # the outcome compared is not empty: the two graphs of every rank, split by the 0.1 MB cap
    rank0 = fresh.rank(0)
    assert [(g.label, g.bucket_cap_mb) for g in rank0.graphs] == [("0/0:0", 0.1), ("0/0:1", 0.1)]
    assert rank0.graph("0/0", 1).collectives["reduce_scatter"].after == 5
