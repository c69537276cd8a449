"""Benchmark of summarize's JSON writer: streamed (``write_summary_json``) against one
``orjson.dumps`` of the whole document, the same bytes; peak RSS of the process, best wall time.

    PYTHONPATH=. python bench/bench_summary_json.py LOG_OR_DIR [LOG_OR_DIR ...]

Each path is summarized to ``/dev/null`` in a fresh process per way and layout (grouped ranks,
``--per-rank``). Inputs: ``bench/make_large_log.py --size 1GB`` and ``bench/make_ranks.py
--ranks 2048 --small``. Figures (the module docstring of :mod:`tracekit.render.summary_json`):
the 1 GB log peaks at 23.9 MiB streamed, 42.1 MiB whole; 2,048 ranks ``--per-rank`` 22.4 MiB
against 56.9 MiB.
"""

from __future__ import annotations

import subprocess
import sys

CHILD = r"""
import resource, sys, time
import orjson
from tracekit.read.reader import load
from tracekit.render.summary_document import summary_document
from tracekit.render.summary_json import write_summary_json
path, per_rank, way = sys.argv[1], sys.argv[2] == "per-rank", sys.argv[3]
run = load([path])
loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
best = float("inf")
for _ in range(3):
    start = time.perf_counter()
    with open("/dev/null", "wb") as f:
        if way == "stream":
            write_summary_json(run, f.write, per_rank=per_rank)
        else:
            doc = summary_document(run, per_rank=per_rank)
            f.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
            del doc
    best = min(best, time.perf_counter() - start)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(f"{loaded / 1024:.1f} {peak / 1024:.1f} {best * 1000:.0f}")
"""


def main(paths: list[str]) -> int:
    print("| input | layout | way | peak RSS after load (MiB) | peak RSS (MiB) | summary + JSON (ms) |")
    print("|---|---|---|---|---|---|")
    for path in paths:
        for layout in ("groups", "per-rank"):
            for way in ("stream", "orjson"):
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, path, layout, way],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout.split()
                print(f"| {path} | {layout} | {way} | {out[0]} | {out[1]} | {out[2]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
