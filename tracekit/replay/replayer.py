"""One rebuilt graph and its planner, asked for plans at many caps (:class:`GraphReplayer`):
the counts and sizes after bucketing and the NCCL-model comm time at each cap
(:meth:`GraphReplayer.at`), torch's overlap scheduler on a pre-bucketed copy
(:meth:`GraphReplayer.scheduled`, each distinct input once), and with ``apply`` the full rewrite
on a fresh rebuild, linted (:meth:`GraphReplayer.apply`). :mod:`tracekit.replay.engine` drives
it over the recorded graphs.
"""

from __future__ import annotations

import time
from typing import Any

import torch.fx as fx

from tracekit.model import SHORT_NAMES
from tracekit.replay import comm_estimate as ce
from tracekit.replay.results import CapReplay, ReplayOptions
from tracekit.replay.rewrite_counts import applied_result, collective_counts


class GraphReplayer:
    """A rebuilt graph and its planner, asked for plans at many caps."""

    def __init__(self, text: str, options: ReplayOptions, inference: bool = False, post_grad: bool = True):
        """``text``: the graph as logged; ``post_grad``: it is a ``before_post_grad_graph``,
        which torch's post-grad passes then rewrote for its scheduler (the replay runs them
        again: :func:`tracekit.replay.post_grad.rebuilt_as_scheduled`); ``inference``: its
        compile had no backward."""
        from bucketing import FsdpPlanner
        from tracekit.replay.post_grad import rebuilt_as_scheduled

        self.text = text
        self.options = options
        self._as_scheduled = (inference, post_grad)
        #: torch's pass pre-bucketed the run's graphs (its log's graph is before_post_grad_graph,
        #: not our pass's input): each cap's copy is left in the order torch's pass leaves
        self.torch_order = post_grad
        t0 = time.perf_counter()
        self.gm, self.post_grad_note = rebuilt_as_scheduled(text, options.symbols, inference, post_grad)
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
        self.run_overrides: dict[str, Any] = {}  # the run's scheduler settings (run_settings)
        #: the run timed nodes with torch's models alone (run_settings.stock_estimates)
        self.stock_estimates = True
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
        sizes = {
            k: [s["size_mb"] for s in report.sizes_after if s["type"] == k] for k in SHORT_NAMES.values()
        }
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
            # a copy rewritten with the plan made on the rebuilt graph, not planned again; its
            # nodes in the order torch's pass leaves them when torch's pass ran in the run
            # (that order is part of what torch's scheduler estimates: bucketing.merge.
            # sort_as_torch), else made without the nodes the rewrite erases and checked (lint)
            # at the first cap, the rewrite being the same after
            with inductor_config.patch({"aten_distributed_optimizations.bucket_mode": mode}):
                gm, report = pre_bucketed_copy(
                    self.gm,
                    self.what_if_planner if what_if else self.planner,
                    cap_mb,
                    lint=not self._linted,
                    torch_order=self.torch_order,
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
                roofline_rest=self.stock_estimates,
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
            asked = self.options.scheduler_overrides if what_if else None
            settings = osch.scheduler_settings({**self.run_overrides, **(asked or {})})
        key = (
            mode,
            self.options.gpu,
            repr(sorted(settings.items())),
            self.stock_estimates,
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
        from tracekit.replay.post_grad import rebuilt_as_scheduled

        def rewrite() -> tuple[Any, fx.GraphModule]:
            gm, _ = rebuilt_as_scheduled(self.text, self.options.symbols, *self._as_scheduled)
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


__all__ = ["GraphReplayer"]
