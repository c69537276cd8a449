"""Settings one job shares that differ between the ranks read (issue 50, items 17 and 19):
two jobs written into one directory, ranks logged by two torch releases. Directories made at
test time from real fixture logs."""

from __future__ import annotations

import shutil

from conftest import FIXTURE_LOGS, plain_copytree, rank_log
from logtext import edit_payloads
from tracekit.render.summary_document import summary_document
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


def test_a_rank_logged_by_another_torch_release_is_named(tmp_path):
    # saved_params's ranks 0-2 (torch 2.13.0) beside rank 3 of saved_params_torch2.14 (2.14.1):
    # they agree, and the verdict names the release each rank's log was written by
    d = _mixed(tmp_path, ("saved_params", (0, 1, 2)), ("saved_params_torch2.14", (3,)))
    doc = summary_document(load(d, jobs=1))
    assert doc["verdict"]["text"] == (
        "OK: all 4 ranks agree on all 2 graphs; the ranks were logged by two torch releases (ranks 0-2 by torch "
        "2.13.0+cpu; rank 3 by torch 2.14.1+cu130): one job runs one torch, and a release changes what inductor "
        "emits, so a difference between them may be the release's; FINDING: 1 graph never pre-bucketed (0/0 "
        "backward on ranks 0-3: 8 reduce-scatters, 298,144 B, 0.0704 ms estimated, run one by one); see Bucketing "
        "did nothing"
    )


def test_a_diverging_rank_on_another_release_is_said_so(tmp_path):
    # diverge_rank, its rank 3's log edited to say torch 2.15.0 wrote it: the DIVERGE (it read
    # with no hint of the release) names both releases
    d = plain_copytree("diverge_rank", tmp_path / "diverge_rank")
    (f,) = d.glob("*_rank_3_*.log")
    f.write_text(edit_payloads(f.read_text(), "torch_version", lambda t: t.replace("2.13.0+cpu", "2.15.0+cu132")))
    doc = summary_document(load(d, jobs=1))
    assert load(d, jobs=1).diagnostics.total == 0
    assert doc["verdict"]["text"] == (
        "DIVERGE: 1 of 4 ranks (3) differ from the majority on 2 graphs; the ranks were logged by two torch releases "
        "(ranks 0-2 by torch 2.13.0+cpu; rank 3 by torch 2.15.0+cu132): one job runs one torch, and a release "
        "changes what inductor emits, so a difference between them may be the release's"
    )


def test_diff_names_a_release_change():
    # overlap_cap_a (2.13.0) against the same model logged by 2.15.0: the note names the change
    from tracekit.analyze.diff import diff_runs

    d = diff_runs(load(FIXTURE_LOGS / "overlap_cap_a", jobs=1), load(FIXTURE_LOGS / "overlap_cap_a_torch2.15", jobs=1))
    assert d.to_dict()["notes"][0] == (
        "torch release changed: 2.13.0+cpu in A, 2.15.0+cu132 in B on ranks 0-1; a release changes what inductor "
        "emits (its order of collectives and waits, its buckets), so what differs may be the release's"
    )
