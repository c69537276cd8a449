"""The mesh what-ifs (collectives pre-bucketing never handles on a mesh, and what would bucket
them: tracekit/replay/mesh_what_ifs.py) reach the report, the ``--trace-out`` timeline and
``--plot``: the saved replay of the real hsdp_overlap fixture (``tracekit replay --recommend
--format json``: its backward's 6 all-reduces of 0.5 MiB on replicate group '1'), rendered;
exact values from that replay (torch's overlap scheduler, NCCL model)."""

from __future__ import annotations

import pytest
from conftest import FIXTURE_LOGS
from htmltree import parse
from report_docs import fixture_doc, replay_doc

from tracekit.render.html import render_html
from tracekit.render.perfetto import trace_for_cap
from tracekit.render.plot import what_if_note


def _cells(table):
    return [[td.text for td in tr.find_all("td")] for tr in table.find_all("tr")[1:]]


def test_the_report_shows_the_what_ifs_of_hsdp_overlap_in_its_cap_sweep():
    # the saved replay is --recommend's: the what-ifs ran at the recorded cap and at the cap it
    # recommends (1 MB), each row its cap first; the whole step with each at both caps
    page = render_html(fixture_doc("hsdp_overlap"), replay_doc("hsdp_overlap"))
    div = parse(page).find("section", id="sweep").find("div", id="mesh-what-ifs")
    per_graph, step = div.find_all("table")
    assert [tr.attrs["data-what-if"] for tr in per_graph.find_all("tr")[1:]] == [
        "as_run", "our_pass_with_groups", "overlap_bucketing"] * 2
    assert _cells(per_graph) == [
        ["0", "0/0:1", "10.4 MB (recorded): as run", "6", "0.1176", "0.1771", "0.1631", "0.3186"],
        ["0", "0/0:1", "10.4 MB (recorded): our pass given '1' as well", "1", "0.0414", "0.1011", "0.0871",
         "0.2426"],
        ["0", "0/0:1", "10.4 MB (recorded): torch's scheduler, collective_bucketing on", "1", "0.0414", "0.1011",
         "0.1631*", "0.3186"],
        ["0", "0/0:1", "1 MB: as run", "6", "0.1176", "0.2833", "0.0510", "0.2021"],
        ["0", "0/0:1", "1 MB: our pass given '1' as well", "3", "0.0717", "0.2377", "0.0437", "0.1948"],
        ["0", "0/0:1", "1 MB: torch's scheduler, collective_bucketing on", "6", "0.1176", "0.2837", "0.0510*",
         "0.2021"],
    ]
    assert _cells(step) == [
        ["recorded: as run (rank 0's graphs)", "0.1946", "0.4385", "-"],
        ["recorded: our pass given the groups as well", "0.1186", "0.3625", "-0.0760"],
        ["recorded: torch's scheduler, collective_bucketing on", "0.1946", "0.4385", "+0.0000"],
        ["1: as run (rank 0's graphs)", "0.0744", "0.3064", "-"],
        ["1: our pass given the groups as well", "0.0671", "0.2991", "-0.0073"],
        ["1: torch's scheduler, collective_bucketing on", "0.0744", "0.3064", "+0.0000"],
    ]
    assert "at the recorded cap and at the other caps shown" in div.find_all("p")[1].text
    assert div.find_all("p")[0].text == (
        "replicate group '1' (ranks 0,2) has no FSDP all-gather: torch's pre-bucketing buckets "
        "all-reduces only on the groups of its FSDP all-gathers ('3')")


def test_a_1d_replay_has_no_mesh_what_ifs_in_its_report():
    page = render_html(fixture_doc("overlap_cap_a"), replay_doc("overlap_cap_a"))
    assert parse(page).find("section", id="sweep") is not None
    assert 'id="mesh-what-ifs"' not in page


def _exposed_us(events, pid):
    return round(sum(e["dur"] for e in events if e["pid"] == pid and e.get("cat") == "exposed"), 3)


def test_the_recorded_caps_timeline_has_a_process_for_our_pass_given_the_replicate_group():
    doc = replay_doc("hsdp_overlap")
    recorded = trace_for_cap(doc, 0)
    events = recorded["traceEvents"]
    # the file's cap is the recorded one, not the name of its last what-if
    assert (recorded["metadata"]["cap"], recorded["metadata"]["cap"]) == (doc["totals"]["step"][0]["cap"], "recorded")
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert names == {1: "ranks 0", 2: "ranks 0 what-if: our pass given '1' as well"}
    # exposed slices add up to the step's figures: as run 0.1946 ms, our pass 0.1186 ms
    assert (_exposed_us(events, 1), _exposed_us(events, 2)) == (194.588, 118.588)
    ars = sorted(e["name"] for e in events if e.get("cat") == "communication" and e["pid"] == 2
                 and e["args"]["kind"] == "all_reduce")
    assert ars == ["all_reduce [all_reduce_6] 3,145,728 B"]  # the 6 all-reduces in one bucket
    assert sum(1 for e in events if e.get("cat") == "communication" and e["pid"] == 1
               and e["args"]["kind"] == "all_reduce") == 6
    # the what-ifs ran at the recorded cap only: another cap's file has no what-if process
    other = trace_for_cap(doc, 1)["traceEvents"]
    assert [e["args"]["name"] for e in other if e["name"] == "process_name"] == ["ranks 0"]


def test_the_plot_writes_the_what_ifs_under_the_backwards_panel(tmp_path):
    doc = replay_doc("hsdp_overlap")
    fwd, bwd = doc["graphs"]
    assert what_if_note(fwd) is None
    assert what_if_note(bwd) == (
        "what-ifs at the recorded cap (left on group '1', exposed ms):\n"
        "as run 6, 0.1631; our pass given '1' as well 1, 0.0871;\n"
        "torch's scheduler, collective_bucketing on 1, 0.1631 (torch's figure)"
    )
    pytest.importorskip("matplotlib")
    from tracekit.render.plot import plot_replay

    assert plot_replay(doc, str(tmp_path / "p.png")) == 1 + 2  # the whole step, then each graph
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- other caps: --cap-mb runs the what-ifs at each cap; --recommend at the caps given only -------


def _cap_rows(entry):
    return [(entry["as_run"]["bucket_cap_mb"], "as run", entry["as_run"]["left"], entry["as_run"]["exposed_ms"],
             entry["as_run"]["est_ms"])] + [
        (w["bucket_cap_mb"], w["name"], w["left"], w["exposed_ms"], w["est_ms"]) for w in entry["what_ifs"]]


def test_cap_mb_runs_the_mesh_what_ifs_at_each_cap():
    import json

    from click.testing import CliRunner

    from tracekit.commands.replay_cmd import replay
    from tracekit.render.mesh_replay_text import unhandled_section

    r = CliRunner().invoke(replay, [str(FIXTURE_LOGS / "hsdp_overlap"), "--cap-mb", "1", "--cap-mb", "64", "--graph",
                                    "0/0:1", "--format", "json"], catch_exceptions=False)
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    m = doc["graphs"][0]["not_prebucketed_on_mesh"]
    assert _cap_rows(m) == [
        (10.4, "as run", 6, 0.1631, 0.3186),
        (10.4, "our_pass_with_groups", 1, 0.0871, 0.2426),
        (10.4, "overlap_bucketing", 1, 0.1631, 0.3186),
    ]
    one, sixty_four = m["at_caps"]
    # at 1 MB our pass leaves the 6 all-reduces of 0.5 MiB in 3 buckets; torch's bucketing leaves them
    assert _cap_rows(one) == [
        (1.0, "as run", 6, 0.051, 0.2021),
        (1.0, "our_pass_with_groups", 3, 0.0437, 0.1948),
        (1.0, "overlap_bucketing", 6, 0.051, 0.2021),
    ]
    assert _cap_rows(sixty_four) == [
        (64.0, "as run", 6, 0.1631, 0.3186),
        (64.0, "our_pass_with_groups", 1, 0.0871, 0.2426),
        (64.0, "overlap_bucketing", 1, 0.1631, 0.3186),
    ]
    # the as-run figures at a cap are that cap's replay
    assert [(c["bucket_cap_mb"], c["exposed_ms"], c["est_ms"]) for c in doc["graphs"][0]["replays"]] == [
        (1.0, 0.051, 0.2021), (64.0, 0.1631, 0.3186)]
    text = unhandled_section(doc, "table")
    assert "cap: what-if" in text
    assert ("0        0/0:1    1 MB: our pass given '1' as well                                3                0.0717"
            "          0.2377     0.0437        0.1948") in text
    assert "at the recorded cap and at each cap replayed" in text
    # the report's table has the same rows, each cap first
    from tracekit.render.mesh_what_ifs_html import mesh_what_ifs_html

    table = parse(mesh_what_ifs_html(doc)).find("table", class_="mesh-what-ifs")
    assert [th.text for th in table.find_all("th")][2] == "cap: what-if"
    cells = _cells(table)
    assert [c[2] for c in cells] == [
        "10.4 MB (recorded): as run", "10.4 MB (recorded): our pass given '1' as well",
        "10.4 MB (recorded): torch's scheduler, collective_bucketing on",
        "1 MB: as run", "1 MB: our pass given '1' as well", "1 MB: torch's scheduler, collective_bucketing on",
        "64 MB: as run", "64 MB: our pass given '1' as well", "64 MB: torch's scheduler, collective_bucketing on",
    ]
    assert cells[4] == ["0", "0/0:1", "1 MB: our pass given '1' as well", "3", "0.0717", "0.2377", "0.0437", "0.1948"]


def test_recommend_runs_the_mesh_what_ifs_at_the_recorded_and_the_recommended_cap_and_says_so():
    from tracekit.render.mesh_replay_text import unhandled_section
    from tracekit.render.replay_text import render_text

    doc = replay_doc("hsdp_overlap")  # --recommend without --cap-mb: the grid's 13 other caps
    m = doc["graphs"][1]["not_prebucketed_on_mesh"]
    assert len(doc["graphs"][1]["replays"]) == 13
    ((rec_cap,),) = [[e["cap"] for e in m["at_caps"]]]  # the cap it recommends only, not its grid
    assert rec_cap == doc["recommendation"]["cap"] == "1"
    assert _cap_rows(m["at_caps"][0]) == [
        (1.0, "as run", 6, 0.051, 0.2021),
        (1.0, "our_pass_with_groups", 3, 0.0437, 0.1948),
        (1.0, "overlap_bucketing", 6, 0.051, 0.2021),
    ]
    assert ("Other caps were replayed; the what-ifs ran at the caps shown only (with --recommend they\n"
            "run at the caps given with --cap-mb and at the cap it recommends, not at each cap of its grid)."
            ) in unhandled_section(doc, "table")
    # the whole step at the recorded cap and at 1 MB with each what-if; the grid's other caps without
    steps = {s["cap"]: s for s in doc["totals"]["step"]}
    assert [(c, [(w["name"], w["collectives"], w["exposed_ms"], w["est_ms"], w["est_ms_vs_as_run"])
                 for w in s["mesh_what_ifs"]]) for c, s in steps.items() if s.get("mesh_what_ifs")] == [
        ("recorded", [("our_pass_with_groups", 4, 0.1186, 0.3625, -0.076),
                      ("overlap_bucketing", 4, 0.1946, 0.4385, 0.0)]),
        ("1", [("our_pass_with_groups", 20, 0.0671, 0.2991, -0.0073),
               ("overlap_bucketing", 23, 0.0744, 0.3064, 0.0)]),
    ]
    # the recommendation (of the caps as torch runs them) says what the what-ifs give at its cap
    rec = doc["recommendation"]
    assert [(w["name"], w["est_ms"], w["est_ms_vs_recorded"]) for w in rec["mesh_what_ifs"]] == [
        ("our_pass_with_groups", 0.2991, -0.1394), ("overlap_bucketing", 0.3064, -0.1321)]
    text = render_text(doc, "table")
    assert ("At 1 MB, with the what-ifs on the mesh (the Pareto front and the recommendation are of\n"
            "the caps as torch runs them: the what-ifs change the pass or the scheduler, not the cap):\n"
            "  our pass given the groups as well: est 0.2991 ms (-0.0073), exposed 0.0671\n"
            "  torch's scheduler, collective_bucketing on: est 0.3064 ms (+0.0000), exposed 0.0744*\n") in text
    assert ("1 + our pass                     1         20             -          0.0671        0.2320        "
            "0.2991    -           -             -0.1394") in text
    assert "\n2 + our pass" not in text and "\n2                                2         15" in text


def test_the_whole_step_at_each_cap_mb_has_the_what_ifs():
    """replay hsdp_overlap --cap-mb 1 --cap-mb 64: the Whole step per cap table has, under each
    cap's row, the step with each what-if (the forward as run, the backward with the what-if)."""
    from click.testing import CliRunner

    from tracekit.commands.replay_cmd import replay

    r = CliRunner().invoke(replay, [str(FIXTURE_LOGS / "hsdp_overlap"), "--cap-mb", "1", "--cap-mb", "64"],
                           catch_exceptions=False)
    assert r.exit_code == 0
    text = r.stdout
    table = text[text.index("Whole step per cap"):text.index("X + our pass")]
    rows = [ln.split() for ln in table.splitlines()[4:] if ln.strip()]
    assert rows == [
        ["recorded", "10.4", "9", "0.2085", "0.1946", "0.2439", "0.4385", "15.00", "6", "+0.0000"],
        ["recorded", "+", "our", "pass", "10.4", "4", "-", "0.1186", "0.2439", "0.3625", "-", "-", "-0.0760"],
        ["recorded", "+", "collective_bucketing", "10.4", "4", "-", "0.1946*", "0.2439", "0.4385", "-", "-",
         "+0.0000"],
        ["1", "1", "23", "0.3737", "0.0744", "0.2320", "0.3064", "8.50", "1", "-0.1321"],
        ["1", "+", "our", "pass", "1", "20", "-", "0.0671", "0.2320", "0.2991", "-", "-", "-0.1394"],
        ["1", "+", "collective_bucketing", "1", "23", "-", "0.0744*", "0.2320", "0.3064", "-", "-", "-0.1321"],
        ["64", "64", "9", "0.2085", "0.1946", "0.2439", "0.4385", "15.00", "6", "+0.0000"],
        ["64", "+", "our", "pass", "64", "4", "-", "0.1186", "0.2439", "0.3625", "-", "-", "-0.0760"],
        ["64", "+", "collective_bucketing", "64", "4", "-", "0.1946*", "0.2439", "0.4385", "-", "-", "+0.0000"],
    ]


def test_replay_run_from_python_registers_the_mesh_and_runs_the_what_ifs():
    """tracekit.replay_run on hsdp_overlap: the backward's replicate group sized from the logs
    (it was 'partial: 1 of 2 graphs' there before), the what-ifs at the recommended cap too."""
    import tracekit

    doc = tracekit.replay_run(str(FIXTURE_LOGS / "hsdp_overlap"), recommend=True)
    step = doc["totals"]["step"][0]
    assert (step["graphs"], step["partial"], step["est_ms"]) == (2, None, 0.4385)
    assert [(w["name"], w["est_ms"]) for w in doc["totals"]["step_mesh_what_ifs"]] == [
        ("our_pass_with_groups", 0.3625), ("overlap_bucketing", 0.4385)]
    assert [(w["name"], w["est_ms"]) for w in doc["recommendation"]["mesh_what_ifs"]] == [
        ("our_pass_with_groups", 0.2991), ("overlap_bucketing", 0.3064)]
