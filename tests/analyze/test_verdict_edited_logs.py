"""The verdict on real fixture logs edited at test time the way real directories get messy: a
rank log cut mid-entry is INCOMPLETE, not divergent, and compared only on what it logged."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from conftest import FIXTURE_LOGS
from tracekit.render.summary_document import summary_document
from tracekit.render.summary_text import render_text
from tracekit.read.reader import load


def _copy(scenario: str, tmp_path: Path) -> Path:
    out = tmp_path / scenario
    shutil.copytree(FIXTURE_LOGS / scenario, out)
    return out


def _rank_file(d: Path, rank: int) -> Path:
    (f,) = d.glob(f"*_rank_{rank}_*.log")
    return f


def _cut_inside(path: Path, needle: bytes, occurrence: int) -> int:
    """Cut ``path`` in the middle of the envelope line holding the ``occurrence``-th (0-based)
    ``needle``; the line number of that envelope."""
    data = path.read_bytes()
    at = -1
    for _ in range(occurrence + 1):
        at = data.index(needle, at + 1)
    path.write_bytes(data[:at])
    return data.count(b"\n", 0, at) + 1


SCHEDULE = b'"name": "inductor_collective_schedule"'


def test_a_log_cut_in_the_backward_is_incomplete_not_divergent(tmp_path):
    d = _copy("spmd_auto", tmp_path)
    f = _rank_file(d, 3)
    line = _cut_inside(f, SCHEDULE, 1)  # the backward's schedule, cut mid-entry
    doc = summary_document(load(d, jobs=1))
    assert doc["verdict"]["status"] == "incomplete"
    assert doc["verdict"]["text"] == (
        "INCOMPLETE: the 4 ranks found agree on what all of them logged; rank 3's log is cut "
        f"(it ends inside an entry, at {f}:{line}): compared only on what it logged"
    )
    assert doc["divergence"] == [] and doc["schedule_divergence"] == [] and doc["compile_divergence"] == []
    assert doc["world"]["cut"] == "3"
    assert doc["diagnostics"]["counts"] == {"truncated_entry": 1}
    text = render_text(doc, "table")
    assert "Why: see World, Diagnostics below\n" in text
    assert "seen in two runs: none; cut short: 3 (see Diagnostics)\n" in text
    assert "hang or corruption risk" not in text
    # what rank 3 did log is still compared: both outcomes agree with the others'; the
    # backward's schedule, cut away, is not held against it
    assert [grp["ranks"] for grp in doc["groups"]] == ["0-2", "3"]
    cut = doc["groups"][1]["graphs"]
    assert [(g["compile_id"], g["graph_index"], g["final"] is None) for g in cut] == [
        ("0/0", 0, False),
        ("0/0", 1, True),
    ]


def test_a_cut_log_that_also_differs_is_still_blamed_for_what_it_logged(tmp_path):
    # diverge_rank's rank 3 has two more layers: both its outcomes (logged before the cut)
    # differ from the others', and stay blamed; its backward's schedule, cut away, is not
    d = _copy("diverge_rank", tmp_path)
    _cut_inside(_rank_file(d, 3), SCHEDULE, 1)
    doc = summary_document(load(d, jobs=1))
    assert doc["verdict"]["status"] == "diverge"
    assert doc["verdict"]["text"].startswith("DIVERGE: 1 of 4 ranks (3) differ from the majority on 2 graphs; ")
    assert {d["graph_index"] for d in doc["divergence"]} == {0, 1}
    assert [d["field"] for d in doc["divergence"] if d["graph_index"] == 1 and d["field"] == "final"] == []
    assert {d["graph_index"] for d in doc["schedule_divergence"]} == {0}
    assert "rank 3's log is cut (it ends inside an entry" in doc["verdict"]["text"]


def _cut_at_line_end(path: Path, needle: bytes, occurrence: int) -> int:
    """Cut ``path`` at the line end before the envelope holding the ``occurrence``-th (0-based)
    ``needle``: the entries before it whole, the file simply ending; the line number of the
    last envelope kept (the last line not led by a tab)."""
    data = path.read_bytes()
    at = -1
    for _ in range(occurrence + 1):
        at = data.index(needle, at + 1)
    end = data.rfind(b"\n", 0, at) + 1
    path.write_bytes(data[:end])
    lines = data[:end].split(b"\n")[:-1]
    return max(i for i, ln in enumerate(lines, 1) if not ln.startswith(b"\t"))


def test_a_log_cut_at_a_line_end_in_the_backward_is_incomplete_not_divergent(tmp_path):
    # the file simply ends before the backward's schedule: every entry it holds is whole, but
    # its last one (a chromium_event) closes no compile, where its peers' end with the
    # backward's bwd_compilation_metrics
    d = _copy("spmd_auto", tmp_path)
    f = _rank_file(d, 3)
    last = _cut_at_line_end(f, SCHEDULE, 1)
    assert f.read_bytes().endswith(b"\n")
    doc = summary_document(load(d, jobs=1))
    assert doc["verdict"]["status"] == "incomplete"
    assert doc["verdict"]["text"] == (
        "INCOMPLETE: the 4 ranks found agree on what all of them logged; rank 3's log is cut "
        "(it ends between two entries, inside a compile: its last entry, a chromium_event, "
        f"closes none, at {f}:{last}): compared only on what it logged"
    )
    assert doc["divergence"] == [] and doc["schedule_divergence"] == [] and doc["compile_divergence"] == []
    assert doc["world"]["cut"] == "3"
    assert doc["diagnostics"]["counts"] == {"cut_between_entries": 1}
    text = render_text(doc, "table")
    assert "Why: see World, Diagnostics below\n" in text
    assert "hang or corruption risk" not in text and "DIVERGE" not in text


def test_a_line_end_cut_is_incomplete_however_the_run_is_read(tmp_path):
    # the same cut, read by worker processes and by the segment reader (a file cut into
    # segments: only its last segment's end counts)
    d = _copy("spmd_auto", tmp_path)
    _cut_at_line_end(_rank_file(d, 3), SCHEDULE, 1)
    for jobs in (1, 2):
        doc = summary_document(load(d, jobs=jobs))
        assert (doc["verdict"]["status"], doc["world"]["cut"]) == ("incomplete", "3")
        assert doc["diagnostics"]["counts"] == {"cut_between_entries": 1}


def _end_after_forward(path: Path) -> None:
    """End ``path`` right after its forward's ``compilation_metrics``: a whole compile, the
    backward (compiled at the first backward call) never begun."""
    data = path.read_bytes()
    at = data.index(b'{"compilation_metrics": ')
    path.write_bytes(data[: data.index(b"\n", at) + 1])


def test_a_log_that_ends_after_a_whole_compile_is_incomplete_not_divergent(tmp_path):
    # rank 3's log ends right after its forward's compilation_metrics: the reader finds the
    # file whole (it ends where torch ends a compile), yet its peers logged the backward too.
    # What it logged equals their prefix, so it is INCOMPLETE, compared only on that, and
    # Diagnostics says where it ends and what the others logged after it (it was DIVERGE,
    # with the backward 'absent' and 'no schedule' under 'a hang or corruption risk')
    d = _copy("spmd_auto", tmp_path)
    f = _rank_file(d, 3)
    _end_after_forward(f)
    doc = summary_document(load(d, jobs=1))
    assert doc["verdict"]["status"] == "incomplete"
    assert doc["verdict"]["text"] == (
        "INCOMPLETE: the 4 ranks found agree on what all of them logged; rank 3's log ends after "
        f"compile 0/0 forward (at {f}); the other ranks logged 1 more (0/0 backward): compared only "
        "on what it logged"
    )
    assert doc["verdict"]["sections"] == ["world", "diagnostics"]
    assert doc["divergence"] == [] and doc["schedule_divergence"] == [] and doc["compile_divergence"] == []
    assert doc["world"]["cut"] == "3"
    assert doc["diagnostics"] == {"counts": {"ends_after_compile": 1}, "examples": [{
        "kind": "ends_after_compile", "file": str(f), "line": 0,
        "detail": "it ends after compile 0/0 forward, a whole one; the other ranks logged 1 more (0/0 backward)"}]}
    text = render_text(doc, "table")
    assert "Why: see World, Diagnostics below\n" in text
    assert "cut short: 3 (see Diagnostics)\n" in text
    assert "ends_after_compile  1\n" in text
    assert "hang or corruption risk" not in text and "DIVERGE" not in text
    # --strict fails on it as on any input its Diagnostics lists (exit 1, the count said)
    from click.testing import CliRunner

    from tracekit.cli import main

    r = CliRunner().invoke(main, ["summarize", str(d), "--jobs", "1", "--strict"])
    assert (r.exit_code, r.stderr) == (1, "tracekit summarize: 1 bad input (--strict)\n")
    # what rank 3 did log is still compared: its forward agrees with the others'
    assert [(grp["ranks"], [g["graph_index"] for g in grp["graphs"]]) for grp in doc["groups"]] == [
        ("0-2", [0, 1]), ("3", [0])]
    assert [g["collectives"]["all_gather"] for grp in doc["groups"] for g in grp["graphs"] if g["graph_index"] == 0] == [
        {"before": 8, "after": 1}] * 2


def test_a_log_that_ends_early_and_differs_in_what_it_logged_is_still_divergent(tmp_path):
    # diverge_rank: rank 3 has two more layers, so its forward differs (AG 10->1 against 8->1);
    # ending its log after that forward makes it no less divergent
    d = _copy("diverge_rank", tmp_path)
    _end_after_forward(_rank_file(d, 3))
    doc = summary_document(load(d, jobs=1))
    assert doc["verdict"]["text"] == "DIVERGE: 1 of 4 ranks (3) differ from the majority on 2 graphs"
    assert "cut" not in doc["world"] and doc["diagnostics"]["counts"] == {}
    assert [(x["graph_index"], x["field"]) for x in doc["divergence"]] == [
        (0, "all_gather"), (0, "sizes_mb.before"), (0, "sizes_mb.after"), (0, "final"), (1, "presence")]


def test_two_logs_that_end_after_the_same_compile_are_incomplete(tmp_path):
    # ranks 2 and 3 both end after the forward (a 2-2 split of what was logged): no one is
    # blamed, both are said to end early
    d = _copy("spmd_auto", tmp_path)
    for r in (2, 3):
        _end_after_forward(_rank_file(d, r))
    doc = summary_document(load(d, jobs=1))
    assert doc["verdict"]["status"] == "incomplete"
    assert doc["verdict"]["text"] == (
        "INCOMPLETE: the 4 ranks found agree on what all of them logged; the logs of ranks 2-3 end "
        f"after compile 0/0 forward (at {_rank_file(d, 2)}; and 1 more cut file); the other ranks "
        "logged 1 more (0/0 backward): compared only on what they logged"
    )
    assert doc["world"]["cut"] == "2-3" and doc["diagnostics"]["counts"] == {"ends_after_compile": 2}


def test_three_of_four_logs_that_end_after_the_same_compile_are_incomplete(tmp_path):
    # ranks 1-3 end after the forward, rank 0 logged the backward too: the ranks that lack it
    # are the majority, yet they are the ones that end early; rank 0, which logged everything,
    # is neither blamed nor said cut (all four were said cut, 'ranks 0-3 end after compile
    # 0/0 backward')
    d = _copy("spmd_auto", tmp_path)
    for r in (1, 2, 3):
        _end_after_forward(_rank_file(d, r))
    doc = summary_document(load(d, jobs=1))
    assert doc["verdict"]["text"] == (
        "INCOMPLETE: the 4 ranks found agree on what all of them logged; the logs of ranks 1-3 end "
        f"after compile 0/0 forward (at {_rank_file(d, 1)}; and 2 more cut files); the other rank (0) "
        "logged 1 more (0/0 backward): compared only on what they logged"
    )
    assert doc["world"]["cut"] == "1-3" and doc["diagnostics"]["counts"] == {"ends_after_compile": 3}
    assert [e["file"] for e in doc["diagnostics"]["examples"]] == [str(_rank_file(d, r)) for r in (1, 2, 3)]
    assert {e["detail"] for e in doc["diagnostics"]["examples"]} == {
        "it ends after compile 0/0 forward, a whole one; the other rank (0) logged 1 more (0/0 backward)"}
    assert doc["divergence"] == [] and doc["schedule_divergence"] == [] and doc["compile_divergence"] == []
    assert [(grp["ranks"], [g["graph_index"] for g in grp["graphs"]]) for grp in doc["groups"]] == [
        ("0", [0, 1]), ("1-3", [0])]


@pytest.mark.parametrize("early", [0, 1])
def test_one_of_two_logs_that_ends_after_a_compile_is_incomplete(tmp_path, early):
    # two rank logs (ranks 2 and 3 removed), one ending after the forward: a 1-1 split, and
    # the one that lacks the backward is the one that ends early, whichever it is
    d = _copy("spmd_auto", tmp_path)
    for r in (2, 3):
        _rank_file(d, r).unlink()
    _end_after_forward(_rank_file(d, early))
    doc = summary_document(load(d, jobs=1))
    assert doc["verdict"]["text"] == (
        "INCOMPLETE: the 2 ranks found agree on what all of them logged; 2 of 4 ranks missing (2-3); "
        f"rank {early}'s log ends after compile 0/0 forward (at {_rank_file(d, early)}); the other rank "
        f"({1 - early}) logged 1 more (0/0 backward): compared only on what it logged"
    )
    assert doc["world"]["cut"] == str(early)
    assert doc["diagnostics"]["counts"] == {"ends_after_compile": 1, "missing_rank": 2}
    assert doc["divergence"] == [] and doc["schedule_divergence"] == [] and doc["compile_divergence"] == []


def test_a_line_end_cut_is_not_claimed_when_no_log_ends_a_compile(tmp_path):
    # logs that end no compile at all (every rank's last entry a chromium_event): nothing to
    # tell a cut from, so no rank is said cut
    d = _copy("spmd_auto", tmp_path)
    for r in range(4):
        _cut_at_line_end(_rank_file(d, r), b'{"bwd_compilation_metrics"', 0)
    doc = summary_document(load(d, jobs=1))
    assert "cut" not in doc["world"] and doc["diagnostics"]["counts"] == {}
    assert doc["verdict"]["status"] == "agree" and "DIVERGE" not in doc["verdict"]["text"]


def test_a_file_of_blank_lines_is_no_entries_never_a_rank(tmp_path):
    # blank lines only, named as rank 5's log: no entry gives it a rank, so it is none
    d = _copy("spmd_auto", tmp_path)
    blank = d / "dedicated_log_torch_trace_rank_5_x.log"
    blank.write_bytes(b"\n\n")
    doc = summary_document(load(d, jobs=1))
    assert doc["verdict"]["text"] == "INCOMPLETE: the 4 ranks found agree; 1 file read as no rank (see Diagnostics)"
    assert doc["world"]["ranks"] == "0-3" and doc["world"]["unplaced"] == [str(blank)]
    assert doc["diagnostics"]["counts"] == {"no_entries": 1}
    assert doc["diagnostics"]["examples"][0]["detail"] == f"no log entries in {blank}"


def test_a_rank_log_renamed_is_read_by_its_content(tmp_path):
    # the divergent rank's log renamed node2.log: read, its rank taken from its entries
    d = _copy("diverge_rank", tmp_path)
    _rank_file(d, 3).rename(d / "node2.log")
    (d / "README.txt").write_text("copied from the cluster\n")
    doc = summary_document(load(d, jobs=1))
    assert doc["verdict"]["text"] == "DIVERGE: 1 of 4 ranks (3) differ from the majority on 2 graphs"
    assert doc["world"]["ranks"] == "0-3" and doc["world"]["missing"] == ""
    assert doc["world"]["not_logs"] == [str(d / "README.txt")]
    assert "; not a log: 1 file (README.txt)\n" in render_text(doc, "table")


def test_an_empty_file_named_for_a_rank_is_no_rank(tmp_path):
    d = _copy("spmd_auto", tmp_path)
    empty = d / "dedicated_log_torch_trace_rank_5_x.log"
    empty.write_bytes(b"")
    doc = summary_document(load(d, jobs=1))
    assert doc["world"]["ranks"] == "0-3" and doc["world"]["expected"] == 4
    assert doc["world"]["unplaced"] == [str(empty)]
    assert doc["divergence"] == [] and doc["schedule_divergence"] == []
    assert doc["verdict"]["text"] == (
        "INCOMPLETE: the 4 ranks found agree; 1 file read as no rank (see Diagnostics)"
    )
    assert doc["diagnostics"] == {
        "counts": {"no_entries": 1},
        "examples": [
            {"kind": "no_entries", "file": str(empty), "line": 0,
             "detail": f"no log entries in {empty} (the file is empty)"}
        ],
    }


def test_a_gz_of_a_plain_log_is_a_copy_not_another_run(tmp_path):
    d = _copy("spmd_auto", tmp_path)
    plain = _rank_file(d, 0)
    gz = d / "rank0_backup.log.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes(), mtime=0))
    doc = summary_document(load(d, jobs=1))
    assert doc["verdict"]["text"] == "OK: all 4 ranks agree on all 2 graphs"
    assert doc["world"]["duplicated"] == "" and doc["world"]["copies"] == [str(gz)]
    assert doc["diagnostics"]["examples"] == [
        {"kind": "copied_file", "file": str(gz), "line": 0,
         "detail": f"a copy (the same log once decompressed) of {plain}: read once"}
    ]


@pytest.mark.parametrize("name", ["rank0_backup.log.gz", "dedicated_log_torch_trace_rank_0_aaa.log.gz"])
def test_a_cut_copy_of_a_rank_log_is_a_copy_not_a_cut_rank(tmp_path, name):
    # a .gz of the first 300,000 bytes of rank 0's log (a backup that stopped) beside the whole
    # log, read after it or (named to sort first) before it: it was 'another run (its compile
    # ids start again at 0/0): not merged', 'ranks 0 also found in another run', and the
    # verdict said rank 0's log cut at the copy's last line, while rank 0's whole log was read
    d = _copy("spmd_auto", tmp_path)
    plain = _rank_file(d, 0)
    gz = d / name
    gz.write_bytes(gzip.compress(plain.read_bytes()[:300_000], mtime=0))
    doc = summary_document(load(d, jobs=1))
    assert doc["verdict"]["text"] == "OK: all 4 ranks agree on all 2 graphs"
    assert doc["world"]["copies"] == [str(gz)] and doc["world"]["duplicated"] == "" and "cut" not in doc["world"]
    assert doc["diagnostics"]["counts"] == {"truncated_entry": 1, "copied_file": 1}
    read_instead = f": {plain} read instead" if name.startswith("dedicated") else ": read once"
    assert doc["diagnostics"]["examples"] == [
        {"kind": "truncated_entry", "file": str(gz), "line": 4528,
         "detail": "the file ends inside this entry (no final newline)"},
        {"kind": "copied_file", "file": str(gz), "line": 0, "detail": f"a copy cut short of {plain}{read_instead}"},
    ]  # fmt: skip
    # rank 0 is its whole log: both graphs, as the others
    assert [(grp["ranks"], len(grp["graphs"])) for grp in doc["groups"]] == [("0-3", 2)]


def test_a_gz_cut_mid_stream_beside_the_whole_log_is_a_copy(tmp_path):
    d = _copy("spmd_auto", tmp_path)
    plain = _rank_file(d, 0)
    gz = d / "rank0.log.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes(), mtime=0)[:40_000])
    doc = summary_document(load(d, jobs=1))
    assert doc["verdict"]["text"] == "OK: all 4 ranks agree on all 2 graphs"
    assert doc["world"]["copies"] == [str(gz)] and "cut" not in doc["world"]
    assert doc["diagnostics"]["counts"] == {"truncated_entry": 1, "bad_gzip": 1, "copied_file": 1}


def test_another_run_of_a_rank_is_still_another_run(tmp_path):
    # a log of rank 0 from another job (spmd_small_cap: the same model at another cap) is no
    # copy, cut or whole: not merged, said another run
    d = _copy("spmd_auto", tmp_path)
    (other,) = (FIXTURE_LOGS / "spmd_small_cap").glob("*_rank_0_*.log")
    shutil.copy(other, d / "zz_rank0_other_job.log")
    doc = summary_document(load(d, jobs=1))
    assert doc["world"]["duplicated"] == "0" and "copies" not in doc["world"]
    assert doc["diagnostics"]["counts"] == {"duplicate_rank": 1}
    assert doc["verdict"]["text"] == "INCOMPLETE: the 4 ranks found agree; rank 0 also found in another run (not merged)"


def test_subdirectories_are_said_not_read(tmp_path):
    # one level is read: a folder whose logs are in node0/ and node1/ said only 'no log could be
    # read' on its last line; one with logs beside a subdirectory of another run said nothing of it
    nodes = tmp_path / "nodes"
    for node, ranks in (("node0", (0, 1)), ("node1", (2, 3))):
        (nodes / node).mkdir(parents=True)
        for r in ranks:
            f = _rank_file(FIXTURE_LOGS / "spmd_auto", r)
            shutil.copy(f, nodes / node / f.name)
    from click.testing import CliRunner

    from tracekit.cli import main

    r = CliRunner().invoke(main, ["summarize", str(nodes)])
    assert (r.exit_code, r.stderr) == (
        2, f"tracekit summarize: {nodes}: directory holds no .log or .log.gz file; its subdirectories node0, node1 do: pass them\n")
    mixed = _copy("spmd_auto", tmp_path)
    shutil.copytree(FIXTURE_LOGS / "diverge_rank", mixed / "old_run")
    (mixed / ".cache").mkdir()  # hidden, and holding no log: not said
    doc = summary_document(load(mixed, jobs=1))
    assert doc["verdict"]["text"] == "OK: all 4 ranks agree on all 2 graphs"
    assert doc["world"]["subdirectories"] == [str(mixed / "old_run")]
    assert render_text(doc, "table").split("\n")[4] == (
        "World: 4 ranks found (0-3) of 4 expected; missing: none; seen in two runs: none; "
        "not read: 1 subdirectory holding logs (old_run: pass it)")
    assert "subdirectories" not in summary_document(load(FIXTURE_LOGS / "spmd_auto", jobs=1))["world"]


def test_python_load_of_a_missing_path_raises(tmp_path):
    import tracekit

    missing = tmp_path / "no_such_dir"
    with pytest.raises(FileNotFoundError) as e:
        tracekit.load(missing)
    assert e.value.filename == str(missing) and e.value.strerror == "no such file or directory"
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError) as e:
        tracekit.load(tmp_path / "empty")
    assert e.value.filename == str(tmp_path / "empty")
    assert e.value.strerror == "directory holds no .log or .log.gz file"
    # one missing path among real ones raises too: no half run for a typo
    with pytest.raises(FileNotFoundError):
        tracekit.load([FIXTURE_LOGS / "spmd_auto", missing])
    assert len(tracekit.load(FIXTURE_LOGS / "spmd_auto", jobs=1).ranks) == 4


def test_python_load_of_files_holding_no_log_raises(tmp_path):
    # it returned a Run of no rank (diagnostics only) for a 0-byte file or a foreign one, while
    # every command exits 2 on them: the API says it as the commands do
    import tracekit

    empty = tmp_path / "dedicated_log_torch_trace_rank_5_x.log"
    empty.write_bytes(b"")
    with pytest.raises(ValueError) as e:
        tracekit.load(empty)
    assert str(e.value) == f"no log entries in {empty} (the file is empty)"
    notes = tmp_path / "train.log"
    notes.write_text("step 1 loss 2.3\n")
    with pytest.raises(ValueError) as e:
        tracekit.load(notes)
    assert str(e.value) == f"no log entries in {notes} (1 bad line)"
    # logs with compiles but no collective (an FSDP2 run) are logs: a Run
    assert len(tracekit.load(FIXTURE_LOGS / "fsdp2").ranks) == 2


def test_an_ok_run_where_nothing_merged_says_so():
    # overlap_cap_a: a 1.5 MB cap under 6 MB layers, every count N -> N
    doc = summary_document(load(FIXTURE_LOGS / "overlap_cap_a", jobs=1))
    assert doc["verdict"]["status"] == "agree"
    assert doc["verdict"]["text"] == (
        "OK: all 2 ranks agree on all 2 graphs; NOTHING MERGED: pre-bucketing merged no collective "
        "in any graph (cap 1.5 MB); see Bucketing did nothing"
    )
    # a run that merged some says nothing of it
    assert summary_document(load(FIXTURE_LOGS / "overlap_cap_b", jobs=1))["verdict"]["text"] == (
        "OK: all 2 ranks agree on all 2 graphs"
    )


def test_a_two_two_split_blames_no_one_and_its_tables_say_other_ranks(tmp_path):
    # ranks 1 and 3 both hold diverge_rank's rank 3 (two more layers; rank 1's copy relabelled)
    src = FIXTURE_LOGS / "diverge_rank"
    d = tmp_path / "tie"
    d.mkdir()
    for r in (0, 2, 3):
        shutil.copy(_rank_file(src, r), d)
    text = _rank_file(src, 3).read_bytes().replace(b'"rank": 3,', b'"rank": 1,')
    (d / "dedicated_log_torch_trace_rank_1_x.log").write_bytes(text)
    doc = summary_document(load(d, jobs=1))
    assert doc["verdict"]["text"] == "DIVERGE: ranks split into 2 groups with no majority (0,2; 1,3) on 2 graphs"
    out = render_text(doc, "table")
    assert "majority" not in out.split("Rank consensus\n", 1)[1].split("\n\n", 2)[1].splitlines()[0]
    assert (
        "compile id    graph     ranks    at    value                      other ranks    other value\n"
    ) in out
    assert "(tie: no majority)" not in out


def test_a_rankless_log_with_compiles_but_no_collective_is_a_log(tmp_path):
    # like tlparse's simple.log: a single-process compile, no rank, no bucketing artifact
    from click.testing import CliRunner

    from tracekit.commands.summarize_cmd import summarize

    keep = ('"dynamo_start"', '"compilation_metrics"', '"str"', '"dynamo_output_graph"')
    out, kept = [], False
    for ln in _rank_file(FIXTURE_LOGS / "spmd_auto", 0).read_text().split("\n"):
        if not ln.startswith("\t"):
            kept = any(f"] {{{k}" in ln for k in keep)
        if kept:
            out.append(ln.replace('"rank": 0, ', "").replace(', "rank": 0', ""))
    log = tmp_path / "simple.log"
    log.write_text("\n".join(out) + "\n")
    res = CliRunner().invoke(summarize, [str(log)])
    assert res.exit_code == 0, res.output
    assert res.output.startswith("Verdict\n=======\nNO DATA: no bucketing outcome in the logs\n")
    assert "- no bucketing recorded: 1 compile was logged, but no graph reached the post-grad passes' log" in res.output


def test_a_gz_cut_short_is_said_cut_once(tmp_path):
    # a .gz whose stream stops (bad_gzip) inside the backward: said cut, and never also
    # cut_between_entries
    d = _copy("spmd_auto", tmp_path)
    f = _rank_file(d, 3)
    data = f.read_bytes()
    at = data.index(SCHEDULE, data.index(SCHEDULE) + 1)
    whole = gzip.compress(data[: data.rfind(b"\n", 0, at) + 1] + data[data.rfind(b"\n", 0, at) + 1 :])
    (d / (f.name + ".gz")).write_bytes(whole[: len(whole) * 9 // 10])
    f.unlink()
    doc = summary_document(load(d, jobs=1))
    assert doc["world"]["cut"] == "3"
    assert doc["diagnostics"]["counts"] == {"bad_gzip": 1, "truncated_entry": 1}
    assert doc["verdict"]["status"] == "incomplete"
