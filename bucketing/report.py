"""What the pre-bucketing pass did (or would do), as plain data."""

from __future__ import annotations

from dataclasses import dataclass, field

from bucketing.sizes import round_mb

REPORT_SCHEMA = "tracekit.bucketing_report/1"
BUCKETS_SCHEMA = "tracekit.buckets/1"


@dataclass
class BucketMember:
    """One original collective that went into a bucket."""

    name: str
    size_mb: float  # rounded to 3 decimals, as in torch's size artifacts
    bytes: int  # exact size the cap is compared against: max(input, output) bytes


#: Why a collective is, or is not, in a bucket (:attr:`Decision.reason`).
REASONS = (
    "bucketed",  # merged with others
    "not_fsdp",  # an all-gather that does not derive from exactly one placeholder
    "rs_not_to_output",  # a reduce-scatter whose wait does not reach the output through 1-input nodes
    "summed_rs",  # a reduce-scatter whose wait is summed with another's: left to the dedup pass
    "other_group",  # not on an FSDP group, or its neighbours are on another group
    "dtype_break",  # its neighbours have another dtype (default mode keys by group and dtype)
    "reduce_op_break",  # its neighbours have another reduce op
    "over_cap",  # joining its neighbours' bucket would pass the cap
    "depends_on_bucket",  # an input derives from a collective in the open bucket (or the reverse)
    "only_one",  # the only candidate of its kind: nothing to merge with
    "no_single_wait",  # the collective is not used by exactly one wait
    "no_fsdp_group",  # the graph has no FSDP all-gather, so no FSDP group: the pass leaves it all
)


@dataclass
class Decision:
    """The planner's decision for one collective of the graph: why it is, or is not, in a bucket.

    ``bucket`` is its bucket's index among the kind's buckets (None when it stays alone);
    ``needed_mb`` (``over_cap`` only) the size of the smallest bucket it failed to join.
    """

    name: str
    kind: str  # "AG" | "RS" | "AR"
    size_mb: float  # as torch reports it: AG output, RS/AR input
    dtype: str  # "f32", "bf16", ... (torch's graph abbreviations)
    group: str
    reason: str
    detail: str
    bucket: int | None = None
    needed_mb: float | None = None

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "size_mb": self.size_mb,
            "dtype": self.dtype,
            "group": self.group,
            "bucket": self.bucket,
            "reason": self.reason,
            "detail": self.detail,
            "needed_mb": self.needed_mb,
        }


@dataclass
class BucketingReport:
    """Outcome of :func:`bucketing.pre_bucket_fsdp_collectives` or :func:`bucketing.plan_fsdp_buckets`.

    ``counts_before`` / ``counts_after`` and ``sizes_before`` / ``sizes_after`` cover every
    collective of each kind ("AG", "RS", "AR") on the FSDP groups, like torch's artifacts;
    ``buckets`` lists, per kind, the buckets of two or more original collectives that were (or
    would be) merged. ``rewritten`` is False for a plan or when the graph was left unchanged
    (then ``skipped_reason`` says why). In a plan, ``sizes_after`` names a merged bucket by its
    first member with a ``+N`` suffix (the rewrite gives new node names).
    """

    fsdp_groups: list[str] = field(default_factory=list)
    group_size: int | None = None
    n_nodes: int = 1
    cap_mb: float | None = None
    cap_source: str | None = None
    mode: str = "default"
    counts_before: dict[str, int] = field(default_factory=dict)
    counts_after: dict[str, int] = field(default_factory=dict)
    sizes_before: list[dict] = field(default_factory=list)
    sizes_after: list[dict] = field(default_factory=list)
    buckets: dict[str, list[list[BucketMember]]] = field(default_factory=dict)
    rewritten: bool = False
    skipped_reason: str | None = None
    bucket_mode: str = "default"  # inductor's aten_distributed_optimizations.bucket_mode (AG keys)
    decisions: list[Decision] = field(default_factory=list)  # filled by FsdpPlanner.plan(explain=True)

    def summary_line(self) -> str:
        """The text of torch's ``pre_bucketing_fsdp_collectives`` artifact, byte for byte."""
        counts = ", ".join(
            f"{long} {self.counts_before.get(kind, 0)}->{self.counts_after.get(kind, 0)}"
            for kind, long in (("AG", "all_gather"), ("RS", "reduce_scatter"), ("AR", "all_reduce"))
        )
        return (
            f"fsdp_groups={list(self.fsdp_groups)}, group_size={self.group_size}, "
            f"nNodes={self.n_nodes}, bucket_cap_mb={self.cap_mb:.1f}, {counts}"
        )

    def bucket_sizes_mb(self) -> dict[str, list[float]]:
        """Per kind, each bucket's total size in MB (sum of exact member bytes, 3 decimals)."""
        return {
            kind: [round_mb(sum(m.bytes for m in bucket)) for bucket in buckets]
            for kind, buckets in self.buckets.items()
        }

    def buckets_payload(self) -> dict:
        """The ``tracekit_fsdp_buckets`` artifact payload (see :mod:`bucketing.artifacts`)."""
        return {
            "schema": BUCKETS_SCHEMA,
            "fsdp_groups": list(self.fsdp_groups),
            "group_size": self.group_size,
            "cap_mb": self.cap_mb,
            "cap_source": self.cap_source,
            "mode": self.mode,
            "buckets": {
                kind: [
                    [{"name": m.name, "size_mb": m.size_mb, "bytes": m.bytes} for m in bucket]
                    for bucket in buckets
                ]
                for kind, buckets in self.buckets.items()
            },
        }

    def to_dict(self) -> dict:
        """A JSON-ready dict of the whole report."""
        return {
            "schema": REPORT_SCHEMA,
            "fsdp_groups": list(self.fsdp_groups),
            "group_size": self.group_size,
            "n_nodes": self.n_nodes,
            "cap_mb": self.cap_mb,
            "cap_source": self.cap_source,
            "mode": self.mode,
            "counts_before": dict(self.counts_before),
            "counts_after": dict(self.counts_after),
            "sizes_before": [dict(s) for s in self.sizes_before],
            "sizes_after": [dict(s) for s in self.sizes_after],
            "buckets": self.buckets_payload()["buckets"],
            "rewritten": self.rewritten,
            "skipped_reason": self.skipped_reason,
            "bucket_mode": self.bucket_mode,
            "decisions": [d.to_dict() for d in self.decisions],
        }
