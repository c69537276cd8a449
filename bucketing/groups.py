"""Which process groups carry FSDP traffic in a graph."""

from __future__ import annotations

import torch.fx as fx

from bucketing.predicates import ALL_GATHER_TARGETS, group_name_of, group_size_of, is_fsdp_all_gather


def find_collectives(graph: fx.Graph, targets: tuple) -> list[fx.Node]:
    """Collective nodes with any of ``targets``, each target's nodes in graph order."""
    found: list[fx.Node] = []
    for target in targets:
        found.extend(graph.find_nodes(op="call_function", target=target))
    return found


def identify_fsdp_groups(gm: fx.GraphModule) -> tuple[list[str], int | None]:
    """Return ``(group names, group size)`` of the FSDP process groups of ``gm``.

    A group is an FSDP group when it carries at least one FSDP all-gather (one derived from a
    single parameter); the size is the first such all-gather's ``group_size``. Reduce-scatters
    and all-reduces on these groups count as FSDP ones too. ``([], None)`` when there is none.
    """
    names: list[str] = []
    group_size: int | None = None
    for node in find_collectives(gm.graph, ALL_GATHER_TARGETS):
        if not is_fsdp_all_gather(node):
            continue
        name = group_name_of(node)
        if name not in names:
            names.append(name)
        if group_size is None:
            group_size = group_size_of(node)
    return names, group_size
