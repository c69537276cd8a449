"""One number, one value (issue 39): a graph's estimated communication is the same in summarize,
replay and explain, in the same format (ms, 4 decimals), or the output says which is which.

- summarize's est ms sums the per-collective figures torch logged
  (``fx_collectives_analytical_estimation``, each written at 4 decimals); replay and explain
  ask the same NCCL model and sum before rounding. On saved_params both give 0.0116 (forward)
  and 0.0704 (backward, never pre-bucketed); on overlap_cap_b's backward the log's rounding
  shows: 0.0282 + 0.0315 = 0.0597 against the model's 0.0596 (docs/output.md says so).
- replay's comm ms costs the FSDP groups' collectives (those pre-bucketing merges); on a mesh the
  graphs also run others (hsdp's replicate all-reduces, fsdp_tp's tensor-parallel all-reduce),
  and replay says what they add and the whole figure, summarize's."""

from __future__ import annotations

import json

from click.testing import CliRunner
from conftest import FIXTURE_LOGS

from tracekit.cli import main


def _out(*args: str) -> str:
    r = CliRunner().invoke(main, list(args))
    assert r.exit_code == 0, r.output
    return r.stdout


def _run_rows(name: str) -> dict[str, str]:
    """summarize's *Collectives that run*: graph ("forward", "backward") -> est ms cell (the
    first group of ranks)."""
    text = _out("summarize", str(FIXTURE_LOGS / name), "--jobs", "1")
    section = text[text.index("Collectives that run"):].split("\n\n")[0]
    out: dict[str, str] = {}
    for ln in section.splitlines():
        if ln.startswith("0/0 "):
            cells = ln.split()
            out.setdefault(cells[1], cells[-2])
    return out


def _row(text: str, start: str) -> list[str]:
    (line,) = [ln for ln in text.splitlines() if ln.startswith(start)]
    return line.split()


def test_saved_params_comm_is_one_number_in_summarize_replay_and_explain():
    logs = str(FIXTURE_LOGS / "saved_params")
    assert _run_rows("saved_params") == {"forward": "0.0116", "backward": "0.0704"}
    summary = _out("summarize", logs, "--jobs", "1")
    assert "8 reduce-scatters, 298,144 B, 0.0704 ms estimated" in summary  # the verdict's finding

    replay = _out("replay", logs)
    assert _row(replay, "0        0/0:0    62 ")[-1] == "0.0116"  # recorded outcome, comm ms
    assert _row(replay, "0        0/0:1    88 ")[-1] == "0.0704"  # never pre-bucketed, comm ms
    assert _row(replay, "0        0/0:0 recorded")[6] == "0.0116"  # after torch's scheduler
    assert _row(replay, "recorded  27.4")[3] == "0.0820"  # the step: 0.0116 + 0.0704

    explain = _out("explain", logs)
    assert "the pass merges RS 8->1: 0.0704 -> 0.0116 ms estimated" in explain
    assert "merges nothing (RS 8->8): comm 0.0704 -> 0.0704 ms" in explain  # b1bd04d's wording


def test_summarize_sums_the_logged_figures_replay_the_model():
    logs = str(FIXTURE_LOGS / "overlap_cap_b")
    assert _run_rows("overlap_cap_b") == {"forward": "0.0315", "backward": "0.0597"}
    doc = json.loads(_out("summarize", logs, "--jobs", "1", "--format", "json"))
    backward = doc["groups"][0]["graphs"][1]["final"]["collectives"]
    assert [c["est_ms"] for c in backward] == [0.0282, 0.0315]  # as the log writes them
    logged = round(sum(c["est_ms"] for c in backward), 4)
    assert logged == 0.0597
    rep = json.loads(_out("replay", logs, "--format", "json"))
    assert [g["recorded"]["estimated_comm_ms"] for g in rep["graphs"]] == [0.0315, 0.0596]
    assert [g["reproduction"]["comm_ms"] for g in rep["graphs"]] == [0.0315, 0.0596]
    # the same model: apart by the log's rounding only (at most 0.00005 a collective)
    model = rep["graphs"][1]["recorded"]["estimated_comm_ms"]
    assert 0 < abs(logged - model) <= 0.00005 * len(backward) + 1e-9


def test_on_a_mesh_replay_says_what_the_other_groups_add():
    assert _run_rows("hsdp") == {"forward": "0.0097", "backward": "0.0851"}
    replay = _out("replay", str(FIXTURE_LOGS / "hsdp"))
    assert _row(replay, "0        0/0:1    117 ")[-1] == "0.0193"  # the FSDP group's only
    assert (
        "comm ms: the FSDP groups' collectives only (those pre-bucketing merges); the graphs also run "
        "others, as logged (summarize's est ms counts them all):\n"
        "  0 0/0:1: + 8 AR on group 1, 0.0658 ms: 0.0851 ms in all\n"
    ) in replay
    assert _run_rows("fsdp_tp") == {"forward": "0.0176", "backward": "0.0273"}
    replay = _out("replay", str(FIXTURE_LOGS / "fsdp_tp"))
    assert "  0 0/0:0: + 1 AR on group 3, 0.0078 ms: 0.0176 ms in all\n" in replay
    assert "  0 0/0:1: + 1 AR on group 3, 0.0078 ms: 0.0273 ms in all\n" in replay


def test_a_one_d_replay_has_no_other_groups_line():
    assert "the FSDP groups' collectives only" not in _out("replay", str(FIXTURE_LOGS / "spmd_auto"))
