"""A step runs one graph per frame and pass (issue 50, item 5): on a run with a graph break
and a recompile (compile ids 0/0, 0/1, 1/0, 1/1, 8 graphs) the step takes the latest compile of
each frame (0/1 and 1/1: 4 graphs) and says which graphs of earlier compiles it left out.

The copy is saved_params' rank 0 log with its compile 0/0 written again as 0/1, 1/0 and 1/1
(at test time): each compile is the same forward (0.0519 ms) and backward never pre-bucketed
(0.0702 ms), so the step is two frames of 0.1221 ms: 0.2442 ms with 18 collectives, not the
0.4884 ms of all 8 graphs."""

from __future__ import annotations

import json

from click.testing import CliRunner

from conftest import FIXTURE_LOGS, log_text, rank_log
from tracekit.cli import main
from tracekit.replay.step_graphs import compiles_taken, step_labels


def _recompiled(tmp_path):
    text = log_text(rank_log(FIXTURE_LOGS / "saved_params", 0))
    text = text if text.endswith("\n") else text + "\n"
    parts = [text]
    for frame, compile_ in ((0, 1), (1, 0), (1, 1)):
        parts.append(
            text.replace('"frame_id": 0, "frame_compile_id": 0', f'"frame_id": {frame}, "frame_compile_id": {compile_}')
        )
    dst = tmp_path / "dedicated_log_torch_trace_rank_0_recompiled.log"
    dst.write_text("".join(parts))
    return dst


EARLIER = ["0/0:0", "0/0:1", "1/0:0", "1/0:1"]


def test_the_step_takes_the_latest_compile_of_each_frame(tmp_path):
    log = _recompiled(tmp_path)
    res = CliRunner().invoke(main, ["replay", str(log), "--format", "json"])
    assert res.exit_code == 0, res.stdout
    doc = json.loads(res.stdout)
    assert [g["compile_id"] for g in doc["graphs"]] == ["0/0", "0/1", "1/0", "1/1"]
    assert len(doc["not_prebucketed"]) == 4
    (s,) = doc["totals"]["step"]
    assert (s["graphs"], s["graphs_never_prebucketed"], s["partial"]) == (4, 2, None)
    assert s["compiles"] == ["0/1", "1/1"]
    assert s["graphs_earlier_compiles"] == EARLIER
    assert s["final"] == {"counts": {"all_gather": 2, "reduce_scatter": 16}, "collectives": 18}
    assert (s["comm_ms"], s["exposed_ms"], s["compute_ms"], s["est_ms"]) == (0.164, 0.0236, 0.2206, 0.2442)
    res = CliRunner().invoke(main, ["replay", str(log)])
    text = " ".join(res.stdout.split())
    assert (
        "The step runs one graph per frame and pass, of the latest compile of each frame (0/1, 1/1); "
        "left out, of earlier compiles: 0/0:0, 0/0:1, 1/0:0, 1/0:1." in text
    )


def test_step_labels():
    labels = [f"{c}:{i}" for c in ("0/0", "0/1", "1/0", "1/1") for i in (0, 1)]
    assert step_labels(labels) == {"0/1:0", "0/1:1", "1/1:0", "1/1:1"}
    assert compiles_taken(labels) == ["0/1", "1/1"]
    # a restart's attempt is later than its first try; compiled autograd is a frame of its own
    assert step_labels(["0/0:0", "0/0_1:0", "!0/0/0:0"]) == {"0/0_1:0", "!0/0/0:0"}
