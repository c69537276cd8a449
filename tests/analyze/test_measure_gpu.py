"""The measured pairing on the GPU form (NCCL kernels). No compile log exists beside a real NCCL
trace in the fixtures, so the trace here is built from the fields torch's profiler writes on a
GPU run: CPU ops ``_c10d_functional::all_gather_into_tensor`` / ``reduce_scatter_tensor`` with an
``External id``, and ``ncclDevKernel_*`` kernels on a stream carrying ``Collective name``, ``In msg
nelems``, ``Out msg nelems``, ``Group size``, ``dtype`` and the ``External id`` of the op that
launched them; the log's side is a recorded final schedule as the reader builds it."""

from __future__ import annotations

from tracekit.analyze.measure import measure
from tracekit.model import FinalSchedule, Rank, Run, ScheduledCollective
from tracekit.model.profile import GPU_FORM, IssuedCollective, RankTrace, Span, Transfer

MAIN, STREAM = 100, 7  # the main thread; the NCCL stream


def _final(position: int, colls: list[tuple[str, str, int, float]]) -> FinalSchedule:
    cs = [ScheduledCollective(kind, op, "0", 2, nbytes, est) for kind, op, nbytes, est in colls]
    return FinalSchedule("0/0", position, FinalSchedule.count_kinds(cs), cs, 2, "matched")


def _run() -> Run:
    rank = Rank(0)
    rank.schedules_without_outcome = [
        _final(0, [("all_gather", "all_gather_into_tensor", 4_194_304, 0.05)]),
        _final(1, [("reduce_scatter", "reduce_scatter_tensor", 8_388_608, 0.08)]),
    ]
    return Run(["log"], [rank])


def _trace(swap_kernels: bool = False) -> RankTrace:
    """One step: forward (one all-gather of 1,048,576 floats a rank), backward (one
    reduce-scatter of 2,097,152 floats). Kernels carry their launching op's External id."""
    t = RankTrace("gpu.json", 0, 2, "nccl", form=GPU_FORM, main_tid=MAIN, has_shapes=True)
    t.steps = [Span("ProfilerStep#3", 0.0, 10_000.0, MAIN)]
    t.regions = [
        Span("Torch-Compiled Region: 0/0", 100.0, 3_000.0, MAIN),
        Span("CompiledFunction", 150.0, 2_900.0, MAIN),
        Span("## Call CompiledFxGraph fabc ##", 200.0, 2_800.0, MAIN),
        Span("CompiledFunctionBackward", 4_000.0, 5_000.0, MAIN),
        Span("## Call CompiledFxGraph fdef ##", 4_050.0, 4_900.0, MAIN),
    ]
    ag = IssuedCollective(
        Span("_c10d_functional::all_gather_into_tensor", 300.0, 40.0, MAIN, external_id=11),
        "all_gather_into_tensor", "all_gather", 1_048_576, "float", 4_194_304, 2,
    )
    rs = IssuedCollective(
        Span("_c10d_functional::reduce_scatter_tensor", 4_100.0, 50.0, MAIN, external_id=22),
        "reduce_scatter_tensor", "reduce_scatter", 2_097_152, "float", 8_388_608, 2,
    )
    t.issued = [ag, rs]
    t.waits = [
        Span("_c10d_functional::wait_tensor", 900.0, 5.0, MAIN),
        Span("_c10d_functional::wait_tensor", 8_000.0, 5.0, MAIN),
    ]
    k_ag = Transfer(
        Span("ncclDevKernel_AllGather_RING_LL", 350.0, 1_500.0, STREAM, external_id=11),
        "all_gather", 1_048_576, 2_097_152, "Float", 2, "0", (0, 1),
    )
    k_rs = Transfer(
        Span("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL", 4_200.0, 2_500.0, STREAM, external_id=22),
        "reduce_scatter", 2_097_152, 1_048_576, "Float", 2, "0", (0, 1),
    )
    t.transfers = [k_rs, k_ag] if swap_kernels else [k_ag, k_rs]
    return t


def test_gpu_form_pairs_each_collective_with_its_kernel_by_external_id():
    doc = measure(_run(), [_trace()]).document()
    (rank,) = doc["ranks"]
    assert (rank["form"], rank["paired"], rank["unpaired"]) == ("gpu", 2, [])
    fwd, bwd = rank["graphs"]
    assert [(g["label"], g["phase"]) for g in (fwd, bwd)] == [("0/0:0", "forward"), ("0/0:1", "backward")]
    assert [(c["kind"], c["bytes"], c["est_ms"], c["measured_ms"], c["ratio"]) for c in fwd["collectives"]] == [
        ("all_gather", 4_194_304, 0.05, 1.5, 30.0)
    ]
    assert [(c["kind"], c["bytes"], c["measured_ms"], c["ratio"]) for c in bwd["collectives"]] == [
        ("reduce_scatter", 8_388_608, 2.5, 31.2)
    ]
    assert (fwd["median_ms"], bwd["median_ms"]) == (2.8, 4.9)
    assert rank["steps"] == {"count": 1, "median_ms": 10.0, "min_ms": 10.0, "max_ms": 10.0}
    assert doc["verdict"].startswith("collectives 31x slower than estimated; ")


def test_the_external_id_wins_over_start_order():
    """Kernels listed out of order still pair with the op that launched them."""
    doc = measure(_run(), [_trace(swap_kernels=True)]).document()
    fwd, bwd = doc["ranks"][0]["graphs"]
    assert (fwd["collectives"][0]["measured_ms"], bwd["collectives"][0]["measured_ms"]) == (1.5, 2.5)


def test_a_kernel_of_another_size_is_no_pair():
    run = _run()
    run.ranks[0].schedules_without_outcome[0] = _final(0, [("all_gather", "all_gather_into_tensor", 2_097_152, 0.05)])
    doc = measure(run, [_trace()]).document()
    rank = doc["ranks"][0]
    assert rank["paired"] == 1
    assert rank["unpaired"] == [
        {
            "step": 0,
            "graph": "0/0:0",
            "issued": 1,
            "reason": "collective 0: issued all_gather of 4,194,304 B, the log records 2,097,152 B",
        }
    ]


def test_gpu_exposed_is_the_compute_stream_idle_during_the_kernel():
    """Compute kernels on stream 8 cover 350-1,000 and 1,400-1,850 us of the all-gather's kernel
    (350-1,850): 400 us idle; none run during the reduce-scatter's (4,200-6,700): all exposed."""
    t = _trace()
    t.compute = [Span("gemm", 300.0, 700.0, 8), Span("gemm", 1_400.0, 600.0, 8), Span("relu", 7_000.0, 50.0, 8)]
    fwd, bwd = measure(_run(), [t]).document()["ranks"][0]["graphs"]
    assert (fwd["collectives"][0]["exposed_ms"], fwd["exposed_measured_ms"]) == (0.4, 0.4)
    assert (bwd["collectives"][0]["exposed_ms"], bwd["exposed_measured_ms"]) == (2.5, 2.5)


def test_without_compute_kernels_gpu_exposed_is_not_measured_and_said():
    doc = measure(_run(), [_trace()]).document()
    assert [g["exposed_measured_ms"] for g in doc["ranks"][0]["graphs"]] == [None, None]
    assert "rank 0: the trace holds no compute kernel: exposed time is not measured" in doc["notes"]
