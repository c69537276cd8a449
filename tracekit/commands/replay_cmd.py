"""``tracekit replay PATH...``: rebuild the recorded graphs and re-run bucketing with other caps.

Reads every recorded ``pre_bucketing_fsdp_collectives`` outcome with the graph text it was
computed from (:func:`tracekit.read.reader.graph_sources`), rebuilds each graph safely
(:mod:`tracekit.replay.graph_text`), checks that the recorded cap reproduces the recorded
counts, then plans each ``--cap-mb`` / ``--cap auto`` (:func:`tracekit.replay.run.run`). With
``--all-ranks``, ranks that logged the same graph and outcome share one replay and one row (the
``ranks`` column, as ranges).

Exit status: 0 when every selected graph was rebuilt and reproduced, or when there was none to
replay (a note says why); 1 when one was not, or only partly (torch's overlap scheduler failed on
one of its caps: "partial", never "reproduced"; the output says which and why), or when the
step's rank's log is cut (the step is partial); 2 for a usage error.
"""

from __future__ import annotations

import sys

import click

from tracekit.commands.options import (
    BAD_INPUT,
    FINDINGS,
    OK,
    FiniteFloatRange,
    check_output_tree,
    examples,
    fail,
    format_option,
    output_option,
    parse_caps,
    parse_syms,
    paths_argument,
    plot_option,
    require_torch,
    selection_options,
)
from tracekit.commands.output import write_document, write_files
from tracekit.render.replay_text import render_text

REPLAY_FORMATS = ("table", "json", "markdown")
GB = FiniteFloatRange(0, None)


@click.command("replay")
@paths_argument()
@click.option(
    "--cap-mb",
    multiple=True,
    metavar="MB[,MB...]",
    callback=parse_caps,
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
    metavar="NAME",
    help="What-if interconnect, one of torch's profiles: NVLINK_A100, NVLINK_H100, NVLINK_B200, "
    "NVLINK_V100, IB_HDR, IB_NDR, PCIE (case and -/_ insensitive).",
)
@click.option(
    "--group-size",
    type=click.IntRange(1, 1 << 20),
    help="What-if FSDP group size for the comm model and the auto cap.",
)
@click.option(
    "--gpus-per-node",
    type=click.IntRange(1, 1024),
    help="What-if GPUs per node (sets nNodes in the comm model).",
)
@click.option("--apply", is_flag=True, help="Also run the full rewrite per cap and lint the result.")
@selection_options("replay", all_ranks=True)
@click.option(
    "--sym",
    "syms",
    multiple=True,
    metavar="NAME=VALUE",
    callback=parse_syms,
    help="Value of a symbolic size (e.g. s77=1024); repeatable.",
)
@click.option("--mode", help="Bucket mode (default, custom_ops, ...), as torch's pass.")
@click.option(
    "--bucket-mode",
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
# torch's overlap scheduler's settings, what-ifs for the other caps: each dest is scheduler_NAME
@click.option(
    "--collective-bucketing/--no-collective-bucketing",
    "scheduler_collective_bucketing",
    default=None,
    help="Scheduler setting: overlap-preserving bucketing (default: inductor's config).",
)
@click.option("--max-in-flight-gb", "scheduler_max_in_flight_gb", type=GB, help="Scheduler setting.")
@click.option(
    "--max-memory-increase-gb", "scheduler_max_memory_increase_gb", type=GB, help="Scheduler setting."
)
@click.option(
    "--max-memory-increase-ratio", "scheduler_max_memory_increase_ratio", type=GB, help="Scheduler setting."
)
@click.option("--scheduler-bucket-mode", metavar="MODE", help="Scheduler setting: bucket_mode.")
@click.option(
    "--recommend",
    is_flag=True,
    help="Sweep recorded, auto and 1 MB..2 GB caps; print the Pareto front and the cap to use.",
)
@click.option(
    "--memory-budget-gb",
    type=FiniteFloatRange(0, None, min_open=True),
    help="With --recommend: the largest peak memory allowed.",
)
@click.option(
    "--profile",
    "profiles",
    multiple=True,
    metavar="TRACES",
    help="The job's torch.profiler traces (files or directories; repeatable): predict the step each "
    "cap would measure, calibrated on them.",
)
@format_option(REPLAY_FORMATS)
@output_option()
@plot_option()
@click.option(
    "--trace-out",
    type=click.Path(file_okay=False),
    callback=check_output_tree,
    metavar="DIR",
    help="Write one Chrome trace-event JSON per cap (DIR/cap_<X>MB.json) for Perfetto or chrome://tracing.",
)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    help="Processes scheduling a graph's caps side by side: this one and N-1 forked workers (default: "
    "the machine's cores; 1: one after another in this process). The output is the same.",
)
@examples(
    "tracekit replay logs/ --cap-mb 64",
    "tracekit replay logs/ --cap-mb 16,64 --cap auto --interconnect IB_NDR --group-size 512",
    "tracekit replay logs/ --rank 3 --graph 0/0:1 --format json",
    "tracekit replay logs/ --cap-mb 0.1 --cap auto --what-if forward-groups",
    "tracekit replay logs/ --profile traces/ --recommend",
)
def replay(
    paths, cap_mb, cap_auto, rank, all_ranks, graphs, syms, fmt, output, plot_path, trace_out, **settings
):
    """Rebuild the recorded graphs from PATH... (rank logs, .gz, directories) and replay FSDP
    pre-bucketing: first at the recorded cap (a reproduction check), then at other caps."""
    from tracekit.commands.progress import ProgressBar, note_loading_torch

    status = ProgressBar(label="replaying", unit="caps", min_total=2)  # on a terminal only
    note_loading_torch(bar=status)  # before the imports that load torch; cleared by the next status
    require_torch("replay", scheduler=True)
    from tracekit.commands.stage_run import run_with_bars
    from tracekit.render.summary_words import said_notes
    from tracekit.replay.run import OptionError, RunOptions, all_reproduced, run
    from tracekit.replay.selection import Selection

    if rank is not None and all_ranks:
        raise click.UsageError("--rank and --all-ranks exclude each other")
    scheduler = {
        k.removeprefix("scheduler_"): settings.pop(k) for k in [*settings] if k.startswith("scheduler_")
    }
    options = RunOptions(
        caps=[*cap_mb, *(None for _ in cap_auto)],
        symbols=syms,
        scheduler_overrides={k: v for k, v in scheduler.items() if v is not None},
        **settings,
    )
    try:
        options.check()
    except OptionError as e:
        raise click.BadParameter(str(e), param_hint="--" + e.option.replace("_", "-")) from None
    selection = Selection(rank, all_ranks, graphs)
    try:
        doc = run_with_bars("replay", status, lambda progress: run(list(paths), options, selection, progress))
    except OptionError as e:  # a profile that cannot predict: found only once the logs are read
        fail("replay", str(e))
    doc["notes"] = said_notes(doc["notes"])
    write_document(doc, fmt, render_text, output, command="replay", error_status=BAD_INPUT)
    write_files(doc, plot_path, trace_out, command="replay")
    sys.exit(OK if all_reproduced(doc) else FINDINGS)  # one verdict a graph (GraphReplay.verdict)
