"""Every claim true, on any log: ties blame no one, ranks that cannot be placed are named (never
dropped, never ``-``), a stray high rank stays small, a whole last entry without its newline is
whole on both read paths, copies and non-logs are named for what they are, escape sequences from
logs never reach the terminal, and the schedule check compares dtypes. Real fixture logs, edited
in tmp_path at test time (MD5s kept valid where it matters)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys

from conftest import FIXTURE_LOGS, ROOT
from tracekit.read.reader import load
from tracekit.render.html import render_html
from tracekit.render.summary_document import summary_document

CMD = [sys.executable, "-m", "tracekit"]


def tk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CMD, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def rank_log(scenario: str, rank: int):
    return next((FIXTURE_LOGS / scenario).glob(f"dedicated_log_torch_trace_rank_{rank}_*.log"))


def relabel(text: str, old: int, new: int) -> str:
    """A rank's log as if another rank wrote it (every envelope's ``rank``)."""
    return re.sub(rf'"rank": {old}([,}}])', rf'"rank": {new}\1', text)


def with_payload(lines: list[str], i: int, payload_lines: list[str]) -> list[str]:
    """Line ``i``'s entry with a new payload, its MD5 recomputed."""
    j = i + 1
    while j < len(lines) and lines[j].startswith("\t"):
        j += 1
    head, env = lines[i].split("] ", 1)
    env_d = json.loads(env)
    env_d["has_payload"] = hashlib.md5("\n".join(payload_lines).encode()).hexdigest()
    return lines[:i] + [head + "] " + json.dumps(env_d)] + ["\t" + p for p in payload_lines] + lines[j:]


def payload_of(lines: list[str], i: int) -> list[str]:
    out = []
    for ln in lines[i + 1:]:
        if not ln.startswith("\t"):
            break
        out.append(ln[1:])
    return out


# --- a tie is not a majority ---------------------------------------------------------------------


def test_two_ranks_that_differ_split_and_nobody_is_blamed(tmp_path):
    for r in (2, 3):
        shutil.copy(rank_log("diverge_rank", r), tmp_path)
    doc = summary_document(load(tmp_path, jobs=1))
    assert doc["verdict"]["text"] == ("DIVERGE: ranks split into 2 groups with no majority (2; 3) on 2 graphs; "
                                      "2 of 4 ranks missing (0-1)")
    assert {(d["majority"], tuple(d["groups"])) for d in doc["divergence"]} == {(False, ("2", "3"))}
    assert [(d["ranks"], d["majority_ranks"], d["majority"]) for d in doc["schedule_divergence"]] == [
        ("3", "2", False), ("3", "2", False)]
    out = tk("summarize", str(tmp_path)).stdout
    assert "9 differences where the ranks split with no majority (no rank is blamed)" in out
    assert "than the others (no majority: no rank is blamed)" in out
    assert "differ from the majority" not in out


def test_a_two_two_split_names_both_groups(tmp_path):
    for r in (0, 1, 3):
        shutil.copy(rank_log("diverge_rank", r), tmp_path)
    text = rank_log("diverge_rank", 3).read_text(encoding="utf-8")
    (tmp_path / "dedicated_log_torch_trace_rank_2_x.log").write_text(relabel(text, 3, 2), encoding="utf-8")
    doc = summary_document(load(tmp_path, jobs=1))
    assert doc["verdict"] == {
        "status": "diverge",
        "text": "DIVERGE: ranks split into 2 groups with no majority (0-1; 2-3) on 2 graphs",
        "sections": ["divergence", "schedule_divergence"]}
    assert {d["majority"] for d in doc["divergence"] + doc["schedule_divergence"]} == {False}
    page = render_html(doc)
    # every row a tie: the page's tables say "other ranks", as the text's (no row marked)
    assert 'data-differing-ranks=""' in page and "(tie: no majority)" not in page
    assert "<th>other ranks</th>" in page and "majority ranks" not in page
    assert ('<p data-ranks="0-3" data-where="divergence">ranks split into 2 groups with no majority '
            '(no rank is blamed): <span class="mono">0-1 | 2-3</span></p>') in page
    assert "differing rank(s)" not in page
    table = tk("summarize", str(tmp_path)).stdout.splitlines()
    assert table[3] == "Why: see Rank consensus (9 rows), Schedule consensus (2 rows) below"
    row = next(ln for ln in table if ln.startswith("0/0           forward   all_gather"))
    # every row a tie: the columns say "other ranks", not "majority" (tracekit.render.majority_columns)
    assert " ".join(row.split()) == "0/0 forward all_gather 2-3 10->1 0-1 8->1 #8 AG (before): 0.004 vs - MB"
    assert any("other ranks" in ln for ln in table) and not any("majority ranks" in ln for ln in table)


def test_three_to_one_still_has_a_majority():
    doc = summary_document(load(FIXTURE_LOGS / "diverge_rank", jobs=1))
    assert doc["verdict"]["text"] == "DIVERGE: 1 of 4 ranks (3) differ from the majority on 2 graphs"
    assert all(d["majority"] and "groups" not in d for d in doc["divergence"])


# --- ranks that cannot be placed ------------------------------------------------------------------


def test_a_rank_beyond_the_bound_is_named_and_shifts_no_blame(tmp_path):
    shutil.copy(rank_log("spmd_auto", 0), tmp_path)
    bad = tmp_path / "dedicated_log_torch_trace_rank_1048576_x.log"
    bad.write_text(relabel(rank_log("spmd_auto", 1).read_text(encoding="utf-8"), 1, 1048576), encoding="utf-8")
    doc = summary_document(load(tmp_path, jobs=1))
    assert doc["world"] | {"unplaced": None} == {
        "expected": 4, "found": 1, "ranks": "0", "missing": "1-3", "missing_count": 3,
        "duplicated": "", "unplaced": None}
    assert doc["world"]["unplaced"] == [str(bad)]
    assert doc["verdict"]["status"] == "incomplete"
    assert doc["divergence"] == [] and doc["schedule_divergence"] == []
    ex = [e for e in doc["diagnostics"]["examples"] if e["kind"] == "unplaced_rank"]
    assert ex == [{"kind": "unplaced_rank", "file": str(bad), "line": 0,
                   "detail": "not placed: its entries say rank 1048576 is not a rank (ranks are 0 to 1048575); "
                             "the file is left out"}]
    out = tk("summarize", str(tmp_path)).stdout
    assert "World: 1 rank found (0) of 4 expected; missing: 1-3; seen in two runs: none; not a rank: 1 file" in out
    assert ",-)" not in out and "#None" not in out


def test_a_rank_less_log_among_ranked_ones_is_named_not_blamed(tmp_path):
    for r in (0, 1):
        shutil.copy(rank_log("diverge_rank", r), tmp_path)
    text = re.sub(r', "rank": \d+', "", rank_log("diverge_rank", 3).read_text(encoding="utf-8"))
    (tmp_path / "dedicated_log_torch_trace_x.log").write_text(text, encoding="utf-8")
    doc = summary_document(load(tmp_path, jobs=1))
    assert doc["world"]["ranks"] == "0-1" and doc["verdict"]["status"] == "incomplete"
    assert doc["diagnostics"]["counts"]["unknown_rank"] == 1
    assert doc["divergence"] == []


def test_a_stray_high_rank_stays_small(tmp_path):
    shutil.copy(rank_log("spmd_auto", 0), tmp_path)
    (tmp_path / "dedicated_log_torch_trace_rank_1048575_x.log").write_text(
        relabel(rank_log("spmd_auto", 1).read_text(encoding="utf-8"), 1, 1048575), encoding="utf-8")
    run = load(tmp_path, jobs=1)
    doc = summary_document(run)
    assert doc["world"]["missing"] == "1-1048574" and doc["world"]["missing_count"] == 1048574
    assert doc["diagnostics"]["counts"] == {"missing_rank": 1048574}
    assert [e["detail"] for e in doc["diagnostics"]["examples"]] == ["ranks 1-1048574 of 1048576 have no log"]
    assert doc["verdict"]["text"] == "INCOMPLETE: the 2 ranks found agree; 1048574 of 1048576 ranks missing (1-1048574)"
    assert len(json.dumps(doc)) < 20_000
    r = tk("summarize", str(tmp_path), "--format", "json")
    assert r.returncode == 0 and len(r.stdout) < 20_000


# --- copies and files that are no log ------------------------------------------------------------


def test_a_byte_identical_copy_is_a_copy_not_another_run(tmp_path):
    for r in (0, 1):
        shutil.copy(rank_log("spmd_auto", r), tmp_path)
    shutil.copy(rank_log("spmd_auto", 1), tmp_path / "dedicated_log_torch_trace_rank_1_zcopy.log")
    doc = summary_document(load(tmp_path, jobs=1))
    assert doc["world"]["duplicated"] == "" and doc["world"]["found"] == 2
    assert doc["diagnostics"]["counts"] == {"copied_file": 1, "missing_rank": 2}
    ex = next(e for e in doc["diagnostics"]["examples"] if e["kind"] == "copied_file")
    assert ex["file"].endswith("rank_1_zcopy.log")
    assert ex["detail"] == f"a byte-identical copy of {tmp_path / rank_log('spmd_auto', 1).name}: read once"


def test_a_file_with_no_entries_is_no_rank(tmp_path):
    junk = tmp_path / "junk.log"
    junk.write_bytes(bytes(range(256)) * 8 + b"\x1b[2Jhello")
    r = tk("summarize", str(junk))
    assert r.returncode == 2
    assert r.stderr == f"tracekit summarize: no log entries in {junk} (9 bad lines)\n"
    assert "1 rank found" not in r.stdout and "truncated_entry" not in r.stdout
    notes = tmp_path / "notes.log"
    notes.write_text("hello world\n")
    doc = summary_document(load([str(rank_log("spmd_auto", 0)), str(notes)], jobs=1))
    assert doc["world"]["ranks"] == "0" and doc["world"]["unplaced"] == [str(notes)]
    assert doc["diagnostics"]["counts"] == {"no_entries": 1}
    assert doc["diagnostics"]["examples"][0]["detail"] == f"no log entries in {notes} (1 bad line)"


# --- a whole last entry without its final newline ------------------------------------------------


def _cut_after(lines: list[str], marker: str, before: int) -> str:
    """The log up to the end of the last entry with ``marker`` before line ``before``, without a
    final newline."""
    i = max(k for k, ln in enumerate(lines[:before]) if marker in ln and not ln.startswith("\t"))
    j = i + 1
    while lines[j].startswith("\t"):
        j += 1
    return "\n".join(lines[:j])


def test_a_whole_last_entry_without_newline_is_whole_on_both_paths(tmp_path):
    lines = rank_log("spmd_auto", 0).read_text(encoding="utf-8").split("\n")
    cases = {
        "skipped.log": _cut_after(lines, '"chromium_event"', 5000),  # an entry the fast path skips
        "graph.log": _cut_after(lines, '"name": "before_post_grad_graph"', 5000),  # 188 payload lines
        "plain.log": "\n".join(lines).rstrip("\n"),
    }
    import gzip

    for name, text in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        (tmp_path / (name + ".gz")).write_bytes(gzip.compress(text.encode()))  # a stream that cannot seek
        for f in (name, name + ".gz"):
            fast = load(str(tmp_path / f), jobs=1).diagnostics.counts
            strict = load(str(tmp_path / f), jobs=1, validate_all=True).diagnostics.counts
            assert fast == strict == {}, f
    (tmp_path / "cut.log").write_text(cases["skipped.log"][:-3], encoding="utf-8")
    for strict in (False, True):
        assert load(str(tmp_path / "cut.log"), jobs=1, validate_all=strict).diagnostics.counts == {"truncated_entry": 1}


def test_an_older_torch_rank_less_log_like_tlparse_simple_log(tmp_path):
    """Rank-less, another torch version, ending without a newline: whole, in both modes."""
    text = re.sub(r', "rank": \d+', "", rank_log("spmd_auto", 0).read_text(encoding="utf-8"))
    lines = text.split("\n")
    i = next(k for k, ln in enumerate(lines) if '"name": "torch_version"' in ln)
    payload = [p.replace("2.13.0+cpu", "2.5.0+cpu") for p in payload_of(lines, i)]
    lines = with_payload(lines, i, payload)
    f = tmp_path / "simple.log"
    f.write_text(_cut_after(lines, '"chromium_event"', 5000), encoding="utf-8")
    for strict in (False, True):
        run = load(str(f), jobs=1, validate_all=strict)
        assert run.diagnostics.counts == {} and run.ranks[0].torch_version == "2.5.0+cpu"
    r = tk("summarize", str(f), "--strict")
    assert r.returncode == 0, r.stderr
    assert "1 rank found (its rank is not logged)" in r.stdout


# --- escape sequences -----------------------------------------------------------------------------


def test_escape_sequences_from_a_log_never_reach_the_terminal(tmp_path):
    src = rank_log("spmd_auto", 0).read_text(encoding="utf-8").split("\n")
    src.insert(3, "\x1b[2J\x1b]0;owned\x07 not an envelope")
    i = next(k for k, ln in enumerate(src) if '"name": "torch_version"' in ln)
    src[i] = src[i].replace('"torch_version"', '"torch_version\\u001b[31m"')  # an artifact name with ESC
    f = tmp_path / "dedicated_log_torch_trace_rank_0_x.log"
    f.write_text("\n".join(src), encoding="utf-8")
    for fmt in ("table", "markdown", "csv"):
        r = tk("summarize", str(f), "--strict", "--format", fmt)
        assert "\x1b" not in r.stdout and "\x07" not in r.stdout and "\x1b" not in r.stderr, fmt
    table = tk("summarize", str(f)).stdout
    assert "\\x1b[2J\\x1b]0;owned\\x07 not an envelope" in table
    doc = json.loads(tk("summarize", str(f), "--format", "json").stdout)
    assert any(e["detail"].startswith("\x1b[2J") for e in doc["diagnostics"]["examples"])  # JSON escapes it


# --- dtype in the schedule check -------------------------------------------------------------------


def test_a_dtype_mismatch_in_the_post_grad_graph_is_a_schedule_divergence(tmp_path):
    for r in (0, 1, 2):
        shutil.copy(rank_log("spmd_auto", r), tmp_path)
    lines = rank_log("spmd_auto", 3).read_text(encoding="utf-8").split("\n")
    i = next(k for k, ln in enumerate(lines) if '"name": "inductor_post_grad_graph"' in ln)
    payload = [p.replace('all_gather_into_tensor_out: "f32[', 'all_gather_into_tensor_out: "bf16[')
               for p in payload_of(lines, i)]
    lines = with_payload(lines, i, payload)
    (tmp_path / rank_log("spmd_auto", 3).name).write_text("\n".join(lines), encoding="utf-8")
    run = load(tmp_path, jobs=1)
    assert run.diagnostics.counts == {}
    assert [c.dtype for c in run.ranks[3].graphs[0].final.collectives] == ["bf16"]
    assert [c.dtype for c in run.ranks[3].graphs[1].final.collectives] == ["f32", "f32"]
    doc = summary_document(run)
    assert doc["schedule_divergence"] == [{
        "compile_id": "0/0", "graph_index": 0, "ranks": "3", "majority_ranks": "0-2", "majority": True,
        "position": 0, "value": {"kind": "all_gather", "group": "0", "bytes": 74536, "dtype": "bf16"},
        "majority_value": {"kind": "all_gather", "group": "0", "bytes": 74536, "dtype": "f32"},
        "length": 1, "majority_length": 1}]
    assert doc["verdict"]["text"] == "DIVERGE: 1 of 4 ranks (3) differ from the majority on 1 graph"


def test_schedules_without_outcome_and_their_divergence_are_shown(tmp_path):
    """No pre_bucketing_fsdp_collectives outcome at all (the entries dropped), rank 3 from the
    diverging run: the collectives that run, and where they differ, are still in the table."""
    for src, r in (("spmd_auto", 0), ("spmd_auto", 1), ("spmd_auto", 2), ("diverge_rank", 3)):
        lines = rank_log(src, r).read_text(encoding="utf-8").split("\n")
        keep, skip = [], False
        for ln in lines:
            if not ln.startswith("\t"):
                skip = '"name": "pre_bucketing_fsdp_collectives"' in ln
            if not skip:
                keep.append(ln)
        (tmp_path / rank_log(src, r).name).write_text("\n".join(keep), encoding="utf-8")
    doc = summary_document(load(tmp_path, jobs=1))
    assert doc["totals"]["graphs"] == 0
    assert [d["ranks"] for d in doc["schedule_divergence"]] == ["3", "3"]
    assert doc["verdict"]["text"] == "DIVERGE: 1 of 4 ranks (3) differ from the majority on 2 graphs"
    out = [" ".join(ln.split()) for ln in tk("summarize", str(tmp_path)).stdout.splitlines()]
    assert "Why: see Schedule consensus (2 rows) below" in out
    assert "0/0 forward 3 #0 AG 75,596 B f32 (group 0) 0-2 AG 74,536 B f32 (group 0)" in out
    assert "0/0 backward 0-2 1 1 0 0 368,072 0.0230 matched" in out
    page = render_html(doc)  # the report says nothing was recorded, and gives no verbose-sizes hint
    assert "no bucketing outcome recorded (see the notes)" in page
    assert "no bucketing outcome recorded: no sizes to show" in page
    assert "merged some" not in page and "pre_bucketing_fsdp_collectives_verbose" not in page


def test_the_report_verdict_points_at_the_divergence_rows():
    page = render_html(summary_document(load(FIXTURE_LOGS / "diverge_rank", jobs=1)))
    assert ('<p class="why">why: see Divergence: bucketing outcome (9), '
            'final schedule (2)</p>') in page
