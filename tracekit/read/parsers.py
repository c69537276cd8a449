"""Entries -> values: one small parser per entry kind, all behind one interface.

Each parser says which entries it wants: artifacts by name (:attr:`EntryParser.artifacts`,
``{"artifact": {"name": NAME}}``) and other entry kinds by type (:attr:`EntryParser.entry_types`,
e.g. ``{"create_symbol": {...}}``); whether it needs the payload text
(:attr:`EntryParser.needs_payload`); turns the entry into a value (:meth:`EntryParser.parse`,
from the payload and the envelope, raising :class:`ArtifactError` on anything it does not
accept); and hands the value to the per-rank model builder (:meth:`EntryParser.apply`, through
the :class:`ModelBuilder` interface): :mod:`tracekit.read.entry_parser`. The reader's loop
only splits lines and dispatches; adding an entry kind is adding one parser here (or, for the
collectives that run and overlap scheduling, in :mod:`tracekit.read.schedule_parsers`) and
naming it in a parser set below.

Payloads and envelopes are untrusted: parsed with regular expressions and orjson, never eval'd.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from tracekit.model import COLLECTIVE_TYPES, GRAPH_BREAK, LONG_NAMES, RECOMPILE, CollectiveSize, Counts
from tracekit.read.entry_parser import (
    NODE_NAME_RE,
    ArtifactError,
    ComputeEstimates,
    EntryKey,
    EntryParser,
    Estimation,
    ModelBuilder,
    Outcome,
    ValueMemo,
    intern_name,
    json_payload,
)
from tracekit.read.schedule_parsers import (
    CollectiveBenchmarksParser,
    ComputeEstimatesParser,
    EstimationAfterOverlapParser,
    EstimationParser,
    GraphDtypeParser,
    OverlapGraphMarkerParser,
    ScheduleParser,
    collective_op,
    final_schedule,
    parse_collective_benchmarks,
    parse_compute_estimates,
    parse_estimation,
)

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
        out.append(CollectiveSize(type=intern_name(t), size_mb=float(mb), name=intern_name(nm)))
    return out


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


def parse_torch_buckets(text: str) -> list[list[str]]:
    """``[[a, b], [c, d, e]]`` -> ``[["a", "b"], ["c", "d", "e"]]``; ArtifactError otherwise."""
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        raise ArtifactError(f"not a list of buckets: {text[:80]!r}")
    buckets = []
    for inner in _BUCKET_RE.findall(body[1:-1]):
        names = [n.strip() for n in inner.split(",") if n.strip()]
        if not all(NODE_NAME_RE.match(n) for n in names):
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
        return intern_name(version) if isinstance(version, str) else None

    def apply(self, builder, key, value, file, line):
        if value is not None:
            builder.set_torch_version(value)


# --- fx_graph_runnable: the run's overlap scheduling settings, for replay -------------------------

#: The prefix of the lines of ``fx_graph_runnable`` that set the inductor config the run changed.
RUN_SETTING_PREFIX = "torch._inductor.config.aten_distributed_optimizations."


def parse_run_settings(text: str) -> dict[str, str]:
    """The ``aten_distributed_optimizations`` settings a run changed from torch's defaults, as
    ``fx_graph_runnable`` writes them (one line each, ``torch._inductor.config.
    aten_distributed_optimizations.max_in_flight_gb = 2.0``): ``{name: value text}``. The value
    stays text (a literal, or the name of a function such as ``__main__.my_estimate``): it is
    never evaluated here (:mod:`tracekit.replay.run_settings` reads literals only)."""
    out: dict[str, str] = {}
    at = text.find(RUN_SETTING_PREFIX)
    while at >= 0:
        end = text.find("\n", at)
        line = text[at + len(RUN_SETTING_PREFIX) : len(text) if end < 0 else end]
        name, sep, value = line.partition(" = ")
        if sep and name.isidentifier():
            out[intern_name(name)] = value.strip()
        at = text.find(RUN_SETTING_PREFIX, at + 1 if end < 0 else end)
    return out


class InferenceGraphParser(EntryParser):
    """``{"aot_inference_graph": ...}``: AOTAutograd compiled this compile id for inference (no
    backward). Its graph goes through inductor's post-grad passes as an inference graph
    (``is_inference``: reordered for locality first), which replay does again."""

    entry_types = frozenset({"aot_inference_graph"})
    needs_payload = False

    def apply(self, builder, key, value, file, line):
        builder.mark_inference()


class RunSettingsParser(EntryParser):
    """``fx_graph_runnable`` (string: a script that reruns the graph, with the inductor config the
    run changed): the run's overlap scheduling settings (:func:`parse_run_settings`), kept per
    compile id for the graphs that follow it."""

    artifacts = frozenset({"fx_graph_runnable"})

    def parse(self, payload, envelope):
        return parse_run_settings(payload or "")

    def apply(self, builder, key, value, file, line):
        builder.set_run_settings(value)


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
    # a call in the graph's code, not in the comments that quote the user's source above it
    # (``# File: ..._functional_collectives.py:179 in all_reduce, code: tensor = torch.ops...``)
    calls = sum(
        1
        for line in text.splitlines()
        if not line.lstrip().startswith("#") and _COLLECTIVE_CALL_RE.search(line)
    )
    return GraphInputs(params, total if known else None, calls)


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


#: A guarded module type FSDP2 made: ``fully_shard`` swaps a module's class for one named
#: ``FSDP`` + its name, defined in ``torch.distributed.fsdp._fully_shard._fsdp_init``.
_FSDP2_TYPE_RE = re.compile(
    r"type=<class 'torch\.distributed\.fsdp\._fully_shard\.[\w.]*?(?P<name>FSDP\w+)'>"
)


class FSDP2ModuleParser(EntryParser):
    """``{"dynamo_cpp_guards_str": {}}``: the guards of a frame compile; kept, the first module
    type FSDP2 made (``FSDPBlock``, from ``type=<class
    'torch.distributed.fsdp._fully_shard._fsdp_init.FSDPBlock'>``) when the frame is the
    forward of a ``fully_shard`` module, else None. A block compiled on its own
    (``block.compile()``) shows FSDP2 here only: its hooks run around the frame, no graph breaks."""

    entry_types = frozenset({"dynamo_cpp_guards_str"})

    def parse(self, payload, envelope):
        m = _FSDP2_TYPE_RE.search(payload or "")
        return m["name"] if m else None

    def apply(self, builder, key, value, file, line):
        if value is not None:
            builder.set_frame_fact("fsdp2_module", value)


class GraphBreakEventParser(GraphBreakParser):
    """``dynamo_graph_break_reason`` for summarize: each graph break kept as a
    :class:`tracekit.model.CompileEvent` of the rank (``at``, ``reason``), outcomes or not."""

    def apply(self, builder, key, value, file, line):
        at, reason = value
        builder.add_compile_event(GRAPH_BREAK, reason, at)


class RecompileReasonsParser(EntryParser):
    """``recompile_reasons``: why dynamo compiled a frame again, logged under the new compile
    id. torch writes one reason as plain text (``1/0: tensor 'x' requires_grad mismatch.
    expected requires_grad=0``: the compile id whose guard failed, then the guard), several as
    a JSON list of strings; each kept (first line) as a :class:`tracekit.model.CompileEvent`."""

    artifacts = frozenset({"recompile_reasons"})

    def parse(self, payload, envelope):
        text = (payload or "").strip()
        if text.startswith("["):
            value = json_payload(text, "recompile_reasons")
            if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
                raise ArtifactError("recompile_reasons is not a list of strings")
            return tuple(_first_line(x, 240) for x in value)
        return (_first_line(text, 240),)

    def apply(self, builder, key, value, file, line):
        for reason in value:
            builder.add_compile_event(RECOMPILE, reason, None)


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
    GraphBreakEventParser(),
    RecompileReasonsParser(),
)

#: The parsers of frame compiles (:class:`tracekit.model.FrameCompile`), read in a second pass
#: only when no rank logged a bucketing outcome (:func:`tracekit.read.reader.load`): their
#: entries are large (``compilation_metrics`` carries configs and tracebacks), and a run with
#: outcomes does not need them.
FRAME_PARSERS: tuple[EntryParser, ...] = (
    GraphInputsParser(),
    GraphBreakParser(),
    FSDP2ModuleParser(),
    CompilationMetricsParser(),
)

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
    RunSettingsParser(),  # the run's overlap scheduling settings and estimation hook
    InferenceGraphParser(),  # inference compiles: replay runs torch's post-grad passes as for them
    CollectiveBenchmarksParser(),  # the run's benchmarked collectives
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
    "parse_collective_benchmarks",
    "parse_compute_estimates",
    "parse_estimation",
    "parse_outcome",
    "parse_sizes",
]
