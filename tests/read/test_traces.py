"""The torch.profiler trace reader on real traces: a 2-GPU NCCL trace (rank 0, from HTA) and the
2-rank gloo runs of ``fixtures/profiled/gloo_cap_{1,12,64}mb`` (torch 2.13 on CPU), and copies of them
edited here the way damaged or unusual files come: cut short, without ``distributedInfo``,
without ``ProfilerStep``, without ``record_shapes``, on one line, named by
``tensorboard_trace_handler``. The values asserted were read off those files."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tracekit.model.profile import CPU_FORM, GPU_FORM, ProcessGroupInfo, RankTrace
from tracekit.read import traces
from tracekit.read.traces import (
    TraceError,
    collective_kind,
    find_trace_files,
    rank_from_trace_name,
    read_trace,
    read_traces,
)

NCCL = ROOT / "fixtures" / "traces" / "nccl_2gpu" / "rank0.json.gz"
GLOO = ROOT / "fixtures" / "profiled" / "gloo_cap_1mb" / "traces"

GLOO_PG = [ProcessGroupInfo(name="0", desc="default_pg", size=2, ranks=(0, 1), backend="cpu:gloo,cuda:gloo")]


@pytest.fixture(scope="module")
def gloo() -> list[RankTrace]:
    return read_traces(GLOO, jobs=1)


def _rank0_text() -> str:
    """The gloo run's rank 0 trace, decompressed."""
    (f,) = [f for f in find_trace_files(GLOO) if read_trace(f).rank == 0]
    return gzip.decompress(f.read_bytes()).decode()


# -- the GPU form ----------------------------------------------------------------------------


def test_nccl_trace_gpu_form():
    t = read_trace(NCCL)
    assert (t.rank, t.world_size, t.backend, t.form) == (0, 2, "nccl", GPU_FORM)
    assert t.process_groups == [ProcessGroupInfo("0", "default_pg", 2, (0, 1), "cuda:nccl")]
    assert (t.complete, t.problems, t.notes, t.layout) == (True, [], [], "kineto")
    assert t.events_read == 40573
    assert t.base_time_ns == 1711964646000000000
    assert [s.name for s in t.steps] == ["ProfilerStep#4", "ProfilerStep#5", "ProfilerStep#6"]
    assert t.steps[0].dur_us == 222442.191
    assert t.has_shapes is False
    # eager DDP: no compiled region, nothing issued by _c10d_functional
    assert (t.regions, t.issued, t.waits) == ([], [], [])
    # 15 all-reduces and 6 broadcasts, NCCL kernels on stream 40
    assert Counter(x.kind for x in t.transfers) == {"all_reduce": 15, "broadcast": 6}
    assert {x.span.tid for x in t.transfers} == {40}
    first = t.transfers[0]
    assert (first.kind, first.numel_in, first.numel_out, first.dtype) == ("broadcast", 53120, 53120, "Float")
    assert (first.group, first.group_ranks, first.group_size) == ("0", (0, 1), 2)
    assert first.span.external_id == 114
    assert first.span.name.startswith("ncclKernel_Broadcast_RING_LL_Sum_int8_t")
    big = max(t.transfers, key=lambda x: x.numel_in or 0)
    assert (big.kind, big.numel_in) == ("all_reduce", 7875584)
    # the other kernels, compute on stream 7, in start order
    assert len(t.compute) == 2679
    assert {s.tid for s in t.compute} == {7}
    assert all(a.ts_us <= b.ts_us for a, b in zip(t.compute, t.compute[1:], strict=False))
    assert t.main_tid == 2910249
    assert t.threads[40] == "stream 40 "


# -- the CPU form ----------------------------------------------------------------------------


def test_gloo_traces_sorted_by_rank(gloo):
    assert [t.rank for t in gloo] == [0, 1]
    for t in gloo:
        assert (t.world_size, t.backend, t.form, t.has_shapes) == (2, "gloo", CPU_FORM, True)
        assert (t.complete, t.problems, t.notes) == (True, [], [])
        assert t.process_groups == GLOO_PG
        assert t.events_read == 5455
        assert t.compute == []
        assert t.base_time_ns == 1790857026000000000


def test_gloo_steps_regions_and_threads(gloo):
    for t in gloo:
        assert [s.name for s in t.steps] == [
            "ProfilerStep#2",
            "ProfilerStep#3",
            "ProfilerStep#4",
            "ProfilerStep#5",
            "ProfilerStep#6",
            "ProfilerStep#7",
            "ProfilerStep#8",
            "ProfilerStep#9",
        ]
        assert Counter(r.name for r in t.regions) == {
            "Torch-Compiled Region: 0/0": 8,
            "CompiledFunction": 8,
            "CompiledFunctionBackward": 8,
            "## Call CompiledFxGraph None ##": 16,
        }
        assert t.threads[t.main_tid].endswith("(python)")
        # every step issued the same 23 collectives
        assert [sum(s.ts_us <= c.span.ts_us < s.end_us for c in t.issued) for s in t.steps] == [23] * 8


def test_gloo_issued_collectives(gloo):
    for t in gloo:
        assert len(t.issued) == 184
        assert Counter((c.op, c.kind, c.numel, c.dtype, c.bytes, c.group_size) for c in t.issued) == {
            ("all_gather_into_tensor", "all_gather", 524288, "float", 2 << 20, 2): 120,
            ("reduce_scatter_tensor", "reduce_scatter", 1048576, "float", 4 << 20, 2): 64,
        }
        # the first step's order: ten gathers, then reduce-scatters between gathers
        assert [c.kind for c in t.issued[:13]] == ["all_gather"] * 10 + [
            "reduce_scatter",
            "all_gather",
            "reduce_scatter",
        ]
        assert t.issued[10].span.name == "_c10d_functional::reduce_scatter_tensor"
        assert {c.span.tid for c in t.issued} == {t.main_tid}
        assert len(t.waits) == 184
        assert {w.name for w in t.waits} == {"_c10d_functional::wait_tensor"}


def test_gloo_transfers_match_issued_in_order(gloo):
    for t in gloo:
        assert Counter((x.kind, x.numel_in, x.dtype) for x in t.transfers) == {
            ("all_gather", 524288, "float"): 120,
            ("all_reduce", 1048576, "float"): 64,
        }
        # on gloo's two worker threads, never the main one
        workers = {x.span.tid for x in t.transfers}
        assert len(workers) == 2 and t.main_tid not in workers
        assert t.threads[t.main_tid] == f"thread {t.main_tid} (python)"
        # the k-th gloo event is the k-th issued collective (gloo runs a reduce-scatter as an all-reduce)
        issued = [{"reduce_scatter": "all_reduce"}.get(c.kind, c.kind) for c in t.issued]
        assert [x.kind for x in t.transfers] == issued
        assert [x.numel_in for x in t.transfers] == [c.numel for c in t.issued]
    # the workers' names are the trace's own: kineto named one of rank 1's "python", not
    # "pt_gloo_runloop", so nothing may rely on a thread's name to find gloo's work
    names = [sorted(t.threads[tid].split(" ", 2)[2] for tid in {x.span.tid for x in t.transfers}) for t in gloo]
    assert names == [["(pt_gloo_runloop)", "(pt_gloo_runloop)"], ["(pt_gloo_runloop)", "(python)"]]


def test_jobs_and_progress_do_not_change_what_is_read(gloo):
    calls: list[tuple[int, int]] = []
    assert read_traces([GLOO], jobs=2, progress=lambda d, n: calls.append((d, n))) == gloo
    assert calls[-1] == (2, 2)


# -- finding files ---------------------------------------------------------------------------


def test_tensorboard_names_in_a_directory(tmp_path):
    text = _rank0_text()
    (tmp_path / "host_7.1796609675504766725.pt.trace.json").write_text(
        text.replace('"rank": 0,', '"rank": 3,')
    )
    (tmp_path / "host_8.1796609675668188959.pt.trace.json.gz").write_bytes(gzip.compress(text.encode()))
    (tmp_path / "notes.txt").write_text("not a trace")
    (tmp_path / "steps.json").write_text('{"step_ms": [1.5]}')  # JSON, no trace: skipped
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "other.json").write_text("{}")
    skipped: list[Path] = []
    files = find_trace_files(tmp_path, skipped)
    assert skipped == [tmp_path / "steps.json"]
    assert [f.name for f in files] == [
        "host_7.1796609675504766725.pt.trace.json",
        "host_8.1796609675668188959.pt.trace.json.gz",
    ]
    # the rank is the trace's own, never the name's; sorted by it
    traces = read_traces([tmp_path, files[0]], jobs=2)
    assert [(t.rank, Path(t.path).name) for t in traces] == [
        (0, "host_8.1796609675668188959.pt.trace.json.gz"),
        (3, "host_7.1796609675504766725.pt.trace.json"),
    ]
    assert traces[0].issued == traces[1].issued


def test_missing_paths_and_empty_directories_are_trace_errors(tmp_path):
    with pytest.raises(TraceError, match="no such file or directory"):
        find_trace_files(tmp_path / "nope")
    with pytest.raises(TraceError, match="holds no .json or .json.gz trace$"):
        read_traces(tmp_path)
    (tmp_path / "steps.json").write_text("{}")
    with pytest.raises(
        TraceError, match=r"holds no .json or .json.gz trace \(1 JSON file without traceEvents\)$"
    ):
        read_traces(tmp_path)
    # a file named is read, trace or not
    with pytest.raises(TraceError, match=r"steps\.json: not a Chrome trace \(no traceEvents list\)"):
        read_traces(tmp_path / "steps.json")


# -- edited copies ---------------------------------------------------------------------------


def test_truncated_gz_keeps_what_was_read(tmp_path, gloo):
    data = (GLOO / Path(gloo[0].path).name).read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(data[: len(data) // 2])
    t = read_trace(cut)
    assert (t.rank, t.complete) == (0, False)
    (problem,) = t.problems
    assert problem.startswith(f"{cut}: the file stops inside an event, ")
    assert "gzip: Compressed file ended before the end-of-stream marker was reached" in problem
    assert 0 < t.events_read < 5455
    assert 0 < len(t.issued) < 184
    assert all(c in gloo[0].issued for c in t.issued)
    assert t.steps == gloo[0].steps[: len(t.steps)]


def test_truncated_json_says_where_it_stopped(tmp_path):
    raw = _rank0_text().encode()
    cut = tmp_path / "cut.json"
    cut.write_bytes(raw[:500_000])
    t = read_trace(cut)
    assert (t.rank, t.complete) == (0, False)
    assert t.problems == [
        f"{cut}: the file stops inside an event, 500,000 bytes into its JSON; the {t.events_read:,} events before it were read"
    ]
    assert t.events_read == raw[:500_000].count(b"\n  {") - 1
    # cut just after an event: all of those read, the array never closed
    end = raw.rfind(b"\n  },", 0, 500_000) + len(b"\n  },")
    cut.write_bytes(raw[:end])
    t = read_trace(cut)
    assert t.complete is False
    assert t.problems == [
        f"{cut}: the file stops after {t.events_read:,} events, {end:,} bytes into its JSON, before the event array closes"
    ]
    assert t.events_read == raw[:end].count(b"\n  {")


def test_no_distributed_info(tmp_path):
    text = re.sub(r'\n *"distributedInfo": .*\n', "\n", _rank0_text())
    named = tmp_path / "trace_rank_5.json"
    named.write_text(text)
    t = read_trace(named)
    assert (t.rank, t.world_size, t.backend, t.process_groups) == (5, None, None, [])
    assert t.notes == ["rank 5 taken from the file name: the trace has no distributedInfo.rank"]
    assert (t.complete, len(t.issued)) == (True, 184)
    plain = tmp_path / "vm_1.2.pt.trace.json"
    plain.write_text(text)
    t = read_trace(plain)
    assert t.rank is None
    assert t.notes == ["no rank: the trace has no distributedInfo.rank and its name gives none"]
    # read with others: the unknown rank last
    assert [x.rank for x in read_traces([plain, GLOO], jobs=1)] == [0, 1, None]


def test_no_profiler_step(tmp_path):
    text = _rank0_text()
    blocks = re.findall(r"\n  \{\n(?:    .*\n)*?  \},", text)
    steps = [b for b in blocks if '"name": "ProfilerStep#' in b]
    assert len(steps) == 8
    for b in steps:
        text = text.replace(b, "", 1)
    f = tmp_path / "no_steps.json"
    f.write_text(text)
    t = read_trace(f)
    assert (t.steps, t.complete, t.events_read) == ([], True, 5447)
    assert (len(t.issued), len(t.transfers), len(t.regions)) == (184, 184, 40)


def test_no_record_shapes(tmp_path):
    text = _rank0_text().replace('"record_shapes": 1,', '"record_shapes": 0,')
    text = re.sub(r'"Concrete Inputs": .*?, (?="Ev Idx")', "", text)
    f = tmp_path / "no_shapes.json"
    f.write_text(text)
    t = read_trace(f)
    assert t.has_shapes is False
    assert {(c.kind, c.numel, c.dtype, c.bytes, c.group_size) for c in t.issued} == {
        ("all_gather", None, None, None, None),
        ("reduce_scatter", None, None, None, None),
    }
    assert {x.numel_in for x in t.transfers} == {None}


def test_one_line_json_is_read_whole(tmp_path, gloo):
    doc = json.loads(_rank0_text())
    f = tmp_path / "one_line.json"
    f.write_text(json.dumps(doc))
    t = read_trace(f)
    assert t.layout == "whole"
    assert t.notes == ["read whole, not event by event: its events are not one block of lines each"]
    for field in (
        "rank",
        "process_groups",
        "steps",
        "regions",
        "issued",
        "waits",
        "transfers",
        "events_read",
    ):
        assert getattr(t, field) == getattr(gloo[0], field), field
    f.write_text(json.dumps(doc)[:300_000])
    t = read_trace(f)
    assert (t.complete, t.issued) == (False, [])
    assert t.problems[0].startswith(f"{f}: not valid JSON (")


def test_not_a_trace_is_a_trace_error(tmp_path):
    log = next((ROOT / "fixtures" / "logs").rglob("*.log*"))
    f = tmp_path / "log.json.gz"
    f.write_bytes(log.read_bytes())
    with pytest.raises(TraceError, match=r"log\.json\.gz: not a Chrome trace"):
        read_trace(f)
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(TraceError, match=r"list\.json: not a Chrome trace"):
        read_trace(tmp_path / "list.json")
    # among good ones, reading them all stops there
    with pytest.raises(TraceError, match=r"list\.json: not a Chrome trace"):
        read_traces([GLOO, tmp_path / "list.json"], jobs=2)


def test_names():
    assert [
        rank_from_trace_name(n) for n in ("rank0.json.gz", "trace_rank_12.json", "vm_23699.17.pt.trace.json")
    ] == [
        0,
        12,
        None,
    ]
    assert [
        collective_kind(n) for n in ("all_gather_into_tensor_out", "reduce_scatter_tensor", "all_reduce_")
    ] == [
        "all_gather",
        "reduce_scatter",
        "all_reduce",
    ]
    assert [collective_kind(n) for n in ("allreduce", "broadcast", "AllGather", "wait")] == [
        "all_reduce",
        "broadcast",
        "all_gather",
        "wait",
    ]


def test_read_on_dask_is_the_local_read(gloo):
    distributed = pytest.importorskip("distributed")  # the `dask` extra

    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=True, dashboard_address=":0"
    ) as c:
        calls: list[tuple[int, int]] = []
        got = read_traces(GLOO, dask=c.scheduler_address, progress=lambda d, n: calls.append((d, n)))
    assert got == gloo
    assert calls[-1] == (2, 2)


def test_a_malformed_event_is_skipped_and_said(tmp_path):
    raw = _rank0_text().encode()
    at = raw.index(b'"name": "_c10d_functional::all_gather_into_tensor"')
    start = raw.rfind(b"\n  {", 0, at) + 1
    dur = raw.index(b'"dur": ', at) + len(b'"dur": ')
    broken = raw[:dur] + b"x" + raw[dur:]  # "dur": x534.367
    f = tmp_path / "broken.json"
    f.write_bytes(broken)
    t = read_trace(f)
    assert (t.complete, len(t.issued), t.events_read) == (True, 183, 5455)
    (problem,) = t.problems
    assert problem.startswith(f"{f}: the event at byte {start:,} is not valid JSON (")
    assert problem.endswith("): skipped")


def test_a_thousand_ranks_in_parallel(tmp_path):
    raw = _rank0_text()
    # rank 0's first 100 events (the gloo threads' come first in the file), as a whole trace
    blocks = raw.split("\n  },\n  {\n")
    small = "\n  },\n  {\n".join(blocks[:100]) + "\n  }\n  ]}"
    for r in range(1000):
        text = small.replace('"rank": 0, "world_size": 2', f'"rank": {r}, "world_size": 1000')
        (tmp_path / f"host_{(r * 7919) % 1000}.{r}.pt.trace.json").write_text(text)
    calls: list[tuple[int, int]] = []
    traces = read_traces(tmp_path, jobs=2, progress=lambda d, n: calls.append((d, n)))
    assert [t.rank for t in traces] == list(range(1000))
    assert {(t.world_size, t.complete, t.events_read, len(t.transfers)) for t in traces} == {
        (1000, True, 100, 12)
    }
    assert calls[-1] == (1000, 1000)


def test_small_pieces_read_the_same(monkeypatch, gloo):
    # every event boundary falls across pieces somewhere: the same trace comes out
    whole = read_trace(NCCL)
    monkeypatch.setattr(traces, "PIECE", 1000)
    assert read_trace(NCCL) == whole
    assert read_trace(gloo[1].path) == gloo[1]


#: What each profiled cap's ranks issued, per (op, numel of the input): the same on both ranks.
ISSUED_BY_CAP = {
    "gloo_cap_1mb": (5455, {("all_gather_into_tensor", 524288): 120, ("reduce_scatter_tensor", 1048576): 64}),
    "gloo_cap_12mb": (
        2479,
        {
            ("all_gather_into_tensor_out", 1572864): 32,
            ("all_gather_into_tensor_out", 1048576): 8,
            ("all_gather_into_tensor", 524288): 8,
            ("reduce_scatter_tensor", 3145728): 16,
            ("reduce_scatter_tensor", 2097152): 8,
        },
    ),
    "gloo_cap_64mb": (
        1479,
        {
            ("all_gather_into_tensor_out", 4194304): 8,
            ("all_gather_into_tensor_out", 3670016): 8,
            ("reduce_scatter_tensor", 8388608): 8,
        },
    ),
}


@pytest.mark.parametrize("cap", sorted(ISSUED_BY_CAP))
def test_every_profiled_cap(cap):
    events, issued = ISSUED_BY_CAP[cap]
    traces = read_traces(ROOT / "fixtures" / "profiled" / cap / "traces", jobs=1)
    assert [t.rank for t in traces] == [0, 1]
    for t in traces:
        assert (t.events_read, t.complete, t.problems, len(t.steps), len(t.regions)) == (
            events,
            True,
            [],
            8,
            40,
        )
        assert Counter((c.op, c.numel) for c in t.issued) == issued
        assert {(c.dtype, c.group_size) for c in t.issued} == {("float", 2)}
        assert all(c.bytes == 4 * c.numel for c in t.issued if c.numel is not None)
        assert len(t.waits) == len(t.issued)
        # the k-th gloo event is the k-th issued collective, kind and size
        assert [(x.kind, x.numel_in) for x in t.transfers] == [
            ("all_reduce" if c.kind == "reduce_scatter" else c.kind, c.numel) for c in t.issued
        ]
