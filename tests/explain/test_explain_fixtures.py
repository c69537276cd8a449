"""``tracekit explain`` end to end on the real fixture logs: reasons, buckets and sizes read off
those logs, what-ifs verified by planning again, the recorded bucket members checked, and the
usage errors."""

from __future__ import annotations

import hashlib
import json

from click.testing import CliRunner

from conftest import FIXTURE_LOGS
from tracekit.cli import main

SMALL = str(FIXTURE_LOGS / "spmd_small_cap")
AG = "all_gather_into_tensor"
RS = "reduce_scatter_tensor"


def _run(*args: str):
    return CliRunner().invoke(main, ["explain", *args])


def _doc(*args: str) -> dict:
    result = _run(*args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _n(base: str, i: int) -> str:
    return base if i == 0 else f"{base}_{i}"


def test_small_cap_forward_over_cap_with_verified_caps() -> None:
    doc = _doc(SMALL, "--graph", "0/0:0")
    assert doc["schema"] == "tracekit.explain/1"
    (g,) = doc["graphs"]
    assert (g["rank"], g["compile_id"], g["graph_index"], g["cap_mb"]) == (0, "0/0", 0, 0.1)
    assert g["recorded"] == {"AG": "8->5", "RS": "0->0", "AR": "0->0"}
    assert (g["reproduced"], g["buckets_checked"], g["mismatches"]) == (True, "members", [])
    # the buckets shown are the ones the log recorded (fx_bucketing_passes_all_gather_buckets)
    assert g["buckets"]["AG"] == [[AG, _n(AG, 1)], [_n(AG, 5), _n(AG, 6), _n(AG, 7)]]
    cs = g["collectives"]
    assert [(c["name"], c["size_mb"], c["bucket"], c["reason"]) for c in cs] == [
        (AG, 0.016, 0, "bucketed"), (_n(AG, 1), 0.001, 0, "bucketed"),
        (_n(AG, 2), 0.125, None, "over_cap"), (_n(AG, 3), 0.001, None, "over_cap"),
        (_n(AG, 4), 0.125, None, "over_cap"), (_n(AG, 5), 0.001, 1, "bucketed"),
        (_n(AG, 6), 0.016, 1, "bucketed"), (_n(AG, 7), 0.000137, 1, "bucketed"),  # 144 bytes: never 0 (issue 50, item 15)
    ]
    assert {c["dtype"] for c in cs} == {"f32"} and {c["kind"] for c in cs} == {"AG"}
    assert cs[2]["detail"] == (
        "the open bucket (all_gather_into_tensor, all_gather_into_tensor_1: 0.017 MB) plus this (0.125 MB) "
        "is 0.142 MB, over the 0.1 MB cap by 0.042 MB; with the next, all_gather_into_tensor_3 (0.001 MB), "
        "it would be 0.126 MB, over the cap by 0.026 MB")
    assert [c["what_if"] and c["what_if"]["cap_mb"] for c in cs] == [None, None, 0.126, 0.126, 0.126, None, None, None]
    assert cs[2]["what_if"] == {"cap_mb": 0.126, "verified": True, "text": "a cap of 0.126 MB buckets it"}
    assert [c["needed_mb"] for c in cs] == [None, None, 0.126, 0.126, 0.126, None, None, None]


def test_small_cap_backward_greedy_what_if_is_not_just_the_neighbour_sum() -> None:
    (g,) = _doc(SMALL, "--graph", "0/0:1")["graphs"]
    assert g["recorded"] == {"AG": "5->4", "RS": "8->5", "AR": "0->0"}
    assert g["reproduced"] is True and g["buckets_checked"] == "members"
    assert g["buckets"]["AG"] == [[_n(AG, 7), _n(AG, 6)]]
    assert g["buckets"]["RS"] == [[RS, _n(RS, 1), _n(RS, 2)], [_n(RS, 6), _n(RS, 7)]]
    by = {c["name"]: c for c in g["collectives"]}
    # all_gather_into_tensor_2 would need only 0.126 MB with its neighbour, but at 0.126 MB the
    # greedy fill pairs its neighbour with the one before; at 0.141 MB the three before the
    # neighbour fill one bucket and the neighbour opens the next, which it joins
    assert by[_n(AG, 2)]["what_if"]["cap_mb"] == 0.141
    assert by[_n(AG, 4)]["what_if"]["cap_mb"] == 0.126
    assert [by[_n(RS, i)]["reason"] for i in range(8)] == ["bucketed"] * 3 + ["over_cap"] * 3 + ["bucketed"] * 2
    assert [by[_n(RS, i)]["size_mb"] for i in range(3, 6)] == [0.125, 0.001, 0.125]


def test_auto_cap_everything_bucketed_and_gzipped_logs_read_the_same() -> None:
    plain = _doc(str(FIXTURE_LOGS / "spmd_auto"))
    gz = _doc(str(FIXTURE_LOGS / "spmd_auto_gz"))
    for doc in (plain, gz):
        fwd, bwd = doc["graphs"]
        assert fwd["cap_mb"] == 27.4 and fwd["reproduced"] is True and fwd["buckets_checked"] == "members"
        assert fwd["buckets"]["AG"] == [[_n(AG, i) for i in range(8)]]
        assert {c["reason"] for c in fwd["collectives"] + bwd["collectives"]} == {"bucketed"}
        assert bwd["buckets"]["AG"] == [[_n(AG, i) for i in (7, 6, 4, 3, 2)]]
        assert bwd["buckets"]["RS"] == [[_n(RS, i) for i in range(8)]]
    strip = [{k: v for k, v in g.items() if k not in ("file",)} for g in plain["graphs"]]
    assert strip == [{k: v for k, v in g.items() if k not in ("file",)} for g in gz["graphs"]]


def test_diverging_rank_3_has_its_two_extra_layers_bucketed() -> None:
    fwd, _ = _doc(str(FIXTURE_LOGS / "diverge_rank"), "--rank", "3")["graphs"]
    assert fwd["rank"] == 3 and fwd["recorded"]["AG"] == "10->1" and fwd["reproduced"] is True
    assert [(c["name"], c["size_mb"]) for c in fwd["collectives"]][8:] == [(_n(AG, 8), 0.004), (_n(AG, 9), 0.000137)]
    assert fwd["buckets"]["AG"] == [[_n(AG, i) for i in range(10)]]


def test_usage_errors_list_what_exists() -> None:
    div = str(FIXTURE_LOGS / "diverge_rank")
    r = _run(div, "--rank", "7")
    assert r.exit_code == 2 and "rank 7 has no recorded outcome in the logs (ranks there: 0-3)" in r.output
    r = _run(div, "--graph", "0/0:5")
    assert r.exit_code == 2 and "graph 0/0:5 is not in the logs (graphs there: 0/0:0, 0/0:1)" in r.output
    r = _run(div, "--rank", "3", "--graph", "forward")
    assert r.exit_code == 2
    assert "'forward' is not a graph: COMPILE_ID[:INDEX], e.g. 0/0 or 0/0:1" in r.output


def test_buckets_that_differ_from_the_recorded_members_are_not_reproduced(tmp_path) -> None:
    (src,) = (FIXTURE_LOGS / "spmd_small_cap").glob("*rank_0_*.log")
    lines = src.read_text(encoding="utf-8").split("\n")
    recorded = "\t[[all_gather_into_tensor, all_gather_into_tensor_1], " \
               "[all_gather_into_tensor_5, all_gather_into_tensor_6, all_gather_into_tensor_7]]"
    i = lines.index(recorded)
    tampered = "[[all_gather_into_tensor, all_gather_into_tensor_1], [all_gather_into_tensor_6, all_gather_into_tensor_7]]"
    old_md5 = hashlib.md5(recorded[1:].encode()).hexdigest()
    lines[i - 1] = lines[i - 1].replace(old_md5, hashlib.md5(tampered.encode()).hexdigest())
    lines[i] = "\t" + tampered
    out = tmp_path / src.name
    out.write_text("\n".join(lines), encoding="utf-8")
    r = _run(str(out), "--graph", "0/0:0")
    assert r.exit_code == 1
    assert "NOT REPRODUCED" in r.output
    assert ("AG buckets: recorded [['all_gather_into_tensor', 'all_gather_into_tensor_1'], "
            "['all_gather_into_tensor_6', 'all_gather_into_tensor_7']], planned") in r.output


def test_help_lists_explain() -> None:
    r = CliRunner().invoke(main, ["--help"])
    assert "explain    Why each collective is, or is not, in a bucket; what-ifs checked." in r.output


def test_markdown_to_a_file(tmp_path) -> None:
    out = tmp_path / "why.md"
    r = _run(SMALL, "--graph", "0/0:0", "--format", "markdown", "--output", str(out))
    assert r.exit_code == 0 and r.output == ""
    text = out.read_text(encoding="utf-8")
    assert text.startswith("## rank 0, graph 0/0:0 (forward), cap 0.1 MB\n\n"
                           "recorded AG 8->5, RS 0->0, AR 0->0; the planner reproduces it (bucket members checked)")
    assert "| all_gather_into_tensor_2 | AG     | 0.125    | f32     | -        | over_cap | cap 0.126 MB |" in text
    assert "| all_gather_into_tensor_7 | AG     | 0.000137 | f32     | AG 1     | bucketed | -            |" in text
    assert "- AG bucket 1: all_gather_into_tensor_5, all_gather_into_tensor_6, all_gather_into_tensor_7\n" in text
