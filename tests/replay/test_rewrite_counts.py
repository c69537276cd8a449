"""``tracekit.replay.rewrite_counts.applied_result``: a rewrite that fails is a reported
result (its error's type and first 300 characters), never raised; one that runs gives its
counts and whether they are the plan's."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")


def test_a_rewrite_that_raises_is_reported_with_its_error():
    from bucketing import BucketingError
    from tracekit.replay.rewrite_counts import applied_result

    def rewrite():
        raise BucketingError("ag_3: expected exactly one wait_tensor user " + "x" * 400)

    got = applied_result(rewrite, {})
    assert got["ok"] is False and set(got) == {"ok", "error"}
    assert got["error"].startswith("BucketingError: ag_3: expected exactly one wait_tensor user x")
    assert len(got["error"]) == len("BucketingError: ") + 300


def test_a_rewrite_that_runs_gives_its_counts_against_the_plan():
    from tests.conftest import FIXTURE_LOGS
    from tracekit.read.reader import graph_sources
    from tracekit.replay.comm_estimate import Hardware
    from tracekit.replay.replayer import GraphReplayer
    from tracekit.replay.results import ReplayOptions

    src = [s for s in graph_sources([FIXTURE_LOGS / "overlap_cap_a"]) if s.rank in (0, None)][1]
    rp = GraphReplayer(src.text, ReplayOptions())
    planned = rp.at(3.0, "override", Hardware()).collectives
    got = rp.apply(3.0, planned)
    assert (got["ok"], got["lint"], got["rewritten"], got["matches_plan"]) == (True, "ok", True, True)
    assert got["collectives"] == planned
    assert got["collectives"]["reduce_scatter"]["before"] > got["collectives"]["reduce_scatter"]["after"]
