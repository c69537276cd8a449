"""Bad input on damaged copies of a real log: counted by kind with file:line, never raised,
and everything valid around it still used."""

from __future__ import annotations

import gzip
import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import FIXTURE_LOGS, ROOT
from tracekit.read.reader import load

SRC = next((FIXTURE_LOGS / "spmd_auto").glob("dedicated_log_torch_trace_rank_0_*"))
_OUTCOMES = [i + 1 for i, x in enumerate(SRC.read_text(encoding="utf-8").split("\n"))
             if '"name": "pre_bucketing_fsdp_collectives"' in x]
FWD_OUTCOME, BWD_OUTCOME = _OUTCOMES  # envelope lines of the two outcomes: 3326, 6716
LAST_LINE = SRC.read_bytes().count(b"\n")  # the file ends with a newline: 9441 lines


def lines() -> list[str]:
    return SRC.read_text(encoding="utf-8").split("\n")


def write(tmp_path: Path, ls: list[str] | bytes, name: str = "dedicated_log_torch_trace_rank_0_x.log") -> Path:
    p = tmp_path / name
    p.write_bytes(ls if isinstance(ls, bytes) else "\n".join(ls).encode("utf-8"))
    return p


def counts(run) -> dict:
    return run.diagnostics.counts


def where(run, kind: str) -> list[int]:
    return [e["line"] for e in run.diagnostics.examples if e["kind"] == kind]


def test_bad_prefix_is_counted_and_the_rest_used(tmp_path):
    ls = lines()
    ls[0] = "garbage " + ls[0][30:]
    run = load(write(tmp_path, ls))
    assert counts(run) == {"bad_prefix": 1} and where(run, "bad_prefix") == [1]
    assert [g.graph_index for g in run.ranks[0].graphs] == [0, 1]


def test_bad_json_in_the_forward_outcome_drops_only_it(tmp_path):
    ls = lines()
    ls[FWD_OUTCOME - 1] = ls[FWD_OUTCOME - 1][:-20]
    run = load(write(tmp_path, ls))
    assert counts(run) == {"bad_json": 1} and where(run, "bad_json") == [FWD_OUTCOME]
    (g,) = run.ranks[0].graphs
    # the backward is now the only outcome of 0/0, so its index is 0
    assert g.collectives["reduce_scatter"].before == 8 and g.graph_index == 0


def test_bad_json_in_a_skipped_envelope_is_still_seen(tmp_path):
    ls = lines()
    ls[18] = ls[18][:-1]  # a chromium_event envelope without its closing brace
    run = load(write(tmp_path, ls))
    assert counts(run) == {"bad_json": 1} and where(run, "bad_json") == [19]
    assert len(run.ranks[0].graphs) == 2


def test_md5_mismatch(tmp_path):
    ls = lines()
    ls[FWD_OUTCOME] = ls[FWD_OUTCOME].replace("all_gather 8->1", "all_gather 9->1")
    run = load(write(tmp_path, ls))
    assert counts(run) == {"md5_mismatch": 1} and where(run, "md5_mismatch") == [FWD_OUTCOME]
    assert len(run.ranks[0].graphs) == 1


def _rehash(envelope: str, payload: bytes) -> str:
    return re.sub(r'"has_payload": "[0-9a-f]{32}"',
                  f'"has_payload": "{hashlib.md5(payload).hexdigest()}"', envelope)


def test_bad_utf8_payload_with_a_matching_md5(tmp_path):
    raw = SRC.read_bytes().split(b"\n")
    bad = raw[FWD_OUTCOME].replace(b"nNodes", b"nN\xffdes")
    raw[FWD_OUTCOME] = bad
    raw[FWD_OUTCOME - 1] = _rehash(raw[FWD_OUTCOME - 1].decode(), bad[1:]).encode()
    run = load(write(tmp_path, b"\n".join(raw)))
    assert counts(run) == {"bad_utf8": 1} and where(run, "bad_utf8") == [FWD_OUTCOME]


def test_unparsable_outcome_is_bad_artifact(tmp_path):
    ls = lines()
    text = "fsdp_groups=__import__('os'), group_size=4"
    ls[FWD_OUTCOME] = "\t" + text
    ls[FWD_OUTCOME - 1] = _rehash(ls[FWD_OUTCOME - 1], text.encode())
    run = load(write(tmp_path, ls))
    assert counts(run) == {"bad_artifact": 1} and where(run, "bad_artifact") == [FWD_OUTCOME]
    assert len(run.ranks[0].graphs) == 1


def test_orphan_payload_after_a_blank_line_and_blank_lines_skipped(tmp_path):
    ls = lines()
    ls[FWD_OUTCOME + 1 : FWD_OUTCOME + 1] = ["", "", "\tstray payload line", "\tanother"]
    run = load(write(tmp_path, ls))
    assert counts(run) == {"orphan_payload": 1} and where(run, "orphan_payload") == [FWD_OUTCOME + 4]
    assert len(run.ranks[0].graphs) == 2


def test_missing_payload(tmp_path):
    ls = lines()
    del ls[FWD_OUTCOME]  # the outcome's payload line
    run = load(write(tmp_path, ls))
    assert counts(run) == {"missing_payload": 1} and where(run, "missing_payload") == [FWD_OUTCOME]


def test_lines_of_another_rank_are_counted_not_used(tmp_path):
    ls = lines()
    other = [ls[FWD_OUTCOME - 1].replace('"rank": 0', '"rank": 1'),
             ls[FWD_OUTCOME].replace("8->1", "8->2")]
    other[0] = _rehash(other[0], other[1][1:].encode())
    chrom = ls[0].replace('"rank": 0', '"rank": 3')
    ls[FWD_OUTCOME + 1 : FWD_OUTCOME + 1] = other + [chrom] + ls[1:18]
    run = load(write(tmp_path, ls))
    assert counts(run) == {"other_rank": 2}
    assert where(run, "other_rank") == [FWD_OUTCOME + 2, FWD_OUTCOME + 4]
    assert [r.rank for r in run.ranks] == [0] and len(run.ranks[0].graphs) == 2


def test_truncated_last_entry(tmp_path):
    data = SRC.read_bytes()
    run = load(write(tmp_path, data[:-40]))
    assert counts(run) == {"truncated_entry": 1} and where(run, "truncated_entry") == [LAST_LINE]
    assert len(run.ranks[0].graphs) == 2


def test_unreadable_and_missing_paths(tmp_path):
    d = tmp_path / "empty"
    d.mkdir()
    run = load([str(tmp_path / "nope.log"), str(d), str(SRC)])
    assert counts(run) == {"unreadable_file": 1, "no_log_files": 1}
    assert [r.rank for r in run.ranks] == [0]


def test_gzip_cut_short_keeps_what_was_read(tmp_path):
    gz = gzip.compress(SRC.read_bytes())
    p = write(tmp_path, gz[: len(gz) * 3 // 4], name="dedicated_log_torch_trace_rank_0_x.log.gz")
    run = load(p)
    assert counts(run).get("bad_gzip") == 1
    assert len(run.ranks[0].graphs) >= 1  # the forward comes in the first third of the file


def test_cli_strict_exits_1_without_traceback(tmp_path):
    ls = lines()
    ls[0] = "garbage"
    p = write(tmp_path, ls)
    shutil.copy(SRC, tmp_path / "dedicated_log_torch_trace_rank_1_y.log")
    cmd = [sys.executable, "-c", "from tracekit.cli import main; main()", "summarize", str(tmp_path)]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    ok = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    strict = subprocess.run(cmd + ["--strict"], capture_output=True, text=True, env=env, cwd=ROOT)
    assert ok.returncode == 0 and strict.returncode == 1
    assert "Traceback" not in ok.stderr + strict.stderr
    assert "bad_prefix" in strict.stdout and f"{p}:1" in strict.stdout
