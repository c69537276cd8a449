"""``tracekit replay --format json`` and ``tracekit.replay_run`` make one document: both call
:func:`tracekit.replay.run.run`, so the Python API gives the command's JSON byte for byte (the
notes, the torch that wrote the graphs never pre-bucketed, their what-ifs). saved_params: rank
0's forward pre-bucketed at 27.4 MB, its backward never pre-bucketed; at 1 MB on IB_NDR."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from conftest import FIXTURE_LOGS

pytest.importorskip("torch")

SAVED = str(FIXTURE_LOGS / "saved_params")


def test_the_python_api_gives_the_commands_json():
    import tracekit
    from tracekit.cli import main
    from tracekit.render.text import dumps_json
    from tracekit.replay.notes import WHAT_IF_REACH

    args = ["--cap-mb", "1", "--interconnect", "IB_NDR", "--overlap", "--what-if", "forward-groups"]
    r = CliRunner().invoke(main, ["replay", SAVED, *args, "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = tracekit.replay_run(SAVED, [1.0], interconnect="IB_NDR", overlap=True, what_ifs=["forward-groups"])
    assert dumps_json(doc) == r.stdout
    # what the two used to differ in: the note, the log torch of the graph never pre-bucketed
    assert doc["notes"] == [WHAT_IF_REACH]
    assert [(e["compile_id"], e["graph_index"], e["reproduced"]) for e in doc["not_prebucketed"]] == [
        ("0/0", 1, True)
    ]
    assert [(t["version"], t["graphs"]) for t in doc["torch"]["logs"]] == [("2.13.0+cpu", 1)]
    step = json.loads(r.stdout)["totals"]["step"]
    assert [(s["cap"], s["bucket_cap_mb"], s["graphs"], s["graphs_never_prebucketed"]) for s in step] == [
        ("recorded", [27.4], 2, 1),
        ("1", [1.0], 2, 1),
    ]


def test_the_caps_asked_twice_are_replayed_once_from_python_too():
    """The command replays a cap given twice once (its caps, once each in the order given); the
    Python API does the same."""
    import tracekit

    doc = tracekit.replay_run(SAVED, [1.0, None, 1.0], overlap=False)
    assert doc["caps"] == ["1", "auto"]
