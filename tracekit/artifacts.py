"""Entries -> artifacts: one small parser per artifact kind, all behind one interface.

Each parser names the artifacts it wants (:attr:`ArtifactParser.names`), says whether it needs
the payload text (:attr:`ArtifactParser.needs_payload`), turns the payload into a value
(:meth:`ArtifactParser.parse`, raising :class:`ArtifactError` on anything it does not accept)
and hands the value to the per-rank model builder (:meth:`ArtifactParser.apply`). The reader's
loop only splits lines and dispatches; adding an artifact kind is adding one parser here.

Payloads are untrusted text: they are parsed with regular expressions and orjson, never eval'd.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import orjson

from tracekit.model import COLLECTIVE_TYPES, LONG_NAMES, CollectiveSize, Counts

if TYPE_CHECKING:
    from tracekit.reader import RankBuilder


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


class ArtifactParser:
    """The interface: which artifacts, whether the payload is needed, what is made of them."""

    names: ClassVar[frozenset[str]] = frozenset()
    needs_payload: ClassVar[bool] = True

    def parse(self, payload: str) -> Any:
        return payload

    def apply(self, builder: RankBuilder, name: str, value: Any, file: str, line: int) -> None:
        raise NotImplementedError


# --- pre_bucketing_fsdp_collectives -------------------------------------------------------------

_STR_LIST_RE = re.compile(r"\[\s*(?:'[^'\\]*'|\"[^\"\\]*\")(?:\s*,\s*(?:'[^'\\]*'|\"[^\"\\]*\"))*\s*\]|\[\s*\]")
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


class OutcomeParser(ArtifactParser):
    names = frozenset({"pre_bucketing_fsdp_collectives"})

    def parse(self, payload: str) -> Outcome:
        return parse_outcome(payload)

    def apply(self, builder, name, value, file, line):
        builder.add_outcome(value, file, line)


# --- pre_bucketing_collective_sizes[_after] -----------------------------------------------------


def parse_sizes(text: str) -> list[CollectiveSize]:
    """``[{"type": "AG", "size_mb": 0.25, "name": "all_gather_into_tensor"}, ...]``."""
    try:
        items = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise ArtifactError(f"sizes are not JSON: {e}") from None
    if not isinstance(items, list):
        raise ArtifactError("sizes are not a list")
    out = []
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


class SizesParser(ArtifactParser):
    names = frozenset({"pre_bucketing_collective_sizes", "pre_bucketing_collective_sizes_after"})

    def parse(self, payload: str) -> list[CollectiveSize]:
        return parse_sizes(payload)

    def apply(self, builder, name, value, file, line):
        builder.set_sizes(after=name.endswith("_after"), sizes=value)


# --- counters: graphs that ran post-grad passes, inductor cache hits ----------------------------


class CompiledGraphCounter(ArtifactParser):
    """``before_post_grad_graph``: one per graph that went through the post-grad passes.

    Summarize only counts it; replay also wants its text (the graph the outcome came from)."""

    names = frozenset({"before_post_grad_graph"})
    needs_payload = False

    def apply(self, builder, name, value, file, line):
        builder.count_compiled_graph(value)


class GraphTextParser(CompiledGraphCounter):
    """``before_post_grad_graph`` with its text kept, for :func:`tracekit.reader.graph_sources`."""

    needs_payload = True


class CacheHitCounter(ArtifactParser):
    """``fx_graph_cache_hit``: a graph that skipped the post-grad passes (so no bucketing logs)."""

    names = frozenset({"fx_graph_cache_hit"})
    needs_payload = False

    def apply(self, builder, name, value, file, line):
        builder.count_cache_hit()


# --- tracekit's own pass (bucketing.install()) --------------------------------------------------


class TracekitBucketsParser(ArtifactParser):
    """``tracekit_fsdp_buckets`` (json): marks the next outcome of the compile id as ours."""

    names = frozenset({"tracekit_fsdp_buckets"})

    def parse(self, payload: str) -> Any:
        try:
            return orjson.loads(payload)
        except orjson.JSONDecodeError as e:
            raise ArtifactError(f"tracekit_fsdp_buckets is not JSON: {e}") from None

    def apply(self, builder, name, value, file, line):
        builder.mark_tracekit(buckets=value)


class TracekitInputGraphParser(ArtifactParser):
    """``tracekit_fsdp_input_graph`` (string): the graph our pass was given, just before its
    outcome. Summarize only needs to know it was there; replay keeps the text."""

    names = frozenset({"tracekit_fsdp_input_graph"})
    needs_payload = False

    def apply(self, builder, name, value, file, line):
        builder.mark_tracekit(input_graph=value)


class TracekitInputGraphTextParser(TracekitInputGraphParser):
    needs_payload = True


#: The parsers summarize uses.
SUMMARY_PARSERS: tuple[ArtifactParser, ...] = (
    OutcomeParser(),
    SizesParser(),
    CompiledGraphCounter(),
    CacheHitCounter(),
    TracekitBucketsParser(),
    TracekitInputGraphParser(),
)

#: The parsers graph_sources uses: the same, with graph texts kept.
SOURCE_PARSERS: tuple[ArtifactParser, ...] = (
    OutcomeParser(),
    SizesParser(),
    GraphTextParser(),
    CacheHitCounter(),
    TracekitBucketsParser(),
    TracekitInputGraphTextParser(),
)


def by_name(parsers: tuple[ArtifactParser, ...]) -> dict[bytes, ArtifactParser]:
    """Artifact name (bytes, as it appears in the envelope) -> its parser."""
    table: dict[bytes, ArtifactParser] = {}
    for p in parsers:
        for n in p.names:
            table[n.encode()] = p
    return table


__all__ = [
    "COLLECTIVE_TYPES",
    "ArtifactError",
    "ArtifactParser",
    "Outcome",
    "SOURCE_PARSERS",
    "SUMMARY_PARSERS",
    "by_name",
    "parse_outcome",
    "parse_sizes",
]
