"""Shared paths for the tests. Fixtures are real logs written by torch.compile runs
(fixtures/generate.py); tests assert exact values taken from them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_LOGS = ROOT / "fixtures" / "logs"


@pytest.fixture
def fixture_logs() -> Path:
    return FIXTURE_LOGS


def bench_module(name: str) -> ModuleType:
    """``bench/NAME.py`` imported as a module (the benchmarks' log makers serve the tests too)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
