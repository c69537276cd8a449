"""The bucket members a run recorded, per outcome: what ``tracekit explain`` checks its buckets against.

Torch's merges log ``fx_bucketing_passes_all_gather_buckets`` / ``..._reduce_scatter_buckets``
(``str()`` of a list of node lists, e.g. ``[[all_gather_into_tensor, all_gather_into_tensor_1]]``)
only when they merge something; our pass logs ``tracekit_fsdp_buckets`` (JSON). For each
``pre_bucketing_fsdp_collectives`` outcome, the artifacts of the same rank and compile id logged
since that graph's ``before_post_grad_graph`` belong to it (overlap scheduling's own bucketing
comes after the outcome, so it never attaches to the wrong graph).

:func:`recorded_buckets` gives ``{(rank, compile_id, graph_index): {"AG": [[names]] | None,
"RS": ...}}``; a kind is None when the log cannot tell (no artifact, yet the counts say that
something merged). Payloads are parsed with regular expressions and orjson only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import orjson

from tracekit.artifacts import ArtifactError, parse_outcome
from tracekit.model import Diagnostics
from tracekit.reader import iter_entries

TORCH_BUCKETS = {
    "fx_bucketing_passes_all_gather_buckets": "AG",
    "fx_bucketing_passes_reduce_scatter_buckets": "RS",
}
OURS = "tracekit_fsdp_buckets"
GRAPH = "before_post_grad_graph"
OUTCOME = "pre_bucketing_fsdp_collectives"
_WANTED = frozenset({*TORCH_BUCKETS, OURS, GRAPH, OUTCOME})
_BUCKET_RE = re.compile(r"\[([^\[\]]*)\]")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_LONG = {"AG": "all_gather", "RS": "reduce_scatter"}

Key = tuple  # (rank, compile_id, graph_index)


def parse_torch_buckets(text: str) -> list[list[str]]:
    """``[[a, b], [c, d, e]]`` -> ``[["a", "b"], ["c", "d", "e"]]``; ArtifactError otherwise."""
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        raise ArtifactError(f"not a list of buckets: {text[:80]!r}")
    buckets = []
    for inner in _BUCKET_RE.findall(body[1:-1]):
        names = [n.strip() for n in inner.split(",") if n.strip()]
        if not all(_NAME_RE.match(n) for n in names):
            raise ArtifactError(f"bucket with a name that is not a node name: {inner[:80]!r}")
        buckets.append(names)
    return buckets


def _ours(text: str) -> dict[str, list[list[str]]]:
    try:
        doc = orjson.loads(text)
        return {k: [[str(m["name"]) for m in b] for b in doc["buckets"][k]] for k in ("AG", "RS", "AR")}
    except (orjson.JSONDecodeError, KeyError, TypeError) as e:
        raise ArtifactError(f"tracekit_fsdp_buckets without buckets: {e}") from None


def recorded_buckets(files: Iterable[str], diagnostics: Diagnostics | None = None) -> dict[Key, dict]:
    """Recorded bucket members per outcome of ``files`` (see the module docstring)."""
    diag = diagnostics if diagnostics is not None else Diagnostics()
    out: dict[Key, dict] = {}
    for path in files:
        pending: dict[tuple, dict] = {}
        index: dict[tuple, int] = {}
        entries = iter_entries(path, lambda t, n: t == "artifact" and n in _WANTED, diagnostics=diag,
                               payload_for=lambda t, n: n != GRAPH)
        for e in entries:
            where = (e.rank, e.compile_id or "-")
            name = e.artifact_name
            try:
                if name == GRAPH:
                    pending[where] = {}
                elif name in TORCH_BUCKETS:
                    pending.setdefault(where, {})[TORCH_BUCKETS[name]] = parse_torch_buckets(e.payload or "")
                elif name == OURS:
                    pending.setdefault(where, {}).update(_ours(e.payload or ""))
                else:
                    outcome = parse_outcome(e.payload or "")
                    got = pending.pop(where, {})
                    i = index.get(where, 0)
                    index[where] = i + 1
                    kinds = {}
                    for kind, long in _LONG.items():
                        counts = outcome.collectives[long]
                        kinds[kind] = got.get(kind, [] if counts.before == counts.after else None)
                    out[(e.rank, where[1], i)] = kinds
            except ArtifactError as err:
                diag.add("bad_artifact", path, e.line, str(err)[:120])
    return out
