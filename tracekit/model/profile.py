"""What a torch.profiler trace (Chrome-trace JSON, one per rank) holds that tracekit reads.

Plain data, no file I/O: :mod:`tracekit.read.traces` fills it, :mod:`tracekit.analyze.measure`
pairs it with the compile log's recorded schedules. Times are the trace's own clock, in
microseconds: two ranks' clocks are never subtracted without saying how they were aligned.

    RankTrace                       one trace file, one rank (``distributedInfo.rank``)
     ├─ steps: [Span]               ``ProfilerStep#N`` (none without a profiler schedule)
     ├─ regions: [Span]             compiled regions and graph runs: ``Torch-Compiled Region: F/C``,
     │                              ``CompiledFunction``, ``CompiledFunctionBackward``,
     │                              ``## Call CompiledFxGraph ... ##``
     ├─ issued: [IssuedCollective]  collectives issued on the CPU, in start order
     ├─ waits: [Span]               ``_c10d_functional::wait_tensor`` on the CPU
     ├─ transfers: [Transfer]       where the data moved: gloo's worker events (CPU form) or the
     │                              NCCL kernels (GPU form), in start order
     ├─ compute: [Span]             the GPU form's other kernels (each stream's compute), in start order
     ├─ host_ops: [HostOp]          CPU ops timed for prediction: matmuls (with FLOPs) and copies
     │                              (with bytes), on every thread, in start order
     ├─ threads: {tid: name}        the trace's ``thread_name`` metadata
     └─ process_groups              ``distributedInfo.pg_config``
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: The two forms a trace comes in: collectives run by gloo on CPU threads, or NCCL kernels on a GPU.
CPU_FORM, GPU_FORM = "cpu", "gpu"


@dataclass(frozen=True, slots=True)
class Span:
    """One complete event (``"ph": "X"``) the reader keeps."""

    name: str
    ts_us: float
    dur_us: float
    tid: int  # thread id; on the GPU form a kernel's stream
    external_id: int | None = None  # links a CPU op to the kernels it launched (GPU form)

    @property
    def end_us(self) -> float:
        return self.ts_us + self.dur_us


@dataclass(frozen=True, slots=True)
class IssuedCollective:
    """A collective issued on the CPU: ``_c10d_functional::all_gather_into_tensor`` (its
    ``_out`` form once bucketed), ``_c10d_functional::reduce_scatter_tensor``,
    ``_c10d_functional::all_reduce_``, ...

    ``numel``/``dtype``/``bytes`` are its input's (the per-rank shard of an all-gather), from
    ``Input Dims`` and ``Input type``: None when the trace was recorded without
    ``record_shapes``. ``group_size`` from ``Concrete Inputs`` when recorded."""

    span: Span
    op: str  # the op without namespace: "all_gather_into_tensor_out"
    kind: str  # "all_gather" | "reduce_scatter" | "all_reduce" | the op for others
    numel: int | None = None
    dtype: str | None = None  # the profiler's spelling: "float", "c10::BFloat16"
    bytes: int | None = None
    group_size: int | None = None


@dataclass(frozen=True, slots=True)
class Transfer:
    """Where one collective's data moved: ``gloo:all_gather`` / ``gloo:all_reduce`` on a gloo
    worker thread (CPU form; gloo runs a reduce-scatter as an all-reduce, so ``kind`` is what
    gloo ran), or an NCCL kernel with its ``Collective name`` and message sizes (GPU form)."""

    span: Span
    kind: str  # "all_gather" | "reduce_scatter" | "all_reduce" | "broadcast" | ...
    numel_in: int | None = None  # GPU form: ``In msg nelems``
    numel_out: int | None = None  # GPU form: ``Out msg nelems``
    dtype: str | None = None
    group_size: int | None = None
    group: str | None = None  # ``Process Group Name`` (GPU form)
    group_ranks: tuple[int, ...] | None = None  # ``Process Group Ranks`` (GPU form)


@dataclass(frozen=True, slots=True)
class ProcessGroupInfo:
    """One entry of ``distributedInfo.pg_config``."""

    name: str
    desc: str
    size: int
    ranks: tuple[int, ...]
    backend: str = ""


@dataclass(frozen=True, slots=True)
class HostOp:
    """A CPU op the prediction of another cap times by: a matmul (``aten::mm``, ``addmm``,
    ``bmm``, ``baddbmm``: ``kind`` "matmul", ``flops`` from its ``Input Dims``) or a copy
    (``aten::copy_``: ``kind`` "copy", ``bytes`` of its source). Sizes are None without
    ``record_shapes``."""

    span: Span
    kind: str  # "matmul" | "copy"
    flops: float | None = None
    bytes: int | None = None


@dataclass(slots=True)
class RankTrace:
    """What one trace file says of one rank. ``complete`` is False when the file was cut (a
    truncated ``.gz`` or JSON): what was read before the cut is kept, and ``problems`` says
    where it stopped. ``has_shapes``: the trace was recorded with ``record_shapes=True``.
    ``events_read``: the events in the file (all of them, not only those kept)."""

    path: str
    rank: int | None
    world_size: int | None = None
    backend: str | None = None
    form: str = CPU_FORM
    main_tid: int | None = None  # the thread that ran the compiled graphs
    process_groups: list[ProcessGroupInfo] = field(default_factory=list)
    steps: list[Span] = field(default_factory=list)
    regions: list[Span] = field(default_factory=list)
    issued: list[IssuedCollective] = field(default_factory=list)
    waits: list[Span] = field(default_factory=list)
    transfers: list[Transfer] = field(default_factory=list)
    has_shapes: bool = False
    complete: bool = True
    events_read: int = 0
    problems: list[str] = field(default_factory=list)
    # added with the reader (tracekit.read.traces); all optional
    compute: list[Span] = field(default_factory=list)  # GPU form: non-collective kernels, tid = stream
    threads: dict[int, str] = field(default_factory=dict)  # ``thread_name`` metadata: tid -> name
    host_ops: list[HostOp] = field(default_factory=list)  # matmuls and copies, for prediction
    base_time_ns: int | None = None  # ``baseTimeNanoseconds``: the epoch time of the trace's ts 0
    layout: str = "kineto"  # how it was read: "kineto" (event by event) or "whole" (one parse)
    notes: list[str] = field(default_factory=list)  # how things were read, where it is not the usual way
