"""``tracekit replay PATH...``: rebuild the recorded graphs and re-run bucketing with other caps.

Reads every recorded ``pre_bucketing_fsdp_collectives`` outcome with the graph text it was
computed from (:func:`tracekit.reader.graph_sources`), rebuilds each graph safely
(:mod:`tracekit.replay.graph_text`), checks that the recorded cap reproduces the recorded
counts, then plans each ``--cap-mb`` / ``--cap auto`` (:mod:`tracekit.replay.engine`). With
``--all-ranks``, ranks that logged the same graph and outcome share one replay and one row (the
``ranks`` column, as ranges).

Exit status: 0 when every selected graph was rebuilt and reproduced; 1 when one was not (the
output says which and why) or when no outcome was found; 2 for a usage error.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from tracekit.commands.options import (
    BAD_INPUT,
    FINDINGS,
    OK,
    examples,
    fail,
    file_in_existing_dir,
    format_option,
    paths_argument,
)
from tracekit.commands.output import output_sink
from tracekit.model import COLLECTIVE_TYPES
from tracekit.rankset import format_ranks, parse_ranks
from tracekit.render import dumps_json, fmt_counts, fmt_mb, heading, table

REPLAY_FORMATS = ("table", "json", "markdown")
GRAPH_HEADERS = ["ranks", "graph", "fx nodes", "recorded cap MB", "AG", "RS", "AR", "reproduced", "comm ms"]
CAP_HEADERS = ["ranks", "graph", "cap MB", "cap from", "AG", "RS", "AR", "buckets", "largest MB",
               "comm ms", "vs recorded"]


def _caps(values: tuple[str, ...], auto: tuple[str, ...]) -> list:
    from tracekit.replay.engine import CapRequest

    out: list[CapRequest] = []
    for v in values:
        for part in v.split(","):
            part = part.strip()
            if not part:
                continue
            if part.lower() == "auto":
                out.append(CapRequest(None))
                continue
            try:
                mb = float(part)
            except ValueError:
                raise click.BadParameter(f"{part!r} is not a number of MB", param_hint="--cap-mb") from None
            if not (mb > 0 and mb < 1e9):
                raise click.BadParameter(f"{part!r} must be a positive number of MB", param_hint="--cap-mb")
            out.append(CapRequest(mb))
    out += [CapRequest(None) for _ in auto]
    seen, uniq = set(), []
    for c in out:
        if c not in seen:
            seen.add(c)
            uniq.append(c)
    return uniq


def _ms(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:+.4f}" if signed else f"{x:.4f}"


def _applied_text(applied: dict[str, Any] | None) -> str:
    if not applied:
        return "-"
    if not applied.get("ok"):
        return f"FAILED: {applied.get('error', '')[:80]}"
    return "lint ok, " + ("same counts as plan" if applied.get("matches_plan") else "COUNTS DIFFER FROM PLAN")


def _ranks(g: dict[str, Any]) -> str:
    """The ranks an entry stands for, as ranges (a /1 document has one ``rank``)."""
    return g.get("ranks") or ("-" if g["rank"] is None else str(g["rank"]))


def hardware_line(doc: dict[str, Any], which: str) -> str:
    """What the comm-ms column of a table assumes, said above it: ``which`` is ``"recorded"``
    (the recorded buckets) or ``"replays"`` (the other caps)."""
    seen: list[dict[str, Any]] = []
    for g in doc["graphs"]:
        hws = [g["recorded"].get("hardware")] if which == "recorded" else [r.get("hardware") for r in g["replays"]]
        for hw in hws:
            if hw and hw not in seen:
                seen.append(hw)
    if not seen:
        return "comm ms: torch's NCCL model (no graph was costed)\n"
    parts = [f"{hw['interconnect']}, group size {hw['group_size']}, "
             f"{hw['n_nodes']} machine{'s' if hw['n_nodes'] != 1 else ''}" for hw in seen]
    return f"comm ms: torch's NCCL model, assuming {'; '.join(parts)}\n"


def render_text(doc: dict[str, Any], fmt: str) -> str:
    """The table / markdown view of a ``tracekit.replay/2`` document: one row per distinct
    replay, with the ranks it stands for."""
    import os

    types = COLLECTIVE_TYPES
    out = [heading("Recorded outcomes, rebuilt and reproduced", fmt), hardware_line(doc, "recorded")]
    runs = {os.path.dirname(g["file"]) for g in doc["graphs"]}

    def run_of(g: dict[str, Any]) -> list[str]:
        # Several runs side by side: say which directory each row comes from.
        return [os.path.basename(os.path.dirname(g["file"])) or "."] if len(runs) > 1 else []

    rows = []
    for g in doc["graphs"]:
        rec = g["recorded"]
        if g["error"]:
            verdict = "not rebuilt"
        else:
            verdict = "yes" if g["reproduced"] else "NO"
        rows.append([*run_of(g), _ranks(g), f"{g['compile_id']}:{g['graph_index']}", g["nodes"] or "-",
                     fmt_mb(rec["bucket_cap_mb"]), *(fmt_counts(rec["collectives"].get(t)) for t in types),
                     verdict, _ms(rec["estimated_comm_ms"])])
    out.append(table(rows, (["run"] if len(runs) > 1 else []) + GRAPH_HEADERS, fmt))
    problems = []
    for g in doc["graphs"]:
        label = f"{g['file']}: ranks {_ranks(g)} graph {g['compile_id']}:{g['graph_index']}"
        if g["error"]:
            problems.append(f"{label}: {g['error']}")
        for m in g["mismatches"]:
            problems.append(f"{label}: NOT REPRODUCED: {m}")
        if g.get("note"):
            problems.append(f"{label}: {g['note']}")
    if problems:
        out.append("\n" + "\n".join(("- " if fmt == "markdown" else "  ") + p for p in problems) + "\n")
    cap_rows = []
    for g in doc["graphs"]:
        for r in g["replays"]:
            buckets = r["bucket_sizes_mb"]
            n_after = sum(len(v) for v in buckets.values())
            row = [*run_of(g), _ranks(g), f"{g['compile_id']}:{g['graph_index']}", fmt_mb(r["bucket_cap_mb"]),
                   r["cap_source"], *(fmt_counts(r["collectives"].get(t)) for t in types),
                   f"{n_after} ({r['merged_buckets']} merged)", fmt_mb(r["largest_bucket_mb"]),
                   _ms(r["estimated_comm_ms"]), _ms(r["comm_ms_vs_recorded"], signed=True)]
            if doc.get("apply"):
                row.append(_applied_text(r.get("applied")))
            cap_rows.append(row)
    if doc["caps"] or cap_rows:
        hw = doc["hardware"]
        what_if = ", ".join(f"{k}={v}" for k, v in [*hw.items(), ("bucket_mode", doc.get("bucket_mode"))]
                            if v is not None)
        title = "Other caps" + (f" ({what_if})" if what_if else "")
        out.append("\n" + heading(title, fmt))
        out.append(hardware_line(doc, "replays"))
        out.append(table(cap_rows, (["run"] if len(runs) > 1 else []) + CAP_HEADERS + (["--apply"] if doc.get("apply") else []), fmt))
        out.append("\nbuckets: collectives left after bucketing (merged: buckets of 2 or more); "
                   "largest: the biggest one, the memory it pins; comm ms: torch's NCCL model of the "
                   "FSDP collectives, vs the recorded buckets on the same hardware.\n")
    t = doc["totals"]
    graphs = f"{t['graphs']} graphs"
    if t.get("outcomes", t["graphs"]) != t["graphs"]:  # --all-ranks: ranks shared the replays
        every = format_ranks(r for g in doc["graphs"] for r in parse_ranks(g["ranks"]))
        graphs = f"{t['graphs']} distinct graphs for {t['outcomes']} recorded outcomes (ranks {every})"
    out.append(f"\n{graphs}: {t['rebuilt']} rebuilt, {t['reproduced']} reproduced, "
               f"{t['not_reproduced']} not reproduced, {t['failed']} not rebuilt.\n")
    for note in doc.get("notes", []):
        out.append(f"note: {note}\n")
    return "".join(out)


@click.command("replay")
@paths_argument()
@click.option("--cap-mb", "cap_mb", multiple=True, metavar="MB[,MB...]",
              help="Cap(s) to replay, in MB; repeatable or comma-separated (auto allowed).")
@click.option("--cap", "cap_auto", multiple=True, type=click.Choice(["auto"]),
              help="`--cap auto`: torch's automatic cap on the (what-if) hardware.")
@click.option("--interconnect", default=None, metavar="NAME",
              help="What-if interconnect, one of torch's profiles: NVLINK_A100, NVLINK_H100, NVLINK_B200, "
                   "NVLINK_V100, IB_HDR, IB_NDR, PCIE (case and -/_ insensitive).")
@click.option("--group-size", type=click.IntRange(1, 1 << 20), default=None,
              help="What-if FSDP group size for the comm model and the auto cap.")
@click.option("--gpus-per-node", type=click.IntRange(1, 1024), default=None,
              help="What-if GPUs per node (sets nNodes in the comm model).")
@click.option("--apply", "apply_", is_flag=True, help="Also run the full rewrite per cap and lint the result.")
@click.option("--rank", "rank", type=int, default=None, help="Rank to replay (default: the lowest).")
@click.option("--all-ranks", is_flag=True, help="Replay every rank's graphs.")
@click.option("--graph", "graphs", multiple=True, metavar="COMPILE_ID[:INDEX]",
              help="Only these graphs (e.g. 0/0 or 0/0:1); repeatable.")
@click.option("--sym", "syms", multiple=True, metavar="NAME=VALUE",
              help="Value of a symbolic size (e.g. s77=1024); repeatable.")
@click.option("--mode", default=None, help="Bucket mode (default, custom_ops, ...), as torch's pass.")
@click.option("--bucket-mode", "bucket_mode", default=None, metavar="MODE",
              help="Model inductor's aten_distributed_optimizations.bucket_mode = MODE, where torch's FSDP pass "
                   "takes its all-gather grouping from (custom_ops_multidtype: bf16 and f32 bucket together).")
@format_option(REPLAY_FORMATS)
@file_in_existing_dir("--plot", "plot_path", "FILE.png", "Draw collectives and comm time against the cap (needs matplotlib).")
@examples(
    "tracekit replay logs/ --cap-mb 64",
    "tracekit replay logs/ --cap-mb 16,64 --cap auto --interconnect IB_NDR --group-size 512",
    "tracekit replay logs/ --rank 3 --graph 0/0:1 --format json",
)
def replay(paths, cap_mb, cap_auto, interconnect, group_size, gpus_per_node, apply_, rank, all_ranks,
           graphs, syms, mode, bucket_mode, fmt, plot_path):
    """Rebuild the recorded graphs from PATH... (rank logs, .gz, directories) and replay FSDP
    pre-bucketing: first at the recorded cap (a reproduction check), then at other caps."""
    from tracekit.progress import note_loading_torch

    note_loading_torch()  # before the imports that load torch
    from bucketing.plan import resolve_mode
    from tracekit.model import Diagnostics
    from tracekit.replay import comm_estimate as ce
    from tracekit.replay.engine import ReplayOptions, replay_document, replay_sources
    from tracekit.replay.pairing import SelectionError, parse_graph_selector, replay_sources_for
    from tracekit.replay.symbols import SizeExprError, parse_sym_assignments

    if rank is not None and all_ranks:
        raise click.UsageError("--rank and --all-ranks exclude each other")
    try:
        symbols = parse_sym_assignments(list(syms))
    except SizeExprError as e:
        raise click.BadParameter(str(e), param_hint="--sym") from None
    try:
        ic = None if interconnect is None else ce.interconnect_name(interconnect)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--interconnect") from None
    for value, hint in ((mode, "--mode"), (bucket_mode, "--bucket-mode")):
        try:
            resolve_mode(value)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint=hint) from None
    options = ReplayOptions(
        caps=_caps(cap_mb, cap_auto),
        hardware=ce.Hardware(interconnect=ic, group_size=group_size, gpus_per_node=gpus_per_node),
        apply=apply_,
        mode=mode,
        symbols=symbols,
        bucket_mode=bucket_mode,
    )

    diag = Diagnostics()
    try:
        selectors = [parse_graph_selector(g) for g in graphs]
    except SelectionError as e:
        raise click.BadParameter(str(e), param_hint="--graph") from None
    try:
        sources = replay_sources_for(list(paths), rank=rank, all_ranks=all_ranks, graphs=selectors,
                                     diagnostics=diag)
    except SelectionError as e:
        fail("replay", str(e), BAD_INPUT)
    results = replay_sources(sources, options)
    notes = []
    if not sources:
        notes.append("no recorded pre_bucketing_fsdp_collectives outcome matched (a warm inductor cache "
                     "skips the post-grad passes and logs no bucketing; was the cache disabled?)")
    if diag.total:
        notes.append(f"{diag.total} bad input(s) while reading: "
                     + ", ".join(f"{k}={v}" for k, v in sorted(diag.counts.items())))
    doc = replay_document(results, options, {"paths": list(paths), "notes": notes,
                                             "diagnostics": diag.to_dict()})
    with output_sink(None, command="replay", error_status=2) as write:
        write((dumps_json(doc) if fmt == "json" else render_text(doc, fmt)).encode("utf-8"))
    if plot_path:
        from tracekit.replay.plot import PlotUnavailable, plot_replay

        try:
            plot_replay(doc, plot_path)
        except PlotUnavailable as e:
            fail("replay", f"error: {e}", BAD_INPUT)
        click.echo(f"plot written to {plot_path}", err=True)
    if not sources:
        click.echo("tracekit replay: no recorded pre_bucketing_fsdp_collectives outcome in the logs", err=True)
    ok = bool(results) and all(r.error is None and r.reproduced for r in results)
    sys.exit(OK if ok else FINDINGS)
