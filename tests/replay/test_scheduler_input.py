"""The graph replay gives torch's overlap scheduler at the recorded cap is the graph torch's
scheduler was given in the run: the log's ``overlap_scheduling_graph_before``, node for node, in
the same order, up to the names of the nodes the buckets made.

torch writes that artifact after its post-grad passes and its FSDP pre-bucketing, as it calls
its scheduler. The replay rebuilds the graph from ``before_post_grad_graph``, runs torch's
post-grad passes on it (:mod:`tracekit.replay.post_grad`), then our pass at the recorded cap in
torch's order (``torch_order``: :func:`bucketing.merge.sort_as_torch`). The scheduler times
every node in the order given before it sorts the graph, so the same graph in the same order is
the same schedule. Without either step the graph is another one (the tests below show both).
"""

from __future__ import annotations

import re

import pytest
from printed_graphs import canonical

from tests.conftest import FIXTURE_LOGS

torch = pytest.importorskip("torch")

def _release_of(scenario: str) -> str:
    from tracekit.read.reader import load

    (version,) = {r.torch_version for r in load(FIXTURE_LOGS / scenario).ranks}
    return version.split("+")[0]


#: the scenarios the running torch wrote (another release's passes make another graph), whose
#: graphs torch's scheduler ran on; tracekit_pass's were bucketed by our own pass in the run
SCENARIOS = sorted(
    p.name
    for p in FIXTURE_LOGS.iterdir()
    if p.is_dir()
    and p.name != "tracekit_pass"
    and not p.name.startswith("fsdp2")
    and _release_of(p.name) == torch.__version__.split("+")[0]
)


def _logged_inputs(scenario: str) -> list[str]:
    """Rank 0's ``overlap_scheduling_graph_before`` texts, in log order."""
    from fixtures.generate import _artifacts

    (log,) = sorted((FIXTURE_LOGS / scenario).glob("*rank_0_*"))
    return [p for n, p in _artifacts(log) if n == "overlap_scheduling_graph_before"]


def _replayed_input(src, table, post_grad: bool = True, torch_order: bool | None = None) -> str:
    import torch._inductor.config as inductor_config

    from bucketing.prebucket import pre_bucketed_copy
    from tracekit.replay.not_prebucketed_graphs import NotPrebucketedReplayer
    from tracekit.replay.replayer import GraphReplayer
    from tracekit.replay.results import ReplayOptions

    if not hasattr(src, "graph"):  # never pre-bucketed: the scheduler is given the graph as it is
        return NotPrebucketedReplayer(src).gm.print_readable(False)

    rp = GraphReplayer(src.text, ReplayOptions(groups=table), inference=src.inference, post_grad=post_grad)
    rp.register_groups()
    with inductor_config.patch({"aten_distributed_optimizations.bucket_mode": rp.planner.bucket_mode}):
        gm, _ = pre_bucketed_copy(
            rp.gm, rp.planner, src.graph.bucket_cap_mb, torch_order=rp.torch_order if torch_order is None else torch_order
        )
    return gm.print_readable(False)


def _sources(scenario: str):
    from tracekit.read.reader import graph_and_not_prebucketed_sources
    from tracekit.replay import process_groups

    table = process_groups.group_table([str(FIXTURE_LOGS / scenario)])
    srcs = graph_and_not_prebucketed_sources(str(FIXTURE_LOGS / scenario))
    return sorted((s for s in srcs if s.rank == 0), key=lambda s: s.graph_index), table


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_replay_gives_the_scheduler_the_graph_torch_gave_it(scenario):
    logged = _logged_inputs(scenario)
    srcs, table = _sources(scenario)
    # nested_waits: a forward compiled for inference, never pre-bucketed
    assert len(logged) == len(srcs) == (1 if scenario.startswith("nested_waits") else 2)
    assert all(s.inference == scenario.startswith("nested_waits") for s in srcs)
    for src, text in zip(srcs, logged, strict=True):
        assert canonical(_replayed_input(src, table)) == canonical(text), (scenario, src.graph_index)


def test_in_our_passs_own_order_it_is_another_graph():
    (_, bwd), table = _sources("hsdp_stock")
    _, logged = _logged_inputs("hsdp_stock")
    want = canonical(logged)
    ours = canonical(_replayed_input(bwd, table, torch_order=False))
    # the same statements: only their order differs. torch leaves the users of the all-gathers'
    # old waits where they were, before the bucket that now feeds them (its graph is sorted by
    # the scheduler, after it has timed the nodes in this order); our pass puts them after it
    assert ours != want and len(ours) == len(want)
    assert sorted(_op(ln) for ln in ours) == sorted(_op(ln) for ln in want)
    assert _used_before_defined(want) == ["n50"] and _used_before_defined(ours) == []


def _op(line: str) -> str:
    """A statement's op: ``torch.ops.aten.mm.default``, ``getitem`` (``x = n35[0]``), ``return``."""
    m = re.search(r"torch\.ops\.[\w.]+", line)
    return m.group(0) if m else "return" if line.startswith("return") else "getitem"


def _used_before_defined(lines: list[str]) -> list[str]:
    """The nodes a statement reads before the statement that makes them."""
    seen: set[str] = set()
    early = []
    for ln in lines:
        name, _, rhs = ln.partition(" = ")
        early += [n for n in re.findall(r"\bn\d+\b", rhs) if n not in seen and n not in early]
        seen.add(name.split(":")[0])
    return early


def test_an_inference_graph_goes_through_the_passes_as_one():
    """nested_waits compiled a forward for inference (its log has ``aot_inference_graph``):
    torch's post-grad passes reorder such a graph for locality first; taken for a training
    graph, it would be another graph."""
    from tracekit.replay.post_grad import rebuilt_as_scheduled

    (src,), _ = _sources("nested_waits")
    want = canonical(_logged_inputs("nested_waits")[0])
    assert src.inference
    for inference, same in ((True, True), (False, False)):
        gm, why = rebuilt_as_scheduled(src.text, src.symbol_hints, inference)
        assert why is None
        assert (canonical(gm.print_readable(False)) == want) is same
    logged, _ = rebuilt_as_scheduled(src.text, src.symbol_hints, True, post_grad=False)
    assert canonical(logged.print_readable(False)) != want  # the graph as logged: not yet reordered


def test_a_graph_torchs_passes_refuse_is_scheduled_as_logged_and_says_why(monkeypatch):
    from torch._inductor.fx_passes import overlap_scheduling, post_grad

    from tracekit.replay.post_grad import rebuilt_as_scheduled

    (fwd, _), _ = _sources("hsdp_stock")
    entry = overlap_scheduling.schedule_overlap_bucketing_from_inductor_configs

    def refuse(gm, is_inference):
        gm.meta["half_done"] = True  # a pass that had begun rewriting it
        raise RuntimeError("a pass that cannot take this graph")

    monkeypatch.setattr(post_grad, "post_grad_passes", refuse)
    gm, why = rebuilt_as_scheduled(fwd.text, fwd.symbol_hints, False)
    assert why == "torch's post-grad passes refused the rebuilt graph: RuntimeError: a pass that cannot take this graph"
    as_logged, none = rebuilt_as_scheduled(fwd.text, fwd.symbol_hints, False, post_grad=False)
    assert none is None and canonical(gm.print_readable(False)) == canonical(as_logged.print_readable(False))
    assert "half_done" not in gm.meta  # rebuilt again, not the graph the pass had begun on
    # torch's entry to its scheduler is put back, whatever happened
    assert overlap_scheduling.schedule_overlap_bucketing_from_inductor_configs is entry
