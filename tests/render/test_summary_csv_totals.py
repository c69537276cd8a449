"""summarize's CSV says what the table says: the graphs torch never pre-bucketed are outcome
rows, the total counts them as the table's total row does, and the collectives that run are
rows with their bytes and estimated ms (saved_params: the backward's 8 reduce-scatters on each
of 4 ranks were never pre-bucketed)."""

from __future__ import annotations

import csv
import io

from click.testing import CliRunner

from conftest import FIXTURE_LOGS
from tracekit.commands.summarize_cmd import summarize

LOGS = str(FIXTURE_LOGS / "saved_params")


def _run(*args: str) -> str:
    r = CliRunner().invoke(summarize, [LOGS, "--jobs", "1", *args])
    assert r.exit_code == 0, r.output
    return r.stdout


def test_csv_totals_equal_the_tables():
    rows = list(csv.DictReader(io.StringIO(_run("--format", "csv"))))
    table_total = next(ln for ln in _run().splitlines() if ln.startswith("total "))
    assert table_total.split()[-6:] == ["32->4", "32->32", "0->0", "2.277", "=", "2.273"]
    total, extra = [r for r in rows if r["section"] == "total"]
    got = [f"{total[f'{k}_before']}->{total[f'{k}_after']}" for k in ("AG", "RS", "AR")]
    assert got + [total["mb_before"], total["mb_after"]] == ["32->4", "32->32", "0->0", "2.277", "2.273"]
    assert (extra["field"], extra["value"]) == ("not_prebucketed", "4")
    never = [r for r in rows if r["section"] == "outcome" and r["value"] == "not pre-bucketed"]
    assert [(r["ranks"], r["count"], r["graph"], r["RS_before"], r["RS_after"], r["mb_before"]) for r in never] == [
        ("0-3", "4", "backward", "8", "8", "0.284")]


def test_csv_has_the_collectives_that_run():
    rows = [r for r in csv.DictReader(io.StringIO(_run("--format", "csv"))) if r["section"] == "collectives_run"]
    assert [(r["ranks"], r["graph"], r["AG_after"], r["RS_after"], r["other"], r["bytes"], r["est_ms"], r["detail"])
            for r in rows] == [("0-3", "forward", "1", "0", "0", "74536", "0.0116", "sizes=matched"),
                               ("0-3", "backward", "0", "8", "0", "298144", "0.0704", "sizes=matched")]
    per_rank = [r for r in csv.DictReader(io.StringIO(_run("--format", "csv", "--per-rank")))
                if r["section"] == "outcome" and r["value"] == "not pre-bucketed"]
    assert [r["ranks"] for r in per_rank] == ["0", "1", "2", "3"]


def test_csv_has_the_mesh_and_what_pre_bucketing_never_handles_on_it():
    """hsdp (replicate 2 x shard 2): the mesh rows (its text, then each group with role, members
    and size), the outcome rows' shard groups, and the 8 replicate all-reduces as a row."""
    r = CliRunner().invoke(summarize, [str(FIXTURE_LOGS / "hsdp"), "--jobs", "1", "--format", "csv"])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    mesh = [(x["field"], x["value"], x["ranks"], x["group_size"]) for x in rows if x["section"] == "mesh"]
    assert mesh == [("world", "world 4 = replicate 2 × shard 2", "", ""), ("replicate", "1", "0,2", "2"),
                    ("replicate", "2", "1,3", "2"), ("shard", "3", "0-1", "2"), ("shard", "4", "2-3", "2")]
    assert [x["fsdp_groups"] for x in rows if x["section"] == "outcome"] == ["3 4", "3 4"]
    (unb,) = [x for x in rows if x["section"] == "mesh_not_prebucketed"]
    assert (unb["ranks"], unb["graph"], unb["field"], unb["value"], unb["fsdp_groups"], unb["bytes"], unb["est_ms"]) == (
        "0-3", "backward", "all_reduce", "8", "3", "148552", "0.0658")
    assert unb["detail"].startswith("groups=1 2; role=replicate; group 1 (replicate) runs no all-gather in this graph")


def test_a_one_d_csv_has_no_mesh_rows():
    assert not [x for x in csv.DictReader(io.StringIO(_run("--format", "csv"))) if x["section"].startswith("mesh")]
