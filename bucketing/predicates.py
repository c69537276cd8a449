"""Small named predicates that say which collectives are FSDP ones.

They follow torch 2.13's ``torch._inductor.fx_passes.fsdp`` heuristics:

- FSDP all-gather: its inputs derive from exactly one placeholder (the parameter shard);
  every input branch is walked, so ``cat(param, zeros)`` padding still counts.
- FSDP reduce-scatter: every path from its wait reaches the graph output through nodes with a
  single input (views, casts); anything that mixes in other data rejects it.
- FSDP all-reduce: on a process group that FSDP all-gathers use.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.fx as fx

_c10d = torch.ops._c10d_functional

ALL_GATHER_TARGETS = (
    _c10d.all_gather_into_tensor.default,
    _c10d.all_gather_into_tensor_out.default,
)
REDUCE_SCATTER_TARGET = _c10d.reduce_scatter_tensor.default
ALL_REDUCE_TARGET = _c10d.all_reduce.default
WAIT_TARGET = _c10d.wait_tensor.default

# Collective kinds, in the order the pass handles them. The short names are the ones torch
# uses in its size artifacts; the long ones in its summary line.
KINDS = ("AG", "RS", "AR")
KIND_LONG_NAMES = {"AG": "all_gather", "RS": "reduce_scatter", "AR": "all_reduce"}


def is_all_gather(node: fx.Node) -> bool:
    """An ``all_gather_into_tensor`` (plain or ``_out``) call."""
    return node.op == "call_function" and node.target in ALL_GATHER_TARGETS


def is_reduce_scatter(node: fx.Node) -> bool:
    """A ``reduce_scatter_tensor`` call."""
    return node.op == "call_function" and node.target is REDUCE_SCATTER_TARGET


def is_wait(node: fx.Node) -> bool:
    """A ``wait_tensor`` call."""
    return node.op == "call_function" and node.target is WAIT_TARGET


def collective_kind(node: fx.Node) -> str | None:
    """ "AG", "RS", "AR" for the three bucketed collectives, else None."""
    if node.op != "call_function":
        return None
    if node.target in ALL_GATHER_TARGETS:
        return "AG"
    if node.target is REDUCE_SCATTER_TARGET:
        return "RS"
    if node.target is ALL_REDUCE_TARGET:
        return "AR"
    return None


@functools.cache
def _arg_positions(target: object) -> dict[str, int]:
    schema = target._schema  # type: ignore[attr-defined]  # an OpOverload (collective targets are)
    return {arg.name: i for i, arg in enumerate(schema.arguments)}


def collective_arg(node: fx.Node, name: str) -> Any:
    """The argument ``name`` of a collective call, given positionally or by keyword (an fx
    argument: a node, a number, a string, ...; Any, as fx's own ``Argument`` is)."""
    if name in node.kwargs:
        return node.kwargs[name]
    position = _arg_positions(node.target)[name]
    if position < len(node.args):
        return node.args[position]
    raise ValueError(f"{node.name}: collective has no argument {name!r}")


def group_name_of(node: fx.Node) -> str:
    """The process group name of a collective; resolves a group given as a graph node."""
    group = collective_arg(node, "group_name")
    if isinstance(group, fx.Node):
        return group.meta["val"].group_name
    return str(group)


def group_size_of(node: fx.Node) -> int | None:
    """The group size argument of an all-gather or reduce-scatter (all-reduce has none)."""
    if "group_size" not in _arg_positions(node.target):
        return None
    return int(collective_arg(node, "group_size"))


def reduce_op_of(node: fx.Node) -> str:
    """The reduce op of a reduce-scatter or all-reduce."""
    return str(collective_arg(node, "reduce_op"))


def waited_collective(wait: fx.Node) -> fx.Node | None:
    """The collective node a ``wait_tensor`` waits on, if it is one of the bucketed kinds."""
    if not is_wait(wait) or not wait.args:
        return None
    arg = wait.args[0]
    if isinstance(arg, fx.Node) and collective_kind(arg) is not None:
        return arg
    return None


def is_fsdp_all_gather(node: fx.Node) -> bool:
    """True when an all-gather's inputs derive from exactly one placeholder.

    Walks every input branch backwards (so ``cat(param, zeros)`` padding and dtype casts are
    accepted) and stops at the second placeholder. Rejects all-gathers of activations, which
    derive from several inputs, and of constants, which derive from none.
    """
    return is_all_gather(node) and len(placeholder_ancestors(node, 2)) == 1


def placeholder_ancestors(node: fx.Node, limit: int) -> list[fx.Node]:
    """The placeholders ``node``'s inputs derive from, in the order found; the walk stops at the
    ``limit``-th one (so fewer than ``limit`` found means these are all of them)."""
    seen: set[fx.Node] = set()
    stack = list(node.all_input_nodes)
    found: list[fx.Node] = []
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        if current.op == "placeholder":
            found.append(current)
            if len(found) >= limit:
                break
        else:
            stack.extend(current.all_input_nodes)
    return found


def is_fsdp_reduce_scatter_wait(wait: fx.Node) -> bool:
    """True when every path from a reduce-scatter's wait reaches the output via 1-input nodes.

    A wait with no users is rejected, and so is any path through a node with two or more
    inputs (for example ``add(grad, wait)`` in gradient accumulation): conservative, as in
    torch.
    """
    return fsdp_reduce_scatter_downstream(wait) is not None


def fsdp_reduce_scatter_downstream(wait: fx.Node) -> list[fx.Node] | None:
    """The nodes on the unary paths from ``wait`` to the output (graph order not kept), or None
    when ``wait`` is not an FSDP reduce-scatter wait (see :func:`is_fsdp_reduce_scatter_wait`)."""
    return reduce_scatter_chain(wait)[0]


def reduce_scatter_chain(wait: fx.Node) -> tuple[list[fx.Node] | None, fx.Node | None]:
    """``(reached, None)`` when every path from ``wait`` reaches the output through 1-input
    nodes (``reached``: those nodes); else ``(None, breaker)``, the first node found with
    another number of inputs (``breaker`` None when the wait has no users)."""
    if not wait.users:
        return None, None
    seen: set[fx.Node] = set()
    reached: list[fx.Node] = []
    stack = [wait]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        for user in current.users:
            if user.op == "output":
                continue
            if len(user.all_input_nodes) != 1:
                return None, user
            reached.append(user)
            stack.append(user)
    return reached, None
