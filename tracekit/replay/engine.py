"""Replay: rebuild each recorded graph, reproduce its recorded outcome, then plan other caps.

For each :class:`tracekit.read.reader.GraphSource` (one recorded ``pre_bucketing_fsdp_collectives``
outcome paired by the reader with the graph text it came from):

1. rebuild the graph (:func:`tracekit.replay.graph_text.parse_graph_text`); a graph that
   cannot be rebuilt is reported with its reason and the others go on;
2. plan at the recorded cap and compare the counts with the recorded ones (``reproduced``;
   the differences are listed, never hidden). The log prints the cap rounded to 0.1 MB; when
   that misses and the automatic cap rounds to the recorded one, the exact automatic cap is
   tried too and the note says so;
3. plan each requested cap (a number, or ``auto`` on the requested hardware) with one
   :class:`bucketing.FsdpPlanner` per graph, so a sweep costs one parse;
4. with ``apply``, run the full rewrite (``bucketing.pre_bucket_fsdp_collectives``) on a fresh
   rebuild, after registering the graph's group names as fake process groups, and lint it.

Each cap gets the counts after, the size of every collective after bucketing, the largest one
(the memory it pins) and the NCCL-model estimate of the FSDP collectives' time
(:mod:`tracekit.replay.comm_estimate`), next to the recorded cap's.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch.fx as fx

from tracekit.model import COLLECTIVE_TYPES, Diagnostics, Graph
from tracekit.model.rankset import format_ranks
from tracekit.replay import comm_estimate as ce
from tracekit.replay.graph_text import GraphTextError, parse_graph_text
from tracekit.replay.rewrite_counts import applied_result, collective_counts
from tracekit.replay.schedule_figures import round_ms, schedule_figures, shown_delta

#: /3: each cap (the recorded one's too) carries torch's overlap schedule (``final``, ``comm_ms``,
#: ``exposed_ms``, ``compute_ms``, ``est_ms``, ``peak_memory_bytes``, ``timeline``) and
#: ``totals.step`` sums them per cap; /2: one entry per distinct replay, with the ``ranks`` it
#: stands for (/1: one per rank and graph)
SCHEMA = "tracekit.replay/3"
KINDS = ("AG", "RS", "AR")


@dataclass(frozen=True)
class CapRequest:
    """A cap to replay: ``mb`` in MB, or None for the automatic cap on the requested hardware."""

    mb: float | None

    @property
    def label(self) -> str:
        return "auto" if self.mb is None else f"{self.mb:g}"


@dataclass
class ReplayOptions:
    caps: list[CapRequest] = field(default_factory=list)
    hardware: ce.Hardware = field(default_factory=ce.Hardware)
    apply: bool = False
    mode: str | None = None
    symbols: Mapping[str, int] = field(default_factory=dict)
    # what-if inductor aten_distributed_optimizations.bucket_mode, from which torch's FSDP pass
    # takes its all-gather grouping key, for the other caps (None: as configured); the
    # reproduction of the recorded outcome always uses the configured one
    bucket_mode: str | None = None
    # the overlap scheduler after pre-bucketing (tracekit.replay.overlap_schedule): None runs it
    # on graphs whose log shows it ran (overlap_scheduling_graph_before), True on all, False never
    overlap: bool | None = None
    gpu: str = "H100"  # whose roofline times nodes without a recorded estimate
    scheduler_overrides: dict[str, Any] = field(default_factory=dict)  # OverlapScheduler settings
    # processes for a graph's distinct caps, this one and jobs - 1 workers (:mod:`parallel_caps`);
    # 1: one after another here
    jobs: int = 1
    # the run's process groups read from every rank's logs (:mod:`process_groups`): sizes and
    # members of the groups a graph names without a size (a mesh's all-reduce groups); None: none read
    groups: Any = None


@dataclass
class CapReplay:
    """What bucketing does to one graph at one cap."""

    bucket_cap_mb: float
    cap_source: str  # "recorded", "override" (a --cap-mb), or the auto cap's rule ("saturation", ...)
    collectives: dict[str, dict[str, int]]  # long type -> {"before", "after"}, as summarize
    bucket_sizes_mb: dict[str, list[float]]  # short kind -> size of every collective after, graph order
    merged_buckets: int
    largest_bucket_mb: float
    estimated_comm_ms: float | None
    comm_ms_vs_recorded: float | None = None
    applied: dict[str, Any] | None = None  # --apply: rewrite outcome and lint
    hardware: dict[str, Any] | None = None  # what the comm model assumed: interconnect, group size, nNodes
    report: Any = field(default=None, repr=False, compare=False)  # the BucketingReport (not in JSON)
    schedule: Any = None  # overlap_schedule.ScheduledGraph, when the scheduler ran
    schedule_error: str | None = None  # why it could not run on this graph
    est_ms_vs_recorded: float | None = None

    def schedule_dict(self) -> dict[str, Any]:
        """The cap's figures after torch's overlap scheduler (tracekit.replay/3 fields)."""
        return schedule_figures(
            self.schedule, self.schedule_error, est_ms_vs_recorded=self.est_ms_vs_recorded
        )

    def to_dict(self) -> dict[str, Any]:
        return {**self._plan_dict(), **self.schedule_dict()}

    def _plan_dict(self) -> dict[str, Any]:
        return {
            "bucket_cap_mb": self.bucket_cap_mb,
            "cap_source": self.cap_source,
            "collectives": self.collectives,
            "bucket_sizes_mb": self.bucket_sizes_mb,
            "merged_buckets": self.merged_buckets,
            "largest_bucket_mb": self.largest_bucket_mb,
            "estimated_comm_ms": round_ms(self.estimated_comm_ms),
            "comm_ms_vs_recorded": round_ms(self.comm_ms_vs_recorded),
            "applied": self.applied,
            "hardware": self.hardware,
        }


@dataclass
class GraphReplay:
    """One recorded outcome, rebuilt and replayed (or the reason it could not be), standing
    for every rank in ``ranks`` that recorded the same outcome from the same graph text."""

    rank: int | None  # the rank whose file and line are shown (the first of ``ranks`` read)
    compile_id: str
    graph_index: int
    source: str  # "torch" | "tracekit"
    text_artifact: str | None
    recorded: Graph
    error: str | None = None
    nodes: int = 0
    parse_ms: float = 0.0
    symbols: dict[str, int] = field(default_factory=dict)  # symbolic sizes and the values used
    reproduced: bool | None = None
    mismatches: list[str] = field(default_factory=list)
    note: str | None = None
    reproduction: CapReplay | None = None
    #: the recorded cap scheduled on the what-if hardware (``--interconnect``, ...): the base of
    #: the what-if caps' "est vs recorded" and the step's recorded row (None: no such what-if)
    recorded_what_if: CapReplay | None = None
    recorded_comm_ms: float | None = None  # recorded buckets, costed on the requested hardware
    recorded_hardware: dict[str, Any] | None = None  # what that cost assumed (interconnect, ...)
    replays: list[CapReplay] = field(default_factory=list)
    ranks: list[int | None] = field(default_factory=list)  # empty: just ``rank``
    overlap_scheduled: bool = False  # the log shows torch's overlap scheduler ran on this graph
    compute_estimates_us: dict[str, float] | None = field(default=None, repr=False)
    final_reproduced: bool | None = None  # replayed final sequence == inductor_collective_schedule
    final_mismatches: list[str] = field(default_factory=list)
    estimates_after_overlap: bool = (
        False  # the recorded final's estimates were logged after overlap bucketing
    )
    replayer: Any = field(default=None, repr=False, compare=False)  # the GraphReplayer (not in JSON)
    # why the replay is incomplete beyond its caps' scheduler failures (e.g. a group it could not
    # register): such a graph is "partial", never "reproduced"
    partial_reasons: list[str] = field(default_factory=list)
    log_torch: str | None = None  # the torch that wrote the log (its torch_version entry)
    #: the process groups the graph uses, as registered (process_groups.GraphGroup)
    groups: list[Any] = field(default_factory=list)
    #: on a mesh: collectives pre-bucketing never handles and the what-ifs (:mod:`mesh_what_ifs`)
    mesh_not_prebucketed: dict[str, Any] | None = None
    #: on a mesh: collectives on groups the pass never saw that run once (no finding, no what-if:
    #: nothing to bucket them with), with what they carry read off the graph (mesh_what_ifs.run_once)
    mesh_run_once: list[dict[str, Any]] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.compile_id}:{self.graph_index}"

    @property
    def recorded_base(self) -> CapReplay | None:
        """The recorded cap the other caps are compared with: on the what-if hardware when
        there is one (:attr:`recorded_what_if`), else the reproduction."""
        return self.recorded_what_if or self.reproduction

    def incomplete(self) -> list[str]:
        """Why this replay is partial: the explicit reasons, then every cap whose run of torch's
        overlap scheduler failed (a graph the scheduler refused is never "reproduced")."""
        out = list(self.partial_reasons)
        caps = ([self.reproduction] if self.reproduction is not None else []) + list(self.replays)
        for i, cap in enumerate(caps):
            if cap.schedule_error:
                which = "recorded cap" if i == 0 and self.reproduction is not None else "cap"
                out.append(f"{which} {cap.bucket_cap_mb:g} MB: {cap.schedule_error}")
        return out

    @property
    def verdict(self) -> str:
        """``not rebuilt`` (no replay), ``not reproduced`` (counts, groups or the final sequence
        differ from the log), ``partial`` (reproduced as far as it ran, but a part did not run:
        :meth:`incomplete`), else ``reproduced``. Totals, the last line and the exit status all
        follow this one verdict."""
        if self.error is not None:
            return "not rebuilt"
        if self.reproduced is False or self.final_reproduced is False:
            return "not reproduced"
        if self.incomplete():
            return "partial"
        return "reproduced" if self.reproduced else "not reproduced"

    def on_mesh(self) -> bool:
        """The graph uses more than one group, or groups whose members were read from the logs."""
        return len(self.groups) > 1 or any(g.members for g in self.groups)

    @property
    def rank_set(self) -> list[int | None]:
        return self.ranks or [self.rank]

    def to_dict(self) -> dict[str, Any]:
        g = self.recorded
        return {
            "rank": self.rank,
            "ranks": format_ranks(self.rank_set),
            "compile_id": self.compile_id,
            "graph_index": self.graph_index,
            "source": self.source,
            "text_artifact": self.text_artifact,
            "file": g.file,
            "line": g.line,
            "log_torch": self.log_torch,
            "error": self.error,
            "nodes": self.nodes,
            "symbols": dict(self.symbols),
            "recorded": {
                "bucket_cap_mb": g.bucket_cap_mb,
                "fsdp_groups": list(g.fsdp_groups),
                "group_size": g.group_size,
                "n_nodes": g.n_nodes,
                "collectives": recorded_collectives(g),
                "sizes_mb": None
                if g.sizes_mb is None
                else {
                    "before": [asdict(x) for x in g.sizes_mb.before],
                    "after": None if g.sizes_mb.after is None else [asdict(x) for x in g.sizes_mb.after],
                },
                "estimated_comm_ms": round_ms(self.recorded_comm_ms),
                "hardware": self.recorded_hardware,
            },
            # True only for a complete reproduction; "counts_reproduced" is the counts check alone
            "reproduced": self.reproduced if self.reproduced is not True else self.verdict == "reproduced",
            "counts_reproduced": self.reproduced,
            "verdict": self.verdict,
            "partial": self.incomplete(),
            "mismatches": list(self.mismatches),
            "overlap_scheduled": self.overlap_scheduled,
            "final_reproduced": self.final_reproduced,
            "final_mismatches": list(self.final_mismatches),
            "recorded_final": _recorded_final(g),
            "note": self.note,
            "reproduction": None if self.reproduction is None else self.reproduction.to_dict(),
            "replays": [r.to_dict() for r in self.replays],
            # on a mesh only (the run's groups were read): a 1-D document is unchanged
            **({"process_groups": [g.to_dict() for g in self.groups]} if self.on_mesh() else {}),
            **({"not_prebucketed_on_mesh": self.mesh_not_prebucketed} if self.mesh_not_prebucketed else {}),
            **({"run_once_on_mesh": self.mesh_run_once} if self.mesh_run_once else {}),
            **(
                {}
                if self.recorded_what_if is None
                else {"recorded_what_if_hardware": self.recorded_what_if.to_dict()}
            ),
        }


def _recorded_final(g: Graph) -> dict[str, Any] | None:
    f = g.final
    if f is None:
        return None
    return {
        "counts": {k: v for k, v in f.counts.items() if v},
        "sizes": f.sizes,
        "collectives": [
            {
                "kind": c.kind,
                "op": c.op,
                "group": c.group,
                "group_size": c.group_size,
                "bytes": c.bytes,
                "est_ms": c.est_ms,
            }
            for c in f.collectives
        ],
    }


def recorded_collectives(g: Graph) -> dict[str, dict[str, int]]:
    return {
        t: {"before": g.collectives[t].before, "after": g.collectives[t].after}
        for t in COLLECTIVE_TYPES
        if t in g.collectives
    }


# --- one graph -----------------------------------------------------------------------------------


class GraphReplayer:
    """A rebuilt graph and its planner, asked for plans at many caps."""

    def __init__(self, text: str, options: ReplayOptions):
        from bucketing import FsdpPlanner

        self.text = text
        self.options = options
        t0 = time.perf_counter()
        self.gm = parse_graph_text(text, options.symbols)
        self.parse_ms = (time.perf_counter() - t0) * 1e3
        self.planner = FsdpPlanner(self.gm, options.mode)
        self.what_if_planner = (
            FsdpPlanner(self.gm, options.mode, options.bucket_mode) if options.bucket_mode else self.planner
        )
        self.by_name: dict[str, fx.Node] = {n.name: n for n in self.gm.graph.nodes}
        self.group_size = self.planner.group_size
        #: every process group the graph uses, with its size and members (:mod:`process_groups`)
        self.groups = _graph_groups(self.gm, options)
        self._bytes: dict[str, int] = {}  # collective name -> torch's fx size, computed once
        #: distinct scheduler inputs -> their ScheduledGraph (see :meth:`scheduled`)
        self._schedules: dict[tuple, Any] = {}
        self.scheduler_runs = 0  # how many times torch's scheduler ran (the rest were reused)
        self._linted = False  # a rewrite of a copy was checked (lint) already
        #: torch's NCCL estimates by op and shapes, per hardware modelled
        self._estimates: dict[ce.Hardware, dict[tuple, float]] = {}

    def at(
        self,
        cap_mb: float,
        cap_source: str,
        hardware: ce.Hardware,
        apply: bool = False,
        what_if: bool = False,
    ) -> CapReplay:
        """Plan at ``cap_mb``; comm time on ``hardware``; with ``apply``, the rewrite too;
        ``what_if``: in the what-if bucket mode (``ReplayOptions.bucket_mode``)."""
        report = (self.what_if_planner if what_if else self.planner).plan(cap_mb)
        collectives = collective_counts(report)
        sizes = {k: [s["size_mb"] for s in report.sizes_after if s["type"] == k] for k in KINDS}
        largest = max((x for v in sizes.values() for x in v), default=0.0)
        out = CapReplay(
            bucket_cap_mb=float(cap_mb),
            cap_source=cap_source,
            collectives=collectives,
            bucket_sizes_mb=sizes,
            merged_buckets=sum(len(v) for v in report.buckets.values()),
            largest_bucket_mb=largest,
            estimated_comm_ms=self.comm_ms(report, hardware),
            hardware=ce.describe(hardware, self.group_size),
            report=report,
        )
        if apply:
            out.applied = self.apply(cap_mb, collectives)
        return out

    def scheduled(self, cap_mb: float, compute_us: dict[str, float] | None, what_if: bool = False):
        """Pre-bucket a copy of the rebuilt graph at ``cap_mb`` (our pass), then run torch's
        overlap scheduler on it: an :class:`overlap_schedule.ScheduledGraph`. Raises on a
        graph the scheduler refuses (the caller notes it).

        Caps that give the same buckets give the same pre-bucketed graph, so the scheduler's
        input is the same: its result is reused (a fresh ``ScheduledGraph`` sharing the first
        one's lists; nothing downstream writes to them). The key is the plan's partition
        (member names per bucket, per kind), the bucket mode, the scheduler settings, the GPU
        and the compute estimates: on a 1,000-layer graph the caps from 16 MB to 2 GB all give
        one bucket per kind, and the scheduler runs once for them."""
        import dataclasses
        import gc

        import torch._inductor.config as inductor_config

        from bucketing.gc_pause import gc_paused
        from bucketing.prebucket import pre_bucketed_copy
        from tracekit.replay import overlap_schedule as osch

        # The collector paused: plan, copy, pass and scheduler allocate many small objects
        # beside a large live graph, and full collections over it were a fifth of a sweep's time.
        with gc_paused():
            key, settings = self.schedule_key(cap_mb, compute_us, what_if)
            done = self._schedules.get(key)
            if done is not None:
                return dataclasses.replace(done)
            self.register_groups()
            mode = key[0]
            # a copy rewritten with the plan made on the rebuilt graph, not planned again, made
            # without the nodes the rewrite erases; checked (lint) at the first cap, the rewrite
            # is the same after
            with inductor_config.patch({"aten_distributed_optimizations.bucket_mode": mode}):
                gm, report = pre_bucketed_copy(
                    self.gm,
                    self.what_if_planner if what_if else self.planner,
                    cap_mb,
                    lint=not self._linted,
                )
            self._linted = True
            hw = self.what_if_hardware(what_if)
            out = osch.schedule(
                gm,
                compute_us,
                osch.GPUS[self.options.gpu],
                settings,
                _bucket_members(report),
                self._estimates.setdefault(hw, {}),
                None if hw == ce.Hardware() else lambda: ce.scheduler_model(hw, self.planner.fsdp_groups),
            )
            del gm, report
        # What the cap made and dropped is collected now, not at a later cap's expense: its
        # copy and what torch's scheduler held while it ran, moved to the older generation by
        # young_collections (overlap_schedule.schedule), which the collector's thresholds
        # reach seldom while caps run paused: 120,000-140,000 objects a cap on 1,000 layers.
        gc.collect(1)
        self.keep_schedule(key, out)
        return dataclasses.replace(out)

    def schedule_key(
        self, cap_mb: float, compute_us: dict[str, float] | None, what_if: bool = False
    ) -> tuple[tuple, dict[str, Any]]:
        """What makes :meth:`scheduled`'s result at ``cap_mb`` (the key its results are kept
        by: bucket mode, GPU, settings, the plan's partition, compute estimates), and the
        scheduler settings."""
        import torch._inductor.config as inductor_config

        from tracekit.replay import overlap_schedule as osch

        planner = self.what_if_planner if what_if else self.planner
        mode = planner.bucket_mode
        with inductor_config.patch({"aten_distributed_optimizations.bucket_mode": mode}):
            # the reproduction runs with the run's settings; the overrides are what-ifs
            settings = osch.scheduler_settings(self.options.scheduler_overrides if what_if else None)
        key = (
            mode,
            self.options.gpu,
            repr(sorted(settings.items())),
            planner.partition(cap_mb),
            None if compute_us is None else tuple(sorted(compute_us.items())),
            self.what_if_hardware(what_if),
        )
        return key, settings

    def what_if_hardware(self, what_if: bool) -> ce.Hardware:
        """The hardware torch's NCCL model answers for in the scheduler: the what-if one
        (``--interconnect``, ``--group-size``, ``--gpus-per-node``) for the what-if caps, the
        one torch detects (as the run logged it) for the reproduction."""
        return self.options.hardware if what_if else ce.Hardware()

    def knows_schedule(self, key: tuple) -> bool:
        return key in self._schedules

    def keep_schedule(self, key: tuple, scheduled: Any) -> None:
        """Keep a schedule made for ``key`` (here, or by a worker: :mod:`parallel_caps`)."""
        self.scheduler_runs += 1
        self._schedules[key] = scheduled

    def register_groups(self) -> None:
        """Every process group the graph uses, as a fake process group of its size (what the
        pass, the scheduler and its NCCL model look up): the FSDP groups, and on a mesh the
        others (:mod:`tracekit.replay.process_groups`). A group of unknown size is left out
        (the replay says so: :meth:`unsized_groups`)."""
        from tracekit.replay import process_groups

        table = self.options.groups
        process_groups.register(self.groups, None if table is None else table.world)

    def unsized_groups(self) -> list[str]:
        """Why a group of the graph could not be registered, one line each."""
        return [
            f"process group {g.name!r} ({', '.join(g.kinds)}): size unknown (the graph names none; "
            "read every rank's logs for its members)"
            for g in self.groups
            if g.size is None
        ]

    def comm_ms(self, report, hardware: ce.Hardware) -> float | None:
        """NCCL-model time of the FSDP collectives after bucketing (buckets cost their sum)."""
        group_size = hardware.group_size or self.group_size
        if not group_size or not report.fsdp_groups:
            return None
        in_bucket: dict[str, int] = {}
        for _kind, buckets in report.buckets.items():
            for i, bucket in enumerate(buckets):
                for m in bucket:
                    in_bucket[m.name] = i
        units: list[tuple[str, int]] = []
        bucket_bytes: dict[tuple[str, int], int] = {}
        for s in report.sizes_before:
            n_bytes = self._bytes.get(s["name"])
            if n_bytes is None:
                node = self.by_name.get(s["name"])
                if node is None:
                    return None
                n_bytes = self._bytes[s["name"]] = ce.collective_bytes(node)
            if s["name"] in in_bucket:
                key = (s["type"], in_bucket[s["name"]])
                bucket_bytes[key] = bucket_bytes.get(key, 0) + n_bytes
            else:
                units.append((s["type"], n_bytes))
        units += [(kind, b) for (kind, _), b in bucket_bytes.items()]
        return ce.comm_ms(units, group_size, hardware)

    def apply(self, cap_mb: float, planned: dict[str, dict[str, int]]) -> dict[str, Any]:
        """The full rewrite on a fresh rebuild; its counts, whether they match the plan, lint."""
        import torch._inductor.config as inductor_config

        from bucketing import pre_bucket_fsdp_collectives

        def rewrite() -> tuple[Any, fx.GraphModule]:
            gm = parse_graph_text(self.text, self.options.symbols)
            self.register_groups()
            mode_patch = {"aten_distributed_optimizations.bucket_mode": self.what_if_planner.bucket_mode}
            with inductor_config.patch(mode_patch):
                return pre_bucket_fsdp_collectives(gm, mode=self.options.mode, bucket_cap_mb=cap_mb), gm

        return applied_result(rewrite, planned)


def _graph_groups(gm: fx.GraphModule, options: ReplayOptions) -> list[Any]:
    from tracekit.replay import process_groups

    return process_groups.graph_groups(gm, options.groups or process_groups.GroupTable.empty())


def _bucket_members(report) -> dict[str, list[str]]:
    """Merged collective node name -> the original collectives it holds: the merged entries of
    ``sizes_after`` (names that were not there before), in order, with ``buckets`` in order."""
    before = {s["name"] for s in report.sizes_before}
    out: dict[str, list[str]] = {}
    for kind, buckets in report.buckets.items():
        merged = [s["name"] for s in report.sizes_after if s["type"] == kind and s["name"] not in before]
        if len(merged) == len(buckets):
            out.update({name: [m.name for m in b] for name, b in zip(merged, buckets, strict=False)})
    return out


def compare_final(recorded: Graph, sched: Any, after_overlap: bool = False) -> list[str]:
    """What differs between the recorded final collectives and the replayed schedule.

    The recorded ``inductor_collective_schedule`` names the ops in run order, without sizes; the
    reader gives them sizes and estimates from the graph's estimation CSV, kind by kind. That
    CSV is ``fx_collectives_analytical_estimation`` (written when the scheduler starts: graph
    order before scheduling) unless ``fx_collectives_estimations_after_overlap_bucketing`` was
    logged (``after_overlap``: run order). So: the kinds are compared in run order, and each
    kind's (group, bytes, estimate) in the order that CSV has, against the replay's collectives
    in the same order (before the scheduler ran, or after it)."""
    f = recorded.final
    if f is None:
        return []
    out = []
    want = [c.kind for c in f.collectives]
    have = [c.kind for c in sched.final]
    if want != have:
        i = next(
            (i for i, (a, b) in enumerate(zip(want, have, strict=False)) if a != b), min(len(want), len(have))
        )
        a = want[i] if i < len(want) else "nothing"
        b = have[i] if i < len(have) else "nothing"
        out.append(
            f"final collective #{i + 1}: recorded {a}, replayed {b} "
            f"({len(want)} recorded, {len(have)} replayed)"
        )
        return out
    if f.sizes != "matched":  # the log gave no sizes to compare
        return out
    mine = sched.final if after_overlap else sched.before_overlap
    for kind in dict.fromkeys(want):
        w = [(c.group, c.bytes) for c in f.collectives if c.kind == kind]
        h = [(c.group, c.bytes) for c in mine if c.kind == kind]
        if w != h:
            i = next((i for i, (a, b) in enumerate(zip(w, h, strict=False)) if a != b), min(len(w), len(h)))
            was = w[i] if i < len(w) else "nothing"
            got = h[i] if i < len(h) else "nothing"
            out.append(f"{kind} #{i + 1} (group, bytes): recorded {was}, replayed {got}")
            continue
        we = [c.est_ms for c in f.collectives if c.kind == kind]
        he = [c.est_ms for c in mine if c.kind == kind]
        for i, (rec_ms, rep_ms) in enumerate(zip(we, he, strict=False)):
            if rec_ms is not None and rep_ms == rep_ms and abs(rec_ms - rep_ms) > 5e-5:
                out.append(f"{kind} #{i + 1}: recorded estimate {rec_ms} ms, replayed {rep_ms} ms")
                break
    return out


def _compare(recorded: Graph, got: CapReplay) -> list[str]:
    """What differs between a recorded outcome and a replay: counts, and the verbose sizes
    when the log has them (sizes before by name; sizes after per kind, names aside, since
    merged buckets get new names)."""
    out = []
    for t in COLLECTIVE_TYPES:
        want = recorded.collectives.get(t)
        have = got.collectives.get(t)
        if want is None or have is None:
            continue
        if (want.before, want.after) != (have["before"], have["after"]):
            out.append(
                f"{t}: recorded {want.before}->{want.after}, replayed {have['before']}->{have['after']}"
            )
    sizes = recorded.sizes_mb
    if sizes is None or got.report is None:
        return out
    want_before = [(s.type, s.size_mb, s.name) for s in sizes.before]
    have_before = [(s["type"], s["size_mb"], s["name"]) for s in got.report.sizes_before]
    if want_before != have_before:
        i = next(
            (i for i, (a, b) in enumerate(zip(want_before, have_before, strict=False)) if a != b),
            min(len(want_before), len(have_before)),
        )
        a = want_before[i] if i < len(want_before) else "nothing"
        b = have_before[i] if i < len(have_before) else "nothing"
        out.append(f"sizes before: collective #{i + 1}: recorded {a}, rebuilt graph {b}")
    if sizes.after is not None:
        for kind in KINDS:
            want_after = sorted(s.size_mb for s in sizes.after if s.type == kind)
            have_after = sorted(s["size_mb"] for s in got.report.sizes_after if s["type"] == kind)
            if want_after != have_after:
                out.append(f"sizes after ({kind}, MB): recorded {want_after}, replayed {have_after}")
    return out


def replay_source(
    src: Any,
    options: ReplayOptions,
    rebuilt: dict[tuple, Any] | None = None,
    on_cap: Callable[[int, int], None] | None = None,
) -> GraphReplay:
    """Replay one :class:`tracekit.read.reader.GraphSource`; never raises for a bad graph.

    ``rebuilt`` (optional, shared across calls) keeps each distinct graph text's rebuilt graph
    and planner, or its error: ranks normally log identical graphs, so ``--all-ranks`` parses
    each one once. ``on_cap(done, total)``: after the reproduction and after each other cap.
    """
    g: Graph = src.graph
    out = GraphReplay(
        rank=src.rank,
        compile_id=src.compile_id,
        graph_index=src.graph_index,
        source=g.source,
        text_artifact=src.text_artifact,
        recorded=g,
        overlap_scheduled=bool(getattr(src, "overlap_scheduled", False)),
        compute_estimates_us=getattr(src, "compute_estimates_us", None),
        estimates_after_overlap=bool(getattr(src, "estimates_after_overlap", False)),
        log_torch=getattr(src, "torch_version", None),
    )
    if src.text is None:
        out.error = (
            "no graph text logged for this outcome (neither before_post_grad_graph nor "
            "tracekit_fsdp_input_graph)"
        )
        return out
    # Hints the log recorded for symbolic sizes (if the reader offers them), then --sym.
    hints = dict(src.symbol_hints)
    if hints:
        options = replace(options, symbols={**hints, **options.symbols})
    key = (
        hashlib.sha256(src.text.encode("utf-8", "surrogatepass")).hexdigest(),
        tuple(sorted(options.symbols.items())),
        options.mode,
        options.bucket_mode,
    )
    rp = None if rebuilt is None else rebuilt.get(key)
    if rp is None:
        try:
            rp = GraphReplayer(src.text, options)
        except GraphTextError as e:
            rp = f"cannot rebuild the graph from {src.text_artifact}: {e}"
        except Exception as e:  # noqa: BLE001 - a planner failure on one graph must not stop the others
            rp = f"cannot plan the rebuilt graph: {type(e).__name__}: {str(e)[:300]}"
        if rebuilt is not None:
            rebuilt[key] = rp
    if isinstance(rp, str):
        out.error = rp
        return out
    out.replayer = rp
    out.groups = list(rp.groups)
    out.nodes = len(rp.gm.graph.nodes)
    out.symbols = dict(rp.gm.meta.get("tracekit_symbols", {}))
    out.parse_ms = rp.parse_ms
    try:
        _replay_caps(rp, out, options, on_cap)
    except Exception as e:  # noqa: BLE001
        out.error = f"replay failed: {type(e).__name__}: {str(e)[:300]}"
    return out


def _replay_caps(
    rp: GraphReplayer,
    out: GraphReplay,
    options: ReplayOptions,
    on_cap: Callable[[int, int], None] | None = None,
) -> None:
    g = out.recorded
    # The recorded cap, on the recorded hardware (torch's own detection): no what-if here.
    here = ce.Hardware()
    # torch's line rounds the cap to 0.1 MB: an automatic cap is retried exactly below.
    repro = rp.at(g.bucket_cap_mb, "recorded", here)
    mismatches = _compare(g, repro)
    if mismatches and rp.group_size:
        exact = ce.auto_cap(rp.group_size, ce.Hardware())
        if round(exact.cap_mb, 1) == round(g.bucket_cap_mb, 1) and exact.cap_mb != g.bucket_cap_mb:
            retry = rp.at(exact.cap_mb, "recorded", here)
            if not _compare(g, retry):
                out.note = (
                    f"reproduced with the exact automatic cap {exact.cap_mb:.4f} MB "
                    f"(the log prints {g.bucket_cap_mb:.1f})"
                )
                repro, mismatches = retry, []
    if rp.group_size is not None and g.group_size is not None and rp.group_size != g.group_size:
        mismatches.append(f"group_size: recorded {g.group_size}, rebuilt graph {rp.group_size}")
    if list(rp.planner.fsdp_groups) != list(g.fsdp_groups):
        mismatches.append(
            f"fsdp_groups: recorded {g.fsdp_groups}, rebuilt graph {list(rp.planner.fsdp_groups)}"
        )
    run_schedule = options.overlap if options.overlap is not None else out.overlap_scheduled
    if run_schedule:
        out.partial_reasons += rp.unsized_groups()
    hw = options.hardware
    requests: list[CapRequest | None] = list(options.caps)
    if (options.bucket_mode or options.scheduler_overrides) and not requests:
        requests = [None]  # the recorded cap, in the what-if bucket mode or scheduler settings
    if on_cap is not None:  # progress never goes back: caps scheduled side by side are told first
        on_cap = _forward_only(on_cap)
    if run_schedule and options.jobs > 1:
        from tracekit.replay.parallel_caps import schedule_in_workers

        try:
            wanted = [(repro.bucket_cap_mb, False)]
            wanted += [(float(_request_cap(rp, req, repro, hw)), True) for req in requests]
        except Exception:  # noqa: BLE001 - the loop below meets the same error, and says it
            wanted = []
        total = 1 + len(requests)
        ready = None if on_cap is None else (lambda n, step=on_cap: step(n, total))
        schedule_in_workers(rp, wanted, out.compute_estimates_us, options.jobs, on_ready=ready)
    if run_schedule:
        _schedule_cap(rp, out, repro, what_if=False)
        if repro.schedule is not None and out.overlap_scheduled:
            out.final_mismatches = compare_final(g, repro.schedule, out.estimates_after_overlap)
            out.final_reproduced = None if g.final is None else not out.final_mismatches
        if repro.schedule is not None and len(rp.groups) > 1:  # a mesh: what pre-bucketing leaves
            from tracekit.replay.mesh_what_ifs import mesh_not_prebucketed

            out.mesh_not_prebucketed = mesh_not_prebucketed(rp, repro, out.compute_estimates_us)
    if len(rp.groups) > 1:  # a mesh: the collectives on other groups that run once (no finding)
        from tracekit.replay.mesh_what_ifs import run_once

        rp.register_groups()
        out.mesh_run_once = run_once(rp)
    out.reproduction = repro
    if on_cap is not None:
        on_cap(1, 1 + len(requests))
    out.reproduced = not mismatches
    out.mismatches = mismatches
    base_ms, base_hw = repro.estimated_comm_ms, repro.hardware
    if hw != here:
        # Compare with the recorded buckets costed on the requested hardware.
        base_ms, base_hw = rp.comm_ms(repro.report, hw), ce.describe(hw, rp.group_size)
    out.recorded_comm_ms = base_ms
    out.recorded_hardware = base_hw
    if run_schedule and hw != here and repro.schedule is not None:
        # the recorded cap on the what-if hardware: what the what-if caps are compared with
        out.recorded_what_if = replace(repro, applied=None, schedule=None, schedule_error=None)
        _schedule_cap(rp, out, out.recorded_what_if, what_if=True)
        if out.recorded_what_if.schedule is None:
            out.recorded_what_if = None
    base = out.recorded_base
    for req in requests:
        if req is None:
            r = rp.at(repro.bucket_cap_mb, "recorded", hw, apply=options.apply, what_if=True)
        elif req.mb is None:
            cap = ce.auto_cap(rp.group_size, hw)
            r = rp.at(cap.cap_mb, cap.source, hw, apply=options.apply, what_if=True)
        else:
            r = rp.at(req.mb, "override", hw, apply=options.apply, what_if=True)
        if r.estimated_comm_ms is not None and base_ms is not None:
            r.comm_ms_vs_recorded = shown_delta(r.estimated_comm_ms, base_ms)
        if run_schedule:
            _schedule_cap(rp, out, r, what_if=True)
            if r.schedule is not None and base is not None and base.schedule is not None:
                r.est_ms_vs_recorded = shown_delta(r.schedule.est_ms, base.schedule.est_ms)
        out.replays.append(r)
        if on_cap is not None:
            on_cap(1 + len(out.replays), 1 + len(requests))


def _forward_only(on_cap: Callable[[int, int], None]) -> Callable[[int, int], None]:
    """``on_cap``, called only when the count of caps done goes up (with ``--jobs``, the caps
    scheduled side by side are counted as their schedules are made; the loop over the caps
    that follows then finds them done)."""
    told = 0

    def step(done: int, total: int) -> None:
        nonlocal told
        if done > told:
            told = done
            on_cap(done, total)

    return step


def _request_cap(rp: GraphReplayer, req: CapRequest | None, repro: CapReplay, hw: ce.Hardware) -> float:
    """The cap ``req`` asks for (as the loop of :func:`_replay_caps` plans it)."""
    if req is None:
        return repro.bucket_cap_mb
    if req.mb is None:
        return ce.auto_cap(rp.group_size, hw).cap_mb
    return req.mb


def _schedule_cap(rp: GraphReplayer, out: GraphReplay, cap: CapReplay, what_if: bool) -> None:
    """torch's overlap scheduler on ``cap``'s pre-bucketed graph; a refusal is a note."""
    try:
        cap.schedule = rp.scheduled(cap.bucket_cap_mb, out.compute_estimates_us, what_if=what_if)
    except Exception as e:  # noqa: BLE001 - a graph the scheduler refuses must not stop the others
        cap.schedule_error = f"overlap scheduler failed: {type(e).__name__}: {str(e)[:300]}"


# --- many graphs ---------------------------------------------------------------------------------


def _record(g: Graph) -> tuple:
    """Everything of a recorded outcome that a replay uses or reports: the cap it is reproduced
    at, the groups, counts and sizes the reproduction is compared with, and the shown fields."""

    def sizes(xs):
        return None if xs is None else tuple((x.type, x.size_mb, x.name) for x in xs)

    return (
        g.bucket_cap_mb,
        tuple(g.fsdp_groups),
        g.group_size,
        g.n_nodes,
        g.source,
        tuple((t, c.before, c.after) for t, c in g.collectives.items()),
        None if g.sizes_mb is None else (sizes(g.sizes_mb.before), sizes(g.sizes_mb.after)),
    )


def same_replay_key(src: Any) -> tuple:
    """Sources with equal keys replay identically, so one replay stands for all of them: the
    same graph text and symbol hints (what is rebuilt), the same recorded outcome (so the
    reproduction verdict is each one's), the same graph, and the same directory (separate runs
    stay separate rows). The options are the same for every source of one call. The text is
    compared whole (ranks' texts are usually one shared string, see ``replay_sources_for``)."""
    hints = getattr(src, "symbol_hints", None) or {}
    compute = getattr(src, "compute_estimates_us", None) or {}
    final = src.graph.final
    return (
        os.path.dirname(src.graph.file),
        src.compile_id,
        src.graph_index,
        src.text_artifact,
        src.text,
        tuple(sorted(hints.items())),
        _record(src.graph),
        tuple(compute.items()),
        bool(getattr(src, "overlap_scheduled", False)),
        None if final is None else tuple((c.kind, c.group, c.bytes, c.est_ms) for c in final.collectives),
        getattr(src, "torch_version", None),
    )


def replay_sources(
    sources: Iterable[Any],
    options: ReplayOptions,
    progress: Callable[[int, int], None] | None = None,
    on_cap: Callable[[int, int, int, int], None] | None = None,
) -> list[GraphReplay]:
    """Replay many sources: each distinct replay (:func:`same_replay_key`) once, reported for
    every rank that shares it (``GraphReplay.ranks``), in the order first seen. 1,024 ranks
    that logged the same graphs cost about one rank; a rank that recorded another outcome from
    the same text is its own entry (its reproduction is checked against its own record).
    ``progress(done, total)``: distinct replays done, after each one; ``on_cap(graph, graphs,
    done, total)``: within the ``graph``-th of ``graphs`` (from 1), its caps done (the
    reproduction first) of ``total``, after each."""
    groups: dict[tuple, tuple[Any, list[int | None]]] = {}
    for src in sources:
        key = same_replay_key(src)
        if key in groups:
            groups[key][1].append(src.rank)
        else:
            groups[key] = (src, [src.rank])
    rebuilt: dict[tuple, Any] = {}  # texts shared by entries that differ in their records
    out: list[GraphReplay] = []
    for src, ranks in groups.values():
        n = len(out) + 1
        step = None if on_cap is None else (lambda done, total, n=n: on_cap(n, len(groups), done, total))
        r = replay_source(src, options, rebuilt, step)
        r.ranks = ranks
        out.append(r)
        if progress is not None:
            progress(len(out), len(groups))
    return out


@dataclass
class ReplayRun:
    """What :func:`tracekit.replay.replay` returns: the graphs replayed, how, and bad input."""

    graphs: list[GraphReplay]
    options: ReplayOptions
    diagnostics: Diagnostics

    def to_dict(self) -> dict:
        """The ``tracekit.replay/3`` document."""
        return replay_document(self.graphs, self.options, {"diagnostics": self.diagnostics.to_dict()})


def replay_document(results: list[GraphReplay], options: ReplayOptions, extra: dict | None = None) -> dict:
    """The ``tracekit.replay/3`` JSON document."""
    hw = options.hardware
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "caps": [c.label for c in options.caps],
        "hardware": {
            "interconnect": hw.interconnect,
            "group_size": hw.group_size,
            "gpus_per_node": hw.gpus_per_node,
        },
        "apply": options.apply,
        "bucket_mode": options.bucket_mode,
        "scheduler": {
            "overlap": options.overlap,
            "gpu": options.gpu,
            "overrides": dict(options.scheduler_overrides),
            "estimates": "compute: the log's fx_compute_nodes_runtime_estimation (Benchmarked "
            "Est(us)); collectives: torch's NCCL model; other nodes: torch's roofline "
            "on the named GPU",
        },
        "symbols": dict(options.symbols),
        "graphs": [r.to_dict() for r in results],
        "totals": {
            "graphs": len(results),
            "outcomes": sum(len(r.rank_set) for r in results),  # recorded outcomes the graphs stand for
            "rebuilt": sum(1 for r in results if r.error is None),
            "reproduced": sum(1 for r in results if r.verdict == "reproduced"),
            "partial": sum(1 for r in results if r.verdict == "partial"),
            "not_reproduced": sum(1 for r in results if r.verdict == "not reproduced"),
            "final_reproduced": sum(1 for r in results if r.final_reproduced),
            "final_not_reproduced": sum(1 for r in results if r.final_reproduced is False),
            "failed": sum(1 for r in results if r.error is not None),
        },
    }
    doc["totals"]["step"] = step_totals(results, options)
    if any(r.mesh_not_prebucketed for r in results):  # the whole step at each cap with each what-if
        from tracekit.replay.mesh_whole_step import add_step_what_ifs

        add_step_what_ifs(doc)
    import torch

    from tracekit.replay.torch_versions import EXPOSED_BASIS, torch_section

    doc["torch"] = torch_section(doc["graphs"], torch.__version__)
    doc["scheduler"]["exposed_ms"] = EXPOSED_BASIS
    if extra:
        doc.update(extra)
    return doc


def cap_labels(options: ReplayOptions) -> list[str]:
    """The labels of the caps every graph was replayed at: ``recorded``, then each request."""
    what_if = options.bucket_mode or options.scheduler_overrides
    reqs = [c.label for c in options.caps] or (["recorded (what-if settings)"] if what_if else [])
    return ["recorded"] + reqs


def step_totals(results: list[GraphReplay], options: ReplayOptions) -> list[dict[str, Any]]:
    """The whole step (every graph replayed: forward + backward) per cap, from the graphs whose
    schedule ran: final counts added, times added, peak memory the largest graph's (the graphs
    of a step run one after another; their activations between them are not counted)."""
    out = []
    # one step is one rank's graphs: those of the lowest rank (ranks that logged other graphs,
    # as in a non-SPMD run, are in the per-graph rows, not in this step)
    ranks = [x for r in results for x in r.rank_set if x is not None]
    lowest = min(ranks) if ranks else None
    results = [r for r in results if lowest is None or lowest in r.rank_set]
    for i, label in enumerate(cap_labels(options)):
        at_cap = [
            r.recorded_base if i == 0 else (r.replays[i - 1] if i - 1 < len(r.replays) else None)
            for r in results
        ]
        caps = [c for c in at_cap if c is not None]
        scheds = [c.schedule for c in caps if c.schedule is not None]
        failed = len([c for c in caps if c.schedule_error])
        counts: dict[str, int] = {}
        for sc in scheds:
            for k, v in sc.counts().items():
                counts[k] = counts.get(k, 0) + v
        entry: dict[str, Any] = {
            "cap": label,
            "rank": lowest,
            "bucket_cap_mb": sorted({c.bucket_cap_mb for c in caps}),
            "graphs": len(scheds),
            "graphs_without_schedule": len(caps) - len(scheds),
            "graphs_scheduler_failed": failed,
            # the step's figures leave these graphs out: say so wherever they are shown
            "partial": (
                f"partial: {len(scheds)} of {len(scheds) + failed} graph{'s' if len(scheds) + failed != 1 else ''} "
                "(the overlap scheduler "
                f"failed on {failed})"
                if failed
                else None
            ),
            "final": {"counts": counts, "collectives": sum(counts.values())},
            "comm_ms": round_ms(sum(sc.comm_ms for sc in scheds)) if scheds else None,
            "exposed_ms": round_ms(sum(sc.exposed_ms for sc in scheds)) if scheds else None,
            "compute_ms": round_ms(sum(sc.compute_ms for sc in scheds)) if scheds else None,
            "est_ms": round_ms(sum(sc.est_ms for sc in scheds)) if scheds else None,
            "peak_memory_bytes": max((sc.peak_memory_bytes for sc in scheds), default=None),
            "largest_bucket_mb": max((c.largest_bucket_mb for c in caps), default=None),
            "fallback_nodes": sum(len(sc.fallback) for sc in scheds),
        }
        out.append(entry)
    base = out[0]["est_ms"] if out else None
    for e in out:
        e["est_ms_vs_recorded"] = (
            None if base is None or e["est_ms"] is None else round_ms(e["est_ms"] - base)
        )
    return out


__all__ = [
    "SCHEMA",
    "CapRequest",
    "CapReplay",
    "GraphReplay",
    "GraphReplayer",
    "ReplayOptions",
    "ReplayRun",
    "cap_labels",
    "compare_final",
    "replay_document",
    "step_totals",
    "replay_source",
    "replay_sources",
]
