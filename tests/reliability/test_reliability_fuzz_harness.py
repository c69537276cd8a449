"""The fuzz harnesses (fuzz/) run as documented: through atheris when it is installed, and
through the seeded fallback loop otherwise (forced here with TRACEKIT_FUZZ_FALLBACK=1)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from conftest import ROOT

HAS_ATHERIS = importlib.util.find_spec("atheris") is not None


def _run(script: str, runs: int, fallback: bool, tmp_path) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    if fallback:
        env["TRACEKIT_FUZZ_FALLBACK"] = "1"
    else:  # atheris copies the seeds into a corpus directory under TMPDIR and grows it there
        (tmp_path / "tmp").mkdir()
        env["TMPDIR"] = str(tmp_path / "tmp")
    return subprocess.run([sys.executable, str(ROOT / "fuzz" / script), f"-atheris_runs={runs}"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)


def test_reader_harness_fallback(tmp_path):
    res = _run("fuzz_reader.py", 3000, True, tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert ": 3000 inputs ran clean" in res.stdout
    assert list(tmp_path.iterdir()) == []  # no crash files, no leftovers


@pytest.mark.skipif(not HAS_ATHERIS, reason="atheris (the optional 'fuzz' extra) is not installed")
def test_reader_harness_atheris(tmp_path):
    res = _run("fuzz_reader.py", 2000, False, tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "Done 2000 " in res.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(("crash-", "leak-", "timeout-"))]


def test_graph_text_harness_fallback(tmp_path):
    pytest.importorskip("torch")
    res = _run("fuzz_graph_text.py", 300, True, tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert ": 300 inputs ran clean" in res.stdout
