"""``tracekit.__version__`` is the version pyproject.toml gives the distribution."""

from __future__ import annotations

import tomllib

import tracekit
from conftest import ROOT


def test_the_version_is_the_projects():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert tracekit.__version__ == project["version"] == "0.1.0"
