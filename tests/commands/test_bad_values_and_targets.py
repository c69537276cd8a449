"""Bad option values and unwritable targets are usage errors found before any work: one line,
status 2, nothing else on stderr (no "loading torch", no replay first)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import FIXTURE_LOGS, ROOT

CMD = [sys.executable, "-m", "tracekit"]
LOGS = str(FIXTURE_LOGS / "spmd_auto")


def tk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CMD, *args], cwd=ROOT, capture_output=True, timeout=120, text=True)


@pytest.mark.parametrize("flag", ["--max-in-flight-gb", "--max-memory-increase-gb",
                                  "--max-memory-increase-ratio", "--memory-budget-gb"])
@pytest.mark.parametrize("value", ["nan", "inf", "NaN"])
def test_nan_and_inf_are_refused_by_every_numeric_option(flag, value):
    p = tk("replay", LOGS, flag, value)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == f"tracekit replay: Invalid value for '{flag}': '{value}' is not a finite number.\n"
    below = tk("replay", LOGS, flag, "-inf")
    assert below.returncode == 2 and below.stderr.count("\n") == 1 and "-inf is not in the range" in below.stderr


def test_unwritable_output_is_found_before_any_work(tmp_path):
    for command in ("summarize", "replay", "explain", "report"):
        p = tk(command, LOGS, "-o", "/proc/tracekit_out.txt")
        assert p.returncode == 2 and p.stdout == ""
        usage = "" if command == "report" else "Invalid value for '--output' / '-o': "
        assert p.stderr == (f"tracekit {command}: {usage}"
                            "cannot write /proc/tracekit_out.txt: No such file or directory\n")
    p = tk("replay", LOGS, "-o", str(tmp_path))
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "is a directory" in p.stderr
    assert list(tmp_path.iterdir()) == []  # the probe left nothing behind


def test_unwritable_trace_dir_and_plot_are_found_before_any_work(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    p = tk("replay", LOGS, "--trace-out", str(a_file / "traces"))
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr == f"tracekit replay: Invalid value for '--trace-out': {a_file} is not a directory\n"
    p = tk("replay", LOGS, "--recommend", "--plot", "/proc/tracekit_plot.png")
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr.startswith("tracekit replay: Invalid value for '--plot': cannot write /proc/tracekit_plot.png")
    # a directory where no directory can be made, though os.access says yes to root: found
    # before the replay (it was found after it, the tables printed, exit 2 at the end)
    p = tk("replay", LOGS, "--trace-out", "/proc/tracekit_traces")
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr == (
        "tracekit replay: Invalid value for '--trace-out': cannot write /proc/tracekit_traces: No such file or directory\n"
    )
    p = tk("replay", LOGS, "--trace-out", str(tmp_path / "new" / "traces"))  # made when written
    assert p.returncode == 0 and p.stderr.endswith(f"1 trace file written to {tmp_path / 'new' / 'traces'}\n")
    assert sorted(q.name for q in tmp_path.iterdir()) == ["a_file", "new"]  # the probe left nothing


def test_a_full_device_is_one_clean_line():
    p = tk("summarize", LOGS, "-o", "/dev/full")
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr == "tracekit summarize: cannot write /dev/full: No space left on device\n"
