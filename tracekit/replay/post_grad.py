"""The rebuilt graph made into the graph torch's scheduler was given: torch's own post-grad passes.

The log's graph (``before_post_grad_graph``) is written before inductor's post-grad passes,
and torch's FSDP pre-bucketing and overlap scheduler run at their end, on what those passes
made of it: no-ops removed, patterns rewritten, nodes sorted (and for an inference graph
reordered for locality), in torch 2.15 duplicate waits removed. For example, a backward's
``relu`` gradient::

    before_post_grad_graph:                   what the scheduler was given:
      where = where(le, scalar_tensor, g)       full_default = full([], 0.0)
      ...                                       where = where(le, full_default, g)
      where_1 = where(le_1, scalar_tensor, x)   where_1 = where(le_1, full_default, x)

The scheduler times every node: a node that is neither a compute node nor a collective by its
roofline when the run had no estimation hook. So another graph is another schedule: on a HSDP
backward timed so, the rebuilt graph gave 0.1492 ms exposed where torch's run logged 0.1626,
and the graph after these passes gives 0.1626 to the last digit
(``tests/replay/test_stock_estimates.py``).

:func:`as_scheduler_input` runs the running torch's ``post_grad_passes`` on the rebuilt graph,
with overlap scheduling on, and stops them where the scheduler would start (torch's entry to
it, replaced for the call by one that ends the passes): whatever the release's passes are, in
its own order. The FSDP pre-bucketing, which torch runs at the scheduler's start, is left to
the replay, which runs it at every cap. torch's functions are called, never copied.

Only what the log records is known of the run's inductor config: the replaying process's
defaults stand for the rest (its ``aten_distributed_optimizations`` settings are read, the other
inductor settings are not), and a custom post-grad pass of the run is not run again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import torch.fx as fx


class _SchedulerReached(Exception):
    """Raised in place of torch's overlap scheduling: the post-grad passes before it are done."""


def as_scheduler_input(gm: fx.GraphModule, inference: bool) -> str | None:
    """Run the running torch's post-grad passes on ``gm`` (rebuilt from ``before_post_grad_graph``,
    with its fake values and ``gm.meta["fake_mode"]``) up to where its overlap scheduler starts;
    None when done, else why not (a pass refused the graph: ``gm`` is then partly rewritten,
    and the caller builds it again)."""
    import torch._inductor.config as inductor_config
    from torch._inductor.fx_passes import overlap_scheduling, post_grad
    from torch._inductor.virtualized import V

    def reached(*args, **kwargs):
        raise _SchedulerReached

    entry = "schedule_overlap_bucketing_from_inductor_configs"
    real = getattr(overlap_scheduling, entry, None)
    if real is None:
        return f"torch {_version()} has no overlap_scheduling.{entry}: its post-grad passes were not run"
    fake_mode = gm.meta.get("fake_mode")
    setattr(overlap_scheduling, entry, reached)
    try:
        with (
            V.set_fake_mode(fake_mode) if fake_mode is not None else contextlib.nullcontext(),
            inductor_config.patch(
                {
                    "aten_distributed_optimizations.enable_overlap_scheduling": True,
                    # the run's custom passes are not in the log; this process's are not the run's
                    "post_grad_custom_pre_pass": None,
                    "post_grad_custom_post_pass": None,
                }
            ),
        ):
            post_grad.post_grad_passes(gm, is_inference=inference)
    except _SchedulerReached:
        gm.recompile()
        return None
    except Exception as e:  # noqa: BLE001 - a pass that refuses the rebuilt graph is a note
        return f"torch's post-grad passes refused the rebuilt graph: {type(e).__name__}: {str(e)[:200]}"
    finally:
        setattr(overlap_scheduling, entry, real)
    return "torch's post-grad passes ended without reaching the overlap scheduler"


def post_grad_waits(gm: fx.GraphModule) -> int:
    """Do to the rebuilt graph's waits what the running torch's post-grad passes do before its
    FSDP pre-bucketing and overlap scheduler see the graph; return how many waits went. Used
    where the post-grad passes themselves could not run (:func:`as_scheduler_input`).

    torch 2.15 runs ``fx_passes.bucketing.deduplicate_wait_tensors`` on every graph with a
    wait: a second wait on a value already waited on (``wait_tensor(wait_tensor(ag))``, or two
    waits of one collective) is removed and its users take the first. Its overlap scheduler then
    registers each collective's one wait; with the second left in, it schedules another graph.
    torch 2.13 and 2.14 have no such pass, and the graph is left as it is. torch's function is
    called, never copied; known by its presence, not by the version."""
    try:
        from torch._inductor.fx_passes.bucketing import deduplicate_wait_tensors
    except ImportError:
        return 0
    before = len(gm.graph.nodes)
    deduplicate_wait_tensors(gm.graph)
    removed = before - len(gm.graph.nodes)
    if removed:
        gm.recompile()
    return removed


def how_rebuilt(src: Any) -> tuple[bool, bool]:
    """``(inference, post_grad)`` of a logged graph's source (a graph source of the reader): its
    compile was for inference; its text is a ``before_post_grad_graph``, which torch's post-grad
    passes rewrote before its pass and scheduler saw it (a ``tracekit_fsdp_input_graph`` is our
    pass's input, after them). What :func:`rebuilt_as_scheduled` takes after the text."""
    return bool(getattr(src, "inference", False)), src.text_artifact == "before_post_grad_graph"


def rebuilt_as_scheduled(
    text: str, symbols: Mapping[str, int] | None, inference: bool, post_grad: bool = True
) -> tuple[fx.GraphModule, str | None]:
    """The graph of ``text`` rebuilt (:func:`tracekit.replay.graph_text.parse_graph_text`, which
    raises on a text it does not accept), then made what torch's scheduler was given
    (:func:`as_scheduler_input`) when ``post_grad`` (the text is a ``before_post_grad_graph``);
    with the reason when that could not be done, the graph then rebuilt again with its waits
    as the running torch's passes leave them (:func:`post_grad_waits`)."""
    from tracekit.replay.graph_text import parse_graph_text

    gm = parse_graph_text(text, symbols)
    if not post_grad:
        return gm, None
    why = as_scheduler_input(gm, inference)
    if why is not None:
        gm = parse_graph_text(text, symbols)
        post_grad_waits(gm)
    return gm, why


def _version() -> str:
    import torch

    return str(torch.__version__)


__all__ = ["as_scheduler_input", "how_rebuilt", "post_grad_waits", "rebuilt_as_scheduled"]
