"""Golden summaries: every ``tracekit summarize`` format on the fixtures and the damaged corpus.

    python tests/golden/make_golden.py            # rewrite tests/golden/summaries.json.gz

The speed work of issue 21 (skipping JSON, sharing values, another scanner) must not change
one byte of what summarize prints. ``summaries.json.gz`` holds the outputs the code printed before
that work (made with this script from the code just before issue 21 merged, which printed them byte for byte as the merged code did, then re-made for meant changes: the CSV's schedule cells with dtypes, the true note on a 2.13 log without post-grad graphs, and spmd_small_cap's logs made anew (collectives timed by torch's NCCL model); gzipped JSON); ``tests/analyze/test_golden_summaries.py``
runs the same cases and compares them byte for byte. Outputs are taken in this process through
click's runner (the real command, its exit status and both streams); the corpus is built into a
temporary directory and named by paths relative to it. Rewrite the file only for a change
that is meant to change the output.
"""

from __future__ import annotations

import gzip
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from click.testing import CliRunner  # noqa: E402

from corpus.make_corpus import build_corpus  # noqa: E402
from tracekit.commands.summarize_cmd import summarize  # noqa: E402

GOLDEN = Path(__file__).resolve().parent / "summaries.json.gz"
SCENARIOS = ("spmd_auto", "spmd_small_cap", "diverge_rank", "tracekit_pass", "spmd_auto_gz")
#: Each case is run with each of these option sets.
VARIANTS: dict[str, list[str]] = {
    "table": [],
    "json": ["--format", "json"],
    "csv": ["--format", "csv"],
    "markdown": ["--format", "markdown"],
    "json-per-rank": ["--format", "json", "--per-rank"],
    "table-per-rank": ["--per-rank"],
    "strict": ["--strict", "--format", "json", "--per-rank"],
}
#: The corpus's single long line, in MB: longer than a chunk, short enough for a quick test.
BIG_MB = 3


def cases(corpus: Path) -> dict[str, tuple[Path, list[str]]]:
    """Case name -> (the directory it runs in, the PATH arguments relative to it): ROOT for the
    fixtures, the corpus directory for its cases (relative paths: the same texts, column widths
    included, wherever the corpus is built)."""
    out = {f"fixture/{s}": (ROOT, [f"fixtures/logs/{s}"]) for s in SCENARIOS}
    out["fixture/all"] = (ROOT, [f"fixtures/logs/{s}" for s in SCENARIOS[:3]])
    for case in build_corpus(corpus, ROOT / "fixtures" / "logs" / "spmd_auto", big_mb=BIG_MB):
        out[f"corpus/{case.name}"] = (corpus, list(case.inputs))
    return out


def load_golden() -> dict[str, dict[str, object]]:
    return json.loads(gzip.decompress(GOLDEN.read_bytes()))


def outputs(corpus: Path) -> dict[str, dict[str, object]]:
    """``case:variant`` -> ``{"status", "stdout", "stderr"}``."""
    import os

    runner = CliRunner()
    res: dict[str, dict[str, object]] = {}
    old = os.getcwd()
    try:
        for name, (cwd, paths) in cases(corpus).items():
            os.chdir(cwd)
            for variant, opts in VARIANTS.items():
                r = runner.invoke(summarize, [*paths, *opts, "--jobs", "1"], catch_exceptions=False)
                res[f"{name}:{variant}"] = {"status": r.exit_code, "stdout": r.stdout, "stderr": r.stderr}
    finally:
        os.chdir(old)
    return res


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tracekit_golden_") as d:
        res = outputs(Path(d))
    GOLDEN.write_bytes(gzip.compress((json.dumps(res, indent=1, sort_keys=True) + "\n").encode(), mtime=0))
    print(f"{len(res)} outputs -> {GOLDEN} ({GOLDEN.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
