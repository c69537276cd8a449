"""Replay under the running torch (2.13.0 in the main install, 2.14.1 and 2.15.0 in .ci/run's
venvs): the logs that release wrote reproduce, with torch's own exposed ms where the log's run
kept it (overlap_results.json), and a log of another release says what differs."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FIXTURE_LOGS, rank_log

torch = pytest.importorskip("torch")

RUNNING = torch.__version__.split("+")[0]


def _release_of(scenario: str) -> str:
    """The release that wrote a scenario's logs (its torch_version entry), read without torch."""
    from tracekit.read.reader import load

    (version,) = {r.torch_version for r in load(FIXTURE_LOGS / scenario).ranks}
    return version.split("+")[0]


SCENARIOS = sorted(p.name for p in FIXTURE_LOGS.iterdir() if p.is_dir())
OWN = [s for s in SCENARIOS if _release_of(s) == RUNNING]
OTHER = [
    s for s in ("overlap_cap_a", "overlap_cap_a_torch2.14", "overlap_cap_a_torch2.15") if _release_of(s) != RUNNING
]


def test_the_running_release_wrote_some_fixtures():
    assert OWN, f"no fixture log written by torch {RUNNING}"


@pytest.mark.parametrize("scenario", OWN)
def test_logs_of_the_running_release_reproduce_with_torchs_exposed_ms(scenario):
    import tracekit.replay

    run = tracekit.replay.replay(str(FIXTURE_LOGS / scenario))
    doc = run.to_dict()
    assert [g["verdict"] for g in doc["graphs"]] == ["reproduced"] * len(doc["graphs"])
    assert doc["totals"]["partial"] == 0
    # FSDP2's collectives stay in eager code; nested_waits is a forward never pre-bucketed (below)
    assert bool(run.graphs) == (not scenario.startswith(("fsdp2", "nested_waits")))
    for g in run.graphs:  # every fixture ran torch's scheduler on every graph; so does the replay
        assert g.overlap_scheduled
        assert g.reproduction.schedule is not None, g.reproduction.schedule_error
        assert g.final_reproduced is True, g.final_mismatches
    if scenario.startswith("saved_params"):  # its backward, never pre-bucketed: scheduled too
        from click.testing import CliRunner

        from tracekit.cli import main

        out = CliRunner().invoke(main, ["replay", str(FIXTURE_LOGS / scenario), "--format", "json"])
        (n,) = json.loads(out.stdout)["not_prebucketed"]
        assert n["reproduced"] and n["schedule"]["exposed_ms"] is not None, n
    results = FIXTURE_LOGS / scenario / "overlap_results.json"
    if results.exists():
        want = {x["graph_index"]: x for x in json.loads(results.read_text())["graphs"]}
        for g in run.graphs:
            # to the log's precision: it records compute estimates to 0.0001 us
            # (tests/replay/test_stock_estimates.py); 1e-6 ms is a nanosecond
            torch_ms = want[g.graph_index]["exact_total_exposed_ms"]
            assert g.reproduction.schedule.exposed_ms == pytest.approx(torch_ms, abs=1e-6, rel=0)


@pytest.mark.parametrize("scenario", OTHER)
def test_a_log_of_another_release_says_what_differs(scenario):
    from tracekit.render.replay_text import render_text
    from tracekit.replay.torch_versions import differences

    import tracekit.replay

    doc = tracekit.replay.replay(str(FIXTURE_LOGS / scenario)).to_dict()
    (log,) = doc["torch"]["logs"]
    wrote = _release_of(scenario)
    assert log["version"].split("+")[0] == wrote and doc["torch"]["replay"] == torch.__version__
    kinds = [d.split(":", 1)[0] for d in log["differences"]]
    crosses_214 = (wrote >= "2.14") != (RUNNING >= "2.14")
    crosses_215 = (wrote >= "2.15") != (RUNNING >= "2.15")
    assert kinds == ["simple_overlap"] * crosses_214 + ["bucket layouts"] * crosses_215
    assert log["differences"] == differences(log["version"], torch.__version__)
    # the same model at the same cap: counts and final sequence still reproduce across releases
    assert (log["graphs"], log["counts_reproduced"], log["final_reproduced"]) == (2, 2, 2)
    text = render_text(doc, "table")
    assert (
        f"torch: logs written by torch {log['version']}, replayed by torch {torch.__version__}; "
        "counts reproduced on 2 of 2 graphs, final sequence 2 of 2\n" in text
    )
    from tracekit.replay.torch_versions import wrapped_line  # lines over 200 columns go on, 4 in

    assert "".join(wrapped_line(f"  differs: {d}") + "\n" for d in log["differences"]) in text
    # by how much, in ms: the final sequence's collective estimates, the log torch's (its
    # fx_collectives_analytical_estimation) against the replaying torch's NCCL model, and the
    # replaying torch's exposed ms per graph; on this model the releases agree to 0.0001 ms
    assert log["collective_ms"] == {"graphs": 2, "log": 0.2567, "replay": 0.2567, "delta": 0.0}
    assert log["exposed_ms"] == {"replay": {"0/0:0": 0.0234, "0/0:1": 0.0198}}
    assert (
        wrapped_line(
            f"  by how much: collective estimates 0.2567 ms by torch {log['version']} (in the log), "
            f"0.2567 ms by torch {torch.__version__}: +0.0000 ms (2 graphs)"
        )
        + "\n"
        + wrapped_line(
            f"  by how much: exposed ms by torch {torch.__version__}'s FX scheduler: 0/0:0 0.0234, 0/0:1 "
            f"0.0198; the log holds no exposed figure of torch {log['version']}, so the schedulers' own "
            "difference is not measured"
        )
        + "\n"
    ) in text
    assert max(map(len, text.splitlines())) <= 200
    # the writing torch's own figure (kept beside the fixture): within 0.0001 ms of the replay's
    wrote_ms = json.loads((FIXTURE_LOGS / scenario / "overlap_results.json").read_text())["graphs"]
    assert [round(x["exact_total_exposed_ms"], 4) for x in wrote_ms] == [0.0234, 0.0198]


#: The same forward (fixtures/generate.py: _nested_waits_forward, a 2 x 2 mesh and the world group),
#: written by torch 2.13.0 and by torch 2.15.0: torch's overlap scheduler handles a wait inside
#: another's handling, across process groups, and 2.15 no longer lets the inner one hide the outer.
NESTED_WAITS = {"2.13.0": "nested_waits", "2.15.0": "nested_waits_torch2.15"}
#: The exposed ms each release's scheduler gives that graph (2.14 schedules it as 2.13 does).
NESTED_WAITS_MS = {"2.13.0": 0.0956, "2.14.1": 0.0956, "2.15.0": 0.1063}


def _logged_figures(scenario: str) -> dict[str, float]:
    """torch's own "Overlap scheduling results" of the scenario's one graph (rank 0), and their
    exact sums, as the run kept them beside the logs."""
    (graph,) = json.loads((FIXTURE_LOGS / scenario / "overlap_results.json").read_text())["graphs"]
    return graph


def test_nested_waits_torch_2_13_and_2_15_log_different_figures():
    """Read from what the two runs logged, no replay: 2.15's figures are not 2.13's on this graph."""
    keys = ("exposed", "bad_exposed", "potentially_hidden", "total_exposed_ms", "total_potential_exposed_ms")
    old, new = (_logged_figures(NESTED_WAITS[r]) for r in ("2.13.0", "2.15.0"))
    assert [old[k] for k in keys] == [0, 0, 5, 0.1, 0.23]
    assert [new[k] for k in keys] == [1, 0, 5, 0.11, 0.23]
    # the same collectives and estimates; 2.15 leaves X, the all-reduce whose wait was being handled, exposed
    assert old["exact_total_potential_exposed_ms"] == new["exact_total_potential_exposed_ms"]
    assert [round(x["exact_total_exposed_ms"], 4) for x in (old, new)] == [0.0956, 0.1063]


@pytest.mark.parametrize("scenario", sorted(NESTED_WAITS.values()))
def test_nested_waits_replay_schedules_as_the_running_release(scenario):
    """Replay runs the running torch's scheduler: on either release's log it gives the running
    release's exposed ms, equal to the figure that release logged, and not the other release's."""
    import tracekit.replay

    assert tracekit.replay.replay(str(FIXTURE_LOGS / scenario)).graphs == []  # no all-gather: never pre-bucketed
    (graph,) = tracekit.replay.not_prebucketed(str(FIXTURE_LOGS / scenario), forward_groups=False)
    assert (graph["ranks"], graph["compile_id"], graph["graph_index"], graph["error"]) == ("0", "0/0", 0, None)
    schedule = graph["schedule"]
    assert schedule["schedule_error"] is None and schedule["final"]["counts"] == {"all_reduce": 3, "reduce_scatter": 3}
    assert schedule["exposed_ms"] == NESTED_WAITS_MS[RUNNING]
    logged = {r: round(_logged_figures(s)["exact_total_exposed_ms"], 4) for r, s in NESTED_WAITS.items()}
    if RUNNING in logged:  # the figure the running release logged on this graph, whichever log is replayed
        assert schedule["exposed_ms"] == logged[RUNNING]
    assert schedule["exposed_ms"] != logged["2.13.0" if RUNNING >= "2.15" else "2.15.0"]


def test_differences_between_releases():
    from tracekit.replay.torch_versions import differences

    assert differences("2.13.0+cpu", "2.13.1") == []
    assert differences(None, "2.15.0") == []
    assert [d.split(":")[0] for d in differences("2.13.0+cpu", "2.14.1+cu132")] == ["simple_overlap"]
    assert [d.split(":")[0] for d in differences("2.14.1", "2.15.0")] == ["bucket layouts"]
    assert [d.split(":")[0] for d in differences("2.15.0", "2.13.0")] == ["simple_overlap", "bucket layouts"]


@pytest.mark.parametrize("scenario", ["saved_params", "saved_params_torch2.14"])
def test_a_log_of_graphs_never_pre_bucketed_only_still_says_which_torch(scenario):
    """``--graph 0/0:1`` picks saved_params' backward only, which torch never pre-bucketed: the
    text and the JSON still say which torch wrote the log and which one replays it."""
    from click.testing import CliRunner

    from tracekit.cli import main
    from tracekit.replay.torch_versions import differences, wrapped_line

    wrote = {"saved_params": "2.13.0+cpu", "saved_params_torch2.14": "2.14.1+cu130"}[scenario]
    args = ["replay", str(FIXTURE_LOGS / scenario), "--graph", "0/0:1"]
    text = CliRunner().invoke(main, args, catch_exceptions=False)
    assert text.exit_code == 0
    want = f"torch: logs written by torch {wrote}, replayed by torch {torch.__version__}\n" + "".join(
        wrapped_line(f"  differs: {d}") + "\n" for d in differences(wrote, torch.__version__)
    )
    assert text.stdout.endswith(f"\n{want}\n1 graph never pre-bucketed: 1 reproduced.\n")
    doc = json.loads(CliRunner().invoke(main, [*args, "--format", "json"], catch_exceptions=False).stdout)
    assert doc["graphs"] == [] and len(doc["not_prebucketed"]) == 1  # so nothing measured in ms
    assert doc["torch"]["replay"] == torch.__version__
    assert doc["torch"]["logs"] == [
        {
            "version": wrote,
            "graphs": 0,
            "counts_reproduced": 0,
            "final_recorded": 0,
            "final_reproduced": 0,
            "differences": differences(wrote, torch.__version__),
        }
    ]


def test_waits_go_as_the_running_release_post_grad_passes_take_them():
    """torch 2.15's post-grad passes remove a second wait on a value already waited on
    (``deduplicate_wait_tensors``) before pre-bucketing and the overlap scheduler; 2.13 and 2.14
    have no such pass. The replay's rebuilt graph gets what the running release does."""
    import torch.fx as fx

    from tracekit.replay.post_grad import post_grad_waits

    c10d = torch.ops._c10d_functional
    g = fx.Graph()
    x = g.placeholder("x")
    ag = g.call_function(c10d.all_gather_into_tensor.default, (x, 2, "0"))
    w1 = g.call_function(c10d.wait_tensor.default, (ag,))
    w2 = g.call_function(c10d.wait_tensor.default, (w1,))
    g.output(g.call_function(torch.ops.aten.add.Tensor, (w2, w1)))
    gm = fx.GraphModule(torch.nn.Module(), g)
    has_pass = RUNNING >= "2.15"
    assert post_grad_waits(gm) == (1 if has_pass else 0)
    waits = [n for n in gm.graph.nodes if n.target == c10d.wait_tensor.default]
    assert waits == ([w1] if has_pass else [w1, w2])
    (add,) = [n for n in gm.graph.nodes if n.target == torch.ops.aten.add.Tensor]
    assert add.args == ((w1, w1) if has_pass else (w2, w1))
    # the fixtures' graphs wait once on each collective: nothing goes
    from tracekit.read.reader import graph_sources
    from tracekit.replay.graph_text import parse_graph_text

    for src in graph_sources(str(rank_log("hsdp_overlap", 0))):
        assert post_grad_waits(parse_graph_text(src.text, {})) == 0
