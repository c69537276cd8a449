"""A diagnostic's "where" is FILE:LINE, or the file alone when it points at no line (a 0-byte
file, a missing rank): never ``FILE:0`` (issue 39's known limit, plain text). Real fixture logs
edited at test time: spmd_auto with a 0-byte ``..._rank_5_x.log`` beside it, rank 3's log cut
in the middle of its backward's ``inductor_collective_schedule`` envelope, and rank 2's removed."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner
from conftest import FIXTURE_LOGS
from htmltree import parse

from tracekit.cli import main
from tracekit.render.cells import where_text

SCHEDULE = b'"name": "inductor_collective_schedule"'


def _messy_copy(tmp_path: Path) -> tuple[Path, Path, int, Path]:
    d = tmp_path / "spmd_auto"
    shutil.copytree(FIXTURE_LOGS / "spmd_auto", d)
    (rank2,) = d.glob("*_rank_2_*.log")
    rank2.unlink()
    (rank3,) = d.glob("*_rank_3_*.log")
    data = rank3.read_bytes()
    at = data.index(SCHEDULE, data.index(SCHEDULE) + 1)
    rank3.write_bytes(data[:at])
    empty = d / "dedicated_log_torch_trace_rank_5_x.log"
    empty.write_bytes(b"")
    return d, rank3, data.count(b"\n", 0, at) + 1, empty


def test_where_text():
    assert where_text("a.log", 49) == "a.log:49"
    assert where_text("a.log", 0) == "a.log" and where_text("a.log", None) == "a.log"
    assert where_text("", 0) == "-" and where_text(None, None) == "-"


def test_summarize_names_a_whole_file_without_a_line(tmp_path):
    d, rank3, line, empty = _messy_copy(tmp_path)
    r = CliRunner().invoke(main, ["summarize", str(d)])
    rows = r.stdout.split("\nkind", 2)[2].splitlines()[2:]
    assert [row.split("  ")[0].strip() for row in rows] == ["truncated_entry", "no_entries", "missing_rank"]
    where = [row[len("truncated_entry  ") :].split("  ")[0] for row in rows]
    assert where == [f"{rank3}:{line}", str(empty), "-"]
    assert line == 9361
    assert ":0 " not in r.stdout and ".log:0" not in r.stdout


def test_the_report_names_a_whole_file_without_a_line(tmp_path):
    d, rank3, line, empty = _messy_copy(tmp_path)
    out = tmp_path / "r.html"
    r = CliRunner().invoke(main, ["report", str(d), "-o", str(out)])
    assert r.exit_code == 0, r.output
    page = parse(out.read_text())
    cells = [
        c.text
        for t in page.find_all("table")
        if [h.text for h in t.find_all("th")] == ["kind", "where", "detail"]
        for c in t.find_all("td")[1::3]
    ]
    assert cells == [f"{rank3}:{line}", str(empty), "-"]
