"""Entries -> values: one small parser per entry kind, all behind one interface.

Each parser says which entries it wants: artifacts by name (:attr:`EntryParser.artifacts`,
``{"artifact": {"name": NAME}}``) and other entry kinds by type (:attr:`EntryParser.entry_types`,
e.g. ``{"create_symbol": {...}}``); whether it needs the payload text
(:attr:`EntryParser.needs_payload`); turns the entry into a value (:meth:`EntryParser.parse`,
from the payload and the envelope, raising :class:`ArtifactError` on anything it does not
accept); and hands the value to the per-rank model builder (:meth:`EntryParser.apply`, through
the :class:`ModelBuilder` interface). The reader's loop only splits lines and dispatches;
adding an entry kind is adding one parser here and naming it in a parser set.

Payloads and envelopes are untrusted: parsed with regular expressions and orjson, never eval'd.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import orjson

from tracekit.model import (
    COLLECTIVE_TYPES,
    LONG_NAMES,
    CollectiveSize,
    Counts,
    FinalSchedule,
    ScheduledCollective,
)
from tracekit.read.estimation_templates import EstimationTemplates

#: An entry's selection key: ``("artifact", NAME)`` for an artifact, ``(TYPE, None)`` otherwise.
EntryKey = tuple[str, "str | None"]


class ArtifactError(ValueError):
    """An artifact payload that does not have the shape its parser expects (``bad_artifact``)."""


@dataclass
class Outcome:
    """What one ``pre_bucketing_fsdp_collectives`` line says."""

    fsdp_groups: list[str]
    group_size: int | None
    n_nodes: int
    bucket_cap_mb: float
    collectives: dict[str, Counts]


def json_payload(payload: str | None, what: str) -> Any:
    """A JSON payload decoded (orjson), or :class:`ArtifactError` naming ``what`` it was."""
    try:
        return orjson.loads(payload or "")
    except orjson.JSONDecodeError as e:
        raise ArtifactError(f"{what} is not JSON: {e}") from None


class ValueMemo:
    """Payload text -> parsed value, for payloads that repeat (a long log logs the same sizes,
    outcome and estimation for thousands of graphs; a job's ranks log the same ones): parsed
    once, and the value is shared (read-only: the model's users copy one before they change
    it), so memory grows with distinct payloads, not with their count. Bounded: cleared when
    it holds ``limit`` payloads (or ``max_chars`` of them); failures are not kept (they raise
    each time)."""

    def __init__(self, parse, limit: int = 2048, max_chars: int = 4 << 20) -> None:
        self._parse = parse
        self._values: dict[str, Any] = {}
        self._chars = 0
        self._limit = limit
        self._max_chars = max_chars

    def __call__(self, text: str) -> Any:
        v = self._values.get(text)
        if v is None:
            v = self._parse(text)
            if len(self._values) >= self._limit or self._chars > self._max_chars:
                self._values.clear()
                self._chars = 0
            self._values[text] = v
            self._chars += len(text)
        return v

    def __getstate__(self):  # a parser travels to worker processes without its memo
        return {
            "_parse": self._parse,
            "_values": {},
            "_chars": 0,
            "_limit": self._limit,
            "_max_chars": self._max_chars,
        }


class ModelBuilder(Protocol):
    """What parsers hand their values to: one file's model, built in log order (implemented by
    :class:`tracekit.read.pairing.RankBuilder`; the compile id of the entry is already set on it)."""

    def add_outcome(self, outcome: Outcome, file: str, line: int) -> None: ...
    def set_sizes(self, after: bool, sizes: list[CollectiveSize]) -> None: ...
    def count_compiled_graph(self, text: str | None) -> None: ...
    def count_cache_hit(self) -> None: ...
    def add_cache_event(self, state: str) -> None: ...
    def add_compile_id(self) -> None: ...
    def set_estimation(self, estimation: Estimation, after_overlap: bool = False) -> None: ...
    def set_compute_estimates(self, estimates: ComputeEstimates) -> None: ...
    def mark_overlap_scheduled(self, after: bool) -> None: ...
    def set_schedule(self, ops: list[tuple[str, str]]) -> None: ...
    def mark_tracekit(self, buckets: Any = None, input_graph: str | None = None) -> None: ...
    def add_symbol_hint(self, symbol: str, value: int) -> None: ...
    def set_bucket_members(self, kind: str, buckets: list[list[str]]) -> None: ...
    def set_torch_version(self, version: str) -> None: ...
    def set_frame_fact(self, kind: str, value: Any) -> None: ...
    def end_frame(self, metrics: dict[str, Any]) -> None: ...


class EntryParser:
    """The interface: which entries, whether the payload is needed, what is made of them."""

    artifacts: ClassVar[frozenset[str]] = frozenset()  # artifact names
    entry_types: ClassVar[frozenset[str]] = frozenset()  # other entry types ("create_symbol")
    needs_payload: ClassVar[bool] = True

    def keys(self) -> list[EntryKey]:
        return [("artifact", n) for n in sorted(self.artifacts)] + [
            (t, None) for t in sorted(self.entry_types)
        ]

    def parse(self, payload: str | None, envelope: dict[str, Any]) -> Any:
        """The value of one entry (``payload`` is None when :attr:`needs_payload` is false).
        A parser never reads the rank out of ``envelope``."""
        return payload

    def apply(self, builder: ModelBuilder, key: EntryKey, value: Any, file: str, line: int) -> None:
        raise NotImplementedError


# --- pre_bucketing_fsdp_collectives -------------------------------------------------------------

_STR_LIST_RE = re.compile(
    r"\[\s*(?:'[^'\\]*'|\"[^\"\\]*\")(?:\s*,\s*(?:'[^'\\]*'|\"[^\"\\]*\"))*\s*\]|\[\s*\]"
)
_STR_ITEM_RE = re.compile(r"'([^'\\]*)'|\"([^\"\\]*)\"")
_OUTCOME_RE = re.compile(
    r"fsdp_groups=(?P<groups>\[[^\]]*\]), group_size=(?P<group_size>\d+|None), "
    r"nNodes=(?P<nodes>\d+), bucket_cap_mb=(?P<cap>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|inf|nan), "
    r"all_gather (?P<ag0>\d+)->(?P<ag1>\d+), reduce_scatter (?P<rs0>\d+)->(?P<rs1>\d+), "
    r"all_reduce (?P<ar0>\d+)->(?P<ar1>\d+)"
)


def parse_outcome(text: str) -> Outcome:
    """Parse ``fsdp_groups=['0'], group_size=4, nNodes=1, bucket_cap_mb=27.4, all_gather 12->1,
    reduce_scatter 0->0, all_reduce 0->0`` strictly (unknown trailing text is tolerated)."""
    m = _OUTCOME_RE.match(text.strip())
    if m is None:
        raise ArtifactError(f"not a pre_bucketing_fsdp_collectives line: {text[:80]!r}")
    groups_text = m["groups"]
    if not _STR_LIST_RE.fullmatch(groups_text):
        raise ArtifactError(f"fsdp_groups is not a list of strings: {groups_text[:80]!r}")
    groups = [a if a else b for a, b in _STR_ITEM_RE.findall(groups_text)]
    gs = m["group_size"]
    return Outcome(
        fsdp_groups=groups,
        group_size=None if gs == "None" else int(gs),
        n_nodes=int(m["nodes"]),
        bucket_cap_mb=float(m["cap"]),
        collectives={
            "all_gather": Counts(int(m["ag0"]), int(m["ag1"])),
            "reduce_scatter": Counts(int(m["rs0"]), int(m["rs1"])),
            "all_reduce": Counts(int(m["ar0"]), int(m["ar1"])),
        },
    )


#: What a template table gives for a text not seen (None is a text that does not parse).
_NOT_SEEN: Any = object()


class OutcomeTemplates:
    """:func:`parse_outcome` once per outcome but for its FSDP groups: a mesh's shard groups
    log one line each that differs only by the group's name (``fsdp_groups=['3'], ...``,
    ``fsdp_groups=['4'], ...``). The rest of the line is parsed once (its template: the line
    with ``fsdp_groups=[]``), and each list of groups once (a forward's and a backward's name
    one group); the outcome's values are shared (read-only, as the parsers' values are). A
    line whose groups or rest do not parse is parsed as it is (its own error)."""

    def __init__(self, limit: int = 1024) -> None:
        self._rest: dict[str, Outcome | None] = {}
        self._groups: dict[str, list[str] | None] = {}  # a group list's text -> its names (None: bad)
        self._limit = limit

    def parse(self, text: str) -> Outcome:
        t = text.strip()
        end = t.find("]")
        if not t.startswith("fsdp_groups=[") or end < 0:
            return parse_outcome(text)
        groups_text, rest = t[12 : end + 1], t[end + 1 :]
        base = self._rest.get(rest, _NOT_SEEN)
        if base is _NOT_SEEN:
            try:
                base = parse_outcome("fsdp_groups=[]" + rest)
            except ArtifactError:
                base = None
            if len(self._rest) >= self._limit:
                self._rest.clear()
            self._rest[rest] = base
        groups = self._groups.get(groups_text, _NOT_SEEN)
        if groups is _NOT_SEEN:
            groups = None
            if _STR_LIST_RE.fullmatch(groups_text):
                groups = [a if a else b for a, b in _STR_ITEM_RE.findall(groups_text)]
            if len(self._groups) >= self._limit:
                self._groups.clear()
            self._groups[groups_text] = groups
        if base is None or groups is None:
            return parse_outcome(text)
        return Outcome(groups, base.group_size, base.n_nodes, base.bucket_cap_mb, base.collectives)

    def __getstate__(self):  # travels to worker processes empty
        return {"_limit": self._limit}

    def __setstate__(self, state) -> None:
        self.__init__(state["_limit"])  # type: ignore[misc]


class OutcomeParser(EntryParser):
    artifacts = frozenset({"pre_bucketing_fsdp_collectives"})

    def __init__(self) -> None:
        self._memo = ValueMemo(OutcomeTemplates().parse)

    def parse(self, payload, envelope):
        return self._memo(payload or "")

    def apply(self, builder, key, value, file, line):
        builder.add_outcome(value, file, line)


# --- pre_bucketing_collective_sizes[_after] -----------------------------------------------------


def parse_sizes(text: str) -> list[CollectiveSize]:
    """``[{"type": "AG", "size_mb": 0.25, "name": "all_gather_into_tensor"}, ...]``."""
    items = json_payload(text, "sizes")
    if not isinstance(items, list):
        raise ArtifactError("sizes are not a list")
    out = []
    mb: Any  # checked below: an int or a float
    for i, it in enumerate(items):
        if not isinstance(it, dict):
            raise ArtifactError(f"size {i} is not an object")
        t, mb, nm = it.get("type"), it.get("size_mb"), it.get("name", "")
        if t not in LONG_NAMES:
            raise ArtifactError(f"size {i} has type {t!r}")
        if type(mb) not in (int, float) or not isinstance(nm, str):
            raise ArtifactError(f"size {i} has a bad size_mb or name")
        out.append(CollectiveSize(type=_intern(t), size_mb=float(mb), name=_intern(nm)))
    return out


def _intern(s: str) -> str:
    """Node names repeat across graphs and ranks: share one string object per name."""
    return sys.intern(s) if len(s) < 200 else s


class SizesParser(EntryParser):
    artifacts = frozenset({"pre_bucketing_collective_sizes", "pre_bucketing_collective_sizes_after"})

    def __init__(self) -> None:
        self._memo = ValueMemo(parse_sizes)

    def parse(self, payload, envelope):
        return self._memo(payload or "")

    def apply(self, builder, key, value, file, line):
        builder.set_sizes(after=key[1].endswith("_after"), sizes=value)


# --- counters: graphs that ran post-grad passes, inductor cache hits ----------------------------


class CompiledGraphCounter(EntryParser):
    """``before_post_grad_graph``: one per graph that went through the post-grad passes.

    Summarize only counts it; replay also wants its text (the graph the outcome came from)."""

    artifacts = frozenset({"before_post_grad_graph"})
    needs_payload = False

    def apply(self, builder, key, value, file, line):
        builder.count_compiled_graph(value)


class GraphTextParser(CompiledGraphCounter):
    """``before_post_grad_graph`` with its text kept, for :func:`tracekit.read.reader.graph_sources`."""

    needs_payload = True


class GraphTextLineParser(GraphTextParser):
    """``before_post_grad_graph`` with its text and line kept, for graphs never pre-bucketed
    (:func:`tracekit.read.reader.graph_and_not_prebucketed_sources`)."""

    def apply(self, builder, key, value, file, line):
        builder.graph_text_line = line
        builder.count_compiled_graph(value)


class CacheEventParser(EntryParser):
    """``fx_graph_cache_hit`` / ``_miss`` / ``_bypass``: inductor's FX graph cache, once per
    graph (logged after the graph is compiled or loaded; not at all when the cache is disabled).
    A hit skipped the post-grad passes (so no bucketing logs) and is counted; every event is
    kept in order, for the cross-rank cache comparison (:func:`tracekit.analyze.schedule.compile_divergence`)."""

    artifacts = frozenset({"fx_graph_cache_hit", "fx_graph_cache_miss", "fx_graph_cache_bypass"})
    needs_payload = False

    def apply(self, builder, key, value, file, line):
        state = key[1].rsplit("_", 1)[1]
        if state == "hit":
            builder.count_cache_hit()
        builder.add_cache_event(state)


class CompileStartParser(EntryParser):
    """``{"dynamo_start": {...}}``: Dynamo starts compiling a frame; its compile id (``0/0``,
    ``1/0``, a recompile ``0/1``, a restart ``0/0_1``) is kept, in order, per rank."""

    entry_types = frozenset({"dynamo_start"})
    needs_payload = False

    def apply(self, builder, key, value, file, line):
        builder.add_compile_id()


# --- the collectives that run: inductor_collective_schedule, fx_collectives_analytical_estimation


def collective_op(name: str | None) -> tuple[str, str] | None:
    """``(kind, op)`` of a scheduled op name, None for a wait (not a collective)::

        torch.ops._c10d_functional.all_gather_into_tensor_out.default -> ("all_gather", "all_gather_into_tensor_out")
        _c10d_functional.reduce_scatter_tensor.default                -> ("reduce_scatter", "reduce_scatter_tensor")
        torch.ops._c10d_functional.all_to_all_single.default          -> ("all_to_all_single", "all_to_all_single")

    ``kind`` is the collective type (:data:`COLLECTIVE_TYPES`) the op's name starts with, else
    the op itself; a name inductor could not give (``null``) is ``("unknown", "unknown")``."""
    if name is None:
        return ("unknown", "unknown")
    parts = name.split(".")
    if parts[:2] == ["torch", "ops"]:
        parts = parts[2:]
    op = parts[1] if len(parts) >= 2 else parts[0]
    if op.startswith("wait_tensor"):
        return None
    op = _intern(op)
    return (next((t for t in COLLECTIVE_TYPES if op.startswith(t)), op), op)


class ScheduleParser(EntryParser):
    """``inductor_collective_schedule`` (json): the op names inductor emits, in run order, waits
    included (``["torch.ops._c10d_functional.all_gather_into_tensor_out.default",
    "torch.ops._c10d_functional.wait_tensor.default"]``). Value: ``[(kind, op), ...]`` of the
    collectives (waits dropped; see :func:`collective_op`)."""

    artifacts = frozenset({"inductor_collective_schedule"})

    def __init__(self) -> None:
        self._memo = ValueMemo(self._parse)

    def parse(self, payload, envelope):
        return self._memo(payload or "")

    @staticmethod
    def _parse(payload: str) -> list[tuple[str, str]]:
        names = json_payload(payload, "inductor_collective_schedule")
        if not isinstance(names, list) or not all(n is None or isinstance(n, str) for n in names):
            raise ArtifactError("inductor_collective_schedule is not a list of op names")
        return [op for op in map(collective_op, names) if op is not None]

    def apply(self, builder, key, value, file, line):
        builder.set_schedule(value)


@dataclass
class Estimation:
    """What one ``fx_collectives_analytical_estimation`` says: the world size and one
    collective per line (graph order, as the overlap scheduler saw them)."""

    world_size: int | None
    collectives: list[ScheduledCollective]


_KEY_RE = re.compile(
    r"(?P<target>\S+) group_size:(?P<size>\S*) group_name:(?P<name>.*?) input_bytes:(?P<bytes>\S*)"
)


def _int_or_none(text: str) -> int | None:
    """A plain decimal count (ASCII digits, at most 19 of them), else None ("None", garbage)."""
    return int(text) if len(text) <= 19 and text.isascii() and text.isdigit() else None


_WORLD_RE = re.compile(r"# World size: ([0-9]{1,9})\s*")
#: :func:`parse_estimation`'s lines remembered (a job's ranks log the same rows in payloads that
#: differ elsewhere, e.g. by a mesh's group names); cleared past this many.
LINE_MEMO_LIMIT = 8192


def parse_estimation(
    text: str, line_memo: dict[tuple[str, int, int], tuple[ScheduledCollective, ...]] | None = None
) -> Estimation:
    """Parse ``# World size: 4`` / ``Collective Key,NCCL Est(ms),Inductor Est(ms)`` / lines
    ``_c10d_functional.all_gather_into_tensor_out.default group_size:4 group_name:0
    input_bytes:75596,0.0116,0.0116`` (with benchmarks, more columns: the NCCL estimate is found
    by its header). ``None`` in a key (a size torch could not tell) gives None. ``line_memo``:
    each row's collective (shared, read-only, as the parsers' values are) by its text and the
    header's shape, kept across calls."""
    world: int | None = None
    header: list[str] | None = None
    nccl = 0
    out: list[ScheduledCollective] = []
    memo: dict[tuple[str, int, int], tuple[ScheduledCollective, ...]] = {} if line_memo is None else line_memo
    for ln in text.split("\n"):
        if not ln.strip():
            continue
        if ln.startswith("#"):
            m = _WORLD_RE.fullmatch(ln)
            world = int(m[1]) if m else world
            continue
        if header is None:
            header = ln.split(",")
            if header[0] != "Collective Key" or "NCCL Est(ms)" not in header:
                raise ArtifactError(f"not a collectives estimation header: {ln[:80]!r}")
            nccl = header.index("NCCL Est(ms)")
            continue
        key = (ln, len(header), nccl)
        row = memo.get(key)
        if row is None:
            row = _estimation_row(ln, len(header), nccl)
            if len(memo) >= LINE_MEMO_LIMIT:
                memo.clear()
            memo[key] = row
        out.extend(row)
    if header is None:
        raise ArtifactError("no collectives estimation header")
    return Estimation(world, out)


def _estimation_row(ln: str, ncols: int, nccl: int) -> tuple[ScheduledCollective, ...]:
    """One row of the estimation CSV: its collective, or none for an op that is no collective."""
    cells = ln.rsplit(",", ncols - 1)
    m = _KEY_RE.fullmatch(cells[0])
    if len(cells) != ncols or m is None:
        raise ArtifactError(f"not a collectives estimation line: {ln[:80]!r}")
    op = collective_op(m["target"])
    if op is None:
        return ()
    try:
        ms: float | None = float(cells[nccl])
    except ValueError:
        ms = None
    name = m["name"]
    return (
        ScheduledCollective(
            kind=op[0],
            op=op[1],
            group=None if name == "None" else _intern(name),
            group_size=_int_or_none(m["size"]),
            bytes=_int_or_none(m["bytes"]),
            est_ms=ms,
        ),
    )


class EstimationParser(EntryParser):
    """``fx_collectives_analytical_estimation`` (string, from overlap scheduling): see
    :func:`parse_estimation`. Value: an :class:`Estimation`, or a
    :class:`tracekit.read.estimation_templates.TemplatedEstimation` for a payload that names
    process groups (its ``estimation()`` is the payload's :class:`Estimation`)."""

    artifacts = frozenset({"fx_collectives_analytical_estimation"})

    def __init__(self) -> None:
        self._memo = ValueMemo(EstimationTemplates(parse_estimation).parse)

    def parse(self, payload, envelope):
        return self._memo(payload or "")

    def apply(self, builder, key, value, file, line):
        builder.set_estimation(value)


#: A collective's node in a printed post-grad graph: ``all_gather_into_tensor_out: "f32[74536][1]cpu"
#: = torch.ops._c10d_functional.all_gather_into_tensor_out.default(...)``: its dtype and op.
_COLLECTIVE_NODE_RE = re.compile(
    r'^[ \t]*\w+: "([a-z][a-z0-9_]*)\[[^"\n]*" = torch\.ops\._c10d_functional\.(\w+)\.', re.M
)


def _collective_node_lines(text: str) -> Iterator[re.Match[str]]:
    """The matches of :data:`_COLLECTIVE_NODE_RE` in ``text``, in order, as ``finditer`` gives
    them, found from the op's literal name (a graph of thousands of nodes has a few dozen
    collectives: the search skips the other lines at ``str.find`` speed instead of trying the
    pattern at each line start, a sixth of a 550 MB summarize before)."""
    find, match = text.find, _COLLECTIVE_NODE_RE.match
    i = find(_COLLECTIVE_NEEDLE)
    while i >= 0:
        start = text.rfind("\n", 0, i) + 1
        m = match(text, start)
        if m is not None:
            yield m
        end = text.find("\n", i)  # at most one match a line: go on from the next line
        if end < 0:
            return
        i = find(_COLLECTIVE_NEEDLE, end)


_COLLECTIVE_NEEDLE = "torch.ops._c10d_functional."


def parse_collective_dtypes(text: str) -> dict[str, list[str]]:
    """The dtypes of a printed graph's collectives by kind, in graph order
    (``{"all_gather": ["f32"], ...}``; waits dropped)."""
    out: dict[str, list[str]] = {}
    for m in _collective_node_lines(text):
        op = collective_op(f"_c10d_functional.{m[2]}.default")
        if op is not None:
            out.setdefault(op[0], []).append(_intern(m[1]))
    return out


class GraphDtypeParser(EntryParser):
    """``inductor_post_grad_graph`` (string): the final post-grad graph, printed with each node's
    ``dtype[shape]`` annotation. Value: the dtypes of its collectives by kind, in graph order
    (``{"all_gather": ["f32"], ...}``; waits dropped), matched to the schedule by
    :func:`final_schedule` as the estimation is."""

    artifacts = frozenset({"inductor_post_grad_graph"})

    def __init__(self) -> None:
        self._memo = ValueMemo(parse_collective_dtypes)

    def parse(self, payload, envelope):
        return self._memo(payload or "")

    def apply(self, builder, key, value, file, line):
        builder.set_dtypes(value)


def final_schedule(
    compile_id: str,
    position: int,
    ops: list[tuple[str, str]],
    estimation: Estimation | None,
    dtypes: dict[str, list[str]] | None = None,
) -> FinalSchedule:
    """A schedule's collectives with sizes from the graph's estimation, matched by order within
    each kind: the i-th all-gather of the schedule gets the i-th all-gather line of the
    estimation (overlap scheduling moves collectives, but keeps those of one kind in order).
    A kind whose counts disagree keeps the schedule's count, with sizes left None. ``dtypes``
    (from :class:`GraphDtypeParser`) are matched the same way, a kind whose counts disagree
    left without."""
    colls = [ScheduledCollective(kind, op) for kind, op in ops]
    if dtypes:
        of_kind: dict[str, list[ScheduledCollective]] = {}
        for c in colls:
            of_kind.setdefault(c.kind, []).append(c)
        for kind, cs in of_kind.items():
            ds = dtypes.get(kind, [])
            if len(ds) == len(cs):
                for c, d in zip(cs, ds, strict=False):
                    c.dtype = d
    if estimation is None:
        return FinalSchedule(compile_id, position, FinalSchedule.count_kinds(colls), colls)
    by_kind: dict[str, list[ScheduledCollective]] = {}
    for e in estimation.collectives:
        by_kind.setdefault(e.kind, []).append(e)
    mine: dict[str, list[ScheduledCollective]] = {}
    for c in colls:
        mine.setdefault(c.kind, []).append(c)
    status = "matched"
    for kind, cs in mine.items():
        es = by_kind.get(kind, [])
        if len(es) != len(cs):
            status = "partial"
            continue
        for c, e in zip(cs, es, strict=False):
            c.group, c.group_size, c.bytes, c.est_ms = e.group, e.group_size, e.bytes, e.est_ms
    if any(len(v) != len(mine.get(k, [])) for k, v in by_kind.items()):
        status = "partial"
    return FinalSchedule(
        compile_id, position, FinalSchedule.count_kinds(colls), colls, estimation.world_size, status
    )


# --- overlap scheduling: compute estimates, estimates after overlap bucketing, graph markers -----


@dataclass
class ComputeEstimates:
    """One ``fx_compute_nodes_runtime_estimation`` CSV: ``{node name: Benchmarked Est(us)}`` in
    row order. The ``Node`` cell is ``str(node)`` then each input's dtype and shape
    (``mm f32(8, 128) f32(128, 256)``), so the name is its first word. A graph logs two, in
    order, with the same "Benchmarked" column; they are paired with graphs by position."""

    benchmarked_us: dict[str, float]


def parse_compute_estimates(text: str) -> ComputeEstimates:
    """Parse ``Node,Benchmarked Est(us),Analytical Est(us),...`` and its rows strictly."""
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if not lines:
        raise ArtifactError("empty compute estimation")
    header = lines[0].split(",")
    if header[:2] != ["Node", "Benchmarked Est(us)"]:
        raise ArtifactError(f"not a compute estimation header: {lines[0][:80]!r}")
    out: dict[str, float] = {}
    for ln in lines[1:]:
        cells = ln.rsplit(",", len(header) - 1)
        name = cells[0].split(" ", 1)[0]
        if len(cells) != len(header) or not _NODE_NAME_RE.match(name):
            raise ArtifactError(f"not a compute estimation row: {ln[:80]!r}")
        try:
            us = float(cells[1])
        except ValueError:
            raise ArtifactError(f"estimate is not a number: {ln[:80]!r}") from None
        if not (us == us and 0 <= us < float("inf")):
            raise ArtifactError(f"estimate is not a finite time: {ln[:80]!r}")
        out[_intern(name)] = us
    return ComputeEstimates(out)


class ComputeEstimatesParser(EntryParser):
    """``fx_compute_nodes_runtime_estimation`` (string CSV, microseconds): see
    :func:`parse_compute_estimates`; the first of a post-grad graph is kept."""

    artifacts = frozenset({"fx_compute_nodes_runtime_estimation"})

    def parse(self, payload, envelope):
        return parse_compute_estimates(payload or "")

    def apply(self, builder, key, value, file, line):
        builder.set_compute_estimates(value)


class EstimationAfterOverlapParser(EntryParser):
    """``fx_collectives_estimations_after_overlap_bucketing`` (string, same CSV as
    ``fx_collectives_analytical_estimation``, with benchmark columns): the collectives after
    overlap bucketing, so the ones the recorded schedule runs (written only with
    ``log_final_collectives_estimations``)."""

    artifacts = frozenset({"fx_collectives_estimations_after_overlap_bucketing"})

    def parse(self, payload, envelope):
        return parse_estimation(payload or "")

    def apply(self, builder, key, value, file, line):
        builder.set_estimation(value, after_overlap=True)


class OverlapGraphMarkerParser(EntryParser):
    """``overlap_scheduling_graph_before`` / ``_after`` (string): overlap scheduling ran on
    this graph. Only their presence is read (the text is the graph after pre-bucketing)."""

    artifacts = frozenset({"overlap_scheduling_graph_before", "overlap_scheduling_graph_after"})
    needs_payload = False

    def apply(self, builder, key, value, file, line):
        builder.mark_overlap_scheduled(after=key[1].endswith("_after"))


# --- tracekit's own pass (bucketing.install()) --------------------------------------------------


class TracekitBucketsParser(EntryParser):
    """``tracekit_fsdp_buckets`` (json): marks the next outcome of the compile id as ours, with
    its bucket members ``{"AG": [[names]], "RS": ..., "AR": ...}``."""

    artifacts = frozenset({"tracekit_fsdp_buckets"})

    def parse(self, payload, envelope):
        doc = json_payload(payload, "tracekit_fsdp_buckets")
        try:
            return {k: [[str(m["name"]) for m in b] for b in doc["buckets"][k]] for k in ("AG", "RS", "AR")}
        except (KeyError, TypeError) as e:
            raise ArtifactError(f"tracekit_fsdp_buckets without buckets: {e!r}") from None

    def apply(self, builder, key, value, file, line):
        builder.mark_tracekit(buckets=value)


_BUCKET_RE = re.compile(r"\[([^\[\]]*)\]")
_NODE_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def parse_torch_buckets(text: str) -> list[list[str]]:
    """``[[a, b], [c, d, e]]`` -> ``[["a", "b"], ["c", "d", "e"]]``; ArtifactError otherwise."""
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        raise ArtifactError(f"not a list of buckets: {text[:80]!r}")
    buckets = []
    for inner in _BUCKET_RE.findall(body[1:-1]):
        names = [n.strip() for n in inner.split(",") if n.strip()]
        if not all(_NODE_NAME_RE.match(n) for n in names):
            raise ArtifactError(f"bucket with a name that is not a node name: {inner[:80]!r}")
        buckets.append(names)
    return buckets


class BucketMembersParser(EntryParser):
    """``fx_bucketing_passes_all_gather_buckets`` / ``..._reduce_scatter_buckets`` (string,
    ``str()`` of a list of node-name lists): the bucket members torch's merges chose, logged
    only when something merges. Those logged between a graph's ``before_post_grad_graph`` and
    its outcome are pre-bucketing's (overlap scheduling's own come after the outcome)."""

    artifacts = frozenset(
        {"fx_bucketing_passes_all_gather_buckets", "fx_bucketing_passes_reduce_scatter_buckets"}
    )

    def parse(self, payload, envelope):
        return parse_torch_buckets(payload or "")

    def apply(self, builder, key, value, file, line):
        builder.set_bucket_members("AG" if key[1].endswith("_all_gather_buckets") else "RS", value)


class TracekitInputGraphParser(EntryParser):
    """``tracekit_fsdp_input_graph`` (string): the graph our pass was given, just before its
    outcome. Summarize only needs to know it was there; replay keeps the text."""

    artifacts = frozenset({"tracekit_fsdp_input_graph"})
    needs_payload = False

    def apply(self, builder, key, value, file, line):
        builder.mark_tracekit(input_graph=value)


class TracekitInputGraphTextParser(TracekitInputGraphParser):
    needs_payload = True


# --- what a run is: compiles started, torch's version -------------------------------------------


class TorchVersionParser(EntryParser):
    """``torch_version`` (json, the file's first entry): ``{"pytorch_version": "2.13.0+cpu", ...}``."""

    artifacts = frozenset({"torch_version"})

    def parse(self, payload, envelope):
        v = json_payload(payload, "torch_version")
        version = v.get("pytorch_version") if isinstance(v, dict) else None
        return _intern(version) if isinstance(version, str) else None

    def apply(self, builder, key, value, file, line):
        if value is not None:
            builder.set_torch_version(value)


# --- create_symbol: the hints of symbolic sizes, for replay ----------------------------------------


class SymbolHintParser(EntryParser):
    """``{"create_symbol": {"symbol": "s77", "val": "8", ...}}``: Dynamo made a size symbolic;
    ``val`` is the size seen then (the hint). A frame's forward and backward share one shape
    environment, so the hints of a compile id serve both its graphs. Unbacked symbols (``u0``)
    and symbolic hints give nothing (replay then needs ``--sym``)."""

    entry_types = frozenset({"create_symbol"})
    needs_payload = False

    def parse(self, payload, envelope):
        body = envelope.get("create_symbol")
        if not isinstance(body, dict):
            return None
        name, val = body.get("symbol"), body.get("val")
        if not isinstance(name, str) or isinstance(val, bool) or not isinstance(val, (str, int)):
            return None
        try:
            return name, int(val)
        except ValueError:
            return None

    def apply(self, builder, key, value, file, line):
        if value is not None:
            builder.add_symbol_hint(*value)


# --- frame compiles: compilation_metrics, dynamo_graph_break_reason, dynamo_output_graph ---------

#: Bytes per element of the dtypes in graph annotations (``f32[128, 32][32, 1]cpu``).
DTYPE_BYTES: dict[str, int] = {
    "f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "u8": 1, "b8": 1,
    "c64": 8, "c128": 16, "f8e4m3fn": 1, "f8e5m2": 1, "f8e4m3fnuz": 1, "f8e5m2fnuz": 1,
}  # fmt: skip
_SIGNATURE_RE = re.compile(r"def forward\(self(?P<args>[^)]*)\)")
_PARAM_ARG_RE = re.compile(r"(?P<name>\w+): \"(?P<dtype>[a-z0-9]+)\[(?P<shape>[^\]]*)\]")
_COLLECTIVE_CALL_RE = re.compile(
    r"= torch\.ops\._c10d_functional\.(?!wait_tensor)\w+|torch\.distributed\.\w+\("
)
_BREAK_AT_RE = re.compile(r"Graph break in user code at (?P<at>\S+:\d+)")


@dataclass(frozen=True)
class GraphInputs:
    """What a ``dynamo_output_graph`` says of its frame: parameter inputs (``L_..._parameters_...``
    placeholders) and their bytes (None when a size is symbolic or a dtype unknown), and the
    collective calls in its body."""

    params: int
    param_bytes: int | None
    collectives: int


def parse_graph_inputs(text: str) -> GraphInputs:
    """The parameter inputs of a dynamo graph, read off its ``forward`` signature::

        def forward(self, L_s_modules_lin_parameters_weight_: "f32[128, 32][32, 1]cpu", L_x_: ...)

    gives one parameter of 128 * 32 * 4 = 16,384 bytes (``L_x_`` is no parameter)."""
    m = _SIGNATURE_RE.search(text)
    params, total = 0, 0
    known = True
    for a in _PARAM_ARG_RE.finditer(m["args"] if m else ""):
        if "_parameters_" not in a["name"]:
            continue
        params += 1
        size = DTYPE_BYTES.get(a["dtype"])
        dims = [d.strip() for d in a["shape"].split(",") if d.strip()]
        if size is None or not all(d.isdigit() for d in dims):
            known = False
            continue
        for d in dims:
            size *= int(d)
        total += size
    return GraphInputs(params, total if known else None, len(_COLLECTIVE_CALL_RE.findall(text)))


class GraphInputsParser(EntryParser):
    """``{"dynamo_output_graph": ...}``: the graph dynamo made of a frame (:func:`parse_graph_inputs`)."""

    entry_types = frozenset({"dynamo_output_graph"})

    def parse(self, payload, envelope):
        return parse_graph_inputs(payload or "")

    def apply(self, builder, key, value, file, line):
        builder.set_frame_fact("graph", value)


def _first_line(text: Any, limit: int = 160) -> str | None:
    """The first line of a reason, with the next one when the first only introduces it
    (``backend='broken_backend' raised:`` / ``RuntimeError: broken backend``), cut at ``limit``."""
    if not isinstance(text, str) or not text.strip():
        return None
    lines = [x.strip() for x in text.strip().splitlines() if x.strip()]
    line = lines[0] if not (lines[0].endswith(":") and len(lines) > 1) else f"{lines[0]} {lines[1]}"
    return line if len(line) <= limit else line[: limit - 3] + "..."


_CLASS_RE = re.compile(r"<class '(?:[\w.]*\.)?(?P<name>\w+)'>")


def exception_name(fail_type: str) -> str:
    """``fail_type`` as a class name: ``<class 'torch._dynamo.exc.BackendCompilerFailed'>``
    (older torch) and ``BackendCompilerFailed`` both give ``BackendCompilerFailed``."""
    m = _CLASS_RE.fullmatch(fail_type.strip())
    return m["name"] if m else fail_type.strip().rsplit(".", 1)[-1]


class GraphBreakParser(EntryParser):
    """``dynamo_graph_break_reason`` (string): ``Graph break in user code at PATH:LINE``, then
    ``Graph Break Reason: ...`` and the reason's first line; kept as ``(at, reason)``."""

    artifacts = frozenset({"dynamo_graph_break_reason"})

    def parse(self, payload, envelope):
        text = payload or ""
        m = _BREAK_AT_RE.search(text)
        lines = [x.strip() for x in text.splitlines() if x.strip()]
        reason = None
        for i, x in enumerate(lines):
            if x.startswith("Graph Break Reason:"):
                tail = x.removeprefix("Graph Break Reason:").strip()
                # "Failed to handle graph break gracefully. ... Graph break encountered:" then the cause
                reason = lines[i + 1] if tail.endswith("encountered:") and i + 1 < len(lines) else tail
                break
        return (m["at"] if m else None, _first_line(reason))

    def apply(self, builder, key, value, file, line):
        builder.set_frame_fact("break", value)


class CompilationMetricsParser(EntryParser):
    """``{"compilation_metrics": {...}}``, the end of a frame compile: the frame's ``co_name``,
    ``co_filename``:``co_firstlineno``, and ``fail_type`` / ``fail_reason`` /
    ``fail_user_frame_filename``:``_lineno`` when it did not compile (``Unsupported``: dynamo
    skipped the frame, it runs in eager code; any other type: a compile failure)."""

    entry_types = frozenset({"compilation_metrics"})
    needs_payload = False

    def parse(self, payload, envelope):
        m = envelope.get("compilation_metrics")
        if not isinstance(m, dict):
            return None

        def text(k: str) -> str | None:
            v = m.get(k)
            return v if isinstance(v, str) else None

        def at(file_key: str, line_key: str) -> str | None:
            f, n = text(file_key), m.get(line_key)
            return None if f is None else f"{f}:{n}" if isinstance(n, int) and not isinstance(n, bool) else f

        return {
            "name": text("co_name"),
            "where": at("co_filename", "co_firstlineno"),
            "fail_type": None if text("fail_type") is None else exception_name(text("fail_type") or ""),
            "reason": _first_line(m.get("fail_reason")),
            "fail_at": at("fail_user_frame_filename", "fail_user_frame_lineno"),
        }

    def apply(self, builder, key, value, file, line):
        if value is not None:
            builder.end_frame(value)


#: The parsers summarize uses.
SUMMARY_PARSERS: tuple[EntryParser, ...] = (
    OutcomeParser(),
    SizesParser(),
    CompiledGraphCounter(),
    CacheEventParser(),
    TracekitBucketsParser(),
    TracekitInputGraphParser(),
    CompileStartParser(),
    TorchVersionParser(),
    ScheduleParser(),
    EstimationParser(),
    GraphDtypeParser(),
    EstimationAfterOverlapParser(),
)

#: The parsers of frame compiles (:class:`tracekit.model.FrameCompile`), read in a second pass
#: only when no rank logged a bucketing outcome (:func:`tracekit.read.reader.load`): their
#: entries are large (``compilation_metrics`` carries configs and tracebacks), and a run with
#: outcomes does not need them.
FRAME_PARSERS: tuple[EntryParser, ...] = (GraphInputsParser(), GraphBreakParser(), CompilationMetricsParser())

#: The parsers graph_sources uses (replay): the same, with graph texts and symbol hints kept.
SOURCE_PARSERS: tuple[EntryParser, ...] = (
    OutcomeParser(),
    SizesParser(),
    GraphTextParser(),
    CacheEventParser(),
    TracekitBucketsParser(),
    TracekitInputGraphTextParser(),
    SymbolHintParser(),
    BucketMembersParser(),
    ScheduleParser(),
    EstimationParser(),
    EstimationAfterOverlapParser(),
    ComputeEstimatesParser(),
    OverlapGraphMarkerParser(),
    TorchVersionParser(),  # which torch wrote the log: replay and explain say it beside their own
)


#: The source parsers, with the graph texts' lines, the schedules and the estimations: graph
#: sources and the graphs never pre-bucketed (:class:`tracekit.read.pairing.NotPrebucketedSource`).
NOT_PREBUCKETED_PARSERS: tuple[EntryParser, ...] = tuple(
    GraphTextLineParser() if isinstance(p, GraphTextParser) else p for p in SOURCE_PARSERS
)


def by_key(parsers: tuple[EntryParser, ...]) -> dict[EntryKey, EntryParser]:
    """Entry key (``("artifact", NAME)`` or ``(TYPE, None)``) -> its parser."""
    table: dict[EntryKey, EntryParser] = {}
    for p in parsers:
        for k in p.keys():
            if k in table:
                raise ValueError(f"two parsers for {k}")
            table[k] = p
    return table


@functools.lru_cache(maxsize=8)
def key_table(parsers: tuple[EntryParser, ...]) -> dict[EntryKey, EntryParser]:
    """:func:`by_key`, made once per parser set: the one table of every file a process reads
    with it (100,000 rank logs are 100,000 lookups, not 100,000 tables). Read-only."""
    return by_key(parsers)


__all__ = [
    "COLLECTIVE_TYPES",
    "ArtifactError",
    "ComputeEstimates",
    "EntryParser",
    "Estimation",
    "FRAME_PARSERS",
    "ModelBuilder",
    "Outcome",
    "SOURCE_PARSERS",
    "SUMMARY_PARSERS",
    "NOT_PREBUCKETED_PARSERS",
    "by_key",
    "key_table",
    "collective_op",
    "final_schedule",
    "parse_compute_estimates",
    "parse_estimation",
    "parse_outcome",
    "parse_sizes",
]
