"""The hardware what-ifs reach every figure: torch's overlap scheduler times collectives with its
NCCL model answering for the what-if hardware (--interconnect, --group-size, --gpus-per-node),
so the overlap figures, the step and the recommendation follow them; the note says so."""

from __future__ import annotations

import json

from click.testing import CliRunner

from conftest import FIXTURE_LOGS
from tracekit.cli import main
from tracekit.replay.notes import WHAT_IF_REACH

B = str(FIXTURE_LOGS / "overlap_cap_b")


def _doc(*args: str) -> dict:
    r = CliRunner().invoke(main, ["replay", B, "--cap-mb", "1", "--format", "json", *args])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_a_hardware_what_if_with_overlap_figures_says_where_it_stops():
    doc = _doc("--interconnect", "IB_NDR", "--overlap")
    assert doc["hardware"]["interconnect"] == "IB_NDR"
    assert doc["notes"] == [WHAT_IF_REACH]
    assert "reach every figure" in WHAT_IF_REACH
    assert doc["totals"]["step"][0]["est_ms"] is not None  # an overlap figure is shown
    assert _doc("--overlap")["notes"] == []  # no what-if: nothing to say
    assert _doc("--group-size", "64", "--no-overlap")["notes"] == []  # no overlap figure


def _step(doc: dict) -> dict:
    return {s["cap"]: (s["comm_ms"], s["exposed_ms"], s["est_ms"], s["est_ms_vs_recorded"]) for s in doc["totals"]["step"]}


def test_the_hardware_what_ifs_reach_the_scheduler_the_step_and_the_recommendation():
    """overlap_cap_b at 1 MB: as logged, on IB_NDR, with a group of 64 and one GPU per node.
    torch's scheduler times each collective on the what-if hardware (the same number as the
    pre-bucketing table's comm ms), the step's recorded row is the recorded cap on it, and the
    per-graph 'recorded' row stays as logged (0.1199 ms for the forward)."""
    logged = _doc("--overlap")
    assert _step(logged) == {"recorded": (0.0911, 0.0772, 0.3211, 0.0), "1": (0.2563, 0.0431, 0.2751, -0.046)}
    ib = _doc("--overlap", "--interconnect", "IB_NDR")
    assert _step(ib) == {"recorded": (0.0715, 0.0576, 0.3015, 0.0), "1": (0.2172, 0.0184, 0.2504, -0.0511)}
    big = _doc("--overlap", "--group-size", "64")
    assert _step(big) == {"recorded": (1.9432, 1.9293, 2.1732, 0.0), "1": (3.4912, 3.1914, 3.4234, 1.2502)}
    for doc, fwd_comm in ((logged, 0.0905), (ib, 0.0767), (_doc("--overlap", "--gpus-per-node", "1"), 0.3695)):
        g = doc["graphs"][0]
        (r,) = g["replays"]
        assert r["estimated_comm_ms"] == r["comm_ms"] == fwd_comm  # one number, one value
        assert g["reproduction"]["est_ms"] == 0.1199  # as logged: the reproduction
    assert ib["graphs"][0]["recorded_what_if_hardware"]["est_ms"] == 0.1129
    assert "recorded_what_if_hardware" not in logged["graphs"][0]


def test_the_recommendation_on_what_if_hardware():
    r = CliRunner().invoke(main, ["replay", B, "--recommend", "--interconnect", "IB_NDR", "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    rec = doc["recommendation"]
    step = {s["cap"]: s for s in doc["totals"]["step"]}
    assert rec["est_ms"] == min(s["est_ms"] for s in step.values())
    assert rec["vs_recorded_ms"] == round(rec["est_ms"] - step["recorded"]["est_ms"], 4)
    assert step["recorded"]["est_ms"] == 0.3015  # the recorded cap on IB_NDR
