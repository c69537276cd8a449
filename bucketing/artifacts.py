"""``trace_structured`` artifacts the pass writes into a TORCH_TRACE log.

In this order, for each graph with FSDP groups (none for a graph without):

1. ``tracekit_fsdp_input_graph`` (string, always): the graph the pass received, as
   ``gm.print_readable(print_output=False, include_stride=True, include_device=True)``, so a
   run made with this pass can be replayed exactly.
2. ``pre_bucketing_collective_sizes`` (json, only when torch's
   ``aten_distributed_optimizations.pre_bucketing_fsdp_collectives_verbose`` is on): torch's
   payload, ``[{"type": "AG"|"RS"|"AR", "size_mb": 0.25, "name": "all_gather_into_tensor"}, ...]``
   (AG: output size, RS/AR: input size, MB rounded to 3 decimals, graph order per kind).
3. ``tracekit_fsdp_buckets`` (json, always): the bucket composition::

       {"schema": "tracekit.buckets/1",
        "fsdp_groups": ["0"], "group_size": 4, "cap_mb": 27.38, "cap_source": "saturation",
        "mode": "default",
        "buckets": {"AG": [[{"name": "all_gather_into_tensor", "size_mb": 1.0, "bytes": 1048576},
                            ...], ...],
                    "RS": [...], "AR": [...]}}

   ``cap_source`` is one of "override", "saturation", "floor", "ceiling", "fallback". Each
   bucket lists the original collectives merged into it, in bucket order; ``size_mb`` is
   rounded to 3 decimals and ``bytes`` is the exact size compared with the cap
   (max of input and output bytes). Only buckets of two or more collectives appear.
4. ``pre_bucketing_collective_sizes_after`` (json, verbose only): as 2, after merging.
5. ``pre_bucketing_fsdp_collectives`` (string, always): torch's line, byte for byte, e.g.
   ``fsdp_groups=['0'], group_size=4, nNodes=1, bucket_cap_mb=27.4, all_gather 12->1, reduce_scatter 0->0, all_reduce 0->0``.
"""

from __future__ import annotations

import json
from collections.abc import Callable

INPUT_GRAPH = "tracekit_fsdp_input_graph"
SIZES = "pre_bucketing_collective_sizes"
BUCKETS = "tracekit_fsdp_buckets"
SIZES_AFTER = "pre_bucketing_collective_sizes_after"
SUMMARY = "pre_bucketing_fsdp_collectives"


def emit(name: str, encoding: str, payload_fn: Callable[[], str]) -> None:
    """Write one artifact entry; ``payload_fn`` runs only when structured tracing is on."""
    from torch._logging import trace_structured

    trace_structured(
        "artifact",
        metadata_fn=lambda: {"name": name, "encoding": encoding},
        payload_fn=payload_fn,
    )


def emit_json(name: str, payload_fn: Callable[[], object]) -> None:
    """Write a JSON artifact (one line, like torch's size artifacts)."""
    emit(name, "json", lambda: json.dumps(payload_fn()))


def emit_string(name: str, payload_fn: Callable[[], str]) -> None:
    """Write a string artifact."""
    emit(name, "string", payload_fn)
