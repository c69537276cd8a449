"""What a collective on a group pre-bucketing never saw carries, read off the rebuilt graph.

On a mesh, a collective on a group that is no FSDP group is either a gradient (HSDP's replicate
all-reduces) or an activation (tensor parallelism: the all-reduce after a row-parallel matmul).
Here, for one collective node of a rebuilt graph (:class:`tracekit.replay.replayer.GraphReplayer`'s
``gm``, before pre-bucketing), the node its input comes from (through views), that node's
operands, whether one of them is a parameter all-gathered on an FSDP group (then the input is
an activation: a matmul of activations with a gathered weight shard), and what uses the result
(the graph's output, or the compute that waits for it). Nothing is run: the graph is only read.

For fsdp_tp_overlap's forward (one all-reduce on tp group '3')::

    all_reduce(mm_7)      mm_7 = mm(relu_6, permute_7); permute_7 <- all_gather on FSDP group '1'
    -> "its input is mm_7 (aten.mm of relu_6 and a parameter all-gathered on FSDP group '1'):
        an activation; the graph returns its result"
"""

from __future__ import annotations

from typing import Any

#: Ops that only look at a tensor again (a view, a copy, a wait): followed when tracing an input.
_PASS_THROUGH = (
    "view",
    "_unsafe_view",
    "reshape",
    "permute",
    "t.default",
    "transpose",
    "expand",
    "clone",
    "contiguous",
    "alias",
    "squeeze",
    "unsqueeze",
    "slice",
    "split",
    "getitem",
    "wait_tensor",
    "_to_copy",
    "convert_element_type",
    "as_strided",
)


def _op(node: Any) -> str:
    return str(node.target) if node.op == "call_function" else node.op


def _passes_through(node: Any) -> bool:
    if node.op != "call_function":
        return False
    target = _op(node)
    return any(p in target for p in _PASS_THROUGH) or target.endswith("getitem")


def _source(node: Any) -> Any:
    """The first node at or before ``node`` (its first input, through views and waits) that
    computes something."""
    seen = 0
    while _passes_through(node) and node.all_input_nodes and seen < 64:
        node = node.all_input_nodes[0]
        seen += 1
    return node


def _gathered_on(node: Any, fsdp: set[str]) -> str | None:
    """The FSDP group ``node`` was all-gathered on (through views, waits, splits and copies:
    a parameter), or None."""
    from tracekit.replay.overlap_schedule import _group_name, collective_op

    todo, seen = [node], 0
    while todo and seen < 256:
        n = todo.pop()
        seen += 1
        if n.op == "call_function" and "_c10d_functional" in _op(n):
            kind = collective_op(_op(n))
            if kind is not None and kind[0] == "all_gather":
                group = _group_name(n)
                if group in fsdp:
                    return group
        if _passes_through(n):
            todo.extend(n.all_input_nodes)
    return None


def _users(node: Any) -> list[str]:
    """What uses a collective's result: through its wait and views, the first compute nodes
    (``output`` when the graph returns it)."""
    out: list[str] = []
    todo, seen = list(node.users), 0
    while todo and seen < 256:
        n = todo.pop(0)
        seen += 1
        if n.op == "output":
            label = "output"
        elif _passes_through(n):
            todo.extend(n.users)
            continue
        else:
            label = n.name
        if label not in out:
            out.append(label)
    return out


def context(gm: Any, name: str, fsdp: list[str]) -> dict[str, Any] | None:
    """What the collective ``name`` of ``gm`` reduces and who waits for it: ``{"input",
    "input_op", "operands", "activation", "gathered_on", "used_by", "text"}``; None when the
    graph has no such node. ``fsdp``: the graph's FSDP groups."""
    node = next((n for n in gm.graph.nodes if n.name == name), None)
    if node is None or not node.all_input_nodes:
        return None
    src = _source(node.all_input_nodes[0])
    groups = set(fsdp)
    operands = []
    gathered = None
    for a in src.all_input_nodes:
        g = _gathered_on(a, groups)
        if g is not None:
            gathered = gathered or g
            operands.append(f"a parameter all-gathered on FSDP group {g!r}")
        else:
            operands.append(a.name)
    used = _users(node)
    op = _op(src).replace(".default", "")
    what = (
        f"its input is {src.name} ({op} of {' and '.join(operands)})"
        if operands
        else f"its input is {src.name} ({op})"
    )
    if gathered is not None:
        what += ": an activation (compute on a gathered parameter), not a gradient"
    if used == ["output"]:
        then = "the graph returns its result"
    elif used:
        after = [u for u in used if u != "output"]
        then = f"{', '.join(after[:3])} {'waits' if len(after) == 1 else 'wait'} for its result" + (
            " (and the graph returns it)" if "output" in used else ""
        )
    else:
        then = "nothing uses its result"
    return {
        "input": src.name,
        "input_op": op,
        "operands": operands,
        "activation": gathered is not None,
        "gathered_on": gathered,
        "used_by": used,
        "text": f"{what}; {then}",
    }


def chained(gm: Any, names: list[str]) -> list[tuple[str, str]]:
    """The pairs (earlier, later) of the collectives ``names`` (graph order) where the later's
    input is computed from the earlier's result: a chain no bucket can hold both of (a bucket
    issues its collectives at once). fsdp_tp2_overlap's forward: [("all_reduce",
    "all_reduce_1")], the second MLP's input being the first's all-reduced output."""
    nodes = {n.name: n for n in gm.graph.nodes if n.name in set(names)}
    out = []
    for i, later in enumerate(names[1:], 1):
        node = nodes.get(later)
        if node is None:
            continue
        ancestors: set[str] = set()
        todo = list(node.all_input_nodes)
        while todo:
            n = todo.pop()
            if n.name in ancestors:
                continue
            ancestors.add(n.name)
            todo.extend(n.all_input_nodes)
        out += [(e, later) for e in names[:i] if e in ancestors]
    return out


__all__ = ["chained", "context"]
