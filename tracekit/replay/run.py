"""One replay, from the logs to the ``tracekit.replay/3`` document: :func:`run`, what
``tracekit replay`` and :func:`tracekit.replay_run` both call, so the command's JSON and the
Python API's document are one.

In order: read the selected graphs (:func:`tracekit.replay.selection.read_selected`) and, on a
mesh, the run's process groups; replay the graphs torch never pre-bucketed
(:mod:`~tracekit.replay.not_prebucketed_graphs`), then the recorded outcomes at the recorded cap
and each cap asked (:mod:`~tracekit.replay.engine`; with ``recommend``, the cap grid of
:mod:`~tracekit.replay.recommend`), with a mesh's what-ifs at those caps; make the document
(:func:`~tracekit.replay.results.replay_document`), add the graphs never pre-bucketed to it and
to its whole step, and with ``recommend`` its Pareto front and recommendation
(:func:`~tracekit.replay.step_coverage.finish_document`), a mesh's what-ifs at that cap too;
with ``profiles``, the step each cap would measure (:mod:`~tracekit.replay.predicted`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from tracekit.model.findings import Finding
from tracekit.replay import comm_estimate as ce
from tracekit.replay.results import CapRequest, ReplayOptions
from tracekit.replay.selection import Progress, Selection


class OptionError(ValueError):
    """A value of :class:`RunOptions` that cannot be used; ``option`` names the field."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


@dataclass
class RunOptions:
    """What a replay is asked, as ``tracekit replay``'s options say it."""

    caps: list[float | None] = field(default_factory=list)  # MB; None: torch's automatic cap
    recommend: bool = False  # the cap grid, its Pareto front and the cap to use
    memory_budget_gb: float | None = None  # with recommend: the largest peak memory allowed
    what_ifs: tuple[str, ...] = ()  # graphs never pre-bucketed: forward_groups, overlap_bucketing
    interconnect: str | None = None  # what-if hardware: one of torch's profiles (any case, - or _)
    group_size: int | None = None
    gpus_per_node: int | None = None
    apply: bool = False  # the full rewrite per cap, linted
    mode: str | None = None  # the pass's bucket mode
    bucket_mode: str | None = None  # what-if inductor bucket_mode for the other caps
    symbols: dict[str, int] = field(default_factory=dict)  # values of symbolic sizes
    overlap: bool | None = None  # torch's overlap scheduler: None on graphs whose log shows it ran
    gpu: str = "H100"  # whose roofline times nodes without a recorded estimate
    scheduler_overrides: dict[str, Any] = field(default_factory=dict)  # OverlapScheduler settings
    jobs: int | None = 1  # processes for a graph's caps; None: the machine's cores
    profiles: list[str] = field(default_factory=list)  # the job's profiler traces: predict each cap

    def check(self) -> None:
        """Raise :class:`OptionError` for a value the replay cannot use (before any work)."""
        from bucketing.plan import resolve_mode

        if self.interconnect is not None:
            try:
                ce.interconnect_name(self.interconnect)
            except ValueError as e:
                raise OptionError("interconnect", str(e)) from None
        for name in ("mode", "bucket_mode"):
            try:
                resolve_mode(getattr(self, name))
            except ValueError as e:
                raise OptionError(name, str(e)) from None
        for mb in self.caps:
            if mb is not None and not (math.isfinite(mb) and mb > 0):
                raise OptionError("caps", f"cap {mb!r} MB: a cap is a finite number of MB above 0")
        for p in self.profiles:
            if not os.path.lexists(p):
                raise OptionError("profile", f"{p}: no such file or directory")
        budget = self.memory_budget_gb
        if budget is not None and not (math.isfinite(budget) and budget > 0):
            raise OptionError(
                "memory_budget_gb", f"memory_budget_gb {budget!r}: a finite number of GB above 0"
            )

    def requests(self) -> list[CapRequest]:
        """The caps asked, once each, in the order given."""
        return list(dict.fromkeys(CapRequest(None if mb is None else float(mb)) for mb in self.caps))

    def hardware_what_if(self) -> bool:
        """The hardware is a what-if (``interconnect``, ``group_size`` or ``gpus_per_node``)."""
        return bool(self.interconnect or self.group_size or self.gpus_per_node)

    def replay_options(self) -> ReplayOptions:
        """The engine's :class:`~tracekit.replay.results.ReplayOptions`: with ``recommend``,
        the automatic cap and the grid (1 MB..2 GB and the caps given) with the overlap
        scheduler on unless told otherwise."""
        from tracekit.read.segments import default_jobs
        from tracekit.replay.recommend import cap_grid

        caps = self.requests()
        if self.recommend:
            given = [c.mb for c in caps if c.mb is not None]
            caps = [CapRequest(None)] + [CapRequest(mb) for mb in cap_grid(given)]
        ic = None if self.interconnect is None else ce.interconnect_name(self.interconnect)
        return ReplayOptions(
            caps=caps,
            overlap=True if self.recommend and self.overlap is None else self.overlap,
            gpu=self.gpu,
            scheduler_overrides=dict(self.scheduler_overrides),
            hardware=ce.Hardware(
                interconnect=ic, group_size=self.group_size, gpus_per_node=self.gpus_per_node
            ),
            apply=self.apply,
            mode=self.mode,
            symbols=dict(self.symbols),
            bucket_mode=self.bucket_mode,
            jobs=default_jobs() if self.jobs is None else self.jobs,
        )


def run(
    paths: list[str],
    options: RunOptions,
    selection: Selection | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The ``tracekit.replay/3`` document of ``paths`` replayed as ``options`` say, on the
    graphs of ``selection`` (default: the lowest rank's). Raises :class:`OptionError` for a bad
    option, :class:`~tracekit.replay.selection.SelectionError` when the logs cannot be read or
    the selection names nothing there, :class:`~tracekit.replay.notes.NoLog` when the input
    holds no compile log; a graph that cannot be replayed is reported in the document."""
    import torch

    from tracekit.model import Diagnostics
    from tracekit.model.nouns import rank_noun
    from tracekit.model.rankset import format_ranks
    from tracekit.read.pairing import NotPrebucketedSource
    from tracekit.replay.engine import replay_sources
    from tracekit.replay.mesh_what_ifs import add_at_caps, add_at_recommended_cap
    from tracekit.replay.not_prebucketed_graphs import replay_not_prebucketed
    from tracekit.replay.notes import WHAT_IF_REACH, bad_input_note, nothing_selected
    from tracekit.replay.process_groups import table_for
    from tracekit.replay.results import cap_labels, replay_document
    from tracekit.replay.selection import read_selected
    from tracekit.replay.step_coverage import finish_document
    from tracekit.replay.torch_versions import torch_section

    options.check()
    paths = list(paths)
    progress = progress or Progress()
    replay_options = options.replay_options()
    diag = Diagnostics()
    selection = selection or Selection()
    # --recommend on the default selection reads every rank: a cap is recommended for the job,
    # and the slowest rank sets its step (:func:`diverging_ranks`)
    every = options.recommend and selection.rank is None and not selection.all_ranks
    mixed = read_selected(
        paths, Selection(None, True, selection.graphs) if every else selection, diag, progress
    )
    differ = diverging_ranks(mixed) if every else []
    if every and not differ:  # every rank logged the same graphs: the lowest one's, as before
        lowest = min((s.rank for s in mixed if s.rank is not None), default=None)
        mixed = [s for s in mixed if s.rank == lowest]
    sources = [s for s in mixed if not isinstance(s, NotPrebucketedSource)]
    never = [s for s in mixed if isinstance(s, NotPrebucketedSource) and s.final.collectives]
    replay_options.groups = table_for(paths, mixed)  # a mesh: every group's size and members
    notes: list[str | Finding] = []  # a Finding: said by the caller (tracekit.render.summary_words)
    if not sources and not never:  # why there is nothing to replay (NoLog: no log at all)
        notes.append(nothing_selected(paths))
    what_ifs = tuple(w.replace("-", "_") for w in options.what_ifs)
    not_prebucketed = replay_not_prebucketed(never, replay_options, what_ifs)
    results = replay_sources(sources, replay_options, on_cap=progress.caps)
    labels = cap_labels(replay_options)[1:]
    mesh = any(r.mesh_not_prebucketed for r in results)
    if mesh:  # a mesh's what-ifs at the other caps too
        # recommend: at the caps given only, not at each cap of its grid (then at the cap it
        # recommends: add_at_recommended_cap)
        asked = frozenset(c.label for c in options.requests() if c.mb is not None)
        add_at_caps(results, replay_options, labels, asked if options.recommend else None)
    scheduled = any(
        c is not None and c.schedule is not None for r in results for c in [r.reproduction, *r.replays]
    )
    if options.hardware_what_if() and scheduled:
        notes.append(WHAT_IF_REACH)
    if differ:
        notes.append(
            "the ranks logged different graphs ("
            + "; ".join(f"{rank_noun(r)} {r}" for r in map(format_ranks, differ))
            + "): each group's graphs are replayed and the step at each cap is the slowest group's"
        )
    if diag.total:
        notes.append(bad_input_note(diag))
    doc = replay_document(
        results, replay_options, {"paths": paths, "notes": notes, "diagnostics": diag.to_dict()}
    )
    if not_prebucketed:  # which torch wrote the graphs never pre-bucketed: a log of them only says it
        doc["torch"] = torch_section(doc["graphs"], torch.__version__, tuple(s.torch_version for s in never))
    # graphs torch never pre-bucketed, in the step too; the recommendation
    finish_document(doc, not_prebucketed, options.recommend, options.memory_budget_gb)
    if options.recommend and mesh:  # and a mesh's what-ifs at the recommended cap
        add_at_recommended_cap(results, replay_options, labels, doc)
    if options.profiles:  # the step each cap would measure, from the job's own profile
        from tracekit.replay.predicted import ProfileError, add_prediction

        try:
            add_prediction(doc, paths, list(options.profiles), options.recommend, options.jobs)
        except ProfileError as e:
            raise OptionError("profile", str(e)) from None
    return doc


def diverging_ranks(sources: list[Any]) -> list[list[int]]:
    """The ranks of ``sources`` grouped by the graphs they recorded (compile id, index and
    outcome: :func:`tracekit.replay.results.outcome_key`), lowest first, when there are two
    groups or more; [] when every rank logged the same."""
    from tracekit.replay.results import ranks_by_graphs

    groups = ranks_by_graphs(
        (s.rank, s.compile_id, s.graph_index, s.graph) for s in sources if hasattr(s, "graph")
    )
    return groups if len(groups) > 1 else []


def all_reproduced(doc: dict[str, Any]) -> bool:
    """Every graph of a replay document reproduced (its one verdict, ``GraphReplay.verdict``),
    no graph never pre-bucketed failed or differed (one of a log where pre-bucketing never
    ran is not compared, never blamed), and the step's rank's log is not cut (its step is
    partial: ``totals.step[].cut``): the command's exit status 0."""
    steps = (doc.get("totals") or {}).get("step") or []
    return (
        all(g["verdict"] == "reproduced" for g in doc["graphs"])
        and all(e["error"] is None and e["reproduced"] is not False for e in doc.get("not_prebucketed", []))
        and not any(s.get("cut") for s in steps)
    )


__all__ = ["OptionError", "RunOptions", "all_reproduced", "diverging_ranks", "run"]
