"""Every "see X" in summarize's text leads to a section X of the same output that shows the
cause: present, not empty, not its "nothing to report" line ("Diagnostics: no bad input").
Checked on every fixture and on fixture logs edited at test time the way real directories get
messy (a log cut mid-entry or at a line end, an empty rank file, a file that is no log, a
renamed log, a rank's log removed, a second run's log beside the first)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from conftest import FIXTURE_LOGS
from tracekit.render.summary_document import summary_document
from tracekit.render.summary_text import render_text
from tracekit.read.reader import load

#: The sections a "see" can name, as their headings start (a heading may say more in brackets).
TITLES = (
    "Rank consensus",
    "Schedule consensus",
    "Compile ids and cache consensus",
    "Bucketing did nothing",
    "Compiled regions",
    "Diagnostics",
    "Notes",
    "World",
)
#: One-line sections that say there is nothing to see.
NOTHING = re.compile(r"^(no bad input|none|all \d+ ranks (agree|run the same|compiled the same)|one rank)")
_HEADING = re.compile(r"^(?P<title>[^\n]+)\n(?P<rule>=+)\n", re.M)
_WHY = re.compile(r"^Why: see (?P<list>.+) below$", re.M)
_ROWS = re.compile(r"^(?P<title>.+?) \((?P<n>\d+) rows?\)$")


def _sections(text: str) -> dict[str, str]:
    """Section title -> its body: headed sections (title, a rule as long) up to the next heading,
    and one-line ``Title: text`` sections."""
    out: dict[str, str] = {}
    heads = [m for m in _HEADING.finditer(text) if len(m["rule"]) == len(m["title"])]
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        out[m["title"]] = text[m.end() : end]
    for title in TITLES:
        for m in re.finditer(rf"^{re.escape(title)}: (.+)$", text, re.M):
            out.setdefault(title, "one line: " + m[1])
    return out


def _find(sections: dict[str, str], title: str) -> str | None:
    for head, body in sections.items():
        if head == title or head.startswith(title + " ("):
            return body
    return None


def _references(text: str) -> list[tuple[str, int | None]]:
    """Every section a "see" names: those of the "Why: see A, B (2 rows) below" line, with the
    rows it promises, and every other "see TITLE"."""
    refs: list[tuple[str, int | None]] = []
    for m in _WHY.finditer(text):
        for item in m["list"].split(", "):
            r = _ROWS.match(item)
            refs.append((r["title"], int(r["n"])) if r else (item, None))
    for title in TITLES:
        refs += [(title, None) for _ in re.finditer(rf"\bsee {re.escape(title)}\b", text)]
    return refs


def check_every_see(text: str) -> int:
    """Assert that each section a "see" names shows something; the number of references."""
    sections = _sections(text)
    refs = _references(text)
    for title, rows in refs:
        body = _find(sections, title)
        assert body is not None, f"'see {title}': no such section in\n{text}"
        if body.startswith("one line: "):
            line = body.removeprefix("one line: ")
            assert not NOTHING.match(line), f"'see {title}' leads to '{title}: {line}'"
            assert rows is None, f"'see {title} ({rows} rows)' leads to one line: {line}"
        else:
            assert body.strip(), f"'see {title}': the section is empty"
        if rows is not None:  # the rows promised are the table's: after its rule of dashes
            lines = body.splitlines()
            rule = next(i for i, ln in enumerate(lines) if ln.strip() and set(ln) <= {"-", " "})
            data = []
            for ln in lines[rule + 1 :]:
                if not ln.strip():
                    break
                data.append(ln)
            assert len(data) == rows, f"'see {title} ({rows} rows)': {len(data)} rows in\n{body}"
    return len(refs)


def _summary_text(d: Path) -> str:
    return render_text(summary_document(load(d, jobs=1)), "table")


@pytest.mark.parametrize("scenario", sorted(p.name for p in FIXTURE_LOGS.iterdir() if p.is_dir()))
def test_every_see_in_a_fixture_summary_shows_its_cause(scenario):
    check_every_see(_summary_text(FIXTURE_LOGS / scenario))


def _rank_file(d: Path, rank: int) -> Path:
    (f,) = d.glob(f"*_rank_{rank}_*.log")
    return f


SCHEDULE = b'"name": "inductor_collective_schedule"'


def _cut_mid_entry(d: Path) -> None:
    f = _rank_file(d, 3)
    data = f.read_bytes()
    f.write_bytes(data[: data.index(SCHEDULE, data.index(SCHEDULE) + 1)])


def _cut_at_line_end(d: Path) -> None:
    f = _rank_file(d, 3)
    data = f.read_bytes()
    at = data.index(SCHEDULE, data.index(SCHEDULE) + 1)
    f.write_bytes(data[: data.rfind(b"\n", 0, at) + 1])


def _empty_rank_file(d: Path) -> None:
    (d / "dedicated_log_torch_trace_rank_5_x.log").write_bytes(b"")


def _blank_rank_file(d: Path) -> None:
    (d / "dedicated_log_torch_trace_rank_5_x.log").write_bytes(b"\n\n")


def _not_a_log(d: Path) -> None:
    (d / "notes.log").write_text("not a log\n")


def _renamed(d: Path) -> None:
    f = _rank_file(d, 3)
    f.rename(d / "node2.log")


def _rank_removed(d: Path) -> None:
    _rank_file(d, 2).unlink()


def _another_run(d: Path) -> None:
    (src,) = (FIXTURE_LOGS / "diverge_rank").glob("*_rank_1_*.log")
    shutil.copy(src, d / "dedicated_log_torch_trace_rank_1_other.log")


def _gz_copy(d: Path) -> None:
    import gzip

    f = _rank_file(d, 0)
    (d / (f.name + ".gz")).write_bytes(gzip.compress(f.read_bytes()))


def _three_of_four_end_early(d: Path) -> None:
    for r in (1, 2, 3):
        f = _rank_file(d, r)
        data = f.read_bytes()
        f.write_bytes(data[: data.index(b"\n", data.index(b'{"compilation_metrics": ')) + 1])


def _cut_gz_copy(d: Path) -> None:
    import gzip

    f = _rank_file(d, 0)
    (d / "rank0_backup.log.gz").write_bytes(gzip.compress(f.read_bytes()[:300_000]))


def _subdirectory(d: Path) -> None:
    (d / "old_run").mkdir()
    shutil.copy(_rank_file(d, 0), d / "old_run" / "rank0.log")


EDITS = {
    "cut mid-entry": ("spmd_auto", _cut_mid_entry, ["World", "Diagnostics"]),
    "cut at a line end": ("spmd_auto", _cut_at_line_end, ["World", "Diagnostics"]),
    "diverge, cut": ("diverge_rank", _cut_mid_entry, ["Rank consensus", "Diagnostics"]),
    "empty rank file": ("spmd_auto", _empty_rank_file, ["World", "Diagnostics"]),
    "blank rank file": ("spmd_auto", _blank_rank_file, ["World", "Diagnostics"]),
    "not a log": ("spmd_auto", _not_a_log, []),
    "renamed": ("diverge_rank", _renamed, ["Rank consensus"]),
    "rank removed": ("spmd_auto", _rank_removed, ["World"]),
    "another run": ("spmd_auto", _another_run, ["World"]),
    "gz copy": ("spmd_auto", _gz_copy, []),
    "3 of 4 end after a compile": ("spmd_auto", _three_of_four_end_early, ["World", "Diagnostics"]),
    "cut gz copy": ("spmd_auto", _cut_gz_copy, []),
    "subdirectory": ("spmd_auto", _subdirectory, []),
}


@pytest.mark.parametrize("name", list(EDITS))
def test_every_see_in_an_edited_run_shows_its_cause(name, tmp_path):
    scenario, edit, named = EDITS[name]
    d = tmp_path / scenario
    shutil.copytree(FIXTURE_LOGS / scenario, d)
    edit(d)
    text = _summary_text(d)
    check_every_see(text)
    # the sections the edit's verdict must point at are among those named
    seen = {t for t, _ in _references(text)}
    assert set(named) <= seen, (name, seen, text)


def test_the_check_fails_on_a_see_that_leads_to_nothing():
    # the checker itself: a "see Diagnostics" above "Diagnostics: no bad input" fails
    text = "Verdict\n=======\nINCOMPLETE: x\nWhy: see Diagnostics below\n\nDiagnostics: no bad input\n"
    with pytest.raises(AssertionError, match="no bad input"):
        check_every_see(text)
    with pytest.raises(AssertionError, match="no such section"):
        check_every_see("Verdict\n=======\nDIVERGE\nWhy: see Rank consensus (2 rows) below\n")
