"""Saved summary documents (:mod:`tracekit.analyze.documents`): a document without the keys
``/2`` added gets them back from what it holds, the verdict by the one verdict function (said by
:mod:`tracekit.render.summary_words`)."""

from __future__ import annotations

import copy

import pytest
from report_docs import fixture_doc

from tracekit.analyze.documents import document_groups, document_verdict, document_world, rank_set
from tracekit.render.summary_words import verdict_dict


@pytest.mark.parametrize("name", ["diverge_rank", "fsdp2", "hsdp_diverge", "spmd_auto"])
def test_an_older_document_gets_the_verdict_summarize_wrote(name):
    doc = copy.deepcopy(fixture_doc(name))
    saved = doc.pop("verdict")
    for key in ("world", "groups"):  # a tracekit.summary/1 document: per-rank entries only
        doc.pop(key)
    assert verdict_dict(document_verdict(doc, document_world(doc))) == saved


def test_the_verdict_of_diverge_rank_from_its_per_rank_entries():
    doc = copy.deepcopy(fixture_doc("diverge_rank"))
    for key in ("verdict", "world", "groups"):
        doc.pop(key)
    world = document_world(doc)
    assert world == {"expected": None, "found": 4, "ranks": "0-3", "missing": [], "duplicated": [],
                     "derived": True}
    assert [g["ranks"] for g in document_groups(doc)] == ["0-2", "3"]
    assert verdict_dict(document_verdict(doc, world)) == {
        "status": "diverge",
        "text": "DIVERGE: 1 of 4 ranks (3) differ from the majority on 2 graphs",
        "sections": ["divergence", "schedule_divergence"],
    }


def test_ranks_missing_from_an_older_document_make_it_incomplete():
    doc = copy.deepcopy(fixture_doc("spmd_auto"))
    for key in ("verdict", "world", "groups"):
        doc.pop(key)
    del doc["ranks"][1]
    doc["totals"]["ranks"] = 3
    world = document_world(doc)
    assert world["missing"] == [1]
    assert verdict_dict(document_verdict(doc, world)) == {
        "status": "incomplete",
        "text": "INCOMPLETE: the 3 ranks found agree; 1 rank missing (1)",
        "sections": ["world"],
    }


def test_rank_sets_read_either_way_and_nothing_unbounded():
    assert rank_set([0, 2, None, True, "x"]) == {0, 2, None}
    assert rank_set("0-2,5") == {0, 1, 2, 5}
    assert rank_set("0-999999999") == set()
