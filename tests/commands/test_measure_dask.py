"""``measure --dask``: the profiled gloo fixture's logs and traces read by the workers of a real
Dask cluster (a ``distributed.LocalCluster`` with two worker processes, started once for this
module) give the same measure document, byte for byte, as a local run; an unusable cluster is one
line, exit 2. Skipped when the ``dask`` extra is not installed."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from conftest import ROOT
from tracekit.commands.measure_cmd import measure
from tracekit.read.traces import read_traces

distributed = pytest.importorskip("distributed")  # the `dask` extra
pytestmark = pytest.mark.slow  # a cluster of two worker processes, as tests/read/test_dask_reader.py

CAP_12MB = ROOT / "fixtures" / "profiled" / "gloo_cap_12mb"


@pytest.fixture(scope="module")
def scheduler() -> str:
    """The address of a real scheduler with two single-threaded worker processes."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster:
        yield cluster.scheduler_address


def _measure(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(measure, [str(CAP_12MB / "logs"), "--profile", str(CAP_12MB / "traces"), *args])
    return res.exit_code, res.stdout, res.stderr


def test_measure_on_dask_is_the_local_one(scheduler):
    code, on_dask, err = _measure("--dask", scheduler, "--format", "json")
    local_code, local, _ = _measure("--jobs", "1", "--format", "json")
    assert (code, err) == (local_code, "") == (0, "")
    assert on_dask == local
    doc = json.loads(on_dask)
    assert [(r["rank"], r["paired"], r["events_read"]) for r in doc["ranks"]] == [(0, 72, 2479), (1, 72, 2479)]
    assert [r["trace"] for r in doc["ranks"]] == sorted(str(p) for p in (CAP_12MB / "traces").iterdir())
    assert doc["ranks"][0]["graphs"][1]["collectives"][3]["bytes"] == 12_582_912


def test_traces_read_on_dask_are_the_local_ones(scheduler, monkeypatch):
    # relative paths: the workers open the absolute path, the traces are named as given
    monkeypatch.chdir(CAP_12MB)
    local = read_traces(["traces"], jobs=1)
    on_dask = read_traces(["traces"], dask=scheduler)
    assert [(t.rank, t.path, t.events_read, t.form, t.backend) for t in on_dask] == [
        (t.rank, t.path, t.events_read, t.form, t.backend) for t in local]
    assert [t.path for t in on_dask] == sorted(f"traces/{p.name}" for p in (CAP_12MB / "traces").iterdir())
    assert [t.rank for t in on_dask] == [0, 1]


def test_jobs_with_dask_is_a_usage_error(scheduler):
    code, _, err = _measure("--dask", scheduler, "--jobs", "2")
    assert code == 2
    assert "--jobs does not apply with --dask" in err


def test_an_address_that_is_no_scheduler_is_one_line_exit_2():
    code, out, err = _measure("--dask", "http://localhost:1")
    assert (code, out) == (2, "")
    assert err.startswith("tracekit measure: ") and len(err.splitlines()) == 1, err
