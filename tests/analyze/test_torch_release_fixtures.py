"""Logs written by torch 2.14.1 and 2.15.0 (fixtures saved_params_torch2.14, overlap_cap_a_torch2.14,
overlap_cap_a_torch2.15, made by fixtures/generate.py in .ci/run's venvs), read without torch: each
records its release, and summarize gives the same outcomes as the torch 2.13 logs of the same model."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from conftest import FIXTURE_LOGS
from tracekit.commands.summarize_cmd import summarize
from tracekit.read.reader import load

TWINS = {
    "saved_params_torch2.14": ("saved_params", "2.14.1+cu130"),
    "overlap_cap_a_torch2.14": ("overlap_cap_a", "2.14.1+cu130"),
    "overlap_cap_a_torch2.15": ("overlap_cap_a", "2.15.0+cu132"),
}


def _outcomes(path):
    return [
        [(g.compile_id, {k: (c.before, c.after) for k, c in g.collectives.items()}, g.bucket_cap_mb) for g in r.graphs]
        for r in load(path).ranks
    ]


@pytest.mark.parametrize("scenario", sorted(TWINS))
def test_each_log_records_the_release_that_wrote_it(scenario):
    release = TWINS[scenario][1]
    assert {r.torch_version for r in load(FIXTURE_LOGS / scenario).ranks} == {release}


@pytest.mark.parametrize("scenario", sorted(TWINS))
def test_outcomes_equal_those_of_the_torch_2_13_logs(scenario):
    twin = TWINS[scenario][0]
    assert _outcomes(FIXTURE_LOGS / scenario) == _outcomes(FIXTURE_LOGS / twin)


@pytest.mark.parametrize("scenario", ["overlap_cap_a_torch2.14", "overlap_cap_a_torch2.15"])
def test_exact_outcomes_of_the_2_14_and_2_15_logs(scenario):
    ranks = _outcomes(FIXTURE_LOGS / scenario)
    assert ranks == [
        [
            ("0/0", {"all_gather": (6, 6), "reduce_scatter": (0, 0), "all_reduce": (0, 0)}, 1.5),
            ("0/0", {"all_gather": (5, 5), "reduce_scatter": (6, 6), "all_reduce": (0, 0)}, 1.5),
        ]
    ] * 2


def test_summarize_json_of_the_2_14_log_names_its_release():
    out = CliRunner().invoke(summarize, [str(FIXTURE_LOGS / "saved_params_torch2.14"), "--format", "json"])
    assert out.exit_code == 0, out.output
    text = json.dumps(json.loads(out.output))
    assert "2.14.1+cu130" in text and "2.13.0" not in text
