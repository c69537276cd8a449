"""The Python API of docs/python-api.md: its five lines run as written and print what the page
says; flat records of the real fixture logs; pandas optional."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import tracekit
from conftest import FIXTURE_LOGS, ROOT

PAGE = (ROOT / "docs" / "python-api.md").read_text()


def test_the_five_lines_of_the_page_print_what_it_says():
    code, printed = re.findall(r"```(?:python)?\n(.*?)```", PAGE, re.S)[:2]
    assert len(code.strip().splitlines()) == 5
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout == printed


def test_the_readme_shows_the_five_lines_and_what_they_print():
    """The README shows the Python API in the page's five lines, which the test above runs, and
    quotes what they print (issue 39)."""
    readme = (ROOT / "README.md").read_text()
    code, printed = re.findall(r"```(?:python)?\n(.*?)```", PAGE, re.S)[:2]
    (shown,) = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert shown == code and len(shown.strip().splitlines()) == 5
    first, second = printed.strip().splitlines()
    assert f"these five lines print `{first}` and `{second}`:" in " ".join(readme.split("\n"))


def test_outcomes_hold_the_graphs_never_prebucketed_with_their_schedule():
    run = tracekit.load(FIXTURE_LOGS / "saved_params")
    rows = tracekit.records.outcomes(run)
    assert len(rows) == 8  # 4 ranks x (the forward pre-bucketed, the backward never)
    back = [r for r in rows if not r["prebucketed"]]
    assert [r["rank"] for r in back] == [0, 1, 2, 3]
    assert back[0] == {"rank": 0, "compile_id": "0/0", "graph_index": 1, "graph": "backward", "prebucketed": False,
                       "fsdp_groups": None, "group_size": 4, "bucket_cap_mb": None, "ag_before": 0, "ag_after": 0,
                       "rs_before": 8, "rs_after": 8, "ar_before": 0, "ar_after": 0, "scheduled": 8,
                       "scheduled_bytes": 298144, "scheduled_est_ms": 0.0704}
    sched = [s for s in tracekit.records.schedules(run) if s["rank"] == 0]
    assert [(s["graph_index"], s["kind"], s["prebucketed"]) for s in sched][:2] == [
        (0, "all_gather", True), (1, "reduce_scatter", False)]
    assert sum(s["bytes"] for s in sched if not s["prebucketed"]) == 298144


def test_frame_is_a_dataframe_with_pandas_else_a_clear_import_error():
    rows = tracekit.records.outcomes(tracekit.load(FIXTURE_LOGS / "spmd_auto"))
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"needs pandas: pip install pandas"):
            tracekit.records.frame(rows)
    else:
        df = tracekit.records.frame(rows)
        assert list(df.columns[:5]) == ["rank", "compile_id", "graph_index", "graph", "prebucketed"]
        assert df["ag_before"].sum() == 4 * 8 + 4 * 5


def test_bad_values_are_refused_before_torch_runs():
    with pytest.raises(ValueError, match="a cap is a finite number"):
        tracekit.replay_run(FIXTURE_LOGS / "spmd_auto", [float("nan")])
    with pytest.raises(FileNotFoundError):
        tracekit.replay_run(FIXTURE_LOGS / "no_such_dir")


def test_importing_tracekit_and_its_records_imports_neither_torch_nor_pandas():
    code = ("import sys, tracekit; tracekit.records.outcomes(tracekit.load('fixtures/logs/spmd_auto')); "
            "print(sorted(m for m in ('torch', 'pandas') if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.stdout == "[]\n", p.stderr
