"""The docs' examples are real output: every ```console block of README.md and docs/*.md that
starts with ``$ tracekit ...`` is run (from a scratch directory that sees the fixtures), and what
the command prints must be the block's text, line for line."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

#: Commands that import torch (replay, explain); the others read logs only.
TORCH_COMMANDS = {"replay", "explain"}


def _examples() -> list[tuple[str, str, str]]:
    """``(page, command, printed)`` of every console block in the docs."""
    out = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in re.findall(r"```console\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
            first, _, printed = block.partition("\n")
            assert first.startswith("$ tracekit "), f"{page.name}: a console block starts with '$ tracekit'"
            out.append((str(page.relative_to(ROOT)), first[2:], printed))
    return out


EXAMPLES = _examples()


def _param(page: str, command: str, printed: str):
    marks = [pytest.mark.torch, pytest.mark.slow] if command.split()[1] in TORCH_COMMANDS else []
    return pytest.param(command, printed, marks=marks, id=f"{page}: {command}")


def test_the_readme_shows_every_command_once():
    readme = [c.split()[1] for page, c, _ in EXAMPLES if page == "README.md"]
    assert readme == ["summarize", "replay", "explain", "diff", "report"]


@pytest.mark.parametrize(("command", "printed"), [_param(*e) for e in EXAMPLES])
def test_the_example_prints_what_the_doc_shows(command: str, printed: str, tmp_path: Path):
    (tmp_path / "fixtures").symlink_to(ROOT / "fixtures")  # the doc's relative paths; outputs land here
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    args = [sys.executable, "-m", "tracekit", *shlex.split(command)[1:]]
    done = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout == printed


def test_the_readme_stays_short():
    """What it is for, the set-up, one example per command, where to read more: 200 lines at most."""
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 200


def test_the_readme_says_which_fsdp_it_covers():
    """SimpleFSDP-style compiled collectives, covered; FSDP2's fully_shard, not (issue 39)."""
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "FSDP covered: SimpleFSDP-style (torchtitan's `simple_fsdp`)" in text
    assert "Not FSDP2's `fully_shard`, whose collectives run in eager code" in text
