"""The parsers of the collectives that run and of overlap scheduling: the schedule inductor
logs (``inductor_collective_schedule``), torch's estimation of each collective
(``fx_collectives_analytical_estimation``, and after overlap bucketing), the dtypes of the
collectives of the post-grad graph, the compute estimates, the collectives the run benchmarked,
and :func:`final_schedule`, which
matches them into a :class:`tracekit.model.FinalSchedule`. Each parser is an
:class:`tracekit.read.entry_parser.EntryParser`; the parser sets are in
:mod:`tracekit.read.parsers`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

from tracekit.model import COLLECTIVE_TYPES, FinalSchedule, ScheduledCollective
from tracekit.read.entry_parser import (
    NODE_NAME_RE,
    ArtifactError,
    ComputeEstimates,
    EntryParser,
    Estimation,
    ValueMemo,
    intern_name,
    json_payload,
)

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
    op = intern_name(op)
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
            group=None if name == "None" else intern_name(name),
            group_size=_int_or_none(m["size"]),
            bytes=_int_or_none(m["bytes"]),
            est_ms=ms,
        ),
    )


class EstimationParser(EntryParser):
    """``fx_collectives_analytical_estimation`` (string, from overlap scheduling): see
    :func:`parse_estimation`. Value: an :class:`Estimation`."""

    artifacts = frozenset({"fx_collectives_analytical_estimation"})

    def __init__(self) -> None:
        self._memo = ValueMemo(functools.partial(parse_estimation, line_memo={}))

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
            out.setdefault(op[0], []).append(intern_name(m[1]))
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


def parse_compute_estimates(text: str) -> ComputeEstimates:
    """Parse ``Node,Benchmarked Est(us),Analytical Est(us),...`` and its rows strictly."""
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if not lines:
        raise ArtifactError("empty compute estimation")
    header = lines[0].split(",")
    if header[:2] != ["Node", "Benchmarked Est(us)"]:
        raise ArtifactError(f"not a compute estimation header: {lines[0][:80]!r}")
    analytical_at = header.index("Analytical Est(us)") if "Analytical Est(us)" in header else None
    out: dict[str, float] = {}
    analytical: dict[str, float] = {}
    for ln in lines[1:]:
        cells = ln.rsplit(",", len(header) - 1)
        name = cells[0].split(" ", 1)[0]
        if len(cells) != len(header) or not NODE_NAME_RE.match(name):
            raise ArtifactError(f"not a compute estimation row: {ln[:80]!r}")
        try:
            us = float(cells[1])
        except ValueError:
            raise ArtifactError(f"estimate is not a number: {ln[:80]!r}") from None
        if not (us == us and 0 <= us < float("inf")):
            raise ArtifactError(f"estimate is not a finite time: {ln[:80]!r}")
        out[intern_name(name)] = us
        if analytical_at is not None:
            try:
                analytical[name] = float(cells[analytical_at])
            except ValueError:
                pass  # an analytical cell that is not a number: that row is taken as benchmarked
    return ComputeEstimates(out, analytical)


class ComputeEstimatesParser(EntryParser):
    """``fx_compute_nodes_runtime_estimation`` (string CSV, microseconds): see
    :func:`parse_compute_estimates`; a post-grad graph's two are folded into what its
    scheduler used (:meth:`ComputeEstimates.then`)."""

    artifacts = frozenset({"fx_compute_nodes_runtime_estimation"})

    def parse(self, payload, envelope):
        return parse_compute_estimates(payload or "")

    def apply(self, builder, key, value, file, line):
        builder.set_compute_estimates(value)


def parse_collective_benchmarks(text: str) -> dict[str, float]:
    """``fx_collectives_node_runtime_estimation`` (written instead of the analytical CSV when
    the run benchmarked its collectives, ``collective_estimator="benchmark"``): ``# World size:
    N``, then ``Collective Key,Benchmarked(ms),NCCL Est(ms),...`` rows whose key is torch's cache
    key (``_c10d_functional.all_gather_into_tensor.default: (2 group size, 1048576 bytes)``):
    ``{key: benchmarked ms}``, the median over the ranks that torch's scheduler used."""
    lines = [ln for ln in text.split("\n") if ln.strip() and not ln.startswith("#")]
    if not lines or not lines[0].startswith("Collective Key,Benchmarked(ms)"):
        raise ArtifactError(f"not a collective benchmark header: {(lines or [''])[0][:80]!r}")
    columns = len(lines[0].split(","))
    out: dict[str, float] = {}
    for ln in lines[1:]:
        cells = ln.rsplit(",", columns - 1)
        try:
            ms = float(cells[1])
        except (ValueError, IndexError):
            raise ArtifactError(f"not a collective benchmark row: {ln[:80]!r}") from None
        if len(cells) != columns or not (ms == ms and 0 <= ms < float("inf")):
            raise ArtifactError(f"not a collective benchmark row: {ln[:80]!r}")
        out[intern_name(cells[0])] = ms
    return out


class CollectiveBenchmarksParser(EntryParser):
    """``fx_collectives_node_runtime_estimation``: see :func:`parse_collective_benchmarks`."""

    artifacts = frozenset({"fx_collectives_node_runtime_estimation"})

    def parse(self, payload, envelope):
        return parse_collective_benchmarks(payload or "")

    def apply(self, builder, key, value, file, line):
        builder.set_collective_benchmarks(value)


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
