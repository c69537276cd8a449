"""Ranks that compiled less than others, their logs ending after a whole compile (issue 50,
item 4): the verdict is the divergence, naming both readings (more compiles, or cut logs), with
how many more compile ids each rank logged. Made at test time from the real FSDP2 logs
(fixtures/logs/fsdp2: frames 0/0 eager, 1/0 and its recompile 1/1)."""

from __future__ import annotations

from pathlib import Path

from conftest import log_text, rank_log
from tracekit.render.summary_document import summary_document
from tracekit.read.reader import load


def _is_metrics(line: str, compile_id: str) -> bool:
    return line.startswith("V") and f'{{"compilation_metrics": {{"compile_id": "{compile_id}"' in line


def _after_entry(lines: list[str], i: int) -> int:
    """The index of the line after the entry whose envelope is line ``i``."""
    i += 1
    while i < len(lines) and lines[i].startswith("\t"):
        i += 1
    return i


def _log(directory: Path, source_rank: int, rank: int, recompiles: int) -> None:
    """fsdp2's rank ``source_rank`` written as rank ``rank``: its recompile 1/1 taken out
    (``recompiles`` 0: the log ends its forwards after 1/0, then the backward as torch wrote
    it), or repeated as 1/2 .. 1/N (``recompiles`` N: the same frame recompiled N times)."""
    lines = log_text(rank_log("fsdp2", source_rank)).split("\n")
    start = _after_entry(lines, next(i for i, ln in enumerate(lines) if _is_metrics(ln, "1/0")))
    end = _after_entry(lines, next(i for i, ln in enumerate(lines) if _is_metrics(ln, "1/1")))
    block = lines[start:end]
    if recompiles == 0:
        del lines[start:end]
    else:
        lines[end:end] = [
            ln.replace('"frame_compile_id": 1,', f'"frame_compile_id": {k},').replace(
                '"compile_id": "1/1"', f'"compile_id": "1/{k}"')
            if ln.startswith("V") else ln
            for k in range(2, recompiles + 1)
            for ln in block
        ]
    text = "\n".join(lines).replace(f'"rank": {source_rank},', f'"rank": {rank},')
    (directory / f"dedicated_log_torch_trace_rank_{rank}_edited.log").write_text(text)


def test_ranks_that_compiled_less_are_a_divergence_with_both_readings(tmp_path):
    # ranks 0 and 2 compiled 1/0 once; rank 1 recompiled it 6 times, rank 3 14 times. It read
    # "NO DATA ... the logs of ranks 0,2 end ...; the other ranks logged 1 more (compile 1/1)"
    for source, rank, recompiles in ((0, 0, 0), (0, 2, 0), (1, 1, 6), (1, 3, 14)):
        _log(tmp_path, source, rank, recompiles)
    run = load(tmp_path, jobs=1)
    assert [len(r.compile_ids) for r in run.ranks] == [2, 8, 2, 16] and run.diagnostics.total == 0
    doc = summary_document(run)
    assert doc["verdict"]["status"] == "diverge"
    assert doc["verdict"]["text"] == (
        "DIVERGE: 2 of 4 ranks (1,3) differ from the majority in what they compiled; ranks 0,2 logged 2 compile "
        "ids, ending after 1/0; rank 1 logged 6 more (from 1/1), rank 3 14 more (from 1/1): either ranks 1,3 "
        "compiled more (recompiles, other frames), or the logs of ranks 0,2 stop early, though each ends after a "
        "whole compile, which shows no cut"
    )
    assert "cut" not in doc["world"] and doc["diagnostics"]["counts"] == {}
    assert [(d["ranks"], d["majority_ranks"], d["length"], d["majority_length"], d["value"])
            for d in doc["compile_divergence"]] == [("1", "0,2", 8, 2, "1/1"), ("3", "0,2", 16, 2, "1/1")]


def test_one_rank_that_compiled_less_than_the_other(tmp_path):
    # two ranks: rank 0 compiled 1/0 once, rank 1 recompiled it (1/1, as fsdp2 logged it)
    _log(tmp_path, 0, 0, 0)
    _log(tmp_path, 1, 1, 1)
    doc = summary_document(load(tmp_path, jobs=1))
    assert doc["verdict"]["text"] == (
        "DIVERGE: ranks split into 2 groups with no majority (0; 1) in what they compiled; rank 0 logged 2 compile "
        "ids, ending after 1/0; rank 1 logged 1 more (from 1/1): either rank 1 compiled more (recompiles, other "
        "frames), or the log of rank 0 stops early, though it ends after a whole compile, which shows no cut"
    )
