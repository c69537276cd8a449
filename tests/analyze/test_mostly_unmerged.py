"""The verdict's MOSTLY UNMERGED headline (issue 50, item 8): a run where pre-bucketing merged
some collectives but left most of them alone says so, in the verdict line and its JSON; read
on spmd_small_cap (cap 0.1 MB, 9 of 21 left alone: no headline) and on a copy whose forward
outcome is edited to merge nothing (14 of 21: the headline)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from conftest import FIXTURE_LOGS
from tracekit.render.summary_document import summary_document
from tracekit.analyze.verdict import stayed_unmerged, unmerged_counts
from tracekit.model import Counts, Graph
from tracekit.read.reader import load


def test_small_cap_counts_what_stayed_alone_from_the_size_names():
    run = load(FIXTURE_LOGS / "spmd_small_cap", jobs=1)
    fwd, bwd = run.ranks[0].graphs
    # forward: AG 8 -> 5, of which 3 kept their node's name (alone) and 2 are new buckets
    assert stayed_unmerged(fwd, "all_gather") == 3
    assert (stayed_unmerged(bwd, "all_gather"), stayed_unmerged(bwd, "reduce_scatter")) == (3, 3)
    assert unmerged_counts(run.ranks[0].graphs) == (9, 21)
    doc = summary_document(run)
    assert doc["verdict"]["text"] == "OK: all 4 ranks agree on all 2 graphs"  # 9 of 21: not most
    assert "unmerged" not in doc["verdict"]


def test_without_sizes_the_counts_give_a_floor():
    # 50 -> 42 with no size lists: at most 8 buckets of two or more, so at least 34 stayed alone
    g = Graph("0/0", 0, ["0"], 8, 1, 25.0, {"all_gather": Counts(50, 42), "all_reduce": Counts(1, 1)})
    assert stayed_unmerged(g, "all_gather") == 34
    assert stayed_unmerged(g, "all_reduce") == 0  # one collective: nothing to merge
    assert unmerged_counts([g]) == (34, 50)


def _edit_payload(path: Path, old: str, new: str) -> None:
    """Replace the one payload line holding ``old`` with ``new`` and set its entry's MD5 anew."""
    lines = path.read_text().split("\n")
    (i,) = [k for k, x in enumerate(lines) if x.startswith("\t") and old in x]
    env = max(k for k in range(i) if not lines[k].startswith("\t"))
    end = env + 1
    while end < len(lines) and lines[end].startswith("\t"):
        end += 1
    before = hashlib.md5("\n".join(x[1:] for x in lines[env + 1 : end]).encode()).hexdigest()
    lines[i] = lines[i].replace(old, new)
    after = hashlib.md5("\n".join(x[1:] for x in lines[env + 1 : end]).encode()).hexdigest()
    lines[env] = lines[env].replace(before, after)
    path.write_text("\n".join(lines))


def test_a_run_that_merged_a_few_says_most_stayed_unmerged(tmp_path):
    d = tmp_path / "spmd_small_cap"
    shutil.copytree(FIXTURE_LOGS / "spmd_small_cap", d)
    for f in sorted(Path(d).glob("*.log")):  # the forward's outcome: all 8 all-gathers left alone
        _edit_payload(f, "all_gather 8->5, reduce_scatter 0->0", "all_gather 8->8, reduce_scatter 0->0")
    doc = summary_document(load(d, jobs=1))
    assert doc["verdict"]["status"] == "agree"
    assert doc["verdict"]["text"] == (
        "OK: all 4 ranks agree on all 2 graphs; MOSTLY UNMERGED: at least 14 of 21 collectives "
        "stayed unmerged (cap 0.1 MB); see Bucketing per graph"
    )
    assert doc["verdict"]["unmerged"] == {"stayed": 14, "of": 21, "share": 0.5}
