"""A 16-rank HSDP mesh made from the HSDP fixture by bench/bench_mesh.py (8 shard groups named
3-10, replicate groups 1 | 2): each rank's finals name its own groups, and a rank whose
schedule differs in its shard group is named among the 16 by the schedule check."""

from __future__ import annotations

import hashlib
import re

import pytest

from conftest import bench_module
from tracekit.render.summary_document import summary_document
from tracekit.read.reader import load


@pytest.fixture(scope="module")
def mesh16(tmp_path_factory):
    dirs = bench_module("bench_mesh").make_dirs(tmp_path_factory.mktemp("mesh16"), 16)
    return dirs["2-D (hsdp)"]


def test_each_rank_of_a_16_rank_mesh_names_its_own_groups(mesh16):
    run = load(mesh16, jobs=1)
    finals = [g.final for r in run.ranks for g in r.graphs]
    # a backward a rank (its shard and replicate groups), a forward a shard group
    assert (len(finals), len({id(f.collectives) for f in finals})) == (32, 24)
    assert summary_document(run, with_ranks=False)["mesh"]["text"] == "world 16 = replicate 8 × shard 2"
    for r in run.ranks:
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
