"""The run's overlap scheduling settings, as its log names them, for the replay's scheduler.

A graph's ``fx_graph_runnable`` lists the inductor config the run changed from torch's defaults
(read by :func:`tracekit.read.parsers.parse_run_settings` as ``{name: value text}``), e.g.::

    torch._inductor.config.aten_distributed_optimizations.max_in_flight_gb = 2.0
    torch._inductor.config.aten_distributed_optimizations.custom_runtime_estimation = __main__.my_estimate

Two uses:

- :func:`scheduler_overrides`: the settings the scheduler takes, so that the replay schedules
  with the run's (``collective_bucketing``, ``max_in_flight_gb``, ...) rather than the replaying
  process's. Only literals are read (``ast.literal_eval``: never evaluated as code); how the run
  estimated is not taken from here (the estimates come from the log: compute nodes from its
  ``fx_compute_nodes_runtime_estimation``, collectives from torch's NCCL model).
- :func:`unrecorded_estimates`: where the run's scheduler used estimates the log does not record
  (a custom hook's for collectives and non-compute nodes, profile-guided ones, benchmarked
  collectives), said plainly, so that a schedule that does not reproduce says why it may not.

Never imports torch.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from typing import Any

#: Settings replay sets itself whatever the run had (estimation and logging: see
#: :func:`tracekit.replay.overlap_schedule.scheduler_settings`; the bucket mode, which the
#: pre-bucketing planner and ``--bucket-mode`` decide for the scheduler as well).
REPLAY_OWN = frozenset(
    {"collective_estimator", "compute_estimator", "log_final_collectives_estimations", "bucket_mode"}
)


def literal(text: str) -> tuple[bool, Any]:
    """``(True, value)`` for a Python literal (``2.0``, ``'default'``, ``True``), else
    ``(False, None)`` (a function's name, an expression)."""
    try:
        return True, ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None


def scheduler_overrides(settings: Mapping[str, str] | None, keys: Iterable[str]) -> dict[str, Any]:
    """The run's values of the scheduler settings ``keys`` (those ``OverlapScheduler`` takes),
    literals only and not None (None: torch's default, as the run had it), without
    :data:`REPLAY_OWN`."""
    out: dict[str, Any] = {}
    for k in keys:
        if k in REPLAY_OWN or not settings or k not in settings:
            continue
        ok, value = literal(settings[k])
        if ok and value is not None:
            out[k] = value
    return out


def stock_estimates(settings: Mapping[str, str] | None) -> bool:
    """Whether the run's overlap scheduler timed nodes with torch's own models only: no
    ``custom_runtime_estimation`` hook and no profile-guided estimates (which torch passes as
    one). Then every node that is neither a compute node nor a collective was timed by torch's
    roofline, which the replay can do again. A log without settings is taken as torch's
    defaults, as :func:`scheduler_overrides` takes it."""
    if not settings:
        return True
    hook = settings.get("custom_runtime_estimation")
    if hook is not None and literal(hook) != (True, None):
        return False
    pge = settings.get("profile_guided_estimations_profile_path")
    return pge is None or not literal(pge)[1]


def unrecorded_estimates(
    settings: Mapping[str, str] | None, recorded_us: Mapping[str, float] | None = None
) -> list[str]:
    """Where the run's overlap scheduler used estimates other than torch's models that the log
    does not record, one sentence each; [] when it used torch's (or the log has no settings).
    ``recorded_us``: the estimates the log gave the replay (benchmarked collectives are there
    by torch's key, ``op: (N group size, B bytes)``, when it logged them)."""
    if not settings:
        return []
    out = []
    hook = settings.get("custom_runtime_estimation")
    has_hook = hook is not None and literal(hook) != (True, None)
    if has_hook:
        out.append(
            f"the log cannot tell: the run's scheduler asked a custom_runtime_estimation hook ({hook}) "
            "first; the log records what it gave compute nodes (fx_compute_nodes_runtime_estimation), "
            "not what it gave collectives and other nodes, which the replay timed with torch's models"
        )
    pge = settings.get("profile_guided_estimations_profile_path")
    if pge is not None and not has_hook and literal(pge)[1]:
        out.append(
            f"the log cannot tell: the run's scheduler used profile-guided estimates (from {pge}), which "
            "the log does not record; the replay timed collectives and other nodes with torch's models"
        )
    ok, coll = literal(settings.get("collective_estimator", "None"))
    if ok and coll == "benchmark" and not any(" group size, " in k for k in recorded_us or {}):
        out.append(
            "the log cannot tell: the run's scheduler benchmarked its collectives "
            "(collective_estimator='benchmark') and the log has no fx_collectives_node_runtime_estimation; "
            "the replay timed them with torch's NCCL model"
        )
    return out


__all__ = ["REPLAY_OWN", "literal", "scheduler_overrides", "stock_estimates", "unrecorded_estimates"]
