"""Our memory walk asks, per storage, about its last use in the walk's order only
(tracekit.replay.overlap_schedule._last_uses), with the figures of torch's MemoryTracker asking
about every use: on the four graphs of overlap_cap_a and spmd_auto, pre-bucketed by our pass at
0.1 MB and at 1,024 MB (one bucket per kind: a buffer with up to 20 uses), walked in graph
order and in a second order (each node as late as its first user needs it; nodes the output
does not need are left out, so their storages are never freed)."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURE_LOGS

pytest.importorskip("torch")

# (scenario, graph, cap MB) -> (nodes after the pass, peak bytes in graph order, most uses of a storage)
CASES = {
    ("overlap_cap_a", 0, 0.1): (45, 7340032, 2),
    ("overlap_cap_a", 0, 1024.0): (65, 13107200, 14),
    ("overlap_cap_a", 1, 0.1): (87, 8912900, 6),
    ("overlap_cap_a", 1, 1024.0): (116, 15728644, 14),
    ("spmd_auto", 0, 0.1): (85, 249308, 8),
    ("spmd_auto", 0, 1024.0): (83, 526536, 18),
    ("spmd_auto", 1, 0.1): (137, 388564, 9),
    ("spmd_auto", 1, 1024.0): (141, 656496, 20),
}

# (scenario, graph, cap MB) -> nodes that allocate or free, in graph order and in the late order
# (a node the late order leaves out is never scheduled)
EVENTS = {
    ("overlap_cap_a", 0, 0.1): [45, 45],
    ("overlap_cap_a", 0, 1024.0): [44, 44],
    ("overlap_cap_a", 1, 0.1): [87, 86],
    ("overlap_cap_a", 1, 1024.0): [78, 77],
    ("spmd_auto", 0, 0.1): [64, 64],
    ("spmd_auto", 0, 1024.0): [56, 56],
    ("spmd_auto", 1, 0.1): [109, 106],
    ("spmd_auto", 1, 1024.0): [97, 94],
}


def _bucketed(scenario: str, index: int, cap: float):
    from bucketing import pre_bucket_fsdp_collectives
    from tracekit.read.reader import graph_sources
    from tracekit.replay.overlap_schedule import copy_graph
    from tracekit.replay.replayer import GraphReplayer
    from tracekit.replay.results import ReplayOptions

    srcs = [s for s in graph_sources([FIXTURE_LOGS / scenario]) if s.rank in (0, None)]
    rp = GraphReplayer(srcs[index].text, ReplayOptions())
    rp.register_groups()
    gm = copy_graph(rp.gm)
    pre_bucket_fsdp_collectives(gm, bucket_cap_mb=cap, recompile=False, planner=rp.planner)
    return gm


def _late_order(gm) -> list:
    """Each node placed just before the first node that needs it, from the output back."""
    out: list = []
    seen: set = set()

    def place(n) -> None:
        stack = [(n, False)]
        while stack:
            node, ready = stack.pop()
            if ready:
                out.append(node)
                continue
            if node in seen:
                continue
            seen.add(node)
            stack.append((node, True))
            stack.extend((i, False) for i in reversed(node.all_input_nodes) if i not in seen)

    place(gm.graph.output_node())
    return out


def _walk(tracker, order) -> list[int]:
    got = []
    for n in order:
        tracker.schedule_node(n)
        got.append(tracker.current_memory_bytes)
    return got


@pytest.mark.parametrize(("scenario", "index", "cap"), list(CASES))
def test_the_walk_asks_about_last_uses_with_every_use_s_figures(scenario, index, cap):
    from tracekit.replay.overlap_schedule import memory_walk

    class Unscheduled:  # no scheduler's map: each tracker makes its own
        memory_tracker = None

    nodes, peak, most_uses = CASES[(scenario, index, cap)]
    gm = _bucketed(scenario, index, cap)
    assert len(gm.graph.nodes) == nodes
    for order in (list(gm.graph.nodes), _late_order(gm)):
        ours = memory_walk(gm, Unscheduled(), order)
        every = memory_walk(gm, Unscheduled())
        assert max(len(u) for u in every.alias_tracker.storage_to_uses.values()) == most_uses
        assert max(len(u) for u in ours.alias_tracker.storage_to_uses.values()) == 1
        assert _walk(ours, order) == _walk(every, order)
    assert max(_walk(memory_walk(gm, Unscheduled(), list(gm.graph.nodes)), list(gm.graph.nodes))) == peak


@pytest.mark.parametrize(("scenario", "index", "cap"), list(CASES))
def test_only_the_nodes_that_allocate_or_free_go_through_the_tracker(scenario, index, cap):
    """schedule()'s walk hands the tracker only the nodes _walk_events names (they allocate a
    storage or are the last use of one) and adds the others to its scheduled set: the same
    bytes after every node as torch's tracker asking about every node and every use."""
    from tracekit.replay.overlap_schedule import _walk_events, memory_walk

    class Unscheduled:
        memory_tracker = None

    gm = _bucketed(scenario, index, cap)
    sizes = []
    for order in (list(gm.graph.nodes), _late_order(gm)):
        ours = memory_walk(gm, Unscheduled(), order)
        events = _walk_events(ours)
        assert events is not None
        got = []
        for n in order:
            if n in events:
                ours.schedule_node(n)
            else:
                ours.scheduled.add(n)
            got.append(ours.current_memory_bytes)
        assert got == _walk(memory_walk(gm, Unscheduled()), order)
        sizes.append(len(events & set(order)))
    assert sizes == EVENTS[(scenario, index, cap)]


@pytest.mark.parametrize(("scenario", "index", "cap"), list(CASES))
def test_byte_changes_give_the_tracker_s_bytes_after_every_node(scenario, index, cap):
    """schedule()'s walk adds byte_changes' figure per node instead of stepping torch's
    tracker: the same bytes in use after every node as the tracker asking about every node and
    every use, in graph order and in the late order (whose left-out uses keep storages live);
    a node that neither allocates nor frees has no entry."""
    from tracekit.replay.overlap_schedule import byte_changes, memory_walk

    class Unscheduled:
        memory_tracker = None

    gm = _bucketed(scenario, index, cap)
    peaks = []
    for order in (list(gm.graph.nodes), _late_order(gm)):
        ours = memory_walk(gm, Unscheduled())
        start = ours.current_memory_bytes
        changes = byte_changes(ours, order)
        assert changes is not None
        assert all(changes.values())
        got, cur = [], start
        for n in order:
            cur += changes.get(n, 0)
            got.append(cur)
        assert got == _walk(memory_walk(gm, Unscheduled()), order)
        peaks.append(max(got))
    assert peaks[0] == CASES[(scenario, index, cap)][1]


def test_byte_changes_leave_to_the_tracker_what_they_cannot_read():
    """With a storage used before it is live, or a tracker without torch's storage map,
    byte_changes answers None: the tracker walks."""
    from tracekit.replay.overlap_schedule import byte_changes, memory_walk

    class Unscheduled:
        memory_tracker = None

    gm = _bucketed("spmd_auto", 0, 0.1)
    order = list(gm.graph.nodes)
    tracker = memory_walk(gm, Unscheduled())
    assert byte_changes(tracker, order) is not None
    tracker.current_live_storages = set()  # the placeholders' storages not live: a use asserts
    assert byte_changes(tracker, order) is None
    assert byte_changes(Unscheduled(), order) is None
