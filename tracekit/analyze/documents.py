"""Saved ``tracekit.summary`` documents: read from a file, checked, and turned back into a Run.

A document is untrusted input, as a log is: every value is checked before it is used, and what
is wrong with one is said in one line (:class:`InputError`, :class:`DocumentError`).

- :func:`sniff_json`: whether a file (plain or gzipped) holds JSON, not a compile log.
- :func:`load_json`: the JSON value of such a file.
- :func:`summary_major`, :func:`run_from_summary`: a ``tracekit.summary/1.x`` or ``/2.x``
  document checked and rebuilt into a Run (:func:`run_from_document`), as ``diff`` and
  ``report`` both judge one.
- :func:`document_world`, :func:`document_groups`, :func:`document_verdict`: the keys ``/2``
  added (``world``, ``groups``, ``verdict``) as the document has them, or derived from what a
  ``/1`` document holds (``ranks``, ``totals``, the divergence items): the verdict by the one
  verdict function, :func:`tracekit.analyze.verdict.verdict`. Rank sets may be lists of ranks
  or range strings (``"0-2,5"``): :func:`rank_set` reads both.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable
from typing import Any

import orjson

from tracekit.analyze.verdict import RunFacts, verdict
from tracekit.model import Diagnostics, Run
from tracekit.model.fields import rank_from_dict
from tracekit.model.findings import Verdict
from tracekit.model.rankset import MAX_RANK, format_ranks, rank_list, rank_members, rank_order
from tracekit.read.sources import GZIP_MAGIC

SUMMARY_PREFIX = "tracekit.summary/"
#: The summary majors this version reads: /1 (per rank) and /2 (ranks grouped by outcome).
SUPPORTED_SUMMARY_MAJORS = (1, 2)


class InputError(Exception):
    """An input that cannot be used; the message is one line meant for the user."""


class DocumentError(ValueError):
    """A JSON document that is not a ``tracekit.summary`` document."""


def sniff_json(path: str) -> Callable[..., Any] | None:
    """How to open the file (``open`` or ``gzip.open``) when its first non-space byte is ``{``
    (looked at through gzip when the file is gzipped): a JSON document, not a glog-prefixed
    compile log. None for anything else."""
    with open(path, "rb") as f:
        head = f.read(4096)
    opener: Callable[..., Any] = open
    if head[:2] == GZIP_MAGIC:
        opener = gzip.open
        with gzip.open(path, "rb") as f:
            head = f.read(4096)
    head = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    return opener if head[:1] == b"{" else None


def load_json(path: str, opener: Callable[..., Any]) -> Any:
    """The JSON value of the file at ``path``, opened with ``opener`` (:func:`sniff_json`);
    :class:`InputError` (``PATH: bad JSON summary: ...``, ``PATH: cannot read: ...``) when it
    cannot be read or is not JSON."""
    try:
        with opener(path, "rb") as f:
            return orjson.loads(f.read())
    except orjson.JSONDecodeError as e:
        raise InputError(f"{path}: bad JSON summary: {e}") from None
    except (OSError, EOFError) as e:
        raise InputError(f"{path}: cannot read: {e}") from None


def summary_major(schema: Any, path: str) -> int:
    """The major version of a ``tracekit.summary/MAJOR[.MINOR]`` schema string, or InputError."""
    if not isinstance(schema, str) or not schema.startswith(SUMMARY_PREFIX):
        raise InputError(
            f"{path}: JSON with schema {schema!r} is not a tracekit summary "
            f"(expected {SUMMARY_PREFIX}{SUPPORTED_SUMMARY_MAJORS[-1]})"
        )
    version = schema[len(SUMMARY_PREFIX) :]
    major = version.split(".", 1)[0]
    if not major.isdigit():
        raise InputError(f"{path}: unreadable summary schema version {schema!r}")
    return int(major)


def run_from_summary(doc: Any, path: str) -> Run:
    """A :class:`Run` rebuilt from a ``tracekit.summary/1.x`` or ``/2.x`` document; keys this
    version does not know are ignored, missing optional ones take their defaults."""
    if not isinstance(doc, dict) or "schema" not in doc:
        raise InputError(f'{path}: JSON without a "schema" key is not a tracekit summary')
    major = summary_major(doc["schema"], path)
    if major not in SUPPORTED_SUMMARY_MAJORS:
        readable = " and ".join(f"{SUMMARY_PREFIX}{m}.x" for m in SUPPORTED_SUMMARY_MAJORS)
        raise InputError(
            f"{path}: summary schema {doc['schema']!r} is not supported (this tracekit reads {readable})"
        )
    for key in ("ranks", "groups"):
        if not isinstance(doc.get(key) or [], list):
            raise InputError(f'{path}: bad summary: "{key}" is not a list')
    try:
        run = run_from_document(doc)  # the model keeps only the keys it knows
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise InputError(f"{path}: bad summary: {e}") from None
    problem = summary_problem(run)
    if problem:
        raise InputError(f"{path}: bad summary: {problem}")
    if not run.paths:
        run.paths = [path]
    return run


def summary_problem(run: Run) -> str:
    """What makes a rebuilt summary unusable (values of the wrong type), or "" when it is fine.
    A summary is untrusted input, like a log."""
    seen: set[Any] = set()
    for r in run.ranks:
        if r.rank is not None and (not isinstance(r.rank, int) or isinstance(r.rank, bool)):
            return f"rank {r.rank!r} is not an integer"
        if r.rank in seen:
            return f"rank {r.rank} appears twice"
        seen.add(r.rank)
        for g in r.graphs:
            if g.group_size is not None and not isinstance(g.group_size, int):
                return f"rank {r.rank} graph {g.label}: group_size {g.group_size!r}"
    return ""


def run_from_document(doc: Any) -> Run:
    """A Run back from a ``tracekit.summary/1`` or ``/2`` document (graphs, counters,
    diagnostics): per-rank entries when the document has them, else every rank of every group
    (``/2``'s default), each with the group's graphs."""
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith("tracekit.summary/"):
        raise DocumentError("not a tracekit.summary document (no 'schema': 'tracekit.summary/2')")
    try:
        if doc.get("ranks") is not None or "groups" not in doc:
            ranks = [rank_from_dict(r) for r in doc.get("ranks") or []]
        else:
            ranks = []
            by_role = mesh_roles(doc.get("mesh"))
            for grp in doc["groups"]:
                for rk in rank_members(str(grp["ranks"])):
                    own = own_group_names(grp, rk, by_role)
                    ranks.append(rank_from_dict({**own, "rank": rk, "files": []}))
            ranks.sort(key=lambda r: (r.rank is None, -1 if r.rank is None else r.rank))
        diag = Diagnostics()
        d = doc.get("diagnostics") or {}
        diag.counts = {str(k): int(v) for k, v in (d.get("counts") or {}).items()}
        diag.examples = list(d.get("examples") or [])
    except (KeyError, TypeError, ValueError) as e:
        raise DocumentError(f"malformed summary document: {e}") from None
    w = doc.get("world") or {}
    dup_v = w.get("duplicated") or []
    try:
        dup: list[int | None] = [r for r in rank_list(dup_v) if isinstance(r, int)]
    except (TypeError, ValueError):
        raise DocumentError("malformed summary document: world.duplicated is not a rank set") from None
    return Run(paths=list(doc.get("paths", [])), ranks=ranks, diagnostics=diag, duplicated=dup)


# --- each rank's own group names in a grouped mesh document ---------------------------------------


def mesh_roles(mesh: Any) -> dict[str, tuple[str, frozenset[int]]]:
    """Group name -> (role, members) of the groups of a document's ``mesh`` section whose role
    has more than one group (the groups a rank group's ranks may differ by); ``{}`` when the
    document has no usable mesh section. Unreadable groups are left out."""
    groups = mesh.get("groups") if isinstance(mesh, dict) else None
    out: dict[str, tuple[str, frozenset[int]]] = {}
    for g in groups if isinstance(groups, list) else []:
        if not isinstance(g, dict) or not isinstance(g.get("role"), str) or g["role"] == "unknown":
            continue
        members = rank_set(g.get("members"))
        out[str(g.get("name"))] = (g["role"], frozenset(r for r in members if r is not None))
    count: dict[str, int] = {}
    for role, _ in out.values():
        count[role] = count.get(role, 0) + 1
    return {n: v for n, v in out.items() if count[v[0]] > 1}


def own_group_names(
    grp: dict[str, Any], rank: int | None, by_role: dict[str, tuple[str, frozenset[int]]]
) -> dict[str, Any]:
    """A rank group of a mesh document as rank ``rank`` logged it: the group holds its first
    rank's group names (ranks 0-3 of an HSDP run on shard group ``3``, though ranks 2-3 are on
    ``4``); each name of a group ``rank`` is not a member of becomes the name of the group of
    the same role that has it (``by_role``: :func:`mesh_roles`), in ``fsdp_groups`` and in the
    collectives of the final schedules. Names of no such group stay as they are."""
    if not by_role or rank is None:
        return grp
    mine = {role: n for n, (role, members) in by_role.items() if rank in members}

    def name(n: Any) -> Any:
        if not isinstance(n, str) or n not in by_role:
            return n
        role, members = by_role[n]
        return n if rank in members else mine.get(role, n)

    def final(f: Any) -> Any:
        if not isinstance(f, dict) or not isinstance(f.get("collectives"), list):
            return f
        cs = [{**c, "group": name(c.get("group"))} if isinstance(c, dict) else c for c in f["collectives"]]
        return {**f, "collectives": cs}

    def graph(g: Any) -> Any:
        if not isinstance(g, dict):
            return g
        out = {**g, "final": final(g.get("final"))}
        if isinstance(g.get("fsdp_groups"), list):
            out["fsdp_groups"] = [name(n) for n in g["fsdp_groups"]]
        return out

    out = {**grp}
    if isinstance(grp.get("graphs"), list):
        out["graphs"] = [graph(g) for g in grp["graphs"]]
    if isinstance(grp.get("schedules_without_outcome"), list):
        out["schedules_without_outcome"] = [final(f) for f in grp["schedules_without_outcome"]]
    return out


# --- the keys of the current schema, for an older document -------------------------------------


def rank_set(value: Any) -> set[int | None]:
    """The ranks of a rank set given as a list (``[0, 1, 2]``) or a range string (``"0-2"``);
    ``None`` stands for a rank-less log (``-``). Unreadable parts are dropped, and a string
    naming ranks beyond :data:`tracekit.model.rankset.MAX_RANK` reads as none (nothing unbounded)."""
    if isinstance(value, str):
        try:
            return set(rank_members(value))
        except ValueError:
            return set()
    if isinstance(value, (list, tuple)):
        return {r for r in value if r is None or (isinstance(r, int) and not isinstance(r, bool))}
    return set()


def _graphs_without_place(graphs: list[dict[str, Any]]) -> bytes:
    """Canonical text of a rank's graphs, without where they were read (file, line)."""
    return orjson.dumps(
        [{k: v for k, v in g.items() if k not in ("file", "line")} for g in graphs],
        option=orjson.OPT_SORT_KEYS,
    )


def document_groups(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """``doc["groups"]`` when present; else ranks with identical graphs grouped from
    ``doc["ranks"]`` (largest group first); ``[]`` when the document has neither."""
    groups = doc.get("groups")
    if isinstance(groups, list):
        return [g for g in groups if isinstance(g, dict)]
    ranks = doc.get("ranks")
    if not isinstance(ranks, list):
        return []
    found: dict[bytes, dict[str, Any]] = {}
    for r in ranks:
        graphs = r.get("graphs") or []
        g = found.setdefault(_graphs_without_place(graphs), {"ranks": [], "graphs": graphs})
        g["ranks"].append(r.get("rank"))
    out = [
        {"ranks": format_ranks(g["ranks"]), "count": len(g["ranks"]), "graphs": g["graphs"]}
        for g in found.values()
    ]
    out.sort(key=lambda g: -g["count"])
    return out


def document_world(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc["world"]`` when present; else what ``ranks`` tells, marked ``derived``: the ranks
    found, and as missing the gaps below the highest rank (``expected`` unknown; ``missing``
    None when the highest rank is beyond :data:`tracekit.model.rankset.MAX_RANK`)."""
    world = doc.get("world")
    if isinstance(world, dict):
        return world
    ranks = doc.get("ranks")
    if not isinstance(ranks, list):
        n = (doc.get("totals") or {}).get("ranks")
        return {"expected": None, "found": n, "ranks": None, "missing": [], "duplicated": [], "derived": True}
    found = [r.get("rank") for r in ranks]
    nums = [r for r in found if isinstance(r, int)]
    top = max(nums, default=-1)
    missing = sorted(set(range(top + 1)) - set(nums)) if top < MAX_RANK else None
    return {
        "expected": None,
        "found": len(found),
        "ranks": format_ranks(found),
        "missing": missing,
        "duplicated": [],
        "derived": True,
    }


def differing_ranks(doc: dict[str, Any]) -> str:
    """Every rank blamed by a divergence, schedule-divergence or compile-divergence item (a tie
    blames no one), as ranges."""
    out: set[int | None] = set()
    for key in ("divergence", "schedule_divergence", "compile_divergence"):
        for item in doc.get(key) or []:
            if isinstance(item, dict) and item.get("majority", True):
                out |= rank_set(item.get("ranks"))
    return format_ranks(out)


def _items(doc: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The items of ``doc[key]`` as the verdict reads them: dicts, with their rank sets as
    sorted lists and a compile id (None when the document has none)."""
    return [
        {
            **d,
            "compile_id": d.get("compile_id"),
            "ranks": sorted(rank_set(d.get("ranks")), key=rank_order),
        }
        for d in doc.get(key) or []
        if isinstance(d, dict)
    ]


def document_verdict(doc: dict[str, Any], world: dict[str, Any]) -> dict[str, Any] | Verdict:
    """``doc["verdict"]`` when present (a dict, its words the document's); else the
    :class:`~tracekit.model.findings.Verdict` of what an older document holds (its divergence
    items, totals, did-nothing graphs, compiled regions, mesh findings and ``world``,
    :func:`document_world`), by :func:`tracekit.analyze.verdict.verdict`: for a document
    summarize writes, the verdict it holds, once said
    (:func:`tracekit.render.summary_words.verdict_dict`)."""
    v = doc.get("verdict")
    if isinstance(v, dict) and isinstance(v.get("status"), str):
        return {**v, "text": str(v.get("text") or v["status"])}
    t: Any = doc.get("totals") if isinstance(doc.get("totals"), dict) else {}
    missing = rank_set(world.get("missing"))
    w = {
        "expected": world.get("expected"),
        "missing": format_ranks(missing),
        "missing_count": len(missing),
        "duplicated": format_ranks(r for r in rank_set(world.get("duplicated")) if r is not None),
    }
    graphs = [g for grp in document_groups(doc) for g in grp.get("graphs") or [] if isinstance(g, dict)]
    counts = (doc.get("diagnostics") or {}).get("counts") or {}
    facts = RunFacts(
        ranks=t.get("ranks") if isinstance(t.get("ranks"), int) else len(doc.get("ranks") or []),
        graph_keys=frozenset((g.get("compile_id"), g.get("graph_index")) for g in graphs),
        caps=tuple(sorted({c for g in graphs if isinstance(c := g.get("bucket_cap_mb"), (int, float))})),
        regions=doc["compiled_regions"] if isinstance(doc.get("compiled_regions"), dict) else None,
        bad_inputs=sum(n for n in counts.values() if isinstance(n, int)),
    )
    other = _items(doc, "schedule_divergence") + _items(doc, "compile_divergence")
    on_mesh = [d for d in doc.get("mesh_not_prebucketed") or [] if isinstance(d, dict)]
    return verdict(facts, w, _items(doc, "divergence"), t, other, _items(doc, "did_nothing"), on_mesh)
