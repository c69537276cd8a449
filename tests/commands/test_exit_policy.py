"""The exit policy and its messages, the same from every command (docs/output.md, "Exit status"):
usage errors are one line on stderr (never click's usage block), the same bad input gets the
same status from every command, nothing to replay or explain is no finding, and the numbers a
command prints are the numbers it used (caps told apart, what-ifs at the verified precision).
Every input is a real fixture log, or made from one at test time."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest
from click.testing import CliRunner

from conftest import FIXTURE_LOGS, ROOT
from tracekit.cli import main

CMD = [sys.executable, "-m", "tracekit"]
SPMD = str(FIXTURE_LOGS / "spmd_auto")


def tk(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*CMD, *args], cwd=ROOT, capture_output=True, text=True, timeout=300, **kw)


@pytest.mark.parametrize("args, line", [
    (["explain", SPMD, "--graph", "nonsense"],
     "tracekit explain: Invalid value for --graph: 'nonsense' is not a graph: COMPILE_ID[:INDEX], e.g. 0/0 or 0/0:1"),
    (["summarize", SPMD, "-o", "/missing/dir/x"],
     "tracekit summarize: Invalid value for '--output' / '-o': directory '/missing/dir' does not exist"),
    (["replay", SPMD, "--cap-mb", "-5"],
     "tracekit replay: Invalid value for --cap-mb: '-5' is not a cap: it must be more than 0 MB"),
    (["replay", SPMD, "--cap-mb", "1e308"],
     "tracekit replay: Invalid value for --cap-mb: '1e308' is too large: a cap is at most 1,000,000,000 MB"),
    (["replay", SPMD, "--cap-mb", "16,nan"], "tracekit replay: Invalid value for --cap-mb: 'nan' is not a number of MB"),
    (["replay", SPMD, "--rank", "0", "--all-ranks"], "tracekit replay: --rank and --all-ranks exclude each other"),
    (["diff", SPMD], "tracekit diff: Missing argument 'RUN_B'."),
    (["summarize", "--bogus", SPMD], "tracekit summarize: No such option '--bogus'. Did you mean '--jobs'?"),
    (["bogus"], "tracekit: No such command 'bogus'."),
])
def test_a_usage_error_is_one_line_and_status_2(args, line):
    p = tk(*args)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.splitlines() == [line]


def test_cap_values_are_checked_before_torch_is_imported():
    code = ("import sys\nfrom tracekit.cli import main\n"
            "try:\n    main(['replay', %r, '--cap-mb', '1e308'])\nexcept SystemExit as e:\n"
            "    print(e.code, 'torch' in sys.modules)\n" % SPMD)
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.stdout.split() == ["2", "False"]


def test_a_missing_matplotlib_is_found_before_the_replay(tmp_path):
    # matplotlib made unimportable: the replay would print its tables first if it ran
    code = ("import sys\nsys.modules['matplotlib'] = None\nsys.argv = ['tracekit', 'replay', %r, '--plot', %r]\n"
            "from tracekit.cli import run\nrun()\n" % (SPMD, str(tmp_path / "p.png")))
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stdout == "" and not (tmp_path / "p.png").exists()
    assert p.stderr.splitlines() == ["tracekit replay: Invalid value for '--plot': needs matplotlib: pip install -e '.[plot]'"]


def test_caps_that_round_alike_are_printed_apart():
    p = tk("replay", SPMD, "--cap-mb", "1.001,1.002,1.0019")
    assert p.returncode == 0
    rows = [ln.split() for ln in p.stdout.splitlines() if " override " in ln]
    assert [(r[1], r[2]) for r in rows] == [(g, c) for g in ("0/0:0", "0/0:1") for c in ("1.001", "1.002", "1.0019")]
    doc = json.loads(tk("replay", SPMD, "--cap-mb", "1.001,1.002,1.0019", "--format", "json").stdout)
    assert [r["bucket_cap_mb"] for r in doc["graphs"][0]["replays"]] == [1.001, 1.002, 1.0019]


def test_explains_what_ifs_name_the_cap_that_was_verified():
    doc = json.loads(tk("explain", str(FIXTURE_LOGS / "spmd_small_cap"), "--format", "json").stdout)
    whatifs = [c["what_if"] for g in doc["graphs"] for c in g["collectives"] if c["what_if"]]
    assert whatifs and all(w["text"] == f"a cap of {w['cap_mb']!r} MB buckets it" for w in whatifs)
    assert whatifs[0]["cap_mb"] == 0.126
    text = tk("explain", str(FIXTURE_LOGS / "spmd_small_cap")).stdout
    assert "cap 0.126 MB" in text and "What if, for each: a cap of 0.126 MB buckets it" in text


def _log_without_outcome(tmp_path) -> str:
    """Rank 0's whole entries before its first graph: a readable log with nothing to replay."""
    src = next((FIXTURE_LOGS / "spmd_auto").glob("*rank_0_*.log")).read_text(encoding="utf-8")
    head = src[: src.index('"name": "before_post_grad_graph"')]
    (tmp_path / "dedicated_log_torch_trace_rank_0_x.log").write_text(head[: head.rindex("\nV") + 1], encoding="utf-8")
    return str(tmp_path)


@pytest.mark.parametrize("command", ["replay", "explain"])
def test_nothing_to_replay_or_explain_is_exit_0_with_the_note(tmp_path, command):
    p = tk(command, _log_without_outcome(tmp_path))
    assert p.returncode == 0
    # the true cause, as summarize says it (the log holds compiles but no post-grad graph)
    assert "note: no bucketing recorded: 1 compile was logged, but no graph reached" in p.stdout
    doc = json.loads(tk(command, str(tmp_path), "--format", "json").stdout)
    assert doc["graphs"] == [] and doc["notes"][0].startswith("no bucketing recorded: 1 compile was logged")
    assert "torch 2.13.0+cpu logs one for every graph inductor compiles, so the compiles stopped" in doc["notes"][0]


def _broken_summaries(tmp_path) -> dict[str, str]:
    good = tk("summarize", SPMD, "--format", "json").stdout
    doc = json.loads(good)
    out = {"cut": good[:300]}
    doc_groups = dict(doc, groups="x")
    out["groups"] = json.dumps(doc_groups)
    bad_rank = json.loads(tk("summarize", SPMD, "--format", "json", "--per-rank").stdout)
    bad_rank["ranks"][0]["rank"] = "a"
    out["rank"] = json.dumps(bad_rank)
    paths = {}
    for name, text in out.items():
        (tmp_path / f"{name}.json").write_text(text, encoding="utf-8")
        paths[name] = str(tmp_path / f"{name}.json")
    return paths


def test_the_same_broken_summary_gets_the_same_status_and_message_from_report_and_diff(tmp_path):
    for name, path in _broken_summaries(tmp_path).items():
        report = tk("report", path, "-o", str(tmp_path / "r.html"))
        diff = tk("diff", path, SPMD)
        assert (report.returncode, diff.returncode) == (2, 2), name
        assert report.stderr.splitlines()[0].removeprefix("tracekit report: ") == \
            diff.stderr.splitlines()[0].removeprefix("tracekit diff: error: "), name


def test_a_file_with_no_log_entry_is_status_2_from_every_command(tmp_path):
    foreign = tmp_path / "dedicated_log_torch_trace_x.log"
    foreign.write_text("[1, 2]\nnot a log line\n", encoding="utf-8")
    runs = {"summarize": tk("summarize", str(foreign)), "replay": tk("replay", str(foreign)),
            "explain": tk("explain", str(foreign)),
            "report": tk("report", str(foreign), "-o", str(tmp_path / "r.html")),
            "diff": tk("diff", str(foreign), SPMD)}
    assert {c: p.returncode for c, p in runs.items()} == dict.fromkeys(runs, 2)
    for c in ("summarize", "replay", "explain", "report"):  # one line, the reader's own words
        assert runs[c].stderr.splitlines()[-1] == f"tracekit {c}: no log entries in {foreign} (2 bad lines)"


def test_our_use_of_click_warns_of_nothing():
    runs = [["summarize", SPMD], ["diff", SPMD, SPMD], ["summarize", "--bogus", SPMD], ["--version"],
            ["explain", SPMD, "--graph", "x"], ["report", "--help"]]
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        warnings.simplefilter("error", PendingDeprecationWarning)
        for args in runs:
            r = CliRunner().invoke(main, args)
            assert r.exception is None or isinstance(r.exception, SystemExit), (args, r.exception)
