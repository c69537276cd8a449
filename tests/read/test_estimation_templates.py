"""Estimations read through group-name templates (tracekit.read.estimation_templates) give
exactly what a parse of each payload gives: on every fixture's estimation payloads, on the HSDP
fixture's shard groups (one template, names bound), and on payloads edited at test time where
a name cannot be bound (then the payload is parsed as it is)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.logtext import artifacts
from tracekit.model import ScheduledCollective
from tracekit.read.estimation_templates import EstimationTemplates, TemplatedEstimation
from tracekit.read.interning import BuildMemo
from tracekit.read.parsers import ArtifactError, ScheduleParser, final_schedule, parse_estimation

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
ESTIMATIONS = ("fx_collectives_analytical_estimation", "fx_collectives_estimations_after_overlap_bucketing")


def _payloads(log: Path, name: str) -> list[str]:
    return [p for n, _src, p in artifacts(log.read_text()) if n == name]


def _hsdp(rank: int, name: str = "fx_collectives_analytical_estimation") -> list[str]:
    return _payloads(next(LOGS.glob(f"hsdp/*_rank_{rank}_*.log")), name)


def test_every_fixture_estimation_reads_the_same_through_templates():
    templates = EstimationTemplates(parse_estimation)
    payloads = [
        p for log in sorted(LOGS.glob("*/*.log")) for name in ESTIMATIONS for p in _payloads(log, name)
    ]
    assert len(payloads) >= 100
    bound = 0
    for p in payloads:
        est = templates.parse(p)
        bound += isinstance(est, TemplatedEstimation)
        assert (est.estimation() if isinstance(est, TemplatedEstimation) else est) == parse_estimation(p)
    assert bound == len(payloads)  # every fixture payload names its groups as a template binds them


def test_the_shard_groups_of_hsdp_share_one_template_with_their_names_bound():
    templates = EstimationTemplates(parse_estimation)
    (fwd0, bwd0), (fwd2, bwd2) = _hsdp(0), _hsdp(2)
    a, b = templates.parse(bwd0), templates.parse(bwd2)
    assert a.template is b.template
    assert a.names == ("3", "1")  # distinct names, in order: the shard group's, the replicate's
    assert b.names == ("4", "1")
    assert b.world_size == 4
    assert b.estimation().collectives[:3] == [
        ScheduledCollective("all_gather", "all_gather_into_tensor_out", "4", 2, 139848, 0.0096),
        ScheduledCollective("reduce_scatter", "reduce_scatter_tensor", "4", 2, 297104, 0.0097),
        ScheduledCollective("all_reduce", "all_reduce", "1", None, 68, 0.0078),
    ]
    assert templates.parse(fwd0).template is templates.parse(fwd2).template
    assert templates.parse(fwd2).estimation().collectives == [
        ScheduledCollective("all_gather", "all_gather_into_tensor_out", "4", 2, 148552, 0.0097)
    ]


BACKWARD = _hsdp(0)[1] if (LOGS / "hsdp").is_dir() else ""
AG_ROW = "group_size:2 group_name:3 input_bytes:139848"


@pytest.mark.parametrize(
    "edit, groups",
    [
        (lambda t: t.replace(AG_ROW, "group_size:2 group_name:a b input_bytes:139848"), "a b"),  # a space
        (lambda t: t.replace(AG_ROW, "group_size:2 group_name:None input_bytes:139848"), None),
        (lambda t: t.replace(AG_ROW, "group_size:2 group_name:x,y input_bytes:139848"), "x,y"),  # a comma
        (lambda t: t.replace("# World size: 4", "# World size: 4 group_name:9 input_bytes:1"), "3"),
        (
            lambda t: t.replace(
                AG_ROW, "group_size:2 group_name:3 input_bytes:1 group_name:5 input_bytes:139848"
            ),
            "3 input_bytes:1 group_name:5",
        ),
        (lambda t: t.replace(AG_ROW, "group_size:2 group_name: input_bytes:139848"), ""),
    ],
    ids=["space", "none", "comma", "world_line", "two_keys", "empty"],
)
def test_edited_names_read_as_a_parse_reads_them(edit, groups):
    text = edit(BACKWARD)
    assert text != BACKWARD
    est = EstimationTemplates(parse_estimation).parse(text)
    if isinstance(est, TemplatedEstimation):
        est = est.estimation()
    assert est == parse_estimation(text)
    assert est.collectives[0].group == groups
    assert len(est.collectives) == 10


def test_a_bad_payload_says_its_own_error():
    text = BACKWARD.replace("input_bytes:139848,0.0096,0.0096", "input_bytes:139848")
    with pytest.raises(ArtifactError) as direct:
        parse_estimation(text)
    with pytest.raises(ArtifactError) as templated:
        EstimationTemplates(parse_estimation).parse(text)
    assert str(templated.value) == str(direct.value)
    assert "group_name:3" in str(direct.value)


def test_finals_built_once_per_template_are_the_finals_of_each_payload():
    memo, templates = BuildMemo(), EstimationTemplates(parse_estimation)
    ops = ScheduleParser._parse(_hsdp(0, "inductor_collective_schedule")[1])
    finals = []
    for rank in range(4):
        est = templates.parse(_hsdp(rank)[1])
        f = memo.final("0/0", 1, ops, est, None)
        assert f == final_schedule("0/0", 1, ops, parse_estimation(_hsdp(rank)[1]), None)
        finals.append(f)
    assert [f.collectives[0].group for f in finals] == ["3", "3", "4", "4"]
    assert [f.collectives[-1].group for f in finals] == ["1", "2", "1", "2"]
    assert finals[0].sizes == "matched" and finals[0].counts == {
        "all_gather": 1,
        "reduce_scatter": 1,
        "all_reduce": 8,
        "other": 0,
    }
    assert all(f.counts is finals[0].counts for f in finals)  # one template: its counts shared
    # the finals keep their template's slots (one object) and their names: what a mesh keys by
    assert all(f.group_slots is finals[0].group_slots for f in finals)
    assert [f.names for f in finals] == [("3", "1"), ("3", "2"), ("4", "1"), ("4", "2")]
    assert [f.collectives[i].group for f in finals[:1] for i in range(10)] == [
        finals[0].names[s] for s in finals[0].group_slots.slots
    ]
