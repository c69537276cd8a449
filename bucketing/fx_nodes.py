"""Making fx nodes in bulk: ``new_node`` and ``copy_graph_nodes``.

``Graph.create_node`` walks a new node's arguments with pytree to warn about raw ``SymInt``
arguments (torch 2.13 to 2.15), and that walk is most of a node's cost: a fifth of our
pre-bucketing and half of a graph copy on a 1,000-layer graph. The nodes made here have none
(their arguments are other nodes, ints, lists of them, dtypes; the sizes are static, or came
from a graph that was itself made by ``create_node`` and warned then), so they are created
without arguments, which ``create_node`` does not walk, and get them at once through the public
``Node.args`` / ``Node.kwargs`` setters: the same node, the same users in the same order::

    before: node = graph.create_node("call_function", aten.view.default, (x, [-1]), {}, name="view")
    after:  node = graph.create_node("call_function", aten.view.default, None, None, name="view")
            object.__setattr__(node, "args", (x, [-1]))   # Node.args's setter

Every attribute assigned to a node goes through ``Node.__setattr__``, which takes the node out
of its graph's lookup table (``find_nodes``'s, keyed by op and target) and puts it back at the
end. A new node's arguments are given through the property setters themselves
(``object.__setattr__``: the same ``Node.args`` / ``Node.kwargs`` setters, without that round
trip); the new node is the last of its key in the table either way, so the table is the same.
A copied node's meta is filled in place (``meta.update``), a shallow copy as ``node_copy``
makes, rather than assigned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.fx as fx


def new_node(
    graph: fx.Graph,
    op: str,
    target: Any,
    args: tuple = (),
    kwargs: dict[str, Any] | None = None,
    name: str | None = None,
    type_expr: Any | None = None,
) -> fx.Node:
    """``graph.create_node(op, target, args, kwargs, name, type_expr)`` at the insert point,
    without the walk over the arguments (see the module)."""
    node = graph.create_node(op, target, None, None, name, type_expr)
    # the Node.args / Node.kwargs property setters, without Node.__setattr__ (see the module)
    if args:
        object.__setattr__(node, "args", args)
    if kwargs:
        object.__setattr__(node, "kwargs", kwargs)
    return node


def copy_graph_nodes(
    source: fx.Graph,
    into: fx.Graph,
    copied: dict[fx.Node, Any] | None = None,
    left_out: dict[fx.Node, Any] | None = None,
) -> Any:
    """Copy every node of ``source`` into the empty graph ``into`` as ``into.graph_copy(source,
    {})`` does (same names, types and order; node meta copied shallowly), and return what the
    copy's output should return (None if ``source`` has no output node). ``copied``: filled
    with each source node's copy (a node left out: what its users hold instead).

    ``left_out``: nodes not copied, each with what its users' arguments hold in its place (a
    mark the caller replaces later). A node left out still takes its name in ``into``'s
    namespace, at its place: the names made after the copy are those a whole copy leaves free."""
    copied = {} if copied is None else copied
    remap: Callable[[fx.Node], Any] = copied.__getitem__
    take_name = into._graph_namespace.create_name if left_out else None
    for node in source.nodes:
        if node.op == "output":
            return fx.node.map_arg(node.args[0], remap)
        if take_name is not None and node in left_out:  # type: ignore[operator]  # left_out is set
            take_name(node.name, None)
            copied[node] = left_out[node]  # type: ignore[index]  # what its users hold instead
            continue
        new = new_node(
            into,
            node.op,
            node.target,
            fx.node.map_arg(node.args, remap),
            fx.node.map_arg(node.kwargs, remap) if node.kwargs else None,
            node.name,
            node.type,
        )
        new.meta.update(node.meta)  # the new node's own dict: no Node.__setattr__ (see the module)
        copied[node] = new
    return None


def graph_module(root: fx.GraphModule, graph: fx.Graph) -> fx.GraphModule:
    """``graph`` as a module with ``root``'s attributes: torch's ``_LazyGraphModule``, whose
    Python code is generated only if something reads it or calls the module (a plain
    ``GraphModule`` generates the code of the whole graph at once, two thirds of a copy's
    time, and a rewritten copy that is only scheduled never runs it)."""
    try:
        from torch.fx._lazy_graph_module import _LazyGraphModule
    except ImportError:  # a release without it: the code is generated, nothing else changes
        return fx.GraphModule(root, graph)
    return _LazyGraphModule(root, graph)


def copy_graph_module(gm: fx.GraphModule) -> fx.GraphModule:
    """A copy of ``gm`` to rewrite: its nodes copied (:func:`copy_graph_nodes`, meta shallowly:
    fake values are shared) into a :func:`graph_module`."""
    graph = fx.Graph()
    graph.output(copy_graph_nodes(gm.graph, graph))
    return graph_module(gm, graph)


__all__ = ["copy_graph_module", "copy_graph_nodes", "graph_module", "new_node"]
