"""What the logs hold when no compiled graph has a bucketing outcome: the frames dynamo compiled.

A run with compiles but no ``pre_bucketing_fsdp_collectives`` outcome is not empty: each frame
compile (:class:`tracekit.model.FrameCompile`) says whether it compiled, fell back to eager at a
graph break, or failed, and the graph of a compiled region says which parameters it takes in.
Under FSDP2 (``fully_shard``), dynamo skips FSDP's hooks (graph breaks at
``torch/distributed/fsdp/_fully_shard/``): its all-gathers and reduce-scatters run in eager code,
one ``fully_shard`` unit at a time, and the compiled regions take in parameters already gathered.

- :func:`compiled_regions`: the frame compiles, ranks with identical ones together, and totals.
- :func:`holds_no_collective`: no compiled graph holds a collective; :func:`is_fsdp2`: the frame
  compiles show FSDP2; :func:`failed_frames`: the frame compiles that failed. Their sentences are
  :mod:`tracekit.render.compiled_regions_text`'.
"""

from __future__ import annotations

from typing import Any

from tracekit.model import COMPILED, EAGER, FAILED, FrameCompile, Run
from tracekit.model.rankset import format_ranks

#: Where FSDP2's code lives; a graph break there is dynamo skipping FSDP2's hooks.
FSDP2_PATH = "torch/distributed/fsdp/_fully_shard/"


def short_path(where: str | None) -> str | None:
    """A ``file:line`` as text: torch's files from ``torch/`` on (the part after
    ``site-packages/``), other files as written.

    >>> short_path("/usr/lib/python3.11/site-packages/torch/distributed/fsdp/_fully_shard/_fsdp_common.py:30")
    'torch/distributed/fsdp/_fully_shard/_fsdp_common.py:30'
    """
    if where is None:
        return None
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in where:
            return where.split(marker, 1)[1]
    return where


def frame_to_dict(f: FrameCompile) -> dict[str, Any]:
    return {
        "compile_id": f.compile_id,
        "name": f.name,
        "where": f.where,
        "status": f.status,
        "reason": f.reason,
        "break_at": short_path(f.break_at),
        "params": f.params,
        "param_bytes": f.param_bytes,
        "collectives": f.collectives,
        **({"fsdp2_module": f.fsdp2_module} if f.fsdp2_module else {}),
    }


def is_fsdp2_break(f: FrameCompile) -> bool:
    """A frame that broke (or failed) in FSDP2's code."""
    return f.break_at is not None and FSDP2_PATH in f.break_at.replace("\\", "/")


def compiled_regions(run: Run) -> dict[str, Any] | None:
    """The frame compiles of ``run``, ranks with identical ones in one group (in order of their
    first rank), with the counts of the first group: ``compiled``, ``eager``, ``failed``
    frames, ``param_bytes`` taken in by its compiled regions (None when one is not known),
    ``collectives`` in their graphs (of every group), ``fsdp2_breaks`` (frames that broke in
    FSDP2's code) and ``fsdp2_modules`` (compiled frames whose guards name a module type FSDP2
    made: ``fully_shard`` modules compiled on their own). None when no rank logged a frame compile."""
    groups: dict[tuple[FrameCompile, ...], list[int | None]] = {}
    for r in run.ranks:
        if r.frames:
            groups.setdefault(tuple(r.frames), []).append(r.rank)
    if not groups:
        return None
    frames = next(iter(groups))
    compiled = [f for f in frames if f.status == COMPILED]
    sizes = [f.param_bytes for f in compiled if f.has_graph]
    return {
        "groups": [
            {"ranks": format_ranks(ranks), "frames": [frame_to_dict(f) for f in fs]}
            for fs, ranks in groups.items()
        ],
        "compiled": len(compiled),
        "eager": sum(f.status == EAGER for f in frames),
        "failed": sum(f.status == FAILED for f in frames),
        "param_bytes": None if any(b is None for b in sizes) else sum(b for b in sizes if b is not None),
        "collectives": sum(f.collectives for fs in groups for f in fs if f.status == COMPILED),
        "fsdp2_breaks": sum(is_fsdp2_break(f) for f in frames),
        "fsdp2_modules": sum(f.status == COMPILED and f.fsdp2_module is not None for f in frames),
    }


def is_fsdp2(regions: dict[str, Any]) -> bool:
    """The frame compiles show FSDP2: a graph break in its code, or a compiled frame of a
    ``fully_shard`` module (``regions`` of an older document may lack ``fsdp2_modules``)."""
    return bool(regions["fsdp2_breaks"] or regions.get("fsdp2_modules"))


def holds_no_collective(regions: dict[str, Any]) -> bool:
    """No compiled graph holds a collective, so pre-bucketing has nothing to merge: some frame
    compiled and none holds one (none compiled is a failure's case, :func:`failed_frames`).
    Said by :func:`tracekit.render.compiled_regions_text.no_collective_text`."""
    return not regions["collectives"] and bool(regions["compiled"])


def failed_frames(regions: dict[str, Any]) -> list[dict[str, Any]]:
    """The frame compiles that failed (the first group's), said by
    :func:`tracekit.render.compiled_regions_text.failures_text`."""
    return [f for f in regions["groups"][0]["frames"] if f["status"] == FAILED]
