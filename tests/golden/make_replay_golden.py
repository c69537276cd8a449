"""Golden replays: what ``tracekit replay --recommend`` and ``tracekit explain`` print on every
fixture, in every format.

    python tests/golden/make_replay_golden.py     # rewrite tests/golden/replays.json.gz

The speed work of issue 41 (parallel caps, fewer imports, graph copies without code, the GC
paused) must not change one byte of what replay and explain report. ``replays.json.gz`` holds
the standard output and exit status each case printed before that work (gzipped JSON);
``tests/replay/test_golden_replays.py`` runs the same cases and compares them byte for byte.
Standard error (progress, notes on the way) is not part of it. Outputs are taken in this
process through click's runner (the real commands), from the repository root, with paths
relative to it. Rewrite the file only for a change that is meant to change the output.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from click.testing import CliRunner  # noqa: E402

GOLDEN = Path(__file__).resolve().parent / "replays.json.gz"
SCENARIOS = (
    "spmd_auto",
    "spmd_small_cap",
    "diverge_rank",
    "tracekit_pass",
    "saved_params",
    "overlap_cap_a",
    "overlap_cap_b",
    "spmd_auto_gz",
    "fsdp_tp2_overlap",  # a mesh: shard 2 x tp 2, two tensor-parallel all-reduces a graph (issue 37)
)
FORMATS = ("table", "json", "markdown")


def cases() -> dict[str, tuple[str, list[str]]]:
    """Case name -> (command, arguments)."""
    out: dict[str, tuple[str, list[str]]] = {}
    for s in SCENARIOS:
        path = f"fixtures/logs/{s}"
        for fmt in FORMATS:
            out[f"replay-recommend/{s}:{fmt}"] = ("replay", ["--recommend", "--format", fmt, path])
            out[f"explain/{s}:{fmt}"] = ("explain", ["--format", fmt, path])
    out["replay-recommend-all-ranks/diverge_rank:json"] = (
        "replay",
        ["--recommend", "--all-ranks", "--format", "json", "fixtures/logs/diverge_rank"],
    )
    out["replay-caps/overlap_cap_a:json"] = (
        "replay",
        ["--cap-mb", "0.01,1,64", "--cap", "auto", "--format", "json", "fixtures/logs/overlap_cap_a"],
    )
    return out


def outputs(only: list[str] | None = None) -> dict[str, dict[str, object]]:
    """``case`` -> ``{"status", "stdout"}`` (all cases, or ``only`` these)."""
    from tracekit.commands.explain_cmd import explain
    from tracekit.commands.replay_cmd import replay

    commands = {"replay": replay, "explain": explain}
    runner = CliRunner()
    res: dict[str, dict[str, object]] = {}
    old = os.getcwd()
    try:
        os.chdir(ROOT)
        for name, (command, args) in cases().items():
            if only is not None and name not in only:
                continue
            r = runner.invoke(commands[command], args, catch_exceptions=False)
            res[name] = {"status": r.exit_code, "stdout": r.stdout}
    finally:
        os.chdir(old)
    return res


def load_golden() -> dict[str, dict[str, object]]:
    return json.loads(gzip.decompress(GOLDEN.read_bytes()))


def main() -> None:
    res = outputs()
    GOLDEN.write_bytes(gzip.compress((json.dumps(res, indent=1, sort_keys=True) + "\n").encode(), mtime=0))
    print(f"{len(res)} outputs -> {GOLDEN} ({GOLDEN.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
