"""A planned graph's copy, made already rewritten: :func:`rewritten_copy`.

Replay rewrites a copy of one graph per cap with the plan made on the graph
(``pre_bucket_fsdp_collectives(copy, planner=...)``). The copy took every node, and the rewrite
then erased each bucket's collectives, their waits and the casts folded into them: on a
log-sized graph close to half of the nodes a cap were made only to be unmade, and collected.
Here they are left out of the copy; the rest is what the pass gives on a whole copy::

    before: copy = copy of every node         # ag_0, w_0 = wait_tensor(ag_0), mm(w_0, x) ...
            merge: bucket before ag_1.next; mm's w_0 -> out_0; erase ag_0, w_0, ag_1, w_1
    after:  copy = the other nodes            # mm(<w_0 until merged>, x) ...
            merge: bucket where ag_1 was;  mm's <w_0 until merged> -> out_0

The same graph, node for node (``tests/bucketing/test_copy_rewrite.py``):

- names: a node left out takes its name in the copy's namespace at its place, so the bucket's
  nodes get the names they get after a whole copy;
- places: a bucket's nodes go where its last collective was (before the first node kept after
  it), after the nodes of buckets whose last collective came earlier in the same gap and
  before those of later ones, as they do when each bucket goes before its last collective's
  next node;
- users: a wait's users hold a mark until its bucket is merged, then take its output in the
  order the pass rewrites them (each wait's users in graph order, a user moved to the end of
  the waits it still uses each time it is rewritten), so every node's users are in the order
  the pass leaves.

A plan this cannot rewrite so (a bucket torch's functions merge, a wait used by another
bucketed collective, a namespace torch does not have) is rewritten on a whole copy instead.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any

import torch.fx as fx

from bucketing import fx_nodes
from bucketing.fx_nodes import copy_graph_nodes
from bucketing.merge import InPlace, _foldable_cast
from bucketing.predicates import KINDS, WAIT_TARGET


class _Waiting:
    """What a user of a left-out wait holds in its arguments until the wait's bucket is merged."""

    __slots__ = ("wait",)

    def __init__(self, wait: fx.Node):
        self.wait = wait

    def __repr__(self) -> str:
        return f"<{self.wait.name} until merged>"


def left_out(buckets: dict[str, list[list[fx.Node]]]) -> dict[fx.Node, Any] | None:
    """The nodes of ``buckets`` (nodes of the planned graph, each bucket one our merge takes:
    ``needs_torch_merge`` is None) a copy can leave out, each with what stands in its users'
    arguments (a :class:`_Waiting` for a wait, None for a collective or a folded cast, which
    only those nodes use), or None if the plan needs a whole copy."""
    out: dict[fx.Node, Any] = {}
    chain: dict[fx.Node, fx.Node] = {}  # a left-out node -> the one left-out node it may use
    for kind in KINDS:
        for members in buckets.get(kind, []):
            for m in members:
                if len(m.users) != 1:
                    return None
                wait = next(iter(m.users))
                if wait.target is not WAIT_TARGET:
                    return None
                out[m], out[wait], chain[wait] = None, _Waiting(wait), m
                cast = _foldable_cast(m) if kind == "AG" else None
                if cast is not None:
                    out[cast], chain[m] = None, cast
    for n, mark in out.items():
        if any(i in out and chain.get(n) is not i for i in n._input_nodes):
            return None  # a bucketed node fed by another bucket's wait: merged in place
        if mark is not None and any(u in out for u in n.users):
            return None
    return out


def _marks_in(args: Any) -> list[_Waiting]:
    """The marks an argument structure holds."""
    found: list[_Waiting] = []

    def note(a: Any) -> Any:
        if type(a) is _Waiting:
            found.append(a)
        return a

    fx.node.map_aggregate(args, note)
    return found


class WaitUsers:
    """What the copies of one planned graph ask of it at every cap: each wait's users in graph
    order (a user rewritten after a later one was made sits after it in ``users``), and the
    nodes that use more than one wait (the only users whose order among a wait's users can
    change as buckets are merged)."""

    def __init__(self, nodes: list[fx.Node], position: dict[fx.Node, int]):
        self.in_order: dict[fx.Node, tuple[fx.Node, ...]] = {}
        self.several: set[fx.Node] = set()
        for n in nodes:
            if n.target is WAIT_TARGET:
                self.in_order[n] = tuple(sorted(n.users, key=position.__getitem__))
            elif sum(1 for i in n._input_nodes if i.target is WAIT_TARGET) > 1:
                self.several.add(n)


class OnCopy(InPlace):
    """The merge's site on a copy made without the buckets' nodes (:func:`rewritten_copy`)."""

    def __init__(
        self,
        graph: fx.Graph,
        copied: dict[fx.Node, Any],
        marks: dict[fx.Node, Any],
        position: dict[fx.Node, int],
        waits: WaitUsers,
    ):
        self.graph = graph
        self.copied = copied
        self.marks = marks
        self.position = position
        self.waits = waits
        #: the kept node each gap ends at -> (position of a bucket's last collective, its first node)
        self.groups: dict[fx.Node, list[tuple[int, fx.Node]]] = {}
        #: each wait's users, in the order its copy's users would be (see the module)
        self.users: dict[fx.Node, dict[fx.Node, None]] = {}
        self._placing: tuple[list[tuple[int, fx.Node]], int, fx.Node] | None = None

    def input(self, node: fx.Node) -> fx.Node:
        return self.copied[node]

    def before(self, members: list[fx.Node]) -> fx.Node:
        last = members[-1]
        kept = last.next
        while kept in self.marks:
            kept = kept.next
        end = self.copied[kept] if kept.op != "output" else self.graph.output_node()
        groups = self.groups.setdefault(end, [])
        at = self.position[last]
        i = bisect.bisect_right([p for p, _ in groups], at)
        before = groups[i][1] if i < len(groups) else end
        self._placing = (groups, i, before.prev)
        return before

    def replace(self, members: list[fx.Node], outputs: list[fx.Node], also: list[list[fx.Node]]) -> None:
        assert self._placing is not None
        groups, i, prev = self._placing
        groups.insert(i, (self.position[members[-1]], prev.next))
        waits = [next(iter(m.users)) for m in members]
        replacement = {self.marks[w]: out for w, out in zip(waits, outputs, strict=True)}
        rewritten = dict.fromkeys(u for w in waits for u in self._users(w))

        def swap(a: Any) -> Any:
            return replacement.get(a, a) if type(a) is _Waiting else a

        several = self.waits.several
        for user in rewritten:
            node = self.copied[user] if user.op != "output" else self.graph.output_node()
            node.args = fx.node.map_aggregate(node.args, swap)
            node.kwargs = fx.node.map_aggregate(node.kwargs, swap)
            if user not in several:
                continue
            for mark in _marks_in((node.args, node.kwargs)):  # the pass's setters moved this user
                users = self._users(mark.wait)  # to the end of the users of the waits it still uses
                users.pop(user, None)
                users[user] = None

    def _users(self, wait: fx.Node) -> dict[fx.Node, None]:
        users = self.users.get(wait)
        if users is None:
            users = self.users[wait] = dict.fromkeys(self.waits.in_order[wait])
        return users


def rewritten_copy(
    gm: fx.GraphModule,
    buckets: dict[str, list[list[fx.Node]]],
    position: dict[fx.Node, int],
    merge: Callable[[fx.Graph, str, list[fx.Node], InPlace], None],
    waits: WaitUsers,
) -> fx.GraphModule | None:
    """A copy of ``gm`` with ``buckets`` (its nodes, planned, none of them a bucket torch's
    functions merge) merged, each bucket by ``merge`` (graph, kind, members, site), as a
    :func:`bucketing.fx_nodes.graph_module`; None (and nothing done) if the plan needs a whole
    copy (see the module). ``waits``: made once per planned graph, kept for its next copies."""
    marks = left_out(buckets)
    graph = fx.Graph()
    if marks is None or not callable(getattr(getattr(graph, "_graph_namespace", None), "create_name", None)):
        return None
    copied: dict[fx.Node, Any] = {}  # a kept node's copy; a left-out node's mark
    graph.output(copy_graph_nodes(gm.graph, graph, copied, marks))
    site = OnCopy(graph, copied, marks, position, waits)
    for kind in KINDS:
        for members in buckets.get(kind, []):
            merge(graph, kind, members, site)
    return fx_nodes.graph_module(gm, graph)


__all__ = ["OnCopy", "WaitUsers", "left_out", "rewritten_copy"]
