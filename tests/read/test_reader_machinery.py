"""The switches of the reader's speed machinery (``tracekit/read/speed_switches.py``, timed by
bench/bench_machinery.py) change how a log is read, never what is read: spmd_auto's rank 0
(736 KB) made "large" here, read cut into segments and whole, and with the C loop and without."""

from __future__ import annotations

import pytest

from conftest import FIXTURE_LOGS
from tracekit.model.fields import rank_to_dict
from tracekit.read import envelopes, segments, speed_switches
from tracekit.read.reader import load

RANK0 = next((FIXTURE_LOGS / "spmd_auto").glob("dedicated_log_torch_trace_rank_0_*.log"))


def _read(monkeypatch, **switches) -> tuple[list[dict], dict]:
    for name, value in switches.items():
        monkeypatch.setattr(speed_switches if name == "SEGMENTS" else envelopes, name, value)
    run = load(RANK0, jobs=2)
    return [rank_to_dict(r) for r in run.ranks], run.diagnostics.counts


def test_a_large_log_is_cut_into_segments_only_with_the_switch_on(monkeypatch):
    monkeypatch.setattr(segments, "SPLIT_MIN_BYTES", 256 << 10)  # 736 KB is large here
    size = RANK0.stat().st_size
    assert segments.segment_count(size, 2) == 2
    monkeypatch.setattr(speed_switches, "SEGMENTS", False)  # TRACEKIT_NO_SEGMENTS=1
    assert segments.segment_count(size, 2) == 1


@pytest.mark.parametrize("switch", ["SEGMENTS", "NATIVE"])
def test_each_switch_off_reads_the_same(monkeypatch, switch):
    monkeypatch.setattr(segments, "SPLIT_MIN_BYTES", 256 << 10)
    monkeypatch.setattr(segments, "PARALLEL_MIN_BYTES", 0)
    on, on_counts = _read(monkeypatch)
    off, off_counts = _read(monkeypatch, **{switch: False})
    assert off == on and off_counts == on_counts == {}
    assert len(on) == 1 and on[0]["rank"] == 0 and len(on[0]["graphs"]) == 2
