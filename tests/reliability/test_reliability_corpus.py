"""The corpus of damaged logs (tests/corpus/make_corpus.py, built from the real spmd_auto fixture
into a temporary directory, with a real 50 MB line): for each damage, the real CLI in a
subprocess prints no traceback, names file, line and kind of damage, counts every intact entry
(the summary equals the summary of the clean log minus the damaged entries, exactly), and exits
0 without ``--strict`` and 1 with it."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys

import pytest

from conftest import FIXTURE_LOGS, ROOT
from corpus.make_corpus import CASES, build_corpus
from tracekit.read.reader import load
from tracekit.render.summary_document import summary_document

CLI = [sys.executable, "-c", "from tracekit.cli import main; main()", "summarize"]
ENV = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}

FWD = "0/0:0 AG8->1 RS0->0 sizes+after"
BWD = "0/0:1 AG5->1 RS8->1 sizes+after"
BWD_ALONE = "0/0:0 AG5->1 RS8->1 sizes+after"  # the backward, when the forward's outcome is lost
#: rank -> (compiled graphs, graphs) read from each damaged input, by hand from the fixture.
ABSOLUTE = {
    "cut_mid_envelope": {0: (2, [FWD])},
    "cut_mid_payload": {0: (1, [FWD])},  # the backward graph's text was cut: not counted
    "md5_mismatch": {0: (2, [BWD_ALONE])},
    "invalid_json": {0: (2, [FWD, BWD])},  # lost: the forward's sizes (before) only
    "json_array": {0: (2, ["0/0:0 AG8->1 RS0->0 sizes", BWD])},
    "json_number": {0: (2, [FWD])},
    "wrong_type_rank": {0: (2, [BWD_ALONE])},
    "wrong_type_frame_id": {0: (2, [FWD])},
    "invalid_utf8": {0: (2, [BWD_ALONE])},
    "nul_bytes": {0: (2, [FWD])},
    "crlf": {0: (2, [FWD, BWD])},
    "long_line": {0: (2, [FWD, BWD])},
    "empty_file": {0: (2, [FWD, BWD]), 1: (2, [FWD, BWD]), 3: (2, [FWD, BWD])},  # 2: no rank
    "truncated_gz": {0: (1, [FWD])},
    "junk_dir": {r: (2, [FWD, BWD]) for r in range(4)},
    "unreadable": {0: (2, [FWD, BWD])},
    "interleaved": {0: (2, [FWD, BWD])},
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("corpus")
    cases = {c.name: c for c in build_corpus(out, FIXTURE_LOGS / "spmd_auto", big_mb=50)}
    return out, cases


def _signature(doc: dict) -> dict:
    def g(x):
        c = x["collectives"]
        s = x["sizes_mb"]
        sizes = "nosizes" if s is None else "sizes" + ("" if s.get("after") is None else "+after")
        return (f"{x['compile_id']}:{x['graph_index']} AG{c['all_gather']['before']}->"
                f"{c['all_gather']['after']} RS{c['reduce_scatter']['before']}->"
                f"{c['reduce_scatter']['after']} {sizes}")

    return {r["rank"]: (r["compiled_graphs"], [g(x) for x in r["graphs"]]) for r in doc["ranks"]}


def _normal(doc: dict, same_lines: bool) -> dict:
    """The summary without what must differ: paths, diagnostics, directories of files."""
    doc = json.loads(json.dumps(doc))
    doc.pop("paths")
    doc.pop("diagnostics")
    # what only the damage says: where a log is cut, files that are no rank, "see Diagnostics"
    for k in ("cut", "unplaced", "not_logs", "subdirectories"):
        doc["world"].pop(k, None)
    v = doc["verdict"]
    v["text"] = re.sub(r"; (rank \S+'s log is cut \(.*|\d+ files? read as no rank \(see Diagnostics\))$",
                       "", v["text"])
    v["sections"] = [s for s in v.get("sections", []) if s != "diagnostics"]
    for r in doc["ranks"]:
        r["files"] = [os.path.basename(f) for f in r["files"]]
        for g in r["graphs"]:
            g["file"] = os.path.basename(g["file"])
            if not same_lines:
                g.pop("line")
    return doc


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=ENV, cwd=ROOT,
                          timeout=120)


@pytest.mark.parametrize("name", CASES)
def test_damaged_log(corpus, name):
    out, cases = corpus
    case = cases[name]
    inputs = [str(out / p) for p in case.inputs]
    expected_run = load([str(out / p) for p in case.expected], jobs=1)
    assert set(expected_run.diagnostics.counts) <= {"missing_rank"}  # clean (an empty file is no rank)
    expected = summary_document(expected_run, per_rank=True)

    ok = _cli(*inputs, "--format", "json", "--per-rank")
    assert "Traceback" not in ok.stderr, ok.stderr
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    # a subdirectory holding a log is said not read (one level is read); a link to "." is not said
    assert doc["world"].get("subdirectories") == ([str(out / case.inputs[0] / "old")] if name == "junk_dir" else None)
    # every intact entry counted: equal to the clean log minus the damaged entries
    assert _normal(doc, case.same_lines) == _normal(expected, case.same_lines)
    assert _signature(doc) == ABSOLUTE[name]
    # each damage reported with its kind, file and line
    assert doc["diagnostics"]["counts"] == case.counts
    examples = [[e["kind"], e["file"], e["line"]] for e in doc["diagnostics"]["examples"]]
    for kind, file, line in case.diagnostics:
        assert [kind, str(out / file), line] in examples, (kind, file, line, examples)

    strict = _cli(*inputs, "--strict")
    assert "Traceback" not in strict.stderr, strict.stderr
    assert strict.returncode == 1
    assert "(--strict)" in strict.stderr
    for kind, file, line in case.diagnostics:
        # a whole file (no line) is named alone, never FILE:0
        where = f"{out / file}:{line}" if line else f"{out / file}  "
        assert kind in strict.stdout and where in strict.stdout
        assert f"{out / file}:0" not in strict.stdout


def test_clean_logs_pass_strict():
    for scenario in ("spmd_auto", "spmd_auto_gz", "diverge_rank"):
        res = _cli(str(FIXTURE_LOGS / scenario), "--strict", "--format", "json", "--per-rank")
        assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
        doc = json.loads(res.stdout)
        assert doc["diagnostics"]["counts"] == {}
        assert doc["totals"]["graphs"] == 8
    assert _signature(json.loads(res.stdout))[3] == (
        2, ["0/0:0 AG10->1 RS0->0 sizes+after", "0/0:1 AG7->1 RS10->1 sizes+after"])


def test_corpus_script_runs_standalone(tmp_path):
    res = subprocess.run([sys.executable, str(ROOT / "tests/corpus/make_corpus.py"), str(tmp_path),
                          "--big-mb", "1", "--only", "crlf,long_line"],
                         capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=60)
    assert res.returncode == 0, res.stderr
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert [c["name"] for c in manifest] == ["crlf", "long_line"]
    assert (tmp_path / "long_line/damaged").is_dir()
    big = max(len(ln) for ln in (tmp_path / manifest[1]["inputs"][0]).read_bytes().split(b"\n"))
    assert big == 1024 * 1024


def test_explicit_unreadable_paths_neither_hang_nor_raise(tmp_path):
    fifo = tmp_path / "dedicated_log_torch_trace_rank_0_fifo.log"
    os.mkfifo(fifo)  # opening it would block until a writer comes: it is never opened
    dangling = tmp_path / "dedicated_log_torch_trace_rank_1_gone.log"
    os.symlink(tmp_path / "nowhere.log", dangling)
    eio = tmp_path / "dedicated_log_torch_trace_rank_2_eio.log"
    os.symlink("/proc/self/mem", eio)  # opens, then every read fails with EIO
    res = _cli(str(fifo), str(eio), "--format", "json", "--per-rank")
    assert "Traceback" not in res.stderr and "no log could be read" in res.stderr
    assert res.returncode == 2  # unreadable input
    doc = json.loads(res.stdout)
    assert doc["diagnostics"]["counts"] == {"unreadable_file": 2}
    details = {e["file"]: e["detail"] for e in doc["diagnostics"]["examples"]}
    assert details[str(fifo)] == "a FIFO, not read (it could block)"
    assert details[str(eio)] == "Input/output error"
    # a path that does not exist (a dangling symlink) is refused before any work
    res = _cli(str(fifo), str(dangling))
    assert res.returncode == 2 and res.stdout == "" and "Traceback" not in res.stderr
    assert f"Path '{dangling}' does not exist" in res.stderr
