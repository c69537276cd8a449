"""Benchmark of ``tracekit report`` at 1,024 ranks: page size, render time, time to open.

Three 1,024-rank runs made from the ``diverge_rank`` fixture (tests/report_docs.py): ranks 300
and 777 differ (2 rank groups), every fourth rank differs (2 groups, 256 ranges), every rank has
its own cap (1,024 groups, the worst case). For each, side by side from one run:

- the page's size next to the summary JSON's (``tracekit summarize --format json``);
- rendering the page next to rendering the summarize table of the same document (best of 5);
- opening the page in headless chromium: navigation start to the end of the load event
  (script run), from ``performance.timing``, best of 3; a fresh browser each time, so this
  includes a first navigation's own cost.

Run: ``PYTHONPATH=. python bench/bench_report.py``. Goal (issue 15): under 3 MB, opens at once.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from browser import visit  # noqa: E402
from report_docs import distinct_run, wide_run  # noqa: E402

from tracekit.render.html import render_html  # noqa: E402
from tracekit.render.summary_document import summary_document  # noqa: E402
from tracekit.render.summary_text import render_text  # noqa: E402
from tracekit.render.text import dumps_json  # noqa: E402

LOAD_MS = "performance.timing.loadEventEnd - performance.timing.navigationStart"


def best(fn, repeat: int = 5) -> float:
    out = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t0)
    return out


def main() -> None:
    cases = [
        ("ranks 300,777 differ", wide_run()),
        ("every 4th rank differs", wide_run(odd=frozenset(range(3, 1024, 4)))),
        ("1,024 caps (worst)", distinct_run()),
    ]
    print(
        "| 1,024 ranks | groups | page KB | summary JSON KB | render s | table render s "
        "| render / table | chromium load ms | problems |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, run) in enumerate(cases):
            doc = summary_document(run)
            page = render_html(doc)
            groups = page.count('class="group"')
            t_html = best(lambda doc=doc: render_html(doc))
            t_text = best(lambda doc=doc: render_text(doc, "table"))
            path = os.path.join(tmp, f"r{i}.html")
            with open(path, "w", encoding="utf-8") as f:
                f.write(page)
            visits = [
                visit("file://" + path, os.path.join(tmp, f"profile{i}-{k}"), {"ms": LOAD_MS})
                for k in range(3)
            ]
            seen = min(visits, key=lambda v: v.values["ms"])
            print(
                f"| {name} | {groups} | {len(page.encode()) / 1024:.0f} | "
                f"{len(dumps_json(doc).encode()) / 1024:.0f} | {t_html:.3f} | {t_text:.3f} | "
                f"{t_html / t_text:.2f} | {seen.values['ms']} | {len(seen.problems())} |"
            )


if __name__ == "__main__":
    main()
