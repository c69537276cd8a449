"""Settings one job shares that differ between the ranks read (issue 50, items 17 and 19):
two jobs written into one directory, ranks logged by two torch releases. Directories made at
test time from real fixture logs."""

from __future__ import annotations

import shutil

from conftest import FIXTURE_LOGS, plain_copytree, rank_log
from logtext import edit_payloads
from tracekit.analyze.summarize import summary_document
from tracekit.read.reader import load


def _mixed(tmp_path, *parts):
    """A directory holding the given ``(scenario, ranks)`` rank logs side by side."""
    d = tmp_path / "mixed"
    d.mkdir()
    for scenario, ranks in parts:
        for r in ranks:
            shutil.copy(rank_log(scenario, r), d)
    return d


def test_two_jobs_at_two_caps_in_one_directory_look_like_two_runs(tmp_path):
    # spmd_auto's ranks 0-1 (cap 27.4 MB) beside spmd_small_cap's ranks 2-3 (cap 0.1 MB): it
    # read "ranks split into 2 groups with no majority" and nothing more
    d = _mixed(tmp_path, ("spmd_auto", (0, 1)), ("spmd_small_cap", (2, 3)))
    doc = summary_document(load(d, jobs=1))
    assert doc["verdict"]["status"] == "diverge"
    assert doc["verdict"]["text"] == (
        "DIVERGE: ranks split into 2 groups with no majority (0-1; 2-3) on 2 graphs; these look like two runs, "
        "not one job: ranks 0-1 at cap 27.4 MB; ranks 2-3 at cap 0.1 MB (a job runs one bucket cap on every rank)"
    )


def test_one_job_whose_ranks_differ_is_not_said_two_runs():
    doc = summary_document(load(FIXTURE_LOGS / "diverge_rank", jobs=1))
    assert doc["verdict"]["text"] == "DIVERGE: 1 of 4 ranks (3) differ from the majority on 2 graphs"
