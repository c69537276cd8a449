"""Summary documents for the report tests, all made from the real fixture logs:

- :func:`fixture_doc`: the ``tracekit.summary/2`` document of a fixture run, per rank (``--per-rank``);
- :func:`wide_doc`: a 1,024-rank run made by replicating the ranks of ``diverge_rank`` (rank 0,
  of the majority, everywhere; rank 3, which built two more layers, at the ranks given), and
  :func:`distinct_run`, the same where every rank has its own cap;
- :func:`v2_doc`: a fixture document with the keys of ``tracekit.summary/2`` (world, verdict,
  groups with final schedules, schedule and compile divergence, explain commands, rank sets as
  range strings, no ``ranks``), each filled from the fixture's own values.
"""

from __future__ import annotations

import copy
import dataclasses
from functools import cache
from typing import Any

from conftest import FIXTURE_LOGS

import tracekit
from tracekit.model import LONG_NAMES, Run
from tracekit.model.rankset import format_ranks
from tracekit.render.summary_document import summary_document


@cache
def fixture_run(name: str) -> Run:
    return tracekit.load([str(FIXTURE_LOGS / name)], jobs=1)


def fixture_doc(name: str) -> dict[str, Any]:
    return summary_document(fixture_run(name), per_rank=True)


def wide_run(n: int = 1024, odd: frozenset[int] = frozenset({300, 777})) -> Run:
    """``n`` ranks: a copy of diverge_rank's rank 3 at each rank of ``odd``, of rank 0 elsewhere."""
    base = fixture_run("diverge_rank")
    normal, extra = base.rank(0), base.rank(3)
    ranks = [dataclasses.replace(extra if r in odd else normal, rank=r,
                                 files=[f"dedicated_log_torch_trace_rank_{r}.log"])
             for r in range(n)]
    return Run(paths=[f"{n} ranks"], ranks=ranks)


def distinct_run(n: int = 1024) -> Run:
    """:func:`wide_run` where every rank compiled with its own cap (27 MB + rank/1000): the worst
    case for a report, ``n`` rank groups."""
    run = wide_run(n)
    run.ranks = [dataclasses.replace(r, graphs=[dataclasses.replace(g, bucket_cap_mb=27.0 + r.rank / 1000)
                                                for g in r.graphs]) for r in run.ranks]
    return run


def wide_doc(n: int = 1024, odd: frozenset[int] = frozenset({300, 777})) -> dict[str, Any]:
    return summary_document(wide_run(n, odd), per_rank=True)


def v2_doc(name: str = "diverge_rank") -> dict[str, Any]:
    """The fixture's document reshaped as ``tracekit.summary/2`` (see the module docstring)."""
    doc = copy.deepcopy(fixture_doc(name))
    ranks = doc.pop("ranks")
    doc["schema"] = "tracekit.summary/2"
    doc["world"] = {"expected": 8, "found": len(ranks), "ranks": format_ranks(r["rank"] for r in ranks),
                    "missing": [4, 5, 6, 7], "duplicated": []}
    doc["verdict"] = {"status": "incomplete", "text": "ranks 4-7 missing; rank 3 differs"}
    groups: dict[str, dict[str, Any]] = {}
    for r in ranks:
        graphs = [{k: v for k, v in g.items() if k not in ("file", "line")} for g in r["graphs"]]
        for g in graphs:
            after = g["sizes_mb"]["after"]
            g["final"] = {
                "compile_id": g["compile_id"], "position": g["graph_index"],  # as a real summary has
                "counts": {t: c["after"] for t, c in g["collectives"].items()},
                "collectives": [{"kind": LONG_NAMES[s["type"]], "group": g["fsdp_groups"][0],
                                 "group_size": g["group_size"], "bytes": round(s["size_mb"] * 2**20),
                                 "est_ms": 0.0116} for s in after],
            }
        key = repr(graphs)
        groups.setdefault(key, {"ranks": [], "graphs": graphs})["ranks"].append(r["rank"])
    doc["groups"] = [{"ranks": format_ranks(g["ranks"]), "count": len(g["ranks"]),
                      "graphs": g["graphs"]} for g in groups.values()]
    for d in doc["divergence"]:
        d["ranks"], d["majority_ranks"] = (x if isinstance(x, str) else format_ranks(x)
                                           for x in (d["ranks"], d["majority_ranks"]))
    majority, odd = doc["groups"][0]["graphs"][1], doc["groups"][1]["graphs"][1]
    doc["schedule_divergence"] = [{
        "compile_id": "0/0", "graph_index": 1, "ranks": "3", "majority_ranks": "0-2", "position": 0,
        "value": {k: odd["final"]["collectives"][0][k] for k in ("kind", "group", "bytes")},
        "majority_value": {k: majority["final"]["collectives"][0][k] for k in ("kind", "group", "bytes")},
    }]
    doc["compile_divergence"] = [{"compile_id": "0/0", "graph_index": 0, "what": "n_layers",
                                  "ranks": "3", "majority_ranks": "0-2", "value": 10,
                                  "majority_value": 8}]
    doc["did_nothing"] = [{"compile_id": "0/0", "graph_index": 1, "types": ["all_gather"],
                           "counts": {"all_gather": 5}, "bucket_cap_mb": 27.4, "ranks": "0-2",
                           "explain": f"tracekit explain {FIXTURE_LOGS / name} --rank 0 --graph 0/0:1"}]
    return doc


@cache
def replay_doc(name: str) -> dict[str, Any]:
    """The ``tracekit.replay/3`` document of ``tracekit replay FIXTURE --recommend --format json``
    (torch's overlap scheduler over the cap grid; made once per test process)."""
    import json
    import subprocess
    import sys

    from conftest import ROOT

    p = subprocess.run([sys.executable, "-m", "tracekit", "replay", str(FIXTURE_LOGS / name), "--recommend",
                        "--format", "json"], capture_output=True, text=True, cwd=ROOT, timeout=300,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)
