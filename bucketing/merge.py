"""The rewrite: merge each planned bucket of collectives into one collective.

All-gather bucket (default mode), for members ``ag_i = all_gather(x_i)`` on ``gs`` ranks::

    before:  ag_0 = all_gather_into_tensor(x_0, gs, g); w_0 = wait_tensor(ag_0); ...
             ag_1 = all_gather_into_tensor(x_1, gs, g); w_1 = wait_tensor(ag_1); ...
    after:   buf = empty([gs * n]); dst = slice(buf, 0, rank * n, rank * n + n)
             cat = cat([view(x_0, [-1]), view(x_1, [-1])]); cp = copy_(dst, cat)
             ag = all_gather_into_tensor_out(cp, gs, g, out=buf); w = wait_tensor(ag)
             parts = split_with_sizes(view(w, [gs, -1]), [n_0, n_1], 1)
             w_0' = _unsafe_view(clone(parts[0]), shape_0); w_1' = ...   # users of w_i use w_i'

A cast feeding a member's all-gather alone (``convert_element_type`` / ``_to_copy``) is folded
into the ``copy_``. Reduce-scatter::

    before:  w_i = wait_tensor(reduce_scatter_tensor(x_i, op, gs, g))
    after:   flat = view(cat([view(x_0, [gs, -1]), view(x_1, [gs, -1])], 1), [N])
             w = wait_tensor(reduce_scatter_tensor(flat, op, gs, g))
             w_i' = view(split_with_sizes(w, [n_0 / gs, n_1 / gs])[i], out_shape_i)

All-reduce: ``w = wait_tensor(all_reduce(cat([view(x_i, [-1])...]), op, g))``, then split and
view back. This is the same IR torch 2.13's traced merge functions produce, built directly
(no tracing) with provenance (``meta["from_node"]``) linear in the bucket size: shared nodes
point at every member, per-member nodes at their own member. Buckets with symbolic sizes, a
group given as a graph node, or a non-default mode go through torch's merge functions.

Each bucket is inserted where torch inserts it (after the bucket's last collective);
:func:`restore_topological_order` then fixes the order once, moving only the nodes that must
move (users of a replaced wait that sat before the bucket), so the graph lints on its own.
"""

from __future__ import annotations

import contextlib
import functools
import operator
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._mode_utils import no_dispatch

from bucketing.compat import TORCH_MERGE_CALLS, TORCH_ORDER_CALLS, check_calls
from bucketing.fx_nodes import new_node
from bucketing.predicates import WAIT_TARGET, collective_arg, group_name_of, reduce_op_of

aten = torch.ops.aten
c10d = torch.ops._c10d_functional
_CASTS = (torch.ops.prims.convert_element_type.default, aten._to_copy.default)
PASS_NAME = "tracekit_bucketing_pass"


class BucketingError(RuntimeError):
    """A bucket the rewrite cannot merge (raised before the graph is touched)."""


def _fake_mode_of(nodes: list[fx.Node]):
    """The fake mode of a bucket's members: the first member's (the members of a graph share
    theirs; asking torch about each member's value was a tenth of a merge's own time)."""
    from torch._guards import detect_fake_mode

    return detect_fake_mode([nodes[0].meta.get("val")])


def _static(val: torch.Tensor) -> bool:
    return all(isinstance(s, int) for s in val.shape) and all(isinstance(s, int) for s in val.stride())


def group_rank(group_name: str) -> int:
    """This process's rank in a registered process group."""
    from torch.distributed.distributed_c10d import _resolve_process_group

    try:
        return _resolve_process_group(group_name).rank()
    except Exception as exc:  # noqa: BLE001 - any failure means the group is unusable here
        raise BucketingError(
            f"process group {group_name!r} is not registered in this process; initialize "
            "torch.distributed or call bucketing.register_fake_process_groups"
        ) from exc


class _Builder:
    """Appends nodes before a point, computing each node's ``meta["val"]`` on fake tensors."""

    def __init__(
        self,
        graph: fx.Graph,
        before: fx.Node,
        fake_mode,
        members: list[fx.Node],
        views: dict[tuple, tuple] | None = None,
        clones: dict[tuple, tuple] | None = None,
    ):
        self.graph = graph
        self.views = views
        self.clones = clones
        self.before = before
        self.fakes = _Fakes(fake_mode) if fake_mode is not None else None
        self.members = members
        self.sources = [_node_source(m, id(graph)) for m in members]
        self.first_meta = members[0].meta
        self.made: list[fx.Node] = []  # the bucket's nodes, in the order they were made
        self.inputs: list[fx.Node] = []  # the members' inputs the bucket reads

    def call(
        self, target, args: tuple, kwargs: dict | None = None, member: int | None = None, val: Any = None
    ) -> fx.Node:
        """A node of ``target`` before the point; ``val``: its fake value, if known already."""
        kwargs = kwargs or {}
        with self.graph.inserting_before(self.before):
            node = new_node(self.graph, "call_function", target, args, kwargs, name=_node_name(target))
        self.made.append(node)
        if val is not None:
            node.meta["val"] = val
            self._copy_meta(node, member)
            return node
        vals = fx.node.map_arg((args, kwargs), lambda n: n.meta["val"])
        if target is operator.getitem and isinstance(vals[0][0], (list, tuple)):
            # an item of a node's list of fake values (split_with_sizes): no fake mode needed
            node.meta["val"] = vals[0][0][vals[0][1]]
            self._copy_meta(node, member)
            return node
        val = _fast_meta(target, vals[0], self.fakes, vals[1])
        if val is None:
            ctx = self.fakes.mode if self.fakes is not None else contextlib.nullcontext()
            with ctx:
                val = target(*vals[0], **vals[1])
        node.meta["val"] = val
        self._copy_meta(node, member)
        return node

    def _copy_meta(self, node: fx.Node, member: int | None) -> None:
        """The member's (or the first member's) module stack, trace and provenance."""
        meta_src = self.members[member].meta if member is not None else self.first_meta
        for key in ("nn_module_stack", "fwd_nn_module_stack", "stack_trace", "custom"):
            if key in meta_src:
                node.meta[key] = meta_src[key]
        node.meta["from_node"] = [self.sources[member]] if member is not None else list(self.sources)

    def reshape(self, x: fx.Node, shape: list[int], member: int | None = None) -> fx.Node:
        """What tracing ``x.reshape(shape)`` gives: a view, or clone + _unsafe_view."""
        if x.meta["val"].is_contiguous():
            return self.call(aten.view.default, (x, shape), member=member)
        dense = self.call(aten.clone.default, (x,), {"memory_format": torch.contiguous_format}, member=member)
        concrete = list(self.fake_reshape_shape(x, shape))
        return self.call(aten._unsafe_view.default, (dense, concrete), member=member)

    def input_view(self, x: fx.Node, shape: list[int], member: int) -> fx.Node:
        """:meth:`reshape` of a member's input. With ``views`` (kept across rewrites of copies
        of one graph, whose nodes share their fake values), a view's fake value is made once:
        the view of the same input value to the same shape, at every cap."""
        val = x.meta["val"]
        if self.views is None or not val.is_contiguous():
            return self.reshape(x, shape, member=member)
        key = (x.name, tuple(shape))
        known = self.views.get(key)
        if known is not None and known[0] is val:
            return self.call(aten.view.default, (x, shape), member=member, val=known[1])
        node = self.reshape(x, shape, member=member)
        self.views[key] = (val, node.meta["val"])
        return node

    def output_reshape(self, part: fx.Node, shape: list[int], member: int) -> fx.Node:
        """:meth:`reshape` of a member's part of the bucket's output. A part that is not
        contiguous (an all-gather's column of ``[gs, total]``) is cloned first: the clone is a
        tensor of its own, not a view of the bucket, so with ``clones`` (kept across rewrites
        of copies of one graph) the fake values of the clone and of its view are made once per
        member, part shape and dtype, and reused at every cap whatever bucket it is in::

            first cap:  clone = clone(getitem_3); out = _unsafe_view(clone, [8, 16])   # made
            next caps:  the same two nodes, their fake values the ones made then
        """
        val = part.meta["val"]
        if self.clones is None or getattr(val, "fake_mode", None) is None or val.is_contiguous():
            return self.reshape(part, shape, member=member)
        key = (self.members[member].name, tuple(val.shape), val.dtype, val.fake_device, tuple(shape))
        known = self.clones.get(key)
        if known is None or known[0].fake_mode is not val.fake_mode:
            known = None
        contiguous = {"memory_format": torch.contiguous_format}
        dense = self.call(aten.clone.default, (part,), contiguous, member=member, val=known and known[0])
        concrete = list(known[2]) if known else list(self.fake_reshape_shape(part, shape))
        out = self.call(aten._unsafe_view.default, (dense, concrete), member=member, val=known and known[1])
        if known is None:
            self.clones[key] = (dense.meta["val"], out.meta["val"], tuple(concrete))
        return out

    def member_outputs(self, parts: fx.Node, shapes: list[list[int]]) -> list[fx.Node]:
        """Each member's item of the bucket's split output (``parts``), reshaped to its shape:
        every item first, then the reshapes, as tracing makes them."""
        items = [self.call(operator.getitem, (parts, i), member=i) for i in range(len(shapes))]
        return [self.output_reshape(items[i], shape, member=i) for i, shape in enumerate(shapes)]

    @staticmethod
    def fake_reshape_shape(x: fx.Node, shape: list[int]) -> tuple[int, ...]:
        numel = x.meta["val"].numel()
        known = 1
        for s in shape:
            if s != -1:
                known *= s
        return tuple(numel // known if s == -1 else s for s in shape)


_VIEW_OPS = (aten.view.default, aten._unsafe_view.default, aten.slice.Tensor)


class _Fakes:
    """The fake values one bucket's nodes get, each made by wrapping a plain meta tensor, kept
    beside it: a view is taken of the plain tensor, then wrapped. The same storage, sizes,
    strides and offset as the view of the fake value, at 0.7 us instead of 5.5 (a fake tensor's
    device is asked of Python at each step of the meta kernel); and on any device (torch built
    without CUDA has no kernel to view a fake tensor on a GPU without dispatch: the merge of a
    real run's graph asked fake dispatch, 100-350 us, for every view)::

        wait  = new(shape)                  # FakeTensor(empty(shape, device="meta")), kept
        rows  = view(wait, [gs, -1])        # wrap(view(wait's meta tensor, [gs, -1])), kept
        parts = split_with_sizes(rows, ...) # each part of rows' meta tensor, wrapped

    A value not made here (a member's input) gets a plain meta tensor on its storage (3.5 us).
    Held for one bucket; each fake value is kept beside its meta tensor, so an id is not reused."""

    def __init__(self, mode):
        self.mode = mode
        self._meta: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # id(fake) -> (fake, meta)

    def wrap(self, meta: torch.Tensor, device: torch.device) -> torch.Tensor:
        """The fake value of ``meta`` (a plain tensor on the meta device) on ``device``."""
        fake = FakeTensor(self.mode, meta, device)
        self._meta[id(fake)] = (fake, meta)
        return fake

    def new(self, shape, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """A fresh contiguous fake tensor (a storage of its own)."""
        return self.wrap(torch.empty(tuple(shape), dtype=dtype, device="meta"), device)

    def meta_of(self, x: torch.Tensor) -> torch.Tensor:
        """The plain meta tensor of the fake value ``x``: the one it wraps if made here, else
        one on its storage with its sizes, strides and offset."""
        known = self._meta.get(id(x))
        if known is not None and known[0] is x:
            return known[1]
        with no_dispatch():  # whatever mode the caller runs under
            meta = torch.empty((0,), dtype=x.dtype, device="meta")
            meta.set_(x.untyped_storage(), x.storage_offset(), x.shape, x.stride())
        self._meta[id(x)] = (x, meta)
        return meta

    def apply(self, target, x: torch.Tensor, args: tuple) -> Any:
        """``target(x, *args)`` (a view op) on the plain meta tensor of ``x``."""
        meta = self.meta_of(x)
        with no_dispatch():
            return target(meta, *args)


def _fast_meta(target, args: tuple, fakes: _Fakes | None, kwargs: dict | None = None) -> Any:
    """The fake result of a view, a contiguous clone, a ``cat`` or one of a bucket's own ops
    (:func:`_fast_bucket_op`) without going through fake dispatch.

    Fake dispatch costs 100-350 us per op; running the meta kernel of a view on the fake
    tensor's meta storage and wrapping the result costs about 14 us (of a value the bucket made,
    on its plain meta tensor: 9 us, :class:`_Fakes`), and keeps the aliasing (same storage).
    Returns None when the shortcut does not apply (then dispatch is used).
    """
    if fakes is None or not args:
        return None
    if target is aten.cat.default:
        return _fast_cat(args, fakes)
    if target in _BUCKET_OPS:
        try:
            return _fast_bucket_op(target, args, kwargs or {}, fakes)
        except Exception:  # noqa: BLE001 - any surprise: use the regular fake dispatch
            return None
    x = args[0]
    if not isinstance(x, FakeTensor) or x.fake_mode is not fakes.mode:
        return None
    try:
        if target is aten.split_with_sizes.default:
            return [fakes.wrap(p, x.fake_device) for p in fakes.apply(target, x, args[1:])]
        if target in _VIEW_OPS:
            return fakes.wrap(fakes.apply(target, x, args[1:]), x.fake_device)
        if target is aten.clone.default:
            return fakes.new(x.shape, x.dtype, x.fake_device)
    except Exception:  # noqa: BLE001 - any surprise: use the regular fake dispatch
        return None
    return None


def _fast_bucket_op(target, args: tuple, kwargs: dict, fakes: _Fakes) -> Any:
    """The fake result of an op a bucket adds once (its buffer, the buffer's fill, the merged
    collective and its wait), as fake dispatch gives it, or None (then dispatch is used):

    - ``empty([n], dtype, device)``, a collective (``all_gather_into_tensor_out``,
      ``reduce_scatter_tensor``, ``all_reduce``) and ``wait_tensor``: a fresh contiguous
      tensor of the result's shape (the ``out=`` buffer's, the input's first dimension over
      the group size, the input's);
    - ``copy_(dst, src)`` of one shape: ``dst``'s own fake value.

    On contiguous static inputs only; ``tests/replay/test_merge_fake_values.py`` checks every
    node a merge makes against fake dispatch (shapes, strides, storages shared, objects)."""

    def ours(t: Any) -> bool:
        return isinstance(t, FakeTensor) and t.fake_mode is fakes.mode and t.is_contiguous()

    if target is aten.empty.memory_format:
        dtype, device, size = kwargs.get("dtype"), kwargs.get("device"), args[0]
        if set(kwargs) - {"dtype", "device", "pin_memory"} or kwargs.get("pin_memory") or len(args) != 1:
            return None
        if not isinstance(dtype, torch.dtype) or device is None or not all(type(s) is int for s in size):
            return None
        return fakes.new(size, dtype, torch.device(device))
    x = args[0]
    if not ours(x):
        return None
    if target is aten.copy_.default:
        src = args[1]
        if len(args) != 2 or kwargs or not ours(src) or src.shape != x.shape:
            return None
        return x
    if target is WAIT_TARGET:
        if len(args) != 1 or kwargs:
            return None
        return fakes.new(x.shape, x.dtype, x.fake_device)
    if target is c10d.all_gather_into_tensor_out.default:
        out: Any = kwargs.get("out")
        if set(kwargs) != {"out"} or not ours(out) or out.dtype != x.dtype:
            return None
        if out.numel() != x.numel() * args[1]:
            return None
        return fakes.new(out.shape, out.dtype, out.fake_device)
    if kwargs:
        return None
    if target is c10d.reduce_scatter_tensor.default:
        group_size = args[2]
        if x.dim() == 0 or type(group_size) is not int or x.shape[0] % group_size:
            return None
        return fakes.new((x.shape[0] // group_size, *x.shape[1:]), x.dtype, x.fake_device)
    if target is c10d.all_reduce.default:
        return fakes.new(x.shape, x.dtype, x.fake_device)
    return None


_BUCKET_OPS = (
    aten.empty.memory_format,
    aten.copy_.default,
    WAIT_TARGET,
    c10d.all_gather_into_tensor_out.default,
    c10d.reduce_scatter_tensor.default,
    c10d.all_reduce.default,
)


def _fast_cat(args: tuple, fakes: _Fakes) -> torch.Tensor | None:
    """Fake ``cat`` of static tensors: a new contiguous tensor, promoted dtype, summed dim."""
    tensors = args[0]
    dim = args[1] if len(args) > 1 else 0
    if not tensors or not all(isinstance(t, FakeTensor) and t.fake_mode is fakes.mode for t in tensors):
        return None
    first = tensors[0]
    if first.dim() == 0 or any(t.dim() != first.dim() for t in tensors):
        return None
    dim = dim % first.dim()
    shape = list(first.shape)
    shape[dim] = sum(t.shape[dim] for t in tensors)
    dtype = functools.reduce(torch.promote_types, (t.dtype for t in tensors))
    return fakes.new(shape, dtype, first.fake_device)


def _node_name(target) -> str:
    """The name tracing gives a node: the op's name without its overload (``view``, ``cat``)."""
    opname = getattr(target, "_opname", None)
    return opname if opname else getattr(target, "__name__", "node")


@functools.cache
def _target_text(target) -> str:
    return str(target)  # str() of an OpOverload rebuilds its schema: slow, so cached


def _node_source(node: fx.Node, graph_id: int):
    """``NodeSource(node, ...)`` as torch builds it, with the target's text cached; ``graph_id``:
    the id of the graph the bucket is merged in (``node``'s own, or its copy's)."""
    import copy

    from torch.fx.traceback import NodeSource, NodeSourceAction

    source = NodeSource(None, PASS_NAME, [NodeSourceAction.CREATE, NodeSourceAction.REPLACE])
    source.node_info = NodeSource.NodeInfo(
        name=node.name, target=_target_text(node.target), graph_id=graph_id
    )
    source.from_node = copy.deepcopy(node.meta["from_node"]) if "from_node" in node.meta else []
    return source


def _only_wait(coll: fx.Node) -> fx.Node:
    users = list(coll.users)
    if len(users) != 1 or users[0].target is not WAIT_TARGET:
        raise BucketingError(f"{coll.name}: expected exactly one wait_tensor user, got {users}")
    return users[0]


def _foldable_cast(ag: fx.Node) -> fx.Node | None:
    src = ag.args[0]
    if (
        isinstance(src, fx.Node)
        and src.op == "call_function"
        and src.target in _CASTS
        and len(src.users) == 1
    ):
        return src
    return None


def needs_torch_merge(
    kind: str, members: list[fx.Node], mode: str, known: dict[fx.Node, str | None] | None = None
) -> str | None:
    """Why a bucket goes through torch's merge functions instead of ours, or None. ``known``:
    each member's own answer, kept across buckets of one graph (a planner's, asked per cap)."""
    if mode != "default":
        return f"bucket mode {mode!r}"
    for m in members:
        if known is None:
            why = _member_needs_torch(m)
        elif m in known:
            why = known[m]
        else:
            why = known[m] = _member_needs_torch(m)
        if why is not None:
            return why
    return None


def _member_needs_torch(m: fx.Node) -> str | None:
    if isinstance(collective_arg(m, "group_name"), fx.Node):
        return "group given as a graph node"
    for n in (m, m.all_input_nodes[0]):
        val = n.meta.get("val")
        if not isinstance(val, torch.Tensor) or not _static(val):
            return "symbolic or missing sizes"
    return None


def _replace_and_erase(members: list[fx.Node], outputs: list[fx.Node], also: list[list[fx.Node]]) -> None:
    """Point the users of each member's wait at its new output, then erase the old nodes.

    Each user is rewritten once for all members (the graph output often returns every
    reduce-scatter's wait: replacing one wait at a time would rescan its arguments k times).
    """
    waits = [_only_wait(m) for m in members]
    replacement = dict(zip(waits, outputs, strict=False))
    users = dict.fromkeys(u for w in waits for u in w.users)
    for user in users:
        user.args = fx.node.map_arg(user.args, lambda n: replacement.get(n, n))
        user.kwargs = fx.node.map_arg(user.kwargs, lambda n: replacement.get(n, n))
    graph = members[0].graph
    for m, wait, extra in zip(members, waits, also, strict=False):
        graph.erase_node(wait)
        graph.erase_node(m)
        for n in extra:
            graph.erase_node(n)


@dataclass
class Merged:
    """What one bucket's merge made: its nodes in the order they were made (tracing's), and the
    members' inputs they read (the bucket's inputs from the rest of the graph)."""

    nodes: list[fx.Node]
    inputs: list[fx.Node]


class InPlace:
    """Where a merge reads its members' inputs, puts its nodes and sends their users: the
    members' own graph. The merge of a copy that is made without the members is the other
    site (:class:`bucketing.copy_rewrite.OnCopy`)."""

    def input(self, node: fx.Node) -> fx.Node:
        """The node of the graph being rewritten that stands for a member's input ``node``."""
        return node

    def before(self, members: list[fx.Node]) -> fx.Node:
        """The node the bucket's nodes go before: the one after its last collective."""
        return members[-1].next

    def replace(self, members: list[fx.Node], outputs: list[fx.Node], also: list[list[fx.Node]]) -> None:
        """The users of each member's wait take its output; the members, waits and ``also``
        (folded casts) go."""
        _replace_and_erase(members, outputs, also)


IN_PLACE = InPlace()


def merge_all_gather_bucket(
    graph: fx.Graph,
    members: list[fx.Node],
    rank: int,
    views: dict[tuple, tuple] | None = None,
    clones: dict[tuple, tuple] | None = None,
    site: InPlace = IN_PLACE,
) -> Merged:
    """Merge all-gathers of one (group, dtype) into one ``all_gather_into_tensor_out``."""
    group_size = int(collective_arg(members[0], "group_size"))
    group = collective_arg(members[0], "group_name")
    dtype = min((m.meta["val"].dtype for m in members), key=lambda d: d.itemsize)
    device = members[0].meta["val"].device
    b = _Builder(graph, site.before(members), _fake_mode_of(members), members, views, clones)
    casts: list[list[fx.Node]] = []
    for m in members:
        cast = _foldable_cast(m)
        casts.append([cast] if cast is not None else [])
        b.inputs.append(site.input(cast.args[0] if cast is not None else m.args[0]))
    numels = [src.meta["val"].numel() for src in b.inputs]
    total = sum(numels)
    # in the order tracing makes them: the buffer and this rank's slice, then the inputs' views
    buf = b.call(
        aten.empty.memory_format,
        ([total * group_size],),
        {"dtype": dtype, "device": device, "pin_memory": False},
    )
    dst = b.call(aten.slice.Tensor, (buf, 0, total * rank, total * rank + total))
    flats = [b.input_view(src, [-1], member=i) for i, src in enumerate(b.inputs)]
    cat = b.call(aten.cat.default, (flats,))
    copied = b.call(aten.copy_.default, (dst, cat))
    ag = b.call(c10d.all_gather_into_tensor_out.default, (copied, group_size, group), {"out": buf})
    wait = b.call(WAIT_TARGET, (ag,))
    rows = b.call(aten.view.default, (wait, [group_size, -1]))
    parts = b.call(aten.split_with_sizes.default, (rows, numels, 1))
    site.replace(members, b.member_outputs(parts, [list(m.meta["val"].shape) for m in members]), casts)
    return Merged(b.made, b.inputs)


def merge_reduce_scatter_bucket(
    graph: fx.Graph,
    members: list[fx.Node],
    views: dict[tuple, tuple] | None = None,
    clones: dict[tuple, tuple] | None = None,
    site: InPlace = IN_PLACE,
) -> Merged:
    """Merge reduce-scatters of one (group, op, dtype) into one ``reduce_scatter_tensor``."""
    group_size = int(collective_arg(members[0], "group_size"))
    group = collective_arg(members[0], "group_name")
    op = reduce_op_of(members[0])
    b = _Builder(graph, site.before(members), _fake_mode_of(members), members, views, clones)
    b.inputs = [site.input(m.args[0]) for m in members]
    rows = [b.input_view(x, [group_size, -1], member=i) for i, x in enumerate(b.inputs)]
    cat = b.call(aten.cat.default, (rows, 1))
    total = cat.meta["val"].numel()
    flat = b.reshape(cat, [total])
    rs = b.call(c10d.reduce_scatter_tensor.default, (flat, op, group_size, group))
    wait = b.call(WAIT_TARGET, (rs,))
    chunks = [m.args[0].meta["val"].numel() // group_size for m in members]
    parts = b.call(aten.split_with_sizes.default, (wait, chunks))
    outputs = b.member_outputs(parts, [list(m.meta["val"].shape) for m in members])
    site.replace(members, outputs, [[] for _ in members])
    return Merged(b.made, b.inputs)


def merge_all_reduce_bucket(
    graph: fx.Graph,
    members: list[fx.Node],
    views: dict[tuple, tuple] | None = None,
    clones: dict[tuple, tuple] | None = None,
    site: InPlace = IN_PLACE,
) -> Merged:
    """Merge all-reduces of one (group, op, dtype) into one ``all_reduce``."""
    group = collective_arg(members[0], "group_name")
    op = reduce_op_of(members[0])
    b = _Builder(graph, site.before(members), _fake_mode_of(members), members, views, clones)
    b.inputs = [site.input(m.args[0]) for m in members]
    flats = [b.input_view(x, [-1], member=i) for i, x in enumerate(b.inputs)]
    cat = b.call(aten.cat.default, (flats,))
    ar = b.call(c10d.all_reduce.default, (cat, op, group))
    wait = b.call(WAIT_TARGET, (ar,))
    parts = b.call(aten.split_with_sizes.default, (wait, [m.args[0].meta["val"].numel() for m in members]))
    outputs = b.member_outputs(parts, [list(m.args[0].meta["val"].shape) for m in members])
    site.replace(members, outputs, [[] for _ in members])
    return Merged(b.made, b.inputs)


def merge_with_torch(graph: fx.Graph, kind: str, members: list[fx.Node], mode: str) -> None:
    """Merge one bucket with torch 2.13's own functions (slow provenance; used as fallback)."""
    from torch._inductor.fx_passes import bucketing as tb

    check_calls(TORCH_MERGE_CALLS)
    if kind == "AG":
        tb.merge_all_gather_bucket(graph, members, mode)
    elif kind == "RS":
        rs_mode = mode.replace("_multidtype", "")
        tb.merge_reduce_scatter_bucket(graph, members, rs_mode)
    else:
        tb.merge_all_reduce_bucket(graph, members)


def merge_bucket(
    graph: fx.Graph,
    kind: str,
    members: list[fx.Node],
    mode: str,
    views: dict[tuple, tuple] | None = None,
    clones: dict[tuple, tuple] | None = None,
    site: InPlace = IN_PLACE,
) -> Merged | None:
    """Merge one planned bucket of ``kind`` ("AG", "RS", "AR"). ``views``: the fake values of
    the members' input views, ``clones`` those of their outputs' clones, kept across rewrites
    of copies of one graph (``_Builder.input_view``, ``_Builder.output_reshape``). ``site``:
    where the members' inputs are and the bucket goes (:class:`InPlace`: the members' graph).
    A bucket torch's functions merge needs its members in ``graph``: another site is given only
    buckets ``needs_torch_merge`` found none of (:func:`bucketing.copy_rewrite.left_out`).
    Returns what the merge made (:class:`Merged`), None when torch's functions merged it."""
    if site is IN_PLACE and needs_torch_merge(kind, members, mode) is not None:
        merge_with_torch(graph, kind, members, mode)
        return None
    if kind == "AG":
        return merge_all_gather_bucket(
            graph, members, group_rank(group_name_of(members[0])), views, clones, site
        )
    if kind == "RS":
        return merge_reduce_scatter_bucket(graph, members, views, clones, site)
    return merge_all_reduce_bucket(graph, members, views, clones, site)


def sort_as_torch(graph: fx.Graph, merged: Merged) -> None:
    """Order the nodes around a bucket just merged as torch's pass does after each merge: its
    own ``_sort_bucket_region`` (called, never copied), a stable topological sort of the span
    from the bucket's earliest input that is not a graph input to its last node. A user of a
    replaced wait that sits before that span stays where it was, before the output it now reads;
    torch's overlap scheduler sorts the whole graph, but only after it has timed the nodes in
    the order given, and it times runs of fusible nodes together (``fusion_regions``), so the
    order it is given is part of what it estimates::

        torch's graph after its pass:  view_11 = reshape(_unsafe_view)   # before its input
                                       ...
                                       _unsafe_view = _unsafe_view(clone, [262144])

    The graph is then not in topological order: :func:`restore_topological_order` makes it so,
    as the pass does unless asked for torch's order (``torch_order``)."""
    from torch._inductor.fx_passes import bucketing as tb

    check_calls(TORCH_ORDER_CALLS)
    tb._sort_bucket_region(graph, merged.nodes, merged.inputs)


def restore_topological_order(graph: fx.Graph) -> bool:
    """Reorder nodes so every node follows its inputs, moving as few as possible.

    Walks the graph in order; a node whose inputs are not all placed yet waits, and is placed
    right after its last missing input. Nodes already in order stay put. Returns whether
    anything moved. Raises :class:`BucketingError` on a cycle.
    """
    placed: set[fx.Node] = set()
    missing: dict[fx.Node, int] = {}
    waiting: dict[fx.Node, list[fx.Node]] = defaultdict(list)
    order: list[fx.Node] = []
    output: fx.Node | None = None
    for node in graph.nodes:
        if node.op == "output":
            output = node
            continue
        inputs = node._input_nodes
        absent = [i for i in inputs if i not in placed] if not placed.issuperset(inputs) else None
        if absent:
            missing[node] = len(absent)
            for i in absent:
                waiting[i].append(node)
            continue
        stack = [node]
        while stack:
            ready = stack.pop()
            placed.add(ready)
            order.append(ready)
            released = []
            for dependent in waiting.pop(ready, ()):
                missing[dependent] -= 1
                if missing[dependent] == 0:
                    del missing[dependent]
                    released.append(dependent)
            stack.extend(reversed(released))
    if missing:
        raise BucketingError(f"cycle in graph after bucketing: {sorted(n.name for n in missing)[:5]}")
    if output is not None:
        order.append(output)
    current = list(graph.nodes)
    if current == order:
        return False
    cursor = graph._root
    for node in order:
        if cursor.next is not node:
            cursor.append(node)
        cursor = node
    return True
