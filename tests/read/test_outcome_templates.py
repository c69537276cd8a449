"""Outcome lines read once but for their FSDP groups (tracekit.read.parsers.OutcomeTemplates)
give exactly what parse_outcome gives: on every fixture's pre_bucketing_fsdp_collectives lines,
on the HSDP fixture's two shard groups (one template), and on lines edited at test time whose
groups or rest do not parse (the same error)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import log_text
from tests.logtext import artifacts
from tracekit.model import Counts
from tracekit.read.parsers import ArtifactError, OutcomeTemplates, parse_outcome

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
NAME = "pre_bucketing_fsdp_collectives"


def _outcomes(pattern: str) -> list[str]:
    """The outcome lines of the logs ``pattern`` names, plain or gzipped (spmd_auto_gz, a copy, left out)."""
    logs = sorted(p for p in LOGS.glob(pattern + "*") if p.parent.name != "spmd_auto_gz")
    return [p for log in logs for n, _src, p in artifacts(log_text(log)) if n == NAME]


def test_every_fixture_outcome_reads_as_parse_outcome_reads_it():
    lines = _outcomes("*/*.log")
    assert len(lines) == 112  # fsdp_tp2_overlap, then hsdp_stock: 4 ranks x 2 graphs more each
    templates = OutcomeTemplates()
    assert all(templates.parse(t) == parse_outcome(t) for t in lines)


def test_the_shard_groups_of_hsdp_share_their_outcome_but_for_the_groups():
    templates = OutcomeTemplates()
    (_, bwd0), (fwd2, bwd2) = _outcomes("hsdp/*_rank_0_*.log"), _outcomes("hsdp/*_rank_2_*.log")
    a, b = templates.parse(bwd0), templates.parse(bwd2)
    assert (a.fsdp_groups, b.fsdp_groups) == (["3"], ["4"])
    assert a.collectives is b.collectives  # the rest parsed once, shared
    assert b.collectives == {
        "all_gather": Counts(5, 1),
        "reduce_scatter": Counts(8, 1),
        "all_reduce": Counts(0, 0),
    }
    assert (b.group_size, b.n_nodes, b.bucket_cap_mb) == (2, 1, 10.4)
    assert templates.parse(fwd2).collectives["all_gather"] == Counts(8, 1)


@pytest.mark.parametrize(
    "groups",
    ["['a]b']", "[3]", "['3', ]", "[]", "['3', \"4\"]", "['3'"],
    ids=["bracket_in_name", "not_quoted", "trailing_comma", "empty", "two", "unclosed"],
)
def test_edited_groups_read_as_parse_outcome_reads_them(groups):
    line = _outcomes("hsdp/*_rank_0_*.log")[1].replace("['3']", groups)
    templates = OutcomeTemplates()
    templates.parse(_outcomes("hsdp/*_rank_2_*.log")[1])  # the template is known
    try:
        want = parse_outcome(line)
    except ArtifactError as e:
        with pytest.raises(ArtifactError) as got:
            templates.parse(line)
        assert str(got.value) == str(e)
    else:
        assert templates.parse(line) == want


def test_a_bad_rest_says_its_own_error():
    line = _outcomes("hsdp/*_rank_0_*.log")[1].replace("nNodes=1", "nNodes=one")
    with pytest.raises(ArtifactError) as got:
        OutcomeTemplates().parse(line)
    assert str(got.value) == f"not a pre_bucketing_fsdp_collectives line: {line[:80]!r}"
