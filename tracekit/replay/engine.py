"""Replay: rebuild each recorded graph, reproduce its recorded outcome, then plan other caps.

For each :class:`tracekit.reader.GraphSource` (one recorded ``pre_bucketing_fsdp_collectives``
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

from tracekit.model import COLLECTIVE_TYPES, LONG_NAMES, Diagnostics, Graph
from tracekit.rankset import format_ranks
from tracekit.replay import comm_estimate as ce
from tracekit.replay.graph_text import GraphTextError, parse_graph_text

#: /2: one entry per distinct replay, with the ``ranks`` it stands for (/1: one per rank and graph)
SCHEMA = "tracekit.replay/2"
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


def _collective_counts(report) -> dict[str, dict[str, int]]:
    """A BucketingReport's counts in the shape summarize uses: ``{"all_gather": {"before", "after"}}``."""
    return {
        LONG_NAMES[k]: {"before": report.counts_before.get(k, 0), "after": report.counts_after.get(k, 0)}
        for k in KINDS
    }


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "bucket_cap_mb": self.bucket_cap_mb,
            "cap_source": self.cap_source,
            "collectives": self.collectives,
            "bucket_sizes_mb": self.bucket_sizes_mb,
            "merged_buckets": self.merged_buckets,
            "largest_bucket_mb": self.largest_bucket_mb,
            "estimated_comm_ms": _round_ms(self.estimated_comm_ms),
            "comm_ms_vs_recorded": _round_ms(self.comm_ms_vs_recorded),
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
    recorded_comm_ms: float | None = None  # recorded buckets, costed on the requested hardware
    recorded_hardware: dict[str, Any] | None = None  # what that cost assumed (interconnect, ...)
    replays: list[CapReplay] = field(default_factory=list)
    ranks: list[int | None] = field(default_factory=list)  # empty: just ``rank``
    replayer: Any = field(default=None, repr=False, compare=False)  # the GraphReplayer (not in JSON)

    @property
    def label(self) -> str:
        return f"{self.compile_id}:{self.graph_index}"

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
                "estimated_comm_ms": _round_ms(self.recorded_comm_ms),
                "hardware": self.recorded_hardware,
            },
            "reproduced": self.reproduced,
            "mismatches": list(self.mismatches),
            "note": self.note,
            "reproduction": None if self.reproduction is None else self.reproduction.to_dict(),
            "replays": [r.to_dict() for r in self.replays],
        }


def _round_ms(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


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
        self._bytes: dict[str, int] = {}  # collective name -> torch's fx size, computed once

    def at(
        self, cap_mb: float, cap_source: str, hardware: ce.Hardware, apply: bool = False, what_if: bool = False
    ) -> CapReplay:
        """Plan at ``cap_mb``; comm time on ``hardware``; with ``apply``, the rewrite too;
        ``what_if``: in the what-if bucket mode (``ReplayOptions.bucket_mode``)."""
        report = (self.what_if_planner if what_if else self.planner).plan(cap_mb)
        collectives = _collective_counts(report)
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

    def comm_ms(self, report, hardware: ce.Hardware) -> float | None:
        """NCCL-model time of the FSDP collectives after bucketing (buckets cost their sum)."""
        group_size = hardware.group_size or self.group_size
        if not group_size or not report.fsdp_groups:
            return None
        in_bucket: dict[str, int] = {}
        for kind, buckets in report.buckets.items():
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

        from bucketing import pre_bucket_fsdp_collectives, register_fake_process_groups

        try:
            gm = parse_graph_text(self.text, self.options.symbols)
            if self.planner.fsdp_groups and self.group_size:
                register_fake_process_groups(self.planner.fsdp_groups, self.group_size)
            mode_patch = {"aten_distributed_optimizations.bucket_mode": self.what_if_planner.bucket_mode}
            with inductor_config.patch(mode_patch):
                report = pre_bucket_fsdp_collectives(gm, mode=self.options.mode, bucket_cap_mb=cap_mb)
            gm.graph.lint()
        except Exception as e:  # noqa: BLE001 - any failure of the rewrite is a reported result
            return {"ok": False, "error": f"{type(e).__name__}: {str(e)[:300]}"}
        counts = _collective_counts(report)
        return {
            "ok": True,
            "lint": "ok",
            "rewritten": report.rewritten,
            "collectives": counts,
            "matches_plan": counts == planned,
            "nodes_after": len(gm.graph.nodes),
        }


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
        i = next((i for i, (a, b) in enumerate(zip(want_before, have_before)) if a != b),
                 min(len(want_before), len(have_before)))
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
    src: Any, options: ReplayOptions, rebuilt: dict[tuple, Any] | None = None
) -> GraphReplay:
    """Replay one :class:`tracekit.reader.GraphSource`; never raises for a bad graph.

    ``rebuilt`` (optional, shared across calls) keeps each distinct graph text's rebuilt graph
    and planner, or its error: ranks normally log identical graphs, so ``--all-ranks`` parses
    each one once.
    """
    g: Graph = src.graph
    out = GraphReplay(
        rank=src.rank,
        compile_id=src.compile_id,
        graph_index=src.graph_index,
        source=g.source,
        text_artifact=src.text_artifact,
        recorded=g,
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
    key = (hashlib.sha256(src.text.encode("utf-8", "surrogatepass")).hexdigest(),
           tuple(sorted(options.symbols.items())), options.mode, options.bucket_mode)
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
    out.nodes = len(rp.gm.graph.nodes)
    out.symbols = dict(rp.gm.meta.get("tracekit_symbols", {}))
    out.parse_ms = rp.parse_ms
    try:
        _replay_caps(rp, out, options)
    except Exception as e:  # noqa: BLE001
        out.error = f"replay failed: {type(e).__name__}: {str(e)[:300]}"
    return out


def _replay_caps(rp: GraphReplayer, out: GraphReplay, options: ReplayOptions) -> None:
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
        mismatches.append(f"fsdp_groups: recorded {g.fsdp_groups}, rebuilt graph {list(rp.planner.fsdp_groups)}")
    out.reproduction = repro
    out.reproduced = not mismatches
    out.mismatches = mismatches
    hw = options.hardware
    base_ms, base_hw = repro.estimated_comm_ms, repro.hardware
    if hw != here:
        # Compare with the recorded buckets costed on the requested hardware.
        base_ms, base_hw = rp.comm_ms(repro.report, hw), ce.describe(hw, rp.group_size)
    out.recorded_comm_ms = base_ms
    out.recorded_hardware = base_hw
    requests = list(options.caps)
    if options.bucket_mode and not requests:
        requests = [None]  # the recorded cap, in the what-if bucket mode
    for req in requests:
        if req is None:
            r = rp.at(repro.bucket_cap_mb, "recorded", hw, apply=options.apply, what_if=True)
        elif req.mb is None:
            cap = ce.auto_cap(rp.group_size, hw)
            r = rp.at(cap.cap_mb, cap.source, hw, apply=options.apply, what_if=True)
        else:
            r = rp.at(req.mb, "override", hw, apply=options.apply, what_if=True)
        if r.estimated_comm_ms is not None and base_ms is not None:
            r.comm_ms_vs_recorded = r.estimated_comm_ms - base_ms
        out.replays.append(r)


# --- many graphs ---------------------------------------------------------------------------------


def _record(g: Graph) -> tuple:
    """Everything of a recorded outcome that a replay uses or reports: the cap it is reproduced
    at, the groups, counts and sizes the reproduction is compared with, and the shown fields."""
    def sizes(xs):
        return None if xs is None else tuple((x.type, x.size_mb, x.name) for x in xs)

    return (g.bucket_cap_mb, tuple(g.fsdp_groups), g.group_size, g.n_nodes, g.source,
            tuple((t, c.before, c.after) for t, c in g.collectives.items()),
            None if g.sizes_mb is None else (sizes(g.sizes_mb.before), sizes(g.sizes_mb.after)))


def same_replay_key(src: Any) -> tuple:
    """Sources with equal keys replay identically, so one replay stands for all of them: the
    same graph text and symbol hints (what is rebuilt), the same recorded outcome (so the
    reproduction verdict is each one's), the same graph, and the same directory (separate runs
    stay separate rows). The options are the same for every source of one call. The text is
    compared whole (ranks' texts are usually one shared string, see ``replay_sources_for``)."""
    hints = getattr(src, "symbol_hints", None) or {}
    return (os.path.dirname(src.graph.file), src.compile_id, src.graph_index, src.text_artifact,
            src.text, tuple(sorted(hints.items())), _record(src.graph))


def replay_sources(sources: Iterable[Any], options: ReplayOptions,
                   progress: Callable[[int, int], None] | None = None) -> list[GraphReplay]:
    """Replay many sources: each distinct replay (:func:`same_replay_key`) once, reported for
    every rank that shares it (``GraphReplay.ranks``), in the order first seen. 1,024 ranks
    that logged the same graphs cost about one rank; a rank that recorded another outcome from
    the same text is its own entry (its reproduction is checked against its own record).
    ``progress(done, total)``: distinct replays done, after each one."""
    groups: dict[tuple, tuple[Any, list[int | None]]] = {}
    for src in sources:
        key = same_replay_key(src)
        if key in groups:
            groups[key][1].append(src.rank)
        else:
            groups[key] = (src, [src.rank])
    rebuilt: dict[tuple, Any] = {}  # texts shared by entries that differ in their records
    out = []
    for src, ranks in groups.values():
        r = replay_source(src, options, rebuilt)
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
        """The ``tracekit.replay/2`` document."""
        return replay_document(self.graphs, self.options, {"diagnostics": self.diagnostics.to_dict()})


def replay_document(results: list[GraphReplay], options: ReplayOptions, extra: dict | None = None) -> dict:
    """The ``tracekit.replay/2`` JSON document."""
    hw = options.hardware
    doc = {
        "schema": SCHEMA,
        "caps": [c.label for c in options.caps],
        "hardware": {
            "interconnect": hw.interconnect,
            "group_size": hw.group_size,
            "gpus_per_node": hw.gpus_per_node,
        },
        "apply": options.apply,
        "bucket_mode": options.bucket_mode,
        "symbols": dict(options.symbols),
        "graphs": [r.to_dict() for r in results],
        "totals": {
            "graphs": len(results),
            "outcomes": sum(len(r.rank_set) for r in results),  # recorded outcomes the graphs stand for
            "rebuilt": sum(1 for r in results if r.error is None),
            "reproduced": sum(1 for r in results if r.reproduced),
            "not_reproduced": sum(1 for r in results if r.reproduced is False),
            "failed": sum(1 for r in results if r.error is not None),
        },
    }
    if extra:
        doc.update(extra)
    return doc


__all__ = [
    "SCHEMA",
    "CapRequest",
    "CapReplay",
    "GraphReplay",
    "GraphReplayer",
    "ReplayOptions",
    "ReplayRun",
    "replay_document",
    "replay_source",
    "replay_sources",
]
