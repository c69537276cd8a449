"""docs/architecture.md names every module: each ``.py`` under tracekit/ and bucketing/ is named
in its folder's row of the stages table, and every module a row names is there."""

from __future__ import annotations

import re
from collections import defaultdict

from conftest import ROOT

DOC = ROOT / "docs" / "architecture.md"


def _named() -> dict[str, set[str]]:
    """Folder (``tracekit/read``) -> the module names its rows give (``sources``): the table's rows
    whose first cell starts with the folder in backquotes."""
    named: dict[str, set[str]] = defaultdict(set)
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| `((?:tracekit|bucketing)[\w/]*?)/?`[^|]*\|([^|]*)\|", line)
        if m:  # a bare name: not `analyze/cut_logs.py`, which points into another folder
            named[m.group(1)] |= set(re.findall(r"(?<![\w/])(\w+)\.py\b", m.group(2)))
    return named


def _modules() -> dict[str, set[str]]:
    found: dict[str, set[str]] = defaultdict(set)
    for package in ("tracekit", "bucketing"):
        for path in (ROOT / package).rglob("*.py"):
            found[path.parent.relative_to(ROOT).as_posix()].add(path.stem)
    return found


def test_every_module_is_named_in_its_folder_s_row():
    named = _named()
    missing = sorted(f"{folder}/{m}.py" for folder, mods in _modules().items() for m in mods - named[folder])
    assert missing == [], f"name these in docs/architecture.md's table: {missing}"


def test_every_module_the_table_names_exists():
    found = _modules()
    stale = sorted(f"{folder}/{m}.py" for folder, mods in _named().items() for m in mods - found[folder])
    assert stale == [], f"docs/architecture.md names modules that are gone: {stale}"


def test_the_table_covers_both_packages():
    assert {"tracekit", "tracekit/model", "tracekit/read", "bucketing"} <= set(_named())
