"""Shared paths for the tests. Fixtures are real logs written by torch.compile runs
(fixtures/generate.py); tests assert exact values taken from them."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_LOGS = ROOT / "fixtures" / "logs"


@pytest.fixture
def fixture_logs() -> Path:
    return FIXTURE_LOGS
