"""``tracekit report``: the HTML page of a summary document, parsed with html.parser, on the real
fixture runs, a 1,024-rank run built from them, a ``tracekit.summary/2`` document, hostile
strings; and the command end to end (exit statuses, saved JSON input, no torch import)."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys

from click.testing import CliRunner
from conftest import FIXTURE_LOGS, ROOT
from htmltree import parse
from report_docs import distinct_run, fixture_doc, v2_doc, wide_doc

from tracekit.cli import main
from tracekit.render.html import render_html
from tracekit.render.summary_document import summary_document

SECTIONS = ["verdict", "world", "groups", "divergence", "sizes", "did-nothing", "diagnostics"]
DIVERGE = str(FIXTURE_LOGS / "diverge_rank")


def tk(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def assert_self_contained(page: str) -> None:
    """Nothing the page could fetch: no src, no link, no URL; one script, ours; a CSP that
    forbids every fetch."""
    tree = parse(page)
    assert not tree.find_all("link") and not tree.find_all(src=True)
    assert [e.attrs["href"][:1] for e in tree.find_all(href=True)] == ["#"] * len(SECTIONS)
    assert len(tree.find_all("script")) == 1
    assert not re.search(r"https?:|//[a-z]|url\(", page, re.I)
    csp = tree.find("meta", http_equiv="Content-Security-Policy").attrs["content"]
    assert csp.startswith("default-src 'none';")


def test_diverge_rank_page():
    page = render_html(fixture_doc("diverge_rank"))
    tree = parse(page)
    assert [s.attrs["id"] for s in tree.find_all("section")] == SECTIONS
    verdict = tree.find("section", id="verdict")
    assert verdict.attrs["data-status"] == "diverge"
    assert verdict.find("p", class_="line").text == "DIVERGE: 1 of 4 ranks (3) differ from the majority on 2 graphs"
    div = tree.find("section", id="divergence")
    assert div.attrs["data-differing-ranks"] == "3"
    rows = div.find_all("tr", data_where="divergence")
    assert [r.attrs["data-ranks"] for r in rows] == ["3"] * 9  # 7 bucketing + 2 final (schedule)
    assert [c.text for c in rows[0].find_all("td")] == [
        "0/0", "forward", "all_gather", "3", "10->1", "0-2", "8->1", "#8 AG (before): 0.004 vs - MB"]
    groups = tree.find_all("div", class_="group")
    assert [(g.attrs["data-ranks"], g.attrs["data-colour"]) for g in groups] == [("0-2", "c0"), ("3", "c1")]
    assert [g.find("h3").text for g in groups] == ["group 1: 3 ranks 0-2, 2 graphs",
                                                  "group 2: 1 rank 3, 2 graphs"]
    odd_backward = groups[1].find_all("tr")[2]
    assert [c.text for c in odd_backward.find_all("td")] == [
        "0/0", "backward", "0", "4", "1", "27.4", "7->1", "10->1", "0->0", "0.56", "0.559", "AG 1 RS 1 AR 0"]
    # one chart per group and graph; one bar per recorded collective, before and after
    charts = tree.find("section", id="sizes").find_all("svg")
    assert [c.attrs["aria-label"] for c in charts] == [
        "group 1 (ranks 0-2): 0/0 forward", "group 1 (ranks 0-2): 0/0 backward",
        "group 2 (ranks 3): 0/0 forward", "group 2 (ranks 3): 0/0 backward"]
    assert [len(c.find_all("rect")) for c in charts] == [8 + 1, 13 + 2, 10 + 1, 17 + 2]
    assert charts[2].find_all("rect")[-1].find("title").text == (
        "after #0: AG 0.288 MB all_gather_into_tensor_out")
    assert tree.find("section", id="did-nothing").find("p").text.startswith("none:")
    assert tree.find("section", id="diagnostics").find("p").text == "no bad input"
    world = tree.find("section", id="world")
    assert [d.text for d in world.find_all("dd")] == ["4", "4 (0-3)", "none", "none"]
    assert world.find("div", id="rank-map").attrs["data-last"] == "3"
    assert_self_contained(page)
    assert 15_000 < len(page.encode()) < 40_000


def _two_two_split(tmp_path):
    """diverge_rank with rank 1 replaced by rank 3's log relabelled: ranks 0,2 against 1,3."""
    import shutil

    from tracekit.read.reader import load

    src = FIXTURE_LOGS / "diverge_rank"
    d = tmp_path / "tie"
    d.mkdir()
    for r in (0, 2, 3):
        shutil.copy(next(src.glob(f"*_rank_{r}_*.log")), d)
    text = next(src.glob("*_rank_3_*.log")).read_bytes().replace(b'"rank": 3,', b'"rank": 1,')
    (d / "dedicated_log_torch_trace_rank_1_x.log").write_bytes(text)
    return summary_document(load(d, jobs=1))


def test_a_two_two_split_page_says_other_ranks_as_the_text_does(tmp_path):
    doc = _two_two_split(tmp_path)
    assert doc["verdict"]["text"] == "DIVERGE: ranks split into 2 groups with no majority (0,2; 1,3) on 2 graphs"
    div = parse(render_html(doc)).find("section", id="divergence")
    tables = div.find_all("table")
    assert [[th.text for th in t.find_all("th")] for t in tables] == [
        ["compile id", "graph", "field", "ranks", "value", "other ranks", "other value", "first difference"],
        ["compile id", "graph", "position", "ranks", "collective", "other ranks", "other collective"],
    ]
    rows = div.find_all("tr", data_where="divergence")
    assert [c.text for c in rows[0].find_all("td")] == [
        "0/0", "forward", "all_gather", "1,3", "10->1", "0,2", "8->1", "#8 AG (before): 0.004 vs - MB"]
    assert "majority" not in div.text.replace("with no majority", "")
    # a 3-1 split keeps its majority columns
    page = parse(render_html(fixture_doc("diverge_rank"))).find("section", id="divergence")
    assert [th.text for th in page.find_all("table")[0].find_all("th")][5:7] == ["majority ranks", "majority value"]


def test_spmd_auto_page_agrees():
    page = render_html(fixture_doc("spmd_auto"))
    tree = parse(page)
    div = tree.find("section", id="divergence")
    assert div.attrs["data-differing-ranks"] == ""
    assert div.find("p").text == "none: every rank agrees with the majority"
    verdict = tree.find("section", id="verdict")
    assert (verdict.attrs["data-status"], verdict.find("p", class_="line").text) == (
        "agree", "OK: all 4 ranks agree on all 2 graphs")
    assert [g.find("h3").text for g in tree.find_all("div", class_="group")] == [
        "group 1: 4 ranks 0-3, 2 graphs"]
    assert len(tree.find_all("svg")) == 2
    assert_self_contained(page)
    assert 10_000 < len(page.encode()) < 30_000


def test_1024_ranks_print_ranges_and_stay_small():
    page = render_html(wide_doc())
    tree = parse(page)
    assert tree.find("section", id="divergence").attrs["data-differing-ranks"] == "300,777"
    row = tree.find_all("tr", data_where="divergence")[0]
    assert [c.text for c in row.find_all("td")][3:6] == ["300,777", "10->1", "0-299,301-776,778-1023"]
    assert [g.find("h3").text for g in tree.find_all("div", class_="group")] == [
        "group 1: 1022 ranks 0-299,301-776,778-1023, 2 graphs", "group 2: 2 ranks 300,777, 2 graphs"]
    assert [d.text for d in tree.find("section", id="world").find_all("dd")][1] == "1024 (0-1023)"
    assert tree.find("div", id="rank-map").attrs["data-last"] == "1023"
    assert len(page.encode()) < 100_000

    # every fourth rank differs: 256 ranges, still one line each
    page = render_html(wide_doc(odd=frozenset(range(3, 1024, 4))))
    differing = parse(page).find("section", id="divergence").attrs["data-differing-ranks"]
    assert differing == ",".join(str(r) for r in range(3, 1024, 4))
    assert len(page.encode()) < 300_000


def test_1024_distinct_ranks_under_3_mb():
    """The worst case: every rank compiled something else (its own cap), 1,024 rank groups."""
    page = render_html(summary_document(distinct_run()))
    tree = parse(page)
    assert len(tree.find_all("div", class_="group")) == 64
    rest = tree.find_all("tr", class_="group")
    assert len(rest) == 1024 - 64
    assert [c.text for c in rest[-1].find_all("td")] == ["1024", "1", "1023"]
    assert rest[-1].attrs["data-where"] == "group 1024"
    # 2 graphs * 1,023 caps off the majority's, + the 9 differences of ranks 300 and 777
    assert len(tree.find_all("tr", data_where="divergence")) == 400
    assert "first 400 of 2055 shown" in tree.find("section", id="divergence").text
    assert len(tree.find("section", id="sizes").find_all("svg")) == 6 * 2
    assert len(page.encode()) < 3_000_000


def test_summary_v2_keys():
    page = render_html(v2_doc())
    tree = parse(page)
    verdict = tree.find("section", id="verdict")
    assert (verdict.attrs["data-status"], verdict.find("p", class_="line").text) == (
        "incomplete", "ranks 4-7 missing; rank 3 differs")
    world = tree.find("section", id="world")
    assert [d.text for d in world.find_all("dd")] == ["8", "4 (0-3)", "4-7", "none"]
    assert world.find("div", id="rank-map").attrs == {
        "id": "rank-map", "data-last": "7", "data-missing": "4-7",
        "title": "one cell per rank, coloured by rank group; click to look a rank up"}
    groups = tree.find_all("div", class_="group")
    assert [g.attrs["data-ranks"] for g in groups] == ["0-2", "3"]
    assert groups[1].find_all("tr")[2].find_all("td")[-1].text == "AG 1 RS 1 AR 0"
    finals = groups[1].find_all("details")
    assert [d.find("summary").text for d in finals] == [
        "final schedule of 0/0 forward: 1 collective", "final schedule of 0/0 backward: 2 collectives"]
    assert [c.text for c in finals[1].find_all("tr")[2].find_all("td")] == [
        "1", "RS", "0", "4", "301,990 B", "0.0116"]  # 0.288 MB, rank 3's reduce-scatter bucket
    div = tree.find("section", id="divergence")
    assert div.attrs["data-differing-ranks"] == "3"
    assert [h.text for h in div.find_all("h3")] == ["Bucketing outcome", "Final schedule", "Compilation"]
    sched = div.find("tr", data_where="schedule divergence")
    assert [c.text for c in sched.find_all("td")] == [
        "0/0", "backward", "0", "3", "AG group 0 284,164 B", "0-2", "AG group 0 279,970 B"]
    comp = div.find("tr", data_where="compile divergence")
    assert [c.text for c in comp.find_all("td")] == ["0/0", "forward", "n_layers", "3", "10", "0-2", "8"]
    dn = tree.find("section", id="did-nothing").find("tr", data_where="did nothing")
    cmd = f"tracekit explain {DIVERGE} --rank 0 --graph 0/0:1"
    assert [c.text for c in dn.find_all("td")] == ["0/0", "backward", "AG 5->5", "27.4", "0-2",
                                                  cmd + "copy"]
    assert dn.find("button").attrs["data-copy"] == cmd
    assert tree.find("body").attrs["data-schema"] == "tracekit.summary/2"
    assert_self_contained(page)


def test_documents_without_ranks_or_groups_still_render():
    doc = fixture_doc("diverge_rank")
    for key in ("ranks", "groups", "world", "verdict"):  # a tracekit.summary/1-like document
        del doc[key]
    tree = parse(render_html(doc))
    assert "no per-rank graphs" in tree.find("section", id="groups").text
    assert tree.find("section", id="sizes").find_all("p")[-1].text == "this document has no per-rank graphs"
    assert [d.text for d in tree.find("section", id="world").find_all("dd")] == ["unknown", "4", "unknown"]
    assert tree.find("section", id="divergence").attrs["data-differing-ranks"] == "3"
    empty = parse(render_html({"schema": "tracekit.summary/1"}))
    verdict = empty.find("section", id="verdict")
    assert (verdict.attrs["data-status"], verdict.find("p", class_="line").text) == (
        "no_data", "NO DATA: no bucketing outcome in the logs")  # summarize's verdict, its words


def test_a_document_without_its_verdict_gives_the_same_page():
    """The page gives a document without a verdict (tracekit.summary/1) the one verdict
    summarize would (tracekit.analyze.documents.document_verdict): the same page, byte for byte."""
    for name in ("diverge_rank", "hsdp_diverge"):
        doc = fixture_doc(name)
        bare = {k: v for k, v in doc.items() if k != "verdict"}
        assert render_html(bare) == render_html(doc)


def test_log_strings_are_escaped():
    evil = '"><script>alert(1)</script><img src=x onerror=alert(2)>'
    doc = copy.deepcopy(fixture_doc("diverge_rank"))
    del doc["groups"]  # the page groups the per-rank entries edited below
    doc["paths"] = [evil]
    g = doc["ranks"][3]["graphs"][0]
    g["compile_id"] = evil
    g["fsdp_groups"] = [evil]
    g["sizes_mb"]["after"][0]["name"] = evil
    doc["divergence"][0]["compile_id"] = evil
    doc["diagnostics"] = {"counts": {evil: 1}, "examples": [
        {"kind": evil, "file": evil, "line": 1, "detail": evil}]}
    doc["notes"] = [evil]
    page = render_html(doc)
    tree = parse(page)
    assert len(tree.find_all("script")) == 1 and not tree.find_all("img")
    assert not any(k.startswith("on") for e in tree.iter() for k in e.attrs)
    assert tree.find("p", class_="paths mono").text == evil
    assert tree.find_all("tr", data_where="divergence")[0].find_all("td")[0].text == evil
    assert tree.find("section", id="diagnostics").find_all("td")[-1].text == evil
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 8


def test_report_command(tmp_path):
    out = tmp_path / "report.html"
    r = tk("report", DIVERGE, "-o", str(out), "--jobs", "1")
    assert (r.exit_code, r.output) == (0, "")
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>\n")
    assert parse(page).find("section", id="divergence").attrs["data-differing-ranks"] == "3"
    # from a saved summary: the same page
    saved = tmp_path / "s.json"
    assert tk("summarize", DIVERGE, "--format", "json", "-o", str(saved)).exit_code == 0
    r = tk("report", str(saved))  # stdout: not a terminal here
    assert r.exit_code == 0 and r.stdout == page
    # a summary/2 document saved as JSON
    v2 = tmp_path / "v2.json"
    v2.write_text(json.dumps(v2_doc()))
    r = tk("report", str(v2))
    assert r.exit_code == 0 and 'data-schema="tracekit.summary/2"' in r.stdout


def test_report_command_errors(tmp_path):
    r = tk("report", DIVERGE, "-o", str(tmp_path / "no" / "such" / "report.html"))
    assert r.exit_code == 2
    assert r.stderr == f"tracekit report: cannot write {tmp_path}/no/such/report.html: " \
                       f"no directory {tmp_path}/no/such\n"
    other = tmp_path / "other.json"
    other.write_text('{"schema": "tracekit.diff/1"}')
    r = tk("report", str(other), "-o", str(tmp_path / "r.html"))
    assert r.exit_code == 2 and r.stderr.count("\n") == 1
    assert "is not a tracekit summary" in r.stderr
    saved = tmp_path / "s.json"
    saved.write_text(json.dumps(fixture_doc("spmd_auto")))
    r = tk("report", str(saved), DIVERGE, "-o", str(tmp_path / "r.html"))
    assert (r.exit_code, r.stderr) == (2, "tracekit report: a saved JSON summary must be the only PATH\n")
    assert tk("report", str(tmp_path / "missing"), "-o", str(tmp_path / "r.html")).exit_code == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    r = tk("report", str(empty), "-o", str(tmp_path / "r.html"))
    assert (r.exit_code, r.stderr) == (2, "tracekit report: no log could be read\n")
    verdict = parse((tmp_path / "r.html").read_text()).find("section", id="verdict")
    assert verdict.attrs["data-status"] == "no_data"


def test_report_never_imports_torch(tmp_path):
    out = tmp_path / "r.html"
    code = ("import sys\nfrom tracekit.cli import main\n"
            f"sys.argv = ['tracekit', 'report', {DIVERGE!r}, '-o', {str(out)!r}, '-j', '1']\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert e.code in (0, None), e.code\n"
            "print('TORCH' if 'torch' in sys.modules else 'NO TORCH')\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=60, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert p.stdout == "NO TORCH\n", p.stderr
    assert out.stat().st_size > 15_000


def test_huge_rank_numbers_are_not_expanded():
    """A saved summary is untrusted: rank sets naming a billion ranks render as they are."""
    doc = copy.deepcopy(fixture_doc("diverge_rank"))
    doc["ranks"][3]["rank"] = 999_999_999
    doc["divergence"][0]["ranks"] = "0-999999999"
    doc["world"] = {"expected": 10**9, "found": 4, "ranks": "0-2,999999999", "missing": "3-999999998"}
    tree = parse(render_html(doc))
    assert tree.find_all("tr", data_where="divergence")[0].find_all("td")[3].text == "0-999999999"
    assert [d.text for d in tree.find("section", id="world").find_all("dd")] == [
        "1000000000", "4 (0-2,999999999)", "3-999999998"]
    assert not tree.find_all("div", id="rank-map")
    assert tree.find("section", id="divergence").attrs["data-differing-ranks"] == "3"
    del doc["world"]
    world = parse(render_html(doc)).find("section", id="world")
    assert [d.text for d in world.find_all("dd")] == ["unknown", "4 (0-2,999999999)", "unknown"]


def test_no_html_into_a_terminal(tmp_path):
    import os
    import pty

    leader, follower = pty.openpty()
    try:
        p = subprocess.run([sys.executable, "-m", "tracekit", "report", DIVERGE], cwd=tmp_path,
                           stdout=follower, stderr=subprocess.PIPE, text=True, timeout=60,
                           env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    finally:
        os.close(follower)
        os.close(leader)
    assert (p.returncode, p.stderr) == (
        2, "tracekit report: the page is HTML: give -o FILE (or redirect stdout)\n")


def test_hsdp_page_shows_the_mesh_and_the_all_reduces_never_bucketed():
    """A 2-D mesh (hsdp: replicate 2 x shard 2): the World section's Mesh line and its groups
    by role, the outcome rows' shard groups, and the replicate all-reduces under Bucketing did
    nothing, with their bytes and est ms."""
    tree = parse(render_html(fixture_doc("hsdp")))
    world = tree.find("section", id="world")
    assert world.find("p", id="mesh").text == (
        "Mesh: world 4 = replicate 2 × shard 2; replicate groups 1 (0,2) | 2 (1,3); shard groups 3 (0-1) | 4 (2-3)")
    rows = [[c.text for c in r.find_all("td")] for r in world.find("table").find_all("tr")[1:]]
    assert [r[:4] for r in rows] == [["replicate", "1", "2", "0,2"], ["replicate", "2", "2", "1,3"],
                                     ["shard", "3", "2", "0-1"], ["shard", "4", "2", "2-3"]]
    assert rows[0][4] == "all-reduces of gradients in backward graphs only"
    group = tree.find("div", class_="group")
    assert [c.text for c in group.find_all("tr")[1].find_all("td")][:3] == ["0/0", "forward", "shard groups 3 | 4"]
    dn = tree.find("section", id="did-nothing")
    (row,) = dn.find_all("tr", data_where="mesh not pre-bucketed")
    assert row.attrs["data-ranks"] == "0-3"
    assert [c.text for c in row.find_all("td")][:7] == [
        "0/0", "backward", "replicate 1 | 2", "all_reduce 8->8", "148,552 B", "0.0658", "0-3"]


def test_one_d_page_has_no_mesh():
    tree = parse(render_html(fixture_doc("diverge_rank")))
    assert tree.find_all("p", id="mesh") == [] and tree.find_all("h3", id="mesh-not-prebucketed") == []
    assert tree.find_all("h3", id="mesh-run-once") == []


def test_fsdp_tp_overlap_page_shows_the_tp_all_reduces_that_run_once():
    """FSDP x TP (fsdp_tp_overlap): one all-reduce of activations per graph on the tp groups is
    no finding, but the report says it under Bucketing did nothing, with bytes and est ms."""
    dn = parse(render_html(fixture_doc("fsdp_tp_overlap"))).find("section", id="did-nothing")
    assert dn.find("h3", id="mesh-run-once").text == "On the mesh, one of a kind (no finding)"
    assert dn.find("p").text == "none: every graph with more than one collective of a type merged some"
    rows = dn.find_all("tr", data_where="mesh run once")
    assert [[c.text for c in r.find_all("td")][:7] for r in rows] == [
        ["0/0", "forward", "tp 3 | 4", "all_reduce 1", "524,288 B", "0.0196", "0-3"],
        ["0/0", "backward", "tp 3 | 4", "all_reduce 1", "524,288 B", "0.0196", "0-3"],
    ]
    assert dn.find_all("h3", id="mesh-not-prebucketed") == []


def test_the_world_accounts_for_every_file_as_the_text_does(tmp_path):
    """spmd_auto with a byte-identical copy of rank 2's log, a README, a 0-byte rank_5 file, a
    subdirectory holding rank 0's log and rank 3's log ending after its forward: the page's
    World lists them as the text's World line does (it showed expected, found, missing and
    duplicated only)."""
    import shutil

    d = tmp_path / "run"
    shutil.copytree(FIXTURE_LOGS / "spmd_auto", d)
    (r2,) = d.glob("*_rank_2_*.log")
    shutil.copy(r2, d / "copy_of_rank2.log")
    (d / "README.txt").write_text("from the cluster\n")
    (d / "dedicated_log_torch_trace_rank_5_x.log").write_bytes(b"")
    (d / "sub").mkdir()
    (r0,) = d.glob("*_rank_0_*.log")
    shutil.copy(r0, d / "sub" / r0.name)
    (r3,) = d.glob("*_rank_3_*.log")
    data = r3.read_bytes()
    r3.write_bytes(data[: data.index(b"\n", data.index(b'{"compilation_metrics": ')) + 1])
    out = tmp_path / "r.html"
    assert tk("report", str(d), "-o", str(out)).exit_code == 0
    world = parse(out.read_text()).find("section", id="world")
    rows = dict(zip([e.text for e in world.find_all("dt")], [" ".join(e.text.split()) for e in world.find_all("dd")]))
    assert rows == {
        "expected": "4", "found": "4 (0-3)", "missing": "none", "duplicated": "none",
        "cut short": "3 (see Diagnostics)",
        "not a rank": "1: dedicated_log_torch_trace_rank_5_x.log (see Diagnostics)",
        "copies read once": "1: copy_of_rank2.log",
        "not a log": "1: README.txt",
        "not read (subdirectories holding logs)": "1: sub",
    }  # fmt: skip
    text = tk("summarize", str(d)).stdout
    assert (
        "World: 4 ranks found (0-3) of 4 expected; missing: none; seen in two runs: none; not a rank: 1 file "
        "(see Diagnostics); copies read once: 1 file; not a log: 1 file (README.txt); not read: 1 subdirectory "
        "holding logs (sub: pass it); cut short: 3 (see Diagnostics)"
    ) in text
