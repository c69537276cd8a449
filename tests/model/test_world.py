"""A verdict that can be trusted: missing ranks, two runs side by side, rank-less logs, a last
entry without its newline, --strict checking every line (exit status 2: tests/commands/test_exit_status.py)."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys

import pytest

from conftest import FIXTURE_LOGS, ROOT
from tracekit.read.reader import load
from tracekit.render.summary_document import summary_document

CMD = [sys.executable, "-m", "tracekit"]


def tk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CMD, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def _copy_ranks(src, dst, ranks):
    dst.mkdir()
    for f in sorted(src.glob("*.log")):
        if int(re.search(r"rank_(\d+)", f.name).group(1)) in ranks:
            shutil.copy(f, dst / f.name)
    return dst


def test_a_missing_rank_is_named_first_and_fails_strict(tmp_path):
    logs = _copy_ranks(FIXTURE_LOGS / "spmd_auto", tmp_path / "run", {0, 1, 3})
    doc = summary_document(load(logs, jobs=1))
    assert doc["world"] == {"expected": 4, "found": 3, "ranks": "0-1,3", "missing": "2", "missing_count": 1,
                            "duplicated": "", "unplaced": []}
    assert doc["verdict"] == {"status": "incomplete",
                              "text": "INCOMPLETE: the 3 ranks found agree; 1 of 4 ranks missing (2)",
                              "sections": ["world", "diagnostics"]}
    assert doc["diagnostics"]["counts"] == {"missing_rank": 1}
    assert doc["diagnostics"]["examples"][0]["detail"] == "rank 2 of 4 has no log"
    r = tk("summarize", str(logs))
    assert r.returncode == 0
    assert r.stdout.splitlines()[:6] == [
        "Verdict", "=======", "INCOMPLETE: the 3 ranks found agree; 1 of 4 ranks missing (2)",
        "Why: see World, Diagnostics below", "",
        "World: 3 ranks found (0-1,3) of 4 expected; missing: 2; seen in two runs: none"]
    strict = tk("summarize", str(logs), "--strict")
    assert strict.returncode == 1 and strict.stderr == "tracekit summarize: 1 bad input (--strict)\n"


def test_strict_fails_with_one_rank_left_as_with_one_missing(tmp_path):
    """3 of 4 ranks missing is INCOMPLETE, as 1 of 4 is, and --strict fails on both; one rank
    read alone counts no missing_rank diagnostic, so the message names the missing ranks."""
    logs = _copy_ranks(FIXTURE_LOGS / "spmd_auto", tmp_path / "run", {0})
    doc = summary_document(load(logs, jobs=1))
    assert (doc["world"]["missing"], doc["diagnostics"]["counts"]) == ("1-3", {})
    assert doc["verdict"]["text"] == "INCOMPLETE: one rank found; 3 of 4 ranks missing (1-3)"
    assert tk("summarize", str(logs)).returncode == 0
    strict = tk("summarize", str(logs), "--strict")
    assert (strict.returncode, strict.stderr) == (1, "tracekit summarize: 3 of 4 ranks missing (1-3) (--strict)\n")


def test_two_runs_are_never_merged():
    doc = summary_document(load([FIXTURE_LOGS / "spmd_auto", FIXTURE_LOGS / "spmd_small_cap"], jobs=1))
    assert doc["world"]["duplicated"] == "0-3"
    assert doc["diagnostics"]["counts"] == {"duplicate_rank": 4}
    assert doc["verdict"]["status"] == "incomplete"
    assert doc["verdict"]["text"].endswith("ranks 0-3 also found in another run (not merged)")
    # the first run's graphs only: indices 0 and 1, the automatic cap
    assert [(g["graph_index"], g["bucket_cap_mb"]) for g in doc["groups"][0]["graphs"]] == [(0, 27.4), (1, 27.4)]
    assert tk("summarize", str(FIXTURE_LOGS / "spmd_auto"), str(FIXTURE_LOGS / "spmd_small_cap"),
              "--strict").returncode == 1


def test_a_log_of_the_same_process_starting_again_is_a_duplicate(tmp_path):
    """Same process, compile ids starting again from 0/0: the same run twice, not merged (the
    second file differs from the first by one time stamp: no byte-identical copy)."""
    logs = _copy_ranks(FIXTURE_LOGS / "spmd_auto", tmp_path / "run", {0, 1})
    f = next(logs.glob("*rank_1_*.log"))
    text = f.read_bytes()
    stamp = text[6:21]
    (logs / "dedicated_log_torch_trace_rank_1_copy.log").write_bytes(text.replace(stamp, b"00:00:00.000001", 1))
    run = load(logs, jobs=1)
    assert run.duplicated == [1] and [len(r.graphs) for r in run.ranks] == [2, 2]
    assert run.diagnostics.examples[0]["detail"].endswith(
        "this file is another run (its compile ids start again at 0/0): not merged")


def _strip_rank(text: str) -> str:
    return re.sub(r', "rank": \d+', "", text)


def test_rank_less_logs_take_the_rank_in_their_name(tmp_path):
    logs = tmp_path / "run"
    logs.mkdir()
    for f in sorted((FIXTURE_LOGS / "diverge_rank").glob("*.log")):
        n = int(re.search(r"rank_(\d+)", f.name).group(1))
        (logs / f"dedicated_log_torch_trace_rank_{n}.log").write_text(_strip_rank(f.read_text()))
    doc = summary_document(load(logs, jobs=1))
    assert doc["world"]["ranks"] == "0-3" and doc["diagnostics"]["counts"] == {}
    assert [(g["ranks"], g["count"]) for g in doc["groups"]] == [("0-2", 3), ("3", 1)]
    assert doc["verdict"]["text"] == "DIVERGE: 1 of 4 ranks (3) differ from the majority on 2 graphs"


def test_a_name_that_disagrees_with_the_entries_is_a_diagnostic(tmp_path):
    logs = _copy_ranks(FIXTURE_LOGS / "spmd_auto", tmp_path / "run", {0, 1})
    f = next(logs.glob("*rank_1_*.log"))
    f.rename(logs / "dedicated_log_torch_trace_rank_7_x.log")
    run = load(logs, jobs=1)
    assert [r.rank for r in run.ranks] == [0, 1]  # the entries win
    assert run.diagnostics.counts == {"rank_mismatch": 1, "missing_rank": 2}
    ex = next(e for e in run.diagnostics.examples if e["kind"] == "rank_mismatch")
    assert ex["detail"] == "the entries say rank 1, the file name rank 7"


def test_a_last_entry_without_its_newline_is_whole(tmp_path):
    src = next((FIXTURE_LOGS / "spmd_auto").glob("*rank_0_*.log")).read_bytes()
    p = tmp_path / "dedicated_log_torch_trace_rank_0_x.log"
    p.write_bytes(src.rstrip(b"\n"))
    assert load(p, jobs=1).diagnostics.counts == {}
    p.write_bytes(src.rstrip(b"\n")[:-2])  # its payload cut: the MD5 no longer matches
    assert load(p, jobs=1).diagnostics.counts == {"truncated_entry": 1}
    last_envelope = src.rstrip(b"\n").rsplit(b"\nV", 1)[0] + b"\nV1202 15:13:02.294000 12482 x.py:1] {\"str\": [\"a\", 0]}"
    p.write_bytes(last_envelope)  # an envelope line with no payload, whole
    assert load(p, jobs=1).diagnostics.counts == {}
    p.write_bytes(last_envelope[:-3])  # cut inside its JSON
    assert load(p, jobs=1).diagnostics.counts == {"truncated_entry": 1}


def _payload_md5(lines: list[str], i: int) -> str:
    end = i + 1
    while end < len(lines) and lines[end].startswith("\t"):
        end += 1
    return hashlib.md5("\n".join(x[1:] for x in lines[i + 1 : end]).encode()).hexdigest()


def test_strict_checks_every_line(tmp_path):
    """Damage in entries summarize skips: seen by --strict (every line decoded and checked),
    not by the default fast path."""
    lines = next((FIXTURE_LOGS / "spmd_auto").glob("*rank_0_*.log")).read_text().split("\n")
    chrom = [i for i, ln in enumerate(lines) if ln.startswith("V") and '{"chromium_event": {}' in ln]
    # 1: an MD5 that does not match a chromium event's payload
    lines[chrom[3]] = lines[chrom[3]].replace(_payload_md5(lines, chrom[3]), "0" * 32)
    # 2: a payload line after an envelope without has_payload (an intern-table entry)
    s = next(i for i, ln in enumerate(lines) if ln.startswith("V") and '{"str": ' in ln)
    lines.insert(s + 1, "\torphan")
    # 3: bad JSON inside a well-shaped skipped envelope: a value torch never writes
    c = chrom[10] + 1
    lines[c] = lines[c].replace('{"chromium_event": {}', '{"chromium_event": {"a": 1, "a": tru}', 1)
    p = tmp_path / "dedicated_log_torch_trace_rank_0_x.log"
    p.write_text("\n".join(lines))
    fast = load(p, jobs=1)
    strict = load(p, jobs=1, validate_all=True)
    assert [g.collectives for g in strict.ranks[0].graphs] == [g.collectives for g in fast.ranks[0].graphs]
    assert strict.diagnostics.counts == {"md5_mismatch": 1, "orphan_payload": 1, "bad_json": 1}
    assert fast.diagnostics.total < 3
    r = tk("summarize", str(p), "--strict")
    assert r.returncode == 1 and r.stderr == "tracekit summarize: 3 bad inputs (--strict)\n"


def test_every_compile_id_form_can_be_selected():
    from tracekit.replay.selection import parse_graph_selector

    assert [parse_graph_selector(t) for t in ("0/0", "0/0_1:1", "!0_1", "!1/2/3:0", "-:0")] == [
        ("0/0", None), ("0/0_1", 1), ("!0_1", None), ("!1/2/3", 0), ("-", 0)]


def test_help_has_examples():
    for cmd in ("summarize", "replay", "diff", "explain"):
        out = tk(cmd, "--help").stdout
        assert "  Examples:\n    tracekit " + cmd in out, cmd


def test_every_comm_ms_table_says_what_hardware_it_assumes():
    r = tk("replay", str(FIXTURE_LOGS / "spmd_small_cap"), "--cap-mb", "0.05,1", "--cap", "auto",
           "--interconnect", "IB_NDR", "--group-size", "512")
    lines = r.stdout.splitlines()
    said = [i for i, ln in enumerate(lines) if ln.startswith("comm ms: ")]
    assert [lines[i] for i in said] == ["comm ms: torch's NCCL model, assuming IB_NDR, group size 512, 64 machines"] * 2
    assert all(lines[i + 1].split()[-1] in ("ms", "recorded") or "comm ms" in lines[i + 1] for i in said)
    plain = tk("replay", str(FIXTURE_LOGS / "spmd_small_cap")).stdout.splitlines()
    assert plain[2] == "comm ms: torch's NCCL model, assuming NVLINK_A100, group size 4, 1 machine"
    assert plain[3].split()[:3] == ["ranks", "graph", "fx"]  # fx nodes, not machines


def _edit_rank3(tmp_path, old: str, new: str):
    logs = _copy_ranks(FIXTURE_LOGS / "spmd_small_cap", tmp_path / "run", {0, 1, 2, 3})
    f = next(logs.glob("*rank_3_*.log"))
    f.write_text(f.read_text().replace(old, new))
    return logs


@pytest.mark.parametrize("bad", ["-1", "100000000000"])
def test_a_rank_that_is_no_rank_is_bad_input_not_a_crash(tmp_path, bad):
    logs = _edit_rank3(tmp_path, '"rank": 3,', f'"rank": {bad},')
    run = load(logs, jobs=1)
    assert run.diagnostics.counts["bad_field_type"] >= 1
    assert next(e for e in run.diagnostics.examples if e["kind"] == "bad_field_type")["detail"] == \
        f"rank {bad} is not a rank"
    r = tk("summarize", str(logs))
    assert r.returncode == 0 and "Traceback" not in r.stderr and "internal error" not in r.stderr


def test_ranks_with_another_torch_are_another_group(tmp_path):
    logs = _copy_ranks(FIXTURE_LOGS / "spmd_auto", tmp_path / "run", {0, 1, 2, 3})
    f = next(logs.glob("*rank_3_*.log"))
    lines = f.read_text().split("\n")
    i = next(k for k, ln in enumerate(lines) if '"name": "torch_version"' in ln)
    j = i + 1
    while lines[j].startswith("\t"):
        j += 1
    for k in range(i + 1, j):
        lines[k] = lines[k].replace("2.13.0+cpu", "2.12.0+cpu")
    lines[i] = lines[i].replace(re.search(r'"has_payload": "([0-9a-f]{32})"', lines[i]).group(1),
                                _payload_md5(lines, i))
    f.write_text("\n".join(lines))
    doc = summary_document(load(logs, jobs=1))
    assert [(g["ranks"], g["torch_version"]) for g in doc["groups"]] == [("0-2", "2.13.0+cpu"), ("3", "2.12.0+cpu")]


def test_rank_ranges_from_documents_are_bounded():
    from tracekit.model.rankset import parse_ranks, rank_members

    assert rank_members("0-2,-") == [0, 1, 2, None]
    with pytest.raises(ValueError, match="rank beyond"):
        parse_ranks("0-99999999999")
