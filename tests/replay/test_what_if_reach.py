"""The hardware what-ifs say where they stop: torch's overlap scheduler times collectives with
its NCCL model of the logged group, so with --interconnect (or --group-size, --gpus-per-node)
and an overlap figure in the output, the replay says which figures the what-if does not reach."""

from __future__ import annotations

import json

from click.testing import CliRunner

from conftest import FIXTURE_LOGS
from tracekit.cli import main
from tracekit.commands.replay_cmd import WHAT_IF_REACH

B = str(FIXTURE_LOGS / "overlap_cap_b")


def _doc(*args: str) -> dict:
    r = CliRunner().invoke(main, ["replay", B, "--cap-mb", "1", "--format", "json", *args])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_a_hardware_what_if_with_overlap_figures_says_where_it_stops():
    doc = _doc("--interconnect", "IB_NDR", "--overlap")
    assert doc["hardware"]["interconnect"] == "IB_NDR"
    assert doc["notes"] == [WHAT_IF_REACH]
    assert doc["totals"]["step"][0]["est_ms"] is not None  # an overlap figure is shown
    assert _doc("--overlap")["notes"] == []  # no what-if: nothing to say
    assert _doc("--group-size", "64", "--no-overlap")["notes"] == []  # no overlap figure
