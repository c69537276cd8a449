"""One version everywhere: ``tracekit.__version__``, ``tracekit --version`` and CHANGELOG.md's
newest section say the version pyproject.toml gives the distribution."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

import tracekit
from conftest import ROOT


def _project_version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def test_the_version_is_the_projects():
    assert tracekit.__version__ == _project_version()
    assert re.fullmatch(r"\d+\.\d+\.\d+", tracekit.__version__)  # a release, as PEP 440 spells one


def test_the_command_says_the_version():
    done = subprocess.run([sys.executable, "-m", "tracekit", "--version"], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"python -m tracekit, version {_project_version()}\n"


def test_the_changelog_s_newest_section_is_the_version():
    headings = re.findall(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), re.M)
    assert headings[0] == _project_version()
