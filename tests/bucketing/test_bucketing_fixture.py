"""The fixture logs: a 4-rank torch.compile run made with ``bucketing.install()``
(``tracekit_pass``) against the same run made with torch's own pass (``spmd_auto``)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import FIXTURE_LOGS
from logtext import artifacts

WATCHED = (
    "tracekit_fsdp_input_graph",
    "pre_bucketing_collective_sizes",
    "tracekit_fsdp_buckets",
    "pre_bucketing_collective_sizes_after",
    "pre_bucketing_fsdp_collectives",
)


def _bucketing_artifacts(path: Path) -> list[tuple[str, str, str]]:
    """(name, source file, payload) of the pre-bucketing artifacts of one log, in order."""
    return [a for a in artifacts(path.read_text()) if a[0] in WATCHED]


def _rank_log(scenario: str, rank: int) -> Path:
    (path,) = sorted((FIXTURE_LOGS / scenario).glob(f"dedicated_log_torch_trace_rank_{rank}_*.log"))
    return path


def test_tracekit_pass_logs_match_torch_outcome_on_every_rank() -> None:
    for rank in range(4):
        ours = _bucketing_artifacts(_rank_log("tracekit_pass", rank))
        theirs = _bucketing_artifacts(_rank_log("spmd_auto", rank))
        # forward and backward graphs, each with our five artifacts in order
        assert [n for n, _, _ in ours] == list(WATCHED) * 2
        assert {src for _, src, _ in ours} == {"bucketing/artifacts.py"}
        ours_by_name = [(n, p) for n, _, p in ours if not n.startswith("tracekit_")]
        assert ours_by_name == [(n, p) for n, _, p in theirs]  # byte for byte
        summaries = [p for n, _, p in ours if n == "pre_bucketing_fsdp_collectives"]
        assert summaries == [
            "fsdp_groups=['0'], group_size=4, nNodes=1, bucket_cap_mb=27.4, all_gather 8->1, reduce_scatter 0->0, all_reduce 0->0",
            "fsdp_groups=['0'], group_size=4, nNodes=1, bucket_cap_mb=27.4, all_gather 5->1, reduce_scatter 8->1, all_reduce 0->0",
        ]
        forward_buckets = json.loads(next(p for n, _, p in ours if n == "tracekit_fsdp_buckets"))
        assert forward_buckets["schema"] == "tracekit.buckets/1"
        assert forward_buckets["cap_source"] == "saturation"
        assert len(forward_buckets["buckets"]["AG"]) == 1 and len(forward_buckets["buckets"]["AG"][0]) == 8
        assert round(sum(m["bytes"] for m in forward_buckets["buckets"]["AG"][0]) / 2**20, 3) == 0.284
