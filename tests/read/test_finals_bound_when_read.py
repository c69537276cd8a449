"""A final schedule read through an estimation template holds its template and names, and its
collectives are bound when first read (tracekit.model.FinalSchedule.of_template): a summary of a
2-D mesh reads them for a few finals, not a rank. Logs: the HSDP fixture, and a 16-rank HSDP
mesh made from it by bench/bench_mesh.py (8 shard groups named 3-10, replicate groups 1 | 2)."""

from __future__ import annotations

import copy
import hashlib
import pickle
import re

import pytest

from conftest import FIXTURE_LOGS, bench_module
from tracekit.analyze.summarize import summary_document
from tracekit.model import FinalSchedule, ScheduledCollective
from tracekit.read.reader import load

_SLOT = FinalSchedule.__dict__["collectives"].slot  # the slot itself (reading the attribute binds)


def _bound(f: FinalSchedule) -> bool:
    """Whether ``f``'s collectives were made (read without making them)."""
    try:
        _SLOT.__get__(f, FinalSchedule)
    except AttributeError:
        return False
    return True


@pytest.fixture(scope="module")
def mesh16(tmp_path_factory):
    dirs = bench_module("bench_mesh").make_dirs(tmp_path_factory.mktemp("mesh16"), 16)
    return dirs["2-D (hsdp)"]


def _finals(run) -> list[FinalSchedule]:
    return [g.final for r in run.ranks for g in r.graphs]


def test_the_hsdp_finals_are_read_with_their_names_and_bound_when_read():
    run = load(FIXTURE_LOGS / "hsdp", jobs=1)
    finals = _finals(run)
    assert len(finals) == 8 and not any(map(_bound, finals))
    assert [f.names for f in finals] == [("3",), ("3", "1"), ("3",), ("3", "2"), ("4",), ("4", "1"), ("4",), ("4", "2")]
    assert finals[0] is finals[2]  # ranks 0 and 1 log one forward: one final
    assert finals[7].collectives[:3] == [
        ScheduledCollective("all_gather", "all_gather_into_tensor_out", "4", 2, 139848, 0.0096, "f32"),
        ScheduledCollective("reduce_scatter", "reduce_scatter_tensor", "4", 2, 297104, 0.0097, "f32"),
        ScheduledCollective("all_reduce", "all_reduce_", "2", None, 68, 0.0078, "f32"),
    ]
    assert [c.group for c in finals[7].collectives] == ["4", "4"] + ["2"] * 8
    assert _bound(finals[7]) and finals[7].collectives is finals[7].collectives  # bound once, kept


def test_a_final_copied_or_pickled_before_it_is_read_keeps_its_collectives():
    run = load(FIXTURE_LOGS / "hsdp", jobs=1)
    f = _finals(run)[5]
    assert not _bound(f)
    again = pickle.loads(pickle.dumps(f))
    assert again.names == ("4", "1") and [c.group for c in again.collectives] == ["4", "4"] + ["1"] * 8
    assert copy.deepcopy(f) == again == f
    assert f.at("1/0", 1).collectives is f.collectives  # equal names: the template's one list


def test_a_summary_of_a_16_rank_mesh_reads_the_collectives_of_two_finals(mesh16):
    run = load(mesh16, jobs=1)
    finals = _finals(run)
    distinct = list({id(f): f for f in finals}.values())
    # a backward a rank (its shard and replicate groups), a forward a shard group
    assert (len(finals), len(distinct)) == (32, 24)
    assert not any(map(_bound, distinct))
    doc = summary_document(run, with_ranks=False)
    assert doc["mesh"]["text"] == "world 16 = replicate 8 × shard 2"
    assert sum(map(_bound, distinct)) == 2
    for r in run.ranks:  # and each, read, names its own groups
        fwd, bwd = (g.final for g in r.graphs)
        shard, replicate = str(3 + r.rank // 2), "1" if r.rank % 2 == 0 else "2"
        assert [c.group for c in fwd.collectives] == [shard]
        assert [c.group for c in bwd.collectives] == [shard, shard] + [replicate] * 8


def test_a_rank_that_diverges_in_its_shard_group_is_named_among_16(mesh16, tmp_path):
    """The schedule check groups ranks by their finals' sequences by role (one group for the 15
    healthy ranks): the rank whose backward all-gather differs is still named, with its group."""
    d = tmp_path / "mesh16_rank9"
    d.mkdir()
    for f in mesh16.iterdir():
        data = f.read_bytes()
        if "_rank_9_" in f.name:  # its backward all-gather's bytes, and that payload's MD5
            data = _edit_payload(data, b"group_name:7 input_bytes:139848", b"group_name:7 input_bytes:139852")
        (d / f.name).write_bytes(data)
    doc = summary_document(load(d, jobs=1), with_ranks=False)
    [item] = doc["schedule_divergence"]
    assert (item["ranks"], item["majority_ranks"], item["group"], item["role"], item["peers"]) == (
        "9",
        "0-8,10-15",
        "7",
        "shard",
        "8-9",
    )
    assert (item["compile_id"], item["graph_index"], item["position"]) == ("0/0", 1, 0)
    assert item["value"] == {"kind": "all_gather", "group": "7", "bytes": 139852, "dtype": None}
    assert item["majority_value"] == {"kind": "all_gather", "group": "3", "bytes": 139848, "dtype": None}


def _edit_payload(log: bytes, old: bytes, new: bytes) -> bytes:
    """``log`` with ``old`` replaced by ``new`` in one payload, whose ``has_payload`` is then
    that of its new text (as torch would have written it)."""
    lines = log.split(b"\n")
    at = next(i for i, line in enumerate(lines) if old in line)
    lines[at] = lines[at].replace(old, new)
    env = max(i for i in range(at) if not lines[i].startswith(b"\t"))
    end = next((i for i in range(at, len(lines)) if not lines[i].startswith(b"\t")), len(lines))
    digest = hashlib.md5(b"\n".join(p[1:] for p in lines[env + 1 : end])).hexdigest().encode()
    lines[env] = re.sub(rb'"has_payload": "[0-9a-f]{32}"', b'"has_payload": "' + digest + b'"', lines[env])
    return b"\n".join(lines)
