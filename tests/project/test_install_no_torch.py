"""The distributions, built and installed the way a user gets them.

``python -m build`` makes an sdist and, from it, a wheel. The wheel carries the two packages
and nothing else (not the fixtures' 16 MB of logs, not the tests); the sdist carries every file
the tests need. Installed from the wheel into a fresh venv without torch (its dependencies come
from the package index), ``summarize``, ``diff`` and ``report`` give what they give in the test
environment, ``import tracekit`` does not even look for torch, and ``replay``, ``explain`` and
the bucketing passes (``from bucketing import ...``) say ``pip install 'tracekit[replay]'`` (the commands with exit 2). On a torch
older than 2.13 or lacking a building block, replay and explain give the refusal (exit 2); a newer one
with every building block runs with one note. In the same venv (pytest and hypothesis added),
``pytest -m "not torch"`` collects the whole suite and passes on the reader, analysis and model tests.
"""

from __future__ import annotations

import email.parser
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from conftest import FIXTURE_LOGS, ROOT

AUTO = str(FIXTURE_LOGS / "spmd_auto")
SMALL_CAP = str(FIXTURE_LOGS / "spmd_small_cap")
NO_TORCH = ("torch is not installed (replay, explain and bucketing need torch 2.13 or newer): "
            "pip install 'tracekit[replay]'")
# Not copied into the build's source tree: what a checkout holds besides its files.
_JUNK = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", "build", "dist", "*.egg-info",
                               ".pytest_cache", ".hypothesis", "out", ".*.new")


def _tracked_files() -> list[str] | None:
    """The files git tracks in this checkout, or None outside a git checkout (an unpacked sdist)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return None
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return sorted(p for p in out.decode().split("\0") if p)


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> dict[str, Path]:
    """``python -m build`` on a copy of the checkout (the build writes egg-info into its source)."""
    tmp = tmp_path_factory.mktemp("dists")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=_JUNK)
    out = tmp / "dist"
    done = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(src)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (wheel,) = out.glob("tracekit-*.whl")
    (sdist,) = out.glob("tracekit-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


def _package_files() -> set[str]:
    return {p.relative_to(ROOT).as_posix() for pkg in ("tracekit", "bucketing")
            for p in (ROOT / pkg).rglob("*.py")}


def test_the_wheel_holds_the_two_packages_and_no_logs_or_tests(dists):
    with zipfile.ZipFile(dists["wheel"]) as z:
        names = z.namelist()
        meta = email.parser.Parser().parsestr(
            z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode())
    tops = {n.split("/")[0] for n in names}
    assert tops == {"tracekit", "bucketing", "tracekit-0.1.0.dist-info"}
    assert not [n for n in names if n.endswith((".log", ".gz")) or "/tests/" in n or "fixtures" in n]
    assert {n for n in names if n.endswith(".py")} == _package_files()
    # the scanner's C part, built for this Python (setup.py; optional where no compiler is)
    assert [n for n in names if n.startswith("tracekit/read/_scan.") and n.endswith(".so")]
    assert dists["wheel"].stat().st_size < 1_000_000  # the fixture logs alone are 16 MB
    requires = sorted(meta.get_all("Requires-Dist"))
    base = [r for r in requires if "extra ==" not in r]
    assert [r.replace(" ", "") for r in base] == ["click<9,>=8.1", "orjson>=3.9", "tabulate>=0.9"]
    torch = [r.replace(" ", "") for r in requires if r.startswith("torch")]
    assert torch == ['torch<2.16,>=2.13;extra=="replay"']
    assert "replay" in meta.get_all("Provides-Extra")


def test_the_sdist_holds_what_its_tests_need(dists):
    with tarfile.open(dists["sdist"]) as t:
        names = {m.name.split("/", 1)[1] for m in t.getmembers() if m.isfile()}
    logs = [n for n in names if n.startswith("fixtures/logs/")]
    in_tree = [p for p in (ROOT / "fixtures" / "logs").rglob("*") if p.is_file()]
    assert len(logs) == len(in_tree) >= 24  # every fixture log: 6 scenarios of 4 ranks and more
    for needed in ("tests/conftest.py", "tests/project/test_install_no_torch.py", "tests/logtext.py",
                   "fixtures/generate.py", "bench/make_ranks.py", "fuzz/fuzz_reader.py",
                   "docs/report.png", "README.md", "pyproject.toml", "MANIFEST.in", ".ci/run"):
        assert needed in names
    tracked = _tracked_files()
    if tracked is not None:  # every file of the checkout but git's own
        assert sorted(set(tracked) - names) == [".git-blame-ignore-revs", ".gitignore"]
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_the_sdist_runs_its_own_tests(dists, tmp_path):
    """Unpacked, the sdist's tests pass on their own files: the layout checks, summarize and diff
    on the fixture logs it carries."""
    with tarfile.open(dists["sdist"]) as t:
        # our own build, but unpacked the safe way where Python has it (3.11.4 on)
        t.extractall(tmp_path, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    (src,) = tmp_path.glob("tracekit-*")
    env = dict(os.environ, PYTHONPATH=str(src))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/project/test_structure.py", "tests/analyze/test_summarize_fixtures.py", "tests/analyze/test_diff_cli.py"],
                          cwd=src, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:]
    passed = re.search(r"(\d+) passed", done.stdout)
    assert passed and int(passed.group(1)) >= 40 and "skipped" not in done.stdout, done.stdout[-500:]
    assert str(src) in subprocess.run([sys.executable, "-c", "import tracekit; print(tracekit.__file__)"],
                                      cwd=src, env=env, capture_output=True, text=True).stdout


def _venv_env() -> dict[str, str]:
    """The environment for the venv's commands: nothing of the checkout on the path, warnings shown."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "TRACEKIT_NO_NATIVE")}
    env["PYTHONWARNINGS"] = "default"
    return env


def _here(*args: str) -> subprocess.CompletedProcess:
    """The same command in the test environment (torch installed), from the checkout."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "tracekit", *args], capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def venv(dists, tmp_path_factory) -> Path:
    """A fresh venv (no system site packages, so no torch) with the wheel installed; its
    dependencies from the package index, at the versions the test environment runs."""
    root = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    pins = [f"{d}=={importlib.metadata.version(d)}" for d in ("orjson", "click", "tabulate")]
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(root / "bin" / "python"),
                           "install", "--no-input", str(dists["wheel"]), *pins],
                          capture_output=True, text=True, env=_venv_env())
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return root


def _in_venv(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin" / "tracekit"), *args], capture_output=True, text=True,
                          env=_venv_env(), cwd=cwd)


def _python_in_venv(venv: Path, code: str, cwd: Path) -> str:
    done = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True,
                          env=_venv_env(), cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_venv_has_no_torch_and_imports_the_installed_tracekit(venv, tmp_path):
    out = _python_in_venv(venv, "import importlib.util, sys, tracekit; "
                                "print(importlib.util.find_spec('torch')); print(sys.prefix); "
                                "print(tracekit.__file__); import tracekit.read.envelopes as e; "
                                "print(e.NATIVE, e._native_scan.__module__)", tmp_path).splitlines()
    assert out[0] == "None"
    assert Path(out[1]) == venv
    assert Path(out[2]).is_relative_to(venv)
    assert out[3] == "True tracekit.read._scan"  # the installed scanner reads with its C part


_ID = {("summarize", AUTO): "summarize", ("summarize", AUTO, "--format", "json"): "summarize-json",
       ("diff", AUTO, SMALL_CAP): "diff"}


@pytest.mark.parametrize("args", list(_ID), ids=list(_ID.values()))
def test_summarize_and_diff_run_without_torch(venv, tmp_path, args):
    got, want = _in_venv(venv, *args, cwd=tmp_path), _here(*args)
    assert (got.returncode, got.stderr) == (0, "")  # no warning either
    assert got.stdout == want.stdout
    expected = {"summarize": "total             8 graphs", "summarize-json": '"schema"',
                "diff": "2 graphs changed on 4 ranks (0-3)"}
    assert expected[_ID[args]] in got.stdout
    if _ID[args] == "summarize":  # the 4 ranks' forward graph: 8 all-gathers merged into 1
        assert "0-3      4        0/0           forward   0              4             1           27.4      8->1" \
            in got.stdout


def test_report_runs_without_torch(venv, tmp_path):
    page, mine = tmp_path / "venv.html", tmp_path / "here.html"
    got = _in_venv(venv, "report", AUTO, "-o", str(page), cwd=tmp_path)
    assert (got.returncode, got.stderr) == (0, "")
    assert _here("report", AUTO, "-o", str(mine)).returncode == 0
    assert page.read_bytes() == mine.read_bytes()
    assert page.read_bytes().startswith(b"<!DOCTYPE html>")


@pytest.mark.parametrize("command", ["replay", "explain"])
def test_replay_and_explain_without_torch_say_what_to_install(venv, tmp_path, command):
    got = _in_venv(venv, command, AUTO, cwd=tmp_path)
    assert (got.returncode, got.stdout) == (2, "")
    assert got.stderr == f"tracekit {command}: {NO_TORCH}\n"


@pytest.mark.parametrize("command", ["replay", "explain"])
def test_replay_and_explain_help_needs_no_torch(venv, tmp_path, command):
    got = _in_venv(venv, command, "--help", cwd=tmp_path)
    assert (got.returncode, got.stderr) == (0, "")
    assert got.stdout.startswith(f"Usage: tracekit {command} [OPTIONS] PATHS...")


def test_import_bucketing_and_the_replay_api_without_torch_say_what_to_install(venv, tmp_path):
    for code in ("from bucketing import plan_fsdp_buckets", f"import tracekit.replay; tracekit.replay.replay({AUTO!r})"):
        out = _python_in_venv(venv, f"try:\n {code}\nexcept Exception as e:\n"
                                    " print(type(e).__name__, e, sep=': ')", tmp_path)
        assert out == f"UnsupportedTorch: {NO_TORCH}\n"


# Records every attempt to import torch, even one that a try/except would hide.
_WATCH = ("import sys\ntried = []\nclass Watch:\n"
          " @staticmethod\n def find_spec(name, path=None, target=None):\n"
          "  if name.split('.')[0] == 'torch': tried.append(name)\n"
          "sys.meta_path.insert(0, Watch)\n")
_READERS = ("import tracekit, tracekit.cli, tracekit.read.reader, tracekit.analyze.summarize, tracekit.analyze.diff, "
            "tracekit.render.html, tracekit.commands.summarize_cmd, tracekit.commands.diff_cmd, "
            "tracekit.commands.report_cmd, tracekit.read.traces, tracekit.analyze.measure, "
            "tracekit.render.measure_text, tracekit.render.measure_perfetto, tracekit.render.measured_html, "
            "tracekit.commands.measure_cmd\n")


def test_import_tracekit_does_not_look_for_torch(venv, tmp_path):
    assert _python_in_venv(venv, _WATCH + _READERS + "print(tried)", tmp_path) == "[]\n"
    # and where torch is installed, it stays unimported
    code = _WATCH + _READERS + "print(tried, 'torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=tmp_path)
    assert done.stdout == "[] False\n", done.stderr


def _run_as(tmp_path, command, prelude):
    """The real torch 2.13.0 after ``prelude`` (which makes it look like another release)."""
    code = (f"import sys, torch\n{prelude}\n"
            f"sys.argv = ['tracekit', {command!r}, {AUTO!r}]\n"
            "from tracekit.cli import run\nrun()\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=tmp_path)


@pytest.mark.parametrize("command", ["replay", "explain"])
def test_replay_and_explain_on_an_older_torch_release_give_unsupported_torch(tmp_path, command):
    """The real torch 2.13.0, reporting itself as 2.12.1: bucketing.compat's version floor."""
    done = _run_as(tmp_path, command, "torch.__version__ = '2.12.1+cpu'")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"tracekit {command}: bucketing needs torch 2.13 or newer, found torch 2.12.1+cpu\n"


@pytest.mark.parametrize("command", ["replay", "explain"])
def test_a_newer_untested_release_with_the_building_blocks_runs_with_one_note(tmp_path, command):
    """The real torch 2.13.0, reporting itself as 2.16.0: it has every building block, so it
    runs (exit 0 on spmd_auto), with one line on stderr saying it is untested."""
    done = _run_as(tmp_path, command, "torch.__version__ = '2.16.0+cpu'")
    assert done.returncode == 0, done.stderr
    notes = [ln for ln in done.stderr.splitlines() if "untested" in ln]
    assert notes == [f"tracekit {command}: note: torch 2.16.0 is untested (tested: 2.13.0, 2.14.1, 2.15.0); "
                     "it has every building block bucketing calls, so it runs"]


def test_a_release_that_lacks_a_building_block_is_refused_with_what_it_lacks(tmp_path):
    """The real torch 2.13.0 without torch._inductor.comm_analysis.NCCL_COLL, as 2.16.0."""
    done = _run_as(tmp_path, "replay", "torch.__version__ = '2.16.0'\n"
                   "import torch._inductor.comm_analysis as ca\ndel ca.NCCL_COLL")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("tracekit replay: torch 2.16.0 lacks building blocks bucketing needs (tested: torch "
                           "2.13.0, 2.14.1, 2.15.0): torch._inductor.comm_analysis.NCCL_COLL\n")


def _setup_commands() -> list[str]:
    """The commands of the README's set-up block."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Set-up", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_ci_runs_the_readme_set_up_exactly():
    commands = _setup_commands()
    assert commands == ["pip install torch==2.13.0 -e '.[test]' && tracekit summarize fixtures/logs/spmd_auto",
                        "python -m pytest -q"]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert [c for c in commands if c in ci] == commands


def test_every_install_command_names_a_tested_torch_exactly():
    """A pip install that mentions torch spells torch==2.13.0 (the CPU wheel) or, in .ci/run's
    venvs, torch==2.14.1 / torch==2.15.0: never a range or a bare torch."""
    lines = [*(ROOT / "README.md").read_text().splitlines(), *(ROOT / ".ci" / "run").read_text().splitlines()]
    installs = [ln for ln in lines if "pip install" in ln]
    assert len(installs) >= 3
    for ln in installs:
        for m in re.finditer(r"\btorch\b(\S*)", ln.split("pip install", 1)[1]):
            assert m.group(1) in ("==2.13.0", "==2.14.1", "==2.15.0"), ln


#: The test folders run in the torch-free venv (a part of the suite, for time; the collection covers all).
_NO_TORCH_RUN = ("tests/read", "tests/analyze", "tests/model")


def test_the_tests_marked_not_torch_collect_and_pass_without_torch(venv):
    """``pytest -m "not torch"`` (CONTRIBUTING) where torch is not installed: the whole suite
    collects without an error (a module that needs torch is skipped before it is imported), and
    the quick tests of the reader, the analysis and the model pass."""
    pins = [f"{d}=={importlib.metadata.version(d)}" for d in ("pytest", "hypothesis")]
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                           "install", "--no-input", *pins], capture_output=True, text=True, env=_venv_env())
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    # as CONTRIBUTING says, from the checkout (its tracekit, its tests)
    pytest_cmd = [str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    collected = subprocess.run([*pytest_cmd, "--collect-only", "-m", "not torch"], cwd=ROOT,
                               capture_output=True, text=True, env=_venv_env())
    assert collected.returncode == 0, collected.stdout[-3000:]
    last = collected.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"\d+/\d+ tests collected \(\d+ deselected\) in [\d.]+s", last), collected.stdout[-3000:]
    assert re.search(r"SKIPPED \[\d+\] .*needs torch, which is not installed", collected.stdout)
    ran = subprocess.run([*pytest_cmd, "-m", "not torch and not slow", *_NO_TORCH_RUN], cwd=ROOT,
                         capture_output=True, text=True, env=_venv_env())
    assert ran.returncode == 0, ran.stdout[-3000:]
    passed = re.search(r"(\d+) passed", ran.stdout)
    assert passed and int(passed.group(1)) >= 300 and " failed" not in ran.stdout, ran.stdout[-500:]
