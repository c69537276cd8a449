"""The FSDP pre-bucketing pass: plan, rewrite, report."""

from __future__ import annotations

import logging

import torch.fx as fx

from bucketing import artifacts
from bucketing.compat import check_torch
from bucketing.copy_rewrite import WaitUsers, rewritten_copy
from bucketing.fx_nodes import copy_graph_module
from bucketing.gc_pause import gc_paused
from bucketing.merge import (
    BucketingError,
    InPlace,
    group_rank,
    merge_bucket,
    needs_torch_merge,
    restore_topological_order,
    sort_as_torch,
)
from bucketing.plan import FsdpPlanner, collective_sizes, count_kinds, fill_buckets
from bucketing.predicates import KINDS, group_name_of
from bucketing.report import BucketingReport

logger = logging.getLogger(__name__)


def _verbose() -> bool:
    import torch._inductor.config as inductor_config

    return bool(inductor_config.aten_distributed_optimizations.pre_bucketing_fsdp_collectives_verbose)


def pre_bucket_fsdp_collectives(
    gm: fx.GraphModule,
    mode: str | None = None,
    bucket_cap_mb: float | None = None,
    *,
    recompile: bool = True,
    fsdp_groups: list[str] | None = None,
    group_size: int | None = None,
    planner: FsdpPlanner | None = None,
    lint: bool = True,
    artifacts: bool = True,
    torch_order: bool = False,
) -> BucketingReport:
    """Merge FSDP all-gathers, reduce-scatters and all-reduces of ``gm`` into capped buckets.

    Same outcome as torch 2.13's ``torch._inductor.fx_passes.fsdp.pre_bucket_fsdp_collectives``
    (see :mod:`bucketing.plan` for the rules and :mod:`bucketing.merge` for the IR), but the
    rewritten graph lints without a later topological sort, it costs about linear time, and it
    returns a :class:`BucketingReport`. For example, four FSDP all-gathers at a large cap::

        before: ag = all_gather_into_tensor(p0, 4, '0'); w = wait_tensor(ag); ... (x4)
        after:  ag = all_gather_into_tensor_out(copy_(slice(buf), cat([view(p0), ...])), 4, '0', out=buf)
                w = wait_tensor(ag); parts = split_with_sizes(view(w, [4, -1]), [...], 1); ...

    ``bucket_cap_mb`` None means the automatic cap (:func:`bucketing.compute_pre_bucket_cap_mb`);
    ``mode`` None means "default". Emits the artifacts listed in :mod:`bucketing.artifacts`.
    A graph without FSDP all-gathers is left unchanged (``skipped_reason`` says so, no artifact).
    ``recompile=False`` skips regenerating ``gm``'s Python code (inductor does not need it).
    ``fsdp_groups`` / ``group_size``: groups found elsewhere (the forward of the same compile
    id), used instead of identifying them in ``gm`` (see :class:`bucketing.FsdpPlanner`): torch
    never does this; it is the what-if for a backward without FSDP all-gather.
    ``planner``: a :class:`bucketing.FsdpPlanner` made (with the same mode, bucket mode and
    groups) on the graph ``gm`` is an unchanged copy of (the same node names): its plan at the
    cap is rewritten on ``gm``, its nodes found by name, instead of planning ``gm`` again (a
    replay rewrites a copy of one graph per cap); ``mode``, ``fsdp_groups`` and ``group_size``
    are then the planner's. ``lint=False`` skips checking the rewritten graph (``Graph.lint``)
    for a caller that checked the rewrite of the same graph at another cap. ``artifacts=False``
    emits none (a replay's copies are not a run's graphs; and with no TORCH_TRACE, torch's trace
    handler still has the first artifact of a process made, the whole graph printed, before it
    finds it has nowhere to write: 0.7 s on a 9,000-node graph). ``torch_order``: leave the
    nodes in the order torch's pass leaves them (:func:`bucketing.merge.sort_as_torch`), which
    is what torch's overlap scheduler is given, not in topological order (no lint, no recompile).
    """
    check_torch()
    with gc_paused():
        return _pre_bucket(
            gm,
            mode,
            bucket_cap_mb,
            recompile,
            fsdp_groups,
            group_size,
            planner,
            lint,
            artifacts,
            torch_order=torch_order,
        )[1]


def pre_bucketed_copy(
    gm: fx.GraphModule,
    planner: FsdpPlanner,
    bucket_cap_mb: float | None = None,
    *,
    lint: bool = True,
    torch_order: bool = False,
) -> tuple[fx.GraphModule, BucketingReport]:
    """A copy of ``gm``, the graph ``planner`` was made on (left as it is), pre-bucketed at
    ``bucket_cap_mb`` with the planner's plan, and the pass's report: what
    ``pre_bucket_fsdp_collectives(copy, planner=planner, recompile=False, lint=lint,
    artifacts=False)`` gives on a whole copy, the same graph node for node, made without the
    nodes that rewrite would erase (:mod:`bucketing.copy_rewrite`; a plan that needs them is
    rewritten on a whole copy). A replay rewrites one copy per cap. ``torch_order``: as
    :func:`pre_bucket_fsdp_collectives` has it (on a whole copy: the sort after each bucket
    needs the graph as it is then)."""
    if planner.gm is not gm:
        raise BucketingError("pre_bucketed_copy: the planner was made on another graph")
    check_torch()
    with gc_paused():
        return _pre_bucket(
            gm,
            None,
            bucket_cap_mb,
            False,
            planner=planner,
            lint=lint,
            emit=False,
            into_copy=True,
            torch_order=torch_order,
        )


def _pre_bucket(
    gm: fx.GraphModule,
    mode: str | None,
    bucket_cap_mb: float | None,
    recompile: bool,
    fsdp_groups: list[str] | None = None,
    group_size: int | None = None,
    planner: FsdpPlanner | None = None,
    lint: bool = True,
    emit: bool = True,
    into_copy: bool = False,
    torch_order: bool = False,
) -> tuple[fx.GraphModule, BucketingReport]:
    """The pass on ``gm``, or (``into_copy``) on a copy of ``gm`` made rewritten: the graph
    rewritten and the report."""
    if planner is None:
        planner = FsdpPlanner(gm, mode, fsdp_groups=fsdp_groups, group_size=group_size)
    report = planner.base_report()
    if not planner.fsdp_groups:
        report.skipped_reason = "no FSDP all-gather in the graph"
        return (copy_graph_module(gm) if into_copy else gm), report
    verbose = emit and _verbose()
    if emit:
        artifacts.emit_string(
            artifacts.INPUT_GRAPH,
            lambda: gm.print_readable(print_output=False, include_stride=True, include_device=True),
        )
    if verbose:
        sizes_before = report.sizes_before
        artifacts.emit_json(artifacts.SIZES, lambda: sizes_before)
    cap = planner.cap_for(bucket_cap_mb)
    report.cap_mb, report.cap_source = cap.cap_mb, cap.source
    plan = planner.plan_at(cap.cap_mb)
    fill_buckets(report, plan)
    if emit:
        artifacts.emit_json(artifacts.BUCKETS, report.buckets_payload)

    # a copy: fake values kept from earlier rewrites of copies are reused
    copy = into_copy or planner.gm is not gm
    views, clones = (planner.input_views, planner.output_clones) if copy else (None, None)
    made = None
    if into_copy:
        by_torch = _check_mergeable(plan.buckets, planner.mode, planner.merge_checks)

        def merge(graph: fx.Graph, kind: str, members: list[fx.Node], site: InPlace) -> None:
            merge_bucket(graph, kind, members, planner.mode, views, clones, site)

        # a copy made rewritten, unless torch's merge functions need the members in the graph
        # or each bucket is sorted as torch sorts it (on the graph as it is then): a whole copy
        if not by_torch and not torch_order:
            if planner.wait_users is None:
                planner.wait_users = WaitUsers(planner.nodes, planner.ids)
            made = rewritten_copy(gm, plan.buckets, planner.ids, merge, planner.wait_users)
        gm = made if made is not None else copy_graph_module(gm)
    if made is not None:
        merged = sum(len(plan.buckets.get(kind, [])) for kind in KINDS)
    else:
        buckets = plan.buckets if planner.gm is gm else _on_copy(gm.graph, planner.nodes, plan.buckets)
        _check_mergeable(buckets, planner.mode)
        merged = 0
        for kind in KINDS:
            for members in buckets[kind]:
                done = merge_bucket(gm.graph, kind, members, planner.mode, views, clones)
                if torch_order and done is not None:  # torch's merge functions sort as torch
                    sort_as_torch(gm.graph, done)
                merged += 1
    graph = gm.graph
    if merged and not torch_order:
        restore_topological_order(graph)
        if lint:
            graph.lint()
        if recompile:
            gm.recompile()
    report.rewritten = merged > 0
    report.sizes_after = collective_sizes(graph, planner.fsdp_groups)
    report.counts_after = count_kinds(report.sizes_after)
    if verbose:
        sizes_after = report.sizes_after
        artifacts.emit_json(artifacts.SIZES_AFTER, lambda: sizes_after)
    line = report.summary_line()
    logger.info("pre_bucket_fsdp_collectives: %s", line)
    if emit:
        artifacts.emit_string(artifacts.SUMMARY, lambda: line)
    return gm, report


def _on_copy(
    graph: fx.Graph, planned: list[fx.Node], buckets: dict[str, list[list[fx.Node]]]
) -> dict[str, list[list[fx.Node]]]:
    """The buckets of a plan made on the graph of the nodes ``planned``, as the nodes of the
    same names in ``graph`` (an unchanged copy of it); raises :class:`BucketingError`, before
    any rewrite, if ``graph`` is not one: another node count, a member missing or another op."""
    by_name = {n.name: n for n in graph.nodes}
    if len(by_name) != len(planned):
        raise BucketingError(
            f"planner given for another graph: {len(planned)} nodes planned, {len(by_name)} here"
        )
    out: dict[str, list[list[fx.Node]]] = {}
    for kind, bs in buckets.items():
        out[kind] = []
        for b in bs:
            here = []
            for m in b:
                h = by_name.get(m.name)
                if h is None or h.target != m.target:
                    raise BucketingError(
                        f"planner given for another graph: no node {m.name!r} ({m.target}) here"
                    )
                here.append(h)
            out[kind].append(here)
    return out


def _check_mergeable(
    buckets: dict[str, list[list[fx.Node]]], mode: str, known: dict[fx.Node, str | None] | None = None
) -> bool:
    """Raise before any rewrite if a bucket could not be merged (unregistered group, ...);
    return whether a bucket goes through torch's merge functions (``needs_torch_merge``, with
    ``known`` its members' answers kept across calls)."""
    by_torch = False
    for kind in KINDS:
        for members in buckets[kind]:
            ours = needs_torch_merge(kind, members, mode, known) is None
            by_torch |= not ours
            if kind == "AG" and ours:
                group_rank(group_name_of(members[0]))
            for m in members:
                if len(m.users) != 1:
                    raise BucketingError(f"{m.name}: collective with {len(m.users)} users cannot be bucketed")
    return by_torch
