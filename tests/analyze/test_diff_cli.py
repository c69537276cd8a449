"""``tracekit diff`` end to end on the fixture logs: formats, JSON summary input, exit codes."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import FIXTURE_LOGS, ROOT

from tracekit.cli import main

AUTO = str(FIXTURE_LOGS / "spmd_auto")
AUTO_GZ = str(FIXTURE_LOGS / "spmd_auto_gz")
SMALL = str(FIXTURE_LOGS / "spmd_small_cap")
DIVERGE = str(FIXTURE_LOGS / "diverge_rank")


def tk(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def diff_json(a: str, b: str) -> dict:
    r = tk("diff", a, b, "--format", "json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def auto_summary(tmp_path_factory) -> str:
    """spmd_auto as ``tracekit summarize --format json`` writes it."""
    path = tmp_path_factory.mktemp("summary") / "spmd_auto.json"
    r = tk("summarize", AUTO, "--format", "json")
    assert r.exit_code == 0, r.output
    path.write_text(r.stdout)
    return str(path)


@pytest.fixture(scope="module")
def per_rank_summary(tmp_path_factory) -> str:
    """spmd_auto as ``tracekit summarize --format json --per-rank`` writes it."""
    path = tmp_path_factory.mktemp("summary") / "spmd_auto_per_rank.json"
    r = tk("summarize", AUTO, "--format", "json", "--per-rank")
    assert r.exit_code == 0, r.output
    path.write_text(r.stdout)
    return str(path)


def test_table_gives_the_verdict_first_then_one_table_for_ranks_0_3():
    r = tk("diff", AUTO, SMALL)
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert lines[0] == "2 graphs changed on 4 ranks (0-3)"
    assert "ranks 0-3" in lines
    assert sum(1 for line in lines if line.startswith("ranks ")) == 1  # said once, not per rank
    row = next(line for line in lines if "bucket_cap_mb" in line).split()
    assert row == ["0/0", "forward", "bucket_cap_mb", "27.4", "MB", "0.1", "MB"]
    assert ["0/0", "backward", "reduce_scatter", "8->1", "8->5"] in [line.split() for line in lines]


def test_diverging_rank_is_named_in_the_table():
    r = tk("diff", AUTO, DIVERGE)
    lines = r.stdout.splitlines()
    assert lines[0] == "2 graphs changed on 1 rank (3)"
    assert "rank 3" in lines
    assert ["0/0", "forward", "all_gather", "8->1", "10->1"] in [line.split() for line in lines]


def test_json_document():
    doc = diff_json(AUTO, SMALL)
    assert doc["schema"] == "tracekit.diff/1"
    assert doc["identical"] is False
    assert doc["verdict"] == "2 graphs changed on 4 ranks (0-3)"
    assert (doc["a"]["path"], doc["b"]["path"]) == (AUTO, SMALL)
    assert doc["a"]["ranks"] == [0, 1, 2, 3]
    assert doc["graphs_compared"] == 8
    assert doc["graphs_changed"] == ["0/0:0", "0/0:1"]
    assert doc["graph_changes"] == 8
    assert [(c["graph"], c["ranks"]) for c in doc["changes"]] == [
        ("0/0:0", [0, 1, 2, 3]),
        ("0/0:1", [0, 1, 2, 3]),
    ]
    assert doc["changes"][0]["fields"][0] == {"field": "bucket_cap_mb", "a": 27.4, "b": 0.1}
    assert doc["changes"][0]["sizes"][0]["b"] == {
        "type": "AG", "size_mb": 0.125, "name": "all_gather_into_tensor_2",
    }


def test_markdown():
    r = tk("diff", AUTO, DIVERGE, "--format", "markdown")
    assert r.stdout.startswith("**2 graphs changed on 1 rank (3)**\n")
    assert "## rank 3\n" in r.stdout
    rows = [
        [cell.strip() for cell in line.split("|")[1:-1]]
        for line in r.stdout.splitlines()
        if line.startswith("|")
    ]
    assert rows[0] == ["compile id", "graph", "what", "A", "B"]
    assert ["0/0", "backward", "reduce_scatter", "8->1", "10->1"] in rows


def test_against_itself_and_its_gzip_copy():
    for b in (AUTO, AUTO_GZ):
        r = tk("diff", AUTO, b, "--exit-code")
        assert r.exit_code == 0
        assert r.stdout.splitlines()[0] == "identical"


def test_json_summary_input_gives_the_same_diff_as_logs(auto_summary):
    from_logs = diff_json(AUTO, SMALL)
    from_summary = diff_json(auto_summary, SMALL)
    assert from_summary["a"]["kind"] == "summary"
    assert from_logs["a"]["kind"] == "logs"
    for key in ("identical", "verdict", "changes", "graphs_compared", "ranks_changed", "notes"):
        assert from_summary[key] == from_logs[key], key
    assert diff_json(auto_summary, AUTO)["identical"] is True


def test_newer_minor_summary_with_unknown_keys_is_read(auto_summary, tmp_path):
    doc = json.loads(open(auto_summary).read())
    assert doc["schema"] == "tracekit.summary/2" and doc["groups"][0]["ranks"] == "0-3"
    doc["schema"] = "tracekit.summary/2.4"
    doc["from_the_future"] = {"x": 1}
    doc["groups"][0]["new_group_key"] = 3
    doc["groups"][0]["graphs"][0]["new_graph_key"] = "y"
    doc["groups"][0]["graphs"][0]["sizes_mb"]["before"][0]["new_size_key"] = 1
    path = tmp_path / "newer.json"
    path.write_text("\n  " + json.dumps(doc))  # leading space: still sniffed as JSON
    r = tk("diff", str(path), AUTO, "--exit-code")
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("identical\n")


def test_exit_codes():
    assert tk("diff", AUTO, SMALL).exit_code == 0  # without --exit-code, differing is no error
    assert tk("diff", AUTO, SMALL, "--exit-code").exit_code == 1
    assert tk("diff", AUTO, DIVERGE, "--exit-code").exit_code == 1
    assert tk("diff", AUTO, AUTO, "--exit-code").exit_code == 0


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"schema": "tracekit.replay/1"}', "is not a tracekit summary"),
        ('{"schema": "tracekit.summary/3", "ranks": []}', "'tracekit.summary/3' is not supported"),
        ('{"ranks": []}', 'without a "schema" key'),
        ('{"schema": "tracekit.summary/1", "ranks": [', "bad JSON summary"),
        ('{"schema": "tracekit.summary/1", "ranks": [{"graphs": [{}]}]}', "bad summary"),
    ],
)
def test_bad_json_inputs_exit_2_with_one_line(tmp_path, content, message):
    path = tmp_path / "in.json"
    path.write_text(content)
    r = tk("diff", str(path), AUTO)
    assert r.exit_code == 2
    assert r.stdout == ""
    assert len(r.stderr.splitlines()) == 1
    assert r.stderr.startswith(f"tracekit diff: error: {path}: ")
    assert message in r.stderr


def test_missing_and_empty_inputs_exit_2(tmp_path):
    r = tk("diff", str(tmp_path / "nope"), AUTO, "--exit-code")
    assert (r.exit_code, r.stderr) == (
        2, f"tracekit diff: error: {tmp_path / 'nope'}: no such file or directory\n",
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    r = tk("diff", AUTO, str(empty))
    assert (r.exit_code, r.stderr) == (
        2, f"tracekit diff: error: {empty}: no torch.compile logs found "
        "(directory holds no .log or .log.gz file)\n",
    )
    foreign = tmp_path / "notes.log"
    foreign.write_text("hello\n")
    r = tk("diff", str(foreign), AUTO)
    assert (r.exit_code, r.stderr) == (
        2, f"tracekit diff: error: no log entries in {foreign} (1 bad line)\n",
    )
    truncated = tmp_path / "cut.log.gz"
    truncated.write_bytes(gzip.compress(b"{" * 100)[:30])
    r = tk("diff", str(truncated), AUTO)
    assert r.exit_code == 2
    assert len(r.stderr.splitlines()) == 1


def test_diagnostics_are_counted_but_do_not_make_runs_differ(tmp_path):
    copy = tmp_path / "spmd_auto_bad_line"
    shutil.copytree(AUTO, copy)
    rank0 = sorted(copy.glob("*rank_0_*.log"))[0]
    with open(rank0, "a") as f:
        f.write("V1202 12:55:04.644000 5659 torch/x.py:1] {not json\n")
    r = tk("diff", AUTO, str(copy), "--format", "json", "--exit-code")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert doc["identical"] is True
    assert doc["a"]["diagnostics_total"] == 0
    assert doc["b"]["diagnostics_total"] == 1
    assert any(n.startswith("B has 1 diagnostic (bad input lines") for n in doc["notes"])


def test_output_file(tmp_path):
    out = tmp_path / "diff.md"
    r = tk("diff", AUTO, SMALL, "--format", "markdown", "--output", str(out), "--exit-code")
    assert r.exit_code == 1
    assert r.stdout == ""
    assert out.read_text().startswith("**2 graphs changed on 4 ranks (0-3)**\n")


def test_diff_never_imports_torch():
    code = (
        "import sys\n"
        "from tracekit.cli import main\n"
        f"sys.argv = ['tracekit', 'diff', {AUTO!r}, {SMALL!r}]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('TORCH' if 'torch' in sys.modules else 'NO TORCH', file=sys.stderr)\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert p.stdout.startswith("2 graphs changed on 4 ranks (0-3)\n")
    assert p.stderr.strip().splitlines()[-1] == "NO TORCH"


@pytest.mark.parametrize(
    "which, edit, message",
    [
        ("per_rank", lambda d: d["ranks"][0].update(rank="0"), "rank '0' is not an integer"),
        ("per_rank", lambda d: d["ranks"][1].update(rank=0), "rank 0 appears twice"),
        ("per_rank", lambda d: d["ranks"][0]["graphs"][0]["sizes_mb"]["before"][0].update(size_mb="big"),
         "bad size entry"),
        ("grouped", lambda d: d["groups"][0].update(ranks="0-x"), "not a rank range"),
        ("grouped", lambda d: d["groups"].append(d["groups"][0]), "rank 0 appears twice"),
    ],
)
def test_summary_with_wrong_values_exits_2(auto_summary, per_rank_summary, tmp_path, which, edit, message):
    doc = json.loads(open(per_rank_summary if which == "per_rank" else auto_summary).read())
    edit(doc)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    r = tk("diff", AUTO, str(path))
    assert r.exit_code == 2
    assert r.stderr.startswith(f"tracekit diff: error: {path}: bad summary: ")
    assert message in r.stderr
    assert len(r.stderr.splitlines()) == 1


def test_summary_1_documents_are_still_read(per_rank_summary, tmp_path):
    """A tracekit.summary/1 document (one entry per rank, no groups) diffs like the logs."""
    doc = json.loads(open(per_rank_summary).read())
    old = {"schema": "tracekit.summary/1", "paths": doc["paths"], "ranks": doc["ranks"],
           "totals": doc["totals"], "divergence": [], "did_nothing": [], "notes": [],
           "diagnostics": doc["diagnostics"]}
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(old))
    assert tk("diff", str(path), AUTO, "--exit-code").exit_code == 0
    r = tk("diff", str(path), SMALL, "--format", "json")
    assert json.loads(r.stdout)["changes"] == diff_json(AUTO, SMALL)["changes"]


def test_table_cells_from_untrusted_names_cannot_break_tables():
    from tracekit.render.diff_text import cell

    assert cell("AG 0.25 MB (x|y\nz)", markdown=True) == "AG 0.25 MB (x\\|y\\nz)"
    assert cell("AG 0.25 MB (x|y\tz)", markdown=False) == "AG 0.25 MB (x|y\\tz)"


@pytest.mark.parametrize("scenario", ["hsdp", "hsdp_overlap", "fsdp_tp_overlap"])
def test_a_saved_mesh_summary_against_its_own_logs_is_identical(scenario, tmp_path):
    """The CI gate of docs/diff.md on a 2-D mesh: the grouped summary holds each group's first
    rank's group names, and the mesh section gives every other rank its own."""
    logs = str(FIXTURE_LOGS / scenario)
    saved = tmp_path / "a.json"
    saved.write_text(tk("summarize", logs, "--format", "json").stdout)
    r = tk("diff", str(saved), logs, "--exit-code")
    assert (r.exit_code, r.stdout.splitlines()[0]) == (0, "identical")


def test_a_saved_hsdp_summary_gives_each_rank_its_own_groups(tmp_path):
    from tracekit.analyze.documents import load_json, run_from_summary

    saved = tmp_path / "hsdp.json"
    saved.write_text(tk("summarize", str(FIXTURE_LOGS / "hsdp"), "--format", "json").stdout)
    doc = json.loads(saved.read_text())
    assert [g["ranks"] for g in doc["groups"]] == ["0-3"]  # one group, rank 0's names
    assert [g["fsdp_groups"] for g in doc["groups"][0]["graphs"]] == [["3"], ["3"]]
    run = run_from_summary(load_json(str(saved), open), str(saved))
    assert [r.graphs[0].fsdp_groups for r in run.ranks] == [["3"], ["3"], ["4"], ["4"]]
    # the backward's all-reduces run on the replicate groups: 1 = ranks 0,2 and 2 = ranks 1,3
    assert [sorted({c.group for c in r.graphs[1].final.collectives}) for r in run.ranks] == [
        ["1", "3"],
        ["2", "3"],
        ["1", "4"],
        ["2", "4"],
    ]
