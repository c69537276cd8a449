"""Our pre-bucketing pass against the installed torch's own pass on every fixture graph.

Every graph of every scenario in fixtures/logs (the 2-D meshes, the logs of torch 2.14.1 and
2.15.0, the backwards torch never pre-bucketed), rebuilt from its ``before_post_grad_graph`` as
replay rebuilds it, with its process groups registered as replay registers them, then both
passes on fresh copies at four caps: 0.01 MB (nothing merges), 1 MB, 64 MB (everything of a kind
merges) and the automatic cap. The same summary line (counts and cap), the same buckets (torch's
``fx_bucketing_passes_*_buckets`` artifacts) and the same sizes after merging; and, asked for
torch's order (``torch_order``: what a replay gives torch's scheduler), the same graph node for
node in the same order, up to the names of the nodes the buckets made. .ci/run runs this under
torch 2.13.0, 2.14.1 and 2.15.0: "our pass agrees with the installed torch's".
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from bucketing_support import captured_artifacts, torch_bucket_names
from printed_graphs import canonical
from conftest import FIXTURE_LOGS
from torch._inductor.fx_passes.fsdp import pre_bucket_fsdp_collectives as torch_pre_bucket

import bucketing
from bucketing.plan import collective_sizes
from tracekit.read.reader import graph_and_not_prebucketed_sources
from tracekit.replay import process_groups
from tracekit.replay.graph_text import parse_graph_text

CAPS = (0.01, 1.0, 64.0, None)


def _fixture_graphs() -> dict[str, tuple[str, dict[str, int], bool, str]]:
    """id -> (graph text, symbol hints, pre-bucketed in the log, scenario) for each distinct graph
    of the fixtures (ranks and scenarios of one model log the same text: kept once)."""
    out: dict[str, tuple[str, dict[str, int], bool, str]] = {}
    seen: set[tuple] = set()
    for scenario in sorted(p for p in FIXTURE_LOGS.iterdir() if p.is_dir()):
        for src in graph_and_not_prebucketed_sources(str(scenario)):
            if src.text is None:
                continue
            hints = dict(getattr(src, "symbol_hints", {}))
            key = (src.text, tuple(sorted(hints.items())))
            if key in seen:
                continue
            seen.add(key)
            graph_id = f"{scenario.name}:rank{src.rank}:{src.compile_id}:{src.graph_index}"
            out[graph_id] = (src.text, hints, hasattr(src, "recorded_buckets"), scenario.name)
    return out


GRAPHS = _fixture_graphs()


@pytest.fixture(scope="module", autouse=True)
def _groups_restored() -> Iterator[dict[str, object]]:
    """The fake process groups this module registers under logged names ('0' is also the fake
    world's own name) are put back as they were at the end, so that the next module's groups
    resolve as it made them; a fake world started here (or started again, bigger) is ended."""
    import torch.distributed as dist
    from torch._C._distributed_c10d import _register_process_group, _unregister_process_group
    from torch.distributed.distributed_c10d import _resolve_process_group

    started = not dist.is_initialized()
    world = None if started else dist.group.WORLD
    before: dict[str, object] = {}
    yield before
    if started or dist.group.WORLD is not world:
        # a fake world started here, or one started again here (a bigger one was needed): the
        # groups noted before belong to a world that was destroyed, so none is put back
        before.clear()
        if dist.is_initialized():
            dist.destroy_process_group()
        return
    for name, group in before.items():
        try:
            _resolve_process_group(name)
            _unregister_process_group(name)
        except Exception:  # noqa: BLE001 - not registered now
            pass
        if group is not None:
            _register_process_group(name, group)


def _register(gm, scenario: str, before: dict[str, object]) -> None:
    """The graph's groups as replay registers them (sizes from the graph or the run's logs)."""
    from torch.distributed.distributed_c10d import _resolve_process_group

    table = process_groups.group_table([str(FIXTURE_LOGS / scenario)])
    groups = process_groups.graph_groups(gm, table)
    for g in groups:
        if g.name not in before:
            try:
                before[g.name] = _resolve_process_group(g.name)
            except Exception:  # noqa: BLE001 - not registered yet
                before[g.name] = None
    process_groups.register(groups, table.world)


def test_every_scenario_is_covered() -> None:
    """68 distinct graphs; every scenario with compiled collectives gives at least one (those
    whose text another scenario logged first share it: the same model, other caps or ranks)."""
    assert len(GRAPHS) == 68
    assert {v[3] for v in GRAPHS.values()} == {
        "diverge_rank", "fsdp_tp", "fsdp_tp2_overlap", "fsdp_tp_overlap", "hsdp", "hsdp_diverge", "hsdp_overlap",
        "hsdp_stock", "nested_waits", "nested_waits_torch2.15", "overlap_cap_a", "overlap_cap_a_torch2.14",
        "overlap_cap_a_torch2.15", "saved_params", "saved_params_torch2.14", "spmd_small_cap",
    }  # fmt: skip
    # saved_params' backwards (2.13, 2.14); nested_waits' forwards (2.13, 2.15), each rank's its own
    # (its groups' names differ from rank to rank)
    assert sum(not v[2] for v in GRAPHS.values()) == 2 + 8


@pytest.mark.parametrize("graph_id", sorted(GRAPHS))
def test_same_buckets_as_the_installed_torch_at_four_caps(graph_id: str, _groups_restored) -> None:
    text, hints, prebucketed, scenario = GRAPHS[graph_id]
    _register(parse_graph_text(text, hints), scenario, _groups_restored)
    after: list[int] = []
    for cap in CAPS:
        theirs = parse_graph_text(text, hints)
        with captured_artifacts() as torch_records:
            torch_pre_bucket(theirs, bucket_cap_mb=cap)
        ours = parse_graph_text(text, hints)
        with captured_artifacts() as our_records:
            report = bucketing.pre_bucket_fsdp_collectives(ours, bucket_cap_mb=cap)
        torch_lines = [p for n, p in torch_records if n == "pre_bucketing_fsdp_collectives"]
        our_lines = [p for n, p in our_records if n == "pre_bucketing_fsdp_collectives"]
        assert our_lines == torch_lines, cap
        # a graph torch pre-bucketed in the log gets one line at every cap; the others none
        assert len(torch_lines) == int(prebucketed), cap
        if not prebucketed:
            continue
        assert torch_lines == [report.summary_line()]
        buckets = {kind: [[m.name for m in b] for b in report.buckets[kind]] for kind in ("AG", "RS")}
        assert buckets == torch_bucket_names(torch_records), cap
        torch_sizes = [(s["type"], s["size_mb"]) for s in collective_sizes(theirs.graph, report.fsdp_groups)]
        assert [(s["type"], s["size_mb"]) for s in report.sizes_after] == torch_sizes, cap
        if cap == 64.0:  # every kind fits one bucket
            assert all(len(v) <= 1 for v in report.buckets.values()), report.buckets
        after.append(sum(report.counts_after.values()))
    if prebucketed:  # a bigger cap never leaves more collectives (0.01 MB still merges 4 KiB vectors)
        assert after[0] >= after[1] >= after[2], after


@pytest.mark.parametrize("graph_id", sorted(GRAPHS))
def test_in_torchs_order_the_same_graph_as_the_installed_torch(graph_id: str, _groups_restored) -> None:
    text, hints, _, scenario = GRAPHS[graph_id]
    _register(parse_graph_text(text, hints), scenario, _groups_restored)
    for cap in CAPS:
        theirs = parse_graph_text(text, hints)
        torch_pre_bucket(theirs, bucket_cap_mb=cap)
        ours = parse_graph_text(text, hints)
        bucketing.pre_bucket_fsdp_collectives(ours, bucket_cap_mb=cap, torch_order=True, artifacts=False)
        assert canonical(ours.print_readable(False)) == canonical(theirs.print_readable(False)), cap
