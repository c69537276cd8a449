"""``tracekit replay PATH...``: rebuild the recorded graphs and re-run bucketing with other caps.

Reads every recorded ``pre_bucketing_fsdp_collectives`` outcome with the graph text it was
computed from (:func:`tracekit.read.reader.graph_sources`), rebuilds each graph safely
(:mod:`tracekit.replay.graph_text`), checks that the recorded cap reproduces the recorded
counts, then plans each ``--cap-mb`` / ``--cap auto`` (:mod:`tracekit.replay.engine`). With
``--all-ranks``, ranks that logged the same graph and outcome share one replay and one row (the
``ranks`` column, as ranges).

Exit status: 0 when every selected graph was rebuilt and reproduced, or when there was none to
replay (a note says why); 1 when one was not, or only partly (torch's overlap scheduler failed on
one of its caps: "partial", never "reproduced"; the output says which and why); 2 for a usage
error.
"""

from __future__ import annotations

import sys

import click

from tracekit.commands.options import (
    BAD_INPUT,
    FINDINGS,
    OK,
    FiniteFloatRange,
    check_cap_mb,
    check_output_tree,
    examples,
    fail,
    format_option,
    nothing_to_do,
    output_option,
    parse_cap_mb,
    paths_argument,
    plot_option,
    require_torch,
)
from tracekit.commands.output import write_document
from tracekit.model.words import plural
from tracekit.render.replay_text import render_text

REPLAY_FORMATS = ("table", "json", "markdown")

#: Where the hardware what-ifs stop, said with any overlap figure: torch's overlap scheduler
#: times collectives with its NCCL model of the logged process group, not the what-if hardware.
WHAT_IF_REACH = (
    "--interconnect, --group-size and --gpus-per-node reach every figure: the pre-bucketing comm "
    "estimates, the auto cap, torch's overlap scheduler (its NCCL model answers for the what-if "
    "hardware), the step, the Pareto front and the recommendation; the step's recorded row is the "
    "recorded cap on that hardware, the per-graph 'recorded' rows stay as logged (the "
    "reproduction); compute times stay the log's"
)


def _caps(values: tuple[str, ...], auto: tuple[str, ...]) -> list:
    from tracekit.replay.results import CapRequest

    out: list[CapRequest] = []
    for v in values:
        for part in v.split(","):
            part = part.strip()
            if not part:
                continue
            mb = parse_cap_mb(part)
            out.append(CapRequest(mb))
    out += [CapRequest(None) for _ in auto]
    seen, uniq = set(), []
    for c in out:
        if c not in seen:
            seen.add(c)
            uniq.append(c)
    return uniq


@click.command("replay")
@paths_argument()
@click.option(
    "--cap-mb",
    "cap_mb",
    multiple=True,
    metavar="MB[,MB...]",
    callback=check_cap_mb,
    help="Cap(s) to replay, in MB; repeatable or comma-separated (auto allowed).",
)
@click.option(
    "--cap",
    "cap_auto",
    multiple=True,
    type=click.Choice(["auto"]),
    help="`--cap auto`: torch's automatic cap on the (what-if) hardware.",
)
@click.option(
    "--interconnect",
    default=None,
    metavar="NAME",
    help="What-if interconnect, one of torch's profiles: NVLINK_A100, NVLINK_H100, NVLINK_B200, "
    "NVLINK_V100, IB_HDR, IB_NDR, PCIE (case and -/_ insensitive).",
)
@click.option(
    "--group-size",
    type=click.IntRange(1, 1 << 20),
    default=None,
    help="What-if FSDP group size for the comm model and the auto cap.",
)
@click.option(
    "--gpus-per-node",
    type=click.IntRange(1, 1024),
    default=None,
    help="What-if GPUs per node (sets nNodes in the comm model).",
)
@click.option(
    "--apply", "apply_", is_flag=True, help="Also run the full rewrite per cap and lint the result."
)
@click.option("--rank", "rank", type=int, default=None, help="Rank to replay (default: the lowest).")
@click.option("--all-ranks", is_flag=True, help="Replay every rank's graphs.")
@click.option(
    "--graph",
    "graphs",
    multiple=True,
    metavar="COMPILE_ID[:INDEX]",
    help="Only these graphs (e.g. 0/0 or 0/0:1); repeatable.",
)
@click.option(
    "--sym",
    "syms",
    multiple=True,
    metavar="NAME=VALUE",
    help="Value of a symbolic size (e.g. s77=1024); repeatable.",
)
@click.option("--mode", default=None, help="Bucket mode (default, custom_ops, ...), as torch's pass.")
@click.option(
    "--bucket-mode",
    "bucket_mode",
    default=None,
    metavar="MODE",
    help="Model inductor's aten_distributed_optimizations.bucket_mode = MODE, where torch's FSDP pass "
    "takes its all-gather grouping from (custom_ops_multidtype: bf16 and f32 bucket together).",
)
@click.option(
    "--what-if",
    "what_ifs",
    multiple=True,
    type=click.Choice(["forward-groups", "overlap-bucketing"]),
    help="For graphs torch never pre-bucketed: forward-groups gives the pass the FSDP groups "
    "the forward of the same compile id identified; overlap-bucketing runs torch's overlap "
    "scheduler on the graph with collective_bucketing True and False.",
)
@click.option(
    "--overlap/--no-overlap",
    "overlap",
    default=None,
    help="Run torch's overlap scheduler after pre-bucketing (default: on graphs whose log shows it ran).",
)
@click.option(
    "--gpu",
    type=click.Choice(["H100", "A100", "B200"]),
    default="H100",
    show_default=True,
    help="GPU whose roofline times nodes without a recorded estimate.",
)
@click.option(
    "--collective-bucketing/--no-collective-bucketing",
    "collective_bucketing",
    default=None,
    help="Scheduler setting: overlap-preserving bucketing (default: inductor's config).",
)
@click.option("--max-in-flight-gb", type=FiniteFloatRange(0, None), default=None, help="Scheduler setting.")
@click.option(
    "--max-memory-increase-gb", type=FiniteFloatRange(0, None), default=None, help="Scheduler setting."
)
@click.option(
    "--max-memory-increase-ratio", type=FiniteFloatRange(0, None), default=None, help="Scheduler setting."
)
@click.option("--scheduler-bucket-mode", default=None, metavar="MODE", help="Scheduler setting: bucket_mode.")
@click.option(
    "--recommend",
    is_flag=True,
    help="Sweep recorded, auto and 1 MB..2 GB caps; print the Pareto front and the cap to use.",
)
@click.option(
    "--memory-budget-gb",
    type=FiniteFloatRange(0, None, min_open=True),
    default=None,
    help="With --recommend: the largest peak memory allowed.",
)
@format_option(REPLAY_FORMATS)
@output_option()
@plot_option()
@click.option(
    "--trace-out",
    "trace_out",
    type=click.Path(file_okay=False),
    default=None,
    callback=check_output_tree,
    metavar="DIR",
    help="Write one Chrome trace-event JSON per cap (DIR/cap_<X>MB.json) for Perfetto or chrome://tracing.",
)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    default=None,
    help="Processes scheduling a graph's caps side by side: this one and N-1 forked workers (default: "
    "the machine's cores; 1: one after another in this process). The output is the same.",
)
@examples(
    "tracekit replay logs/ --cap-mb 64",
    "tracekit replay logs/ --cap-mb 16,64 --cap auto --interconnect IB_NDR --group-size 512",
    "tracekit replay logs/ --rank 3 --graph 0/0:1 --format json",
    "tracekit replay logs/ --cap-mb 0.1 --cap auto --what-if forward-groups",
)
def replay(
    paths,
    cap_mb,
    cap_auto,
    interconnect,
    group_size,
    gpus_per_node,
    apply_,
    rank,
    all_ranks,
    graphs,
    syms,
    mode,
    bucket_mode,
    what_ifs,
    overlap,
    gpu,
    collective_bucketing,
    max_in_flight_gb,
    max_memory_increase_gb,
    max_memory_increase_ratio,
    scheduler_bucket_mode,
    recommend,
    memory_budget_gb,
    fmt,
    output,
    plot_path,
    trace_out,
    jobs,
):
    """Rebuild the recorded graphs from PATH... (rank logs, .gz, directories) and replay FSDP
    pre-bucketing: first at the recorded cap (a reproduction check), then at other caps."""
    from tracekit.commands.progress import ProgressBar, note_loading_torch

    status = ProgressBar(label="replaying", unit="caps", min_total=2)  # on a terminal only
    note_loading_torch(bar=status)  # before the imports that load torch; cleared by the next status
    require_torch("replay", scheduler=True)
    from bucketing.plan import resolve_mode
    from tracekit.commands.graph_sources import bad_input_note, read_graph_sources
    from tracekit.model import Diagnostics
    from tracekit.read.pairing import NotPrebucketedSource
    from tracekit.read.segments import default_jobs
    from tracekit.replay import comm_estimate as ce
    from tracekit.replay.engine import replay_sources
    from tracekit.replay.not_prebucketed_graphs import replay_not_prebucketed
    from tracekit.replay.results import ReplayOptions, replay_document
    from tracekit.replay.selection import SelectionError, parse_graph_selector
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
    caps = _caps(cap_mb, cap_auto)
    if recommend:
        from tracekit.replay.recommend import cap_grid
        from tracekit.replay.results import CapRequest

        given = [c.mb for c in caps if c.mb is not None]
        caps = [CapRequest(None)] + [CapRequest(mb) for mb in cap_grid(given)]
    options = ReplayOptions(
        caps=caps,
        overlap=True if recommend and overlap is None else overlap,
        gpu=gpu,
        scheduler_overrides={
            k: v
            for k, v in {
                "collective_bucketing": collective_bucketing,
                "max_in_flight_gb": max_in_flight_gb,
                "max_memory_increase_gb": max_memory_increase_gb,
                "max_memory_increase_ratio": max_memory_increase_ratio,
                "bucket_mode": scheduler_bucket_mode,
            }.items()
            if v is not None
        },
        hardware=ce.Hardware(interconnect=ic, group_size=group_size, gpus_per_node=gpus_per_node),
        apply=apply_,
        mode=mode,
        symbols=symbols,
        bucket_mode=bucket_mode,
        jobs=default_jobs() if jobs is None else jobs,
    )

    diag = Diagnostics()
    try:
        selectors = [parse_graph_selector(g) for g in graphs]
    except SelectionError as e:
        raise click.BadParameter(str(e), param_hint="--graph") from None
    mixed = read_graph_sources(
        "replay", list(paths), status, rank=rank, all_ranks=all_ranks, graphs=selectors, diagnostics=diag
    )
    sources = [s for s in mixed if not isinstance(s, NotPrebucketedSource)]
    not_prebucketed_sources = [
        s for s in mixed if isinstance(s, NotPrebucketedSource) and s.final.collectives
    ]
    from tracekit.replay.process_groups import table_for

    options.groups = table_for(list(paths), mixed)  # a mesh: every group's size and members
    notes = []
    if not sources and not not_prebucketed_sources:  # status 2 when no log, else the note (exit 0)
        notes.append(nothing_to_do("replay", paths, status))
    not_prebucketed = replay_not_prebucketed(
        not_prebucketed_sources, options, tuple(w.replace("-", "_") for w in what_ifs)
    )
    with status:

        def per_cap(graph: int, graphs: int, done: int, total: int) -> None:
            status.label = f"replaying graph {graph}/{graphs}"
            status(done, total)

        results = replay_sources(sources, options, on_cap=per_cap)
        if any(r.mesh_not_prebucketed for r in results):  # a mesh's what-ifs at the other caps too
            from tracekit.replay.mesh_what_ifs import add_at_caps
            from tracekit.replay.results import cap_labels

            # --recommend: at the caps given with --cap-mb only, not at each cap of its grid
            # (then at the cap it recommends: add_at_recommended_cap)
            asked = frozenset(c.label for c in _caps(cap_mb, cap_auto) if c.mb is not None)
            add_at_caps(results, options, cap_labels(options)[1:], asked if recommend else None)
    scheduled = any(
        c is not None and c.schedule is not None for r in results for c in [r.reproduction, *r.replays]
    )
    if (ic or group_size or gpus_per_node) and scheduled:
        notes.append(WHAT_IF_REACH)
    if diag.total:
        notes.append(bad_input_note(diag))
    doc = replay_document(
        results, options, {"paths": list(paths), "notes": notes, "diagnostics": diag.to_dict()}
    )
    if not_prebucketed:  # which torch wrote the graphs never pre-bucketed: a log of them only says it
        import torch

        from tracekit.replay.torch_versions import torch_section

        doc["torch"] = torch_section(
            doc["graphs"], torch.__version__, tuple(s.torch_version for s in not_prebucketed_sources)
        )
    # graphs torch never pre-bucketed (tracekit.replay.not_prebucketed_graphs), in the step too
    from tracekit.replay.step_coverage import finish_document

    finish_document(doc, not_prebucketed, recommend, memory_budget_gb)
    if recommend and any(r.mesh_not_prebucketed for r in results):  # and at the recommended cap
        from tracekit.replay.mesh_what_ifs import add_at_recommended_cap
        from tracekit.replay.results import cap_labels

        add_at_recommended_cap(results, options, cap_labels(options)[1:], doc)
    write_document(doc, fmt, render_text, output, command="replay", error_status=BAD_INPUT)
    if plot_path:
        from tracekit.render.plot import PlotUnavailable, plot_replay

        try:
            plot_replay(doc, plot_path)
        except PlotUnavailable as e:
            fail("replay", f"error: {e}", BAD_INPUT)
        click.echo(f"plot written to {plot_path}", err=True)
    if trace_out:
        from tracekit.render.perfetto import write_traces

        try:
            written = write_traces(doc, trace_out)
        except OSError as e:
            fail("replay", f"cannot write traces to {trace_out}: {e.strerror or e}", BAD_INPUT)
        click.echo(f"{plural(len(written), 'trace file')} written to {trace_out}", err=True)
    if not sources and not not_prebucketed:
        click.echo(
            "tracekit replay: no recorded pre_bucketing_fsdp_collectives outcome in the logs", err=True
        )
    # nothing to replay is no finding: the note says why (exit 0)
    # one verdict per graph (GraphReplay.verdict) decides the totals, the last line and this status
    ok = all(r.verdict == "reproduced" for r in results) and all(
        # a graph of a log where pre-bucketing never ran is not compared (None), never blamed
        e["error"] is None and e["reproduced"] is not False
        for e in not_prebucketed
    )
    sys.exit(OK if ok else FINDINGS)
