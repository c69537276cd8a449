"""No text line wider than 200 columns from any command, in any text format, measured on the
outputs of real fixture logs; the CSV holds numbers as numbers and every section."""

from __future__ import annotations

import csv
import io
import subprocess
import sys

import pytest

from conftest import FIXTURE_LOGS, ROOT

L = FIXTURE_LOGS


def tk(*args: str) -> str:
    p = subprocess.run([sys.executable, "-m", "tracekit", *args], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode in (0, 1), p.stderr
    return p.stdout


@pytest.mark.parametrize("args", [
    ["summarize", str(L / "diverge_rank")],
    ["summarize", str(L / "diverge_rank"), "--per-rank"],
    ["summarize", str(L / "hsdp_diverge")],
    ["explain", str(L / "spmd_small_cap")],
    ["explain", str(L / "saved_params")],
    ["explain", str(L / "diverge_rank"), "--rank", "3"],
    ["replay", str(L / "diverge_rank"), "--all-ranks", "--cap-mb", "0.1,1.0019", "--cap", "auto"],
    ["diff", str(L / "spmd_auto"), str(L / "diverge_rank")],
])
@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_no_line_is_wider_than_200_columns(args, fmt):
    lines = tk(*args, "--format", fmt).splitlines()
    assert lines and max(len(ln) for ln in lines) <= 200


def test_explain_on_a_small_cap_groups_its_three_over_cap_paragraphs():
    out = tk("explain", str(L / "spmd_small_cap"))
    forward = out.split("\n\nrank 0, graph 0/0:1")[0]
    assert forward.count("over_cap: all_gather_into_tensor_2, all_gather_into_tensor_3, all_gather_into_tensor_4.") == 1
    assert "3 collectives, over_cap:" in forward


def test_the_csv_holds_every_section_with_numbers_as_numbers():
    rows = list(csv.DictReader(io.StringIO(tk("summarize", str(L / "diverge_rank"), "--format", "csv"))))
    assert {r["section"] for r in rows} == {"verdict", "world", "outcome", "total", "divergence", "schedule",
                                              "collectives_run"}
    for r in rows:
        if r["section"] in ("outcome", "total"):
            counts = [r[k] for k in ("AG_before", "AG_after", "RS_before", "RS_after", "AR_before", "AR_after")]
            assert all(c.isdigit() for c in counts), r
            float(r["mb_before"]), float(r["mb_after"])
    assert not any("->" in v for r in rows for v in r.values() if v)
