"""``tracekit.analyze.step_simulation``: a schedule run on the main thread and the transfers with
measured costs. The schedules here are small ones written out by hand in the form ``tracekit
replay`` gives them (``timeline.nodes``), with round costs, so each expected time is worked out
in the comment beside it; the fixtures' own schedules and profiles are in
tests/replay/test_predicted.py."""

from __future__ import annotations

import pytest

from tracekit.analyze.calibration import Calibration, GraphCost
from tracekit.analyze.step_simulation import GraphModel, Model, TransferFit, fit, predict_graph, predict_step

MIB = 1 << 20


def _cal(sharing: float = 0.0, **kw) -> Calibration:
    base = dict(
        traces=[],
        ranks=[0],
        steps=1,
        outside_ms=0.0,
        graphs={},
        sharing=sharing,
        sharing_measured=True,
        issue_base_ms=0.0,
        issue_ms_per_mib={},
        wait_ms=0.0,
        copy_ms_per_mib=0.0,
        first_touch_ms_per_mib=0.0,
        first_touch_measured=True,
    )
    base.update(kw)
    return Calibration(**base)


COST = GraphCost("0/0", 0, runs=1, span_ms=0.0, gap_ms=0.0, matmul_alone_ms=0.0, matmuls=1, wait_ms=0.0)


def _model(cal: Calibration, ms_per_mib: float = 1.0) -> tuple[Model, GraphModel]:
    return Model(cal, TransferFit(0.0, ms_per_mib, True)), GraphModel(COST, 1.0, 0.0, frozenset())


def mm(name: str, ms: float) -> dict:
    return {"type": "compute", "name": name, "estimate": "recorded", "dur_us": ms * 1e3}


def gather(name: str, shard_mib: int, members: int = 1) -> dict:  # an all-gather over 2 ranks
    return {
        "type": "collective",
        "name": name,
        "kind": "all_gather",
        "input_bytes": shard_mib * MIB,
        "bytes": 3 * shard_mib * MIB,
        "members": [f"m{i}" for i in range(members)],
    }


def wait(of: str) -> dict:
    return {"type": "wait", "name": f"wait_{of}", "collective": of}


def test_a_transfer_waited_on_before_any_compute_is_all_exposed():
    model, g = _model(_cal())
    # 2 MiB moved at 1 ms/MiB: the main thread waits 2 ms, then computes 3
    p = predict_graph([gather("ag", 1), wait("ag"), mm("mm", 3.0)], model, g)
    assert (p.total_ms, p.exposed_ms, p.comm_ms, p.compute_ms) == pytest.approx((5.0, 2.0, 2.0, 3.0))


def test_compute_hides_a_transfer_and_both_share_the_cores():
    nodes = [gather("ag", 1), mm("mm", 3.0), wait("ag")]
    model, g = _model(_cal(sharing=0.0))
    assert predict_graph(nodes, model, g).total_ms == pytest.approx(3.0)  # hidden, nothing shared
    model, g = _model(_cal(sharing=1.0))
    # both at half speed: the transfer's 2 ms of work ends at 4 ms, when the matmul has done 2 of
    # its 3; the last 1 ms alone
    p = predict_graph(nodes, model, g)
    assert (p.total_ms, p.exposed_ms, p.comm_ms) == pytest.approx((5.0, 0.0, 4.0))


def test_transfers_run_one_at_a_time_in_issue_order():
    model, g = _model(_cal())
    # two 2 ms transfers: the second starts when the first ends; the wait on it ends at 4 ms
    p = predict_graph([gather("a", 1), gather("b", 1), wait("b"), wait("a")], model, g)
    assert (p.total_ms, p.exposed_ms) == pytest.approx((4.0, 4.0))


def test_a_bucket_pays_its_copies_and_a_fresh_buffer_its_first_touch():
    cal = _cal(copy_ms_per_mib=0.1, first_touch_ms_per_mib=0.25)
    model, g = _model(cal, ms_per_mib=0.0)
    # 8 merged shards of 2 MiB: 16 MiB copied in (1.6 ms), 32 MiB gathered (fresh: 32 x 0.25 = 8 ms
    # on the transfer), 32 MiB copied out into the weights, which are reused (3.2 ms)
    p = predict_graph([gather("bucket", 16, members=8), wait("bucket")], model, g)
    assert (p.compute_ms, p.exposed_ms, p.total_ms) == pytest.approx((1.6 + 3.2, 8.0, 12.8))
    # one collective merged nothing: no copies; its 32 MiB output is still fresh pages
    p = predict_graph([gather("one", 16), wait("one")], model, g)
    assert (p.compute_ms, p.total_ms) == pytest.approx((0.0, 8.0))


def test_fit_makes_the_recorded_schedule_take_what_it_measured():
    nodes = [gather("ag", 1), wait("ag"), mm("mm", 0.001)]  # torch's estimate: 1 us
    cost = GraphCost("0/0", 0, runs=4, span_ms=9.0, gap_ms=0.0, matmul_alone_ms=3.0, matmuls=1, wait_ms=6.0)
    cal = _cal(graphs={("0/0", 0): cost}, outside_ms=0.5)
    model = fit(cal, {("0/0", 0): nodes})
    # the matmul takes its measured 3 ms; the transfer the other 6: 1.5 ms latency + 2 MiB x 2.25
    assert model.graphs[("0/0", 0)].matmul_ratio == pytest.approx(3000.0)
    assert (model.transfer.latency_ms, model.transfer.ms_per_mib) == pytest.approx((1.5, 2.25))
    step = predict_step(model, {("0/0", 0): nodes})
    assert step["predicted_step_ms"] == pytest.approx(9.5)  # and the time outside the graph runs
