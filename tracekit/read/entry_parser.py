"""The parsers' interface: what every entry parser is (:class:`EntryParser`: which entries it
wants, whether it needs the payload, what it makes of them), what it hands its values to
(:class:`ModelBuilder`, the per-rank model builder), the values handed over (:class:`Outcome`,
:class:`Estimation`, :class:`ComputeEstimates`), and the helpers the parsers share (payloads
as JSON, a memo of repeated payloads, names interned). The parsers themselves are in
:mod:`tracekit.read.parsers` and :mod:`tracekit.read.schedule_parsers`.

Payloads and envelopes are untrusted: parsed with regular expressions and orjson, never eval'd.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import orjson

from tracekit.model import CollectiveSize, Counts, ScheduledCollective

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


@dataclass
class Estimation:
    """What one ``fx_collectives_analytical_estimation`` says: the world size and one
    collective per line (graph order, as the overlap scheduler saw them)."""

    world_size: int | None
    collectives: list[ScheduledCollective]


@dataclass
class ComputeEstimates:
    """One ``fx_compute_nodes_runtime_estimation`` CSV: ``{node name: Benchmarked Est(us)}`` in
    row order, and its "Analytical Est(us)" column. The ``Node`` cell is ``str(node)`` then each
    input's dtype and shape (``mm f32(8, 128) f32(128, 256)``), so the name is its first word. A
    graph logs two, in order; they are paired with graphs by position (:meth:`then`)."""

    benchmarked_us: dict[str, float]
    analytical_us: dict[str, float] = field(default_factory=dict)

    def then(self, aligned: ComputeEstimates) -> ComputeEstimates:
        """The estimates torch's scheduler used, from this graph's first CSV (``self``: written
        when the scheduler gathers its estimates: the ``custom_runtime_estimation`` hook's value,
        else torch's roofline) and its second (``aligned``: written when the scheduler aligns
        its compute estimates across ranks, before it schedules).

        With ``compute_estimator="benchmark"`` (the function's default) the alignment replaces
        each compute node's estimate by its benchmark (the hook's value when it gives one; a
        value cached by the node's op and shapes, from an earlier graph or an earlier compile on
        that machine, before either), and the second CSV's "Benchmarked" column holds those. With
        ``"analytical"`` the alignment keeps the gathered estimates and the second CSV's
        "Benchmarked" column is the roofline, equal to its "Analytical" one. So a row of the
        second CSV whose two columns differ is what the scheduler used; a row where they are
        equal (analytical mode, a higher-order op torch does not benchmark) or whose benchmark
        is 0 (a node torch could not benchmark: it keeps the gathered one) leaves the first's."""
        out = dict(self.benchmarked_us)
        for name, us in aligned.benchmarked_us.items():
            if us != aligned.analytical_us.get(name) and (us > 0 or name not in out):
                out[name] = us
        return ComputeEstimates(out, dict(self.analytical_us))


def intern_name(s: str) -> str:
    """Node names repeat across graphs and ranks: share one string object per name."""
    return sys.intern(s) if len(s) < 200 else s


#: A node name of a printed graph.
NODE_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


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
    def set_run_settings(self, settings: dict[str, str]) -> None: ...
    def mark_inference(self) -> None: ...
    def set_collective_benchmarks(self, benchmarks: dict[str, float]) -> None: ...
    def set_frame_fact(self, kind: str, value: Any) -> None: ...
    def end_frame(self, metrics: dict[str, Any]) -> None: ...
    def add_compile_event(self, kind: str, reason: str | None, at: str | None) -> None: ...


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
