"""Equal values are one object from the moment a file is built (issue 21: memory grows with
what is distinct, not with how many times it repeats).

- :class:`tracekit.read.interning.BuildMemo`: a long log's graphs of one schedule share its counts
  and collectives (and of the same size lists, one ``Sizes``) in the builder, not only once the files are merged (and a read's files
  share one memo).
- :class:`tracekit.read.interning.Interner`: the merge knows a shared value by a key made of its
  contents; what it gives is the value the key gives.

Logs are the spmd_auto fixture's rank 0, cut to the entries summarize reads (bench/make_ranks.py
--small), repeated with new compile ids (bench/make_large_log.py), written at test time; bytes are counted with tracemalloc, never timed.
"""

from __future__ import annotations

import gc
import pickle
import tracemalloc

import pytest

from conftest import FIXTURE_LOGS, bench_module
from tracekit.model import Diagnostics
from tracekit.model.fields import rank_to_dict
from tracekit.read.merge import merge_files
from tracekit.read.pairing import FileBuilder, build_file
from tracekit.read.parsers import SUMMARY_PARSERS
from tracekit.read.reader import load
from tracekit.read.segments import Segment, read_segment
from tracekit.read.sources import find_logs

make_large_log = bench_module("make_large_log")
make_ranks = bench_module("make_ranks")

RUN = FIXTURE_LOGS / "spmd_auto"
#: Bytes the builder holds a graph of a long log, until the file's result is made (measured:
#: 372; before the builder shared a schedule's collectives and sizes: 820, a list of
#: collectives and a Sizes a graph; with the collectives alone shared: ~420).
BUILT_PER_GRAPH = 410


@pytest.fixture(scope="module")
def small_rank0(tmp_path_factory):
    """Rank 0 of spmd_auto with only the entries summarize reads (8.7 KB, not 0.7 MB)."""
    d = tmp_path_factory.mktemp("small")
    make_ranks.make_ranks(d, 1, base=RUN, small=True)
    return next(d.glob("dedicated_log_torch_trace_rank_0_*.log"))


def _long_log(tmp_path, source, copies: int):
    out = tmp_path / f"long_{copies}.log"
    make_large_log.make_large_log([source], out, copies * source.stat().st_size)
    [lg] = find_logs([str(out)], Diagnostics())
    return lg


def _collective_rows(final):
    return [(c.kind, c.op, c.group, c.group_size, c.bytes, c.est_ms, c.dtype) for c in final.collectives]


def test_a_long_logs_graphs_share_their_schedules_collectives_as_the_file_is_built(tmp_path, small_rank0):
    lg = _long_log(tmp_path, small_rank0, 40)
    res = build_file(lg, [read_segment(Segment(lg))], SUMMARY_PARSERS)  # no merge
    finals = [g.final for g in res.graphs]
    # 42 copies: the torch_version entry is written once, so more fit in 40 files' bytes
    assert len(finals) == 84 and all(f is not None for f in finals)
    assert len({f.compile_id for f in finals}) == 42  # a forward and a backward a copy
    # one list of collectives and one of counts a position (forward, backward), not one a graph
    by_position = {p: [f for f in finals if f.position == p] for p in (0, 1)}
    for p, fs in by_position.items():
        assert len(fs) == 42
        assert len({id(f.collectives) for f in fs}) == 1 and len({id(f.counts) for f in fs}) == 1
    assert by_position[0][0].collectives is not by_position[1][0].collectives
    # and one Sizes a graph index (forward, backward), with its lists
    for i in (0, 1):
        assert len({id(g.sizes_mb) for g in res.graphs if g.graph_index == i}) == 1
    assert res.graphs[0].sizes_mb is not res.graphs[1].sizes_mb
    # the values are those of one copy read alone
    [one] = find_logs([str(small_rank0)], Diagnostics())
    alone = build_file(one, [read_segment(Segment(one))], SUMMARY_PARSERS)
    for g, a in zip(res.graphs[:2], alone.graphs):
        assert _collective_rows(g.final) == _collective_rows(a.final)
        assert g.final.counts == a.final.counts and g.final.sizes == a.final.sizes == "matched"
    assert [len(f.collectives) for f in finals[:2]] == [len(a.final.collectives) for a in alone.graphs]


def test_a_long_log_is_built_with_a_few_hundred_bytes_a_graph(tmp_path, small_rank0):
    held, graphs = {}, {}
    for copies in (100, 500):
        lg = _long_log(tmp_path, small_rank0, copies)
        part = read_segment(Segment(lg))
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            fb = FileBuilder(lg, SUMMARY_PARSERS)
            fb.add(part)
            held[copies] = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        graphs[copies] = len(fb.finish().graphs)
    assert graphs == {100: 208, 500: 1032}
    per_graph = (held[500] - held[100]) / (graphs[500] - graphs[100])
    assert 0 < per_graph < BUILT_PER_GRAPH, per_graph


def _batch_round_trip(lg):
    """A file's result as it comes back from a worker: pickled on its own, so its values are
    equal to, not the same objects as, any other batch's."""
    return pickle.loads(pickle.dumps(read_segment(Segment(lg)), protocol=pickle.HIGHEST_PROTOCOL))


def test_the_merge_shares_equal_values_that_came_from_separate_batches():
    logs = find_logs([str(RUN)], Diagnostics())
    assert len(logs) == 4
    results = []
    for lg in logs:
        fb = FileBuilder(lg, SUMMARY_PARSERS)
        fb.add(_batch_round_trip(lg))
        results.append(fb.finish())
    firsts = [r.graphs[0] for r in results]
    assert len({id(g.final.collectives) for g in firsts}) == 4  # four batches, four objects
    run = merge_files([str(RUN)], iter(results), Diagnostics())
    assert [r.rank for r in run.ranks] == [0, 1, 2, 3]
    for i in (0, 1):
        gs = [r.graphs[i] for r in run.ranks]
        for attr in ("fsdp_groups", "collectives", "sizes_mb"):
            assert len({id(getattr(g, attr)) for g in gs}) == 1, attr
        assert len({id(g.final.collectives) for g in gs}) == 1
        assert len({id(g.final.counts) for g in gs}) == 1
        assert len({id(g.final) for g in gs}) == 1  # one compile id and position: one final
    assert run.ranks[0].graphs[0].final.collectives is not run.ranks[0].graphs[1].final.collectives
    plain = load(RUN, jobs=1)
    assert [rank_to_dict(r) for r in run.ranks] == [rank_to_dict(r) for r in plain.ranks]


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_long_log_reads_the_same_with_the_memo(tmp_path, small_rank0, jobs):
    """The shared schedules change no value: every graph's final is the one its own schedule,
    estimation and dtypes give, read whole in one process or through workers."""
    lg = _long_log(tmp_path, small_rank0, 30)
    run = load(lg.path, jobs=jobs)
    [one] = find_logs([str(small_rank0)], Diagnostics())
    alone = build_file(one, [read_segment(Segment(one))], SUMMARY_PARSERS)
    graphs = run.ranks[0].graphs
    assert len(graphs) == 62  # 31 copies (the torch_version entry is written once)
    for i, g in enumerate(graphs):
        a = alone.graphs[i % 2]
        assert _collective_rows(g.final) == _collective_rows(a.final)
        assert (g.final.position, g.final.world_size, g.final.sizes) == (a.final.position, a.final.world_size, a.final.sizes)
        assert g.final.compile_id == g.compile_id
