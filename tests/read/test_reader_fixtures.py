"""The reader on the real fixture logs: exact values read off the logs."""

from __future__ import annotations

import subprocess
import sys


from conftest import FIXTURE_LOGS, ROOT
from tracekit.model import CollectiveSize, Counts
from tracekit.read.entries import iter_entries
from tracekit.read.reader import graph_sources, load

SPMD = FIXTURE_LOGS / "spmd_auto"
FWD_BEFORE = [0.016, 0.001, 0.125, 0.001, 0.125, 0.001, 0.016, 0.0]


def rank0_file(scenario: str = "spmd_auto"):
    return next((FIXTURE_LOGS / scenario).glob("dedicated_log_torch_trace_rank_0_*"))


def test_spmd_auto_every_rank_two_graphs_with_sizes():
    run = load(SPMD, jobs=1)
    assert [r.rank for r in run.ranks] == [0, 1, 2, 3]
    assert run.diagnostics.counts == {}
    for r in run.ranks:
        assert len(r.files) == 1 and f"rank_{r.rank}_" in r.files[0]
        assert r.compiled_graphs == 2 and r.cache_hits == 0
        fwd, bwd = r.graphs
        assert (fwd.compile_id, fwd.graph_index, bwd.compile_id, bwd.graph_index) == ("0/0", 0, "0/0", 1)
        assert fwd.fsdp_groups == ["0"] and fwd.group_size == 4 and fwd.n_nodes == 1
        assert fwd.bucket_cap_mb == 27.4 and fwd.source == "torch"
        assert fwd.collectives == {"all_gather": Counts(8, 1), "reduce_scatter": Counts(0, 0),
                                   "all_reduce": Counts(0, 0)}
        assert bwd.collectives["all_gather"] == Counts(5, 1)
        assert bwd.collectives["reduce_scatter"] == Counts(8, 1)
        assert [s.size_mb for s in fwd.sizes_mb.before] == FWD_BEFORE
        assert fwd.sizes_mb.after == [CollectiveSize("AG", 0.284, "all_gather_into_tensor_out")]
        assert [(s.type, s.size_mb) for s in bwd.sizes_mb.after] == [("AG", 0.267), ("RS", 0.284)]
        assert [s.type for s in bwd.sizes_mb.before] == ["AG"] * 5 + ["RS"] * 8
    g = run.ranks[0].graphs[0]
    assert g.line == 3326 and g.file.endswith(".log")


def test_outcome_line_number_points_at_the_envelope():
    g = load(rank0_file()).ranks[0].graphs[0]
    with open(g.file, encoding="utf-8") as f:
        lines = f.read().split("\n")
    assert '"name": "pre_bucketing_fsdp_collectives"' in lines[g.line - 1]
    assert lines[g.line].startswith("\tfsdp_groups=['0'], group_size=4, nNodes=1, bucket_cap_mb=27.4")


def test_small_cap_splits_buckets():
    run = load(FIXTURE_LOGS / "spmd_small_cap", jobs=1)
    for r in run.ranks:
        fwd, bwd = r.graphs
        assert fwd.bucket_cap_mb == 0.1
        assert fwd.collectives["all_gather"] == Counts(8, 5)
        assert bwd.collectives["all_gather"] == Counts(5, 4)
        assert bwd.collectives["reduce_scatter"] == Counts(8, 5)
        assert [s.size_mb for s in fwd.sizes_mb.after] == [0.125, 0.001, 0.125, 0.017, 0.017]


def test_diverge_rank_three_has_two_more_all_gathers():
    run = load(FIXTURE_LOGS / "diverge_rank", jobs=1)
    ag = {r.rank: [g.collectives["all_gather"].before for g in r.graphs] for r in run.ranks}
    assert ag == {0: [8, 5], 1: [8, 5], 2: [8, 5], 3: [10, 7]}
    assert run.ranks[3].graphs[1].collectives["reduce_scatter"] == Counts(10, 1)


def test_gzip_directory_reads_the_same_as_plain():
    plain = load(SPMD, jobs=1)
    gz = load(FIXTURE_LOGS / "spmd_auto_gz", jobs=1)
    assert gz.diagnostics.counts == {}
    assert [r.rank for r in gz.ranks] == [0, 1, 2, 3]
    assert all(f.endswith(".log.gz") for r in gz.ranks for f in r.files)
    strip = lambda run: [[(g.key, g.collectives, g.sizes_mb, g.line) for g in r.graphs] for r in run.ranks]  # noqa: E731
    assert strip(gz) == strip(plain)


def test_parallel_jobs_give_the_same_run(monkeypatch):
    import tracekit.read.segments as segments

    one = load(SPMD, jobs=1)
    monkeypatch.setattr(segments, "PARALLEL_MIN_BYTES", 0)  # 3 MB: else read in this process
    two = load(SPMD, jobs=2)
    assert [(r.rank, r.files, r.graphs) for r in one.ranks] == [(r.rank, r.files, r.graphs) for r in two.ranks]


def test_several_paths_and_files():
    f0 = rank0_file()
    run = load([str(f0), str(FIXTURE_LOGS / "spmd_small_cap")], jobs=1)
    # rank 0 has two files of two runs: never merged; the second is a duplicate_rank diagnostic
    r0 = run.rank(0)
    assert r0.files == [str(f0)]
    assert [(g.graph_index, g.bucket_cap_mb) for g in r0.graphs] == [(0, 27.4), (1, 27.4)]
    assert [r.rank for r in run.ranks] == [0, 1, 2, 3] and run.duplicated == [0]
    assert run.diagnostics.counts == {"duplicate_rank": 1}
    (ex,) = run.diagnostics.examples
    assert ex["file"].endswith("dedicated_log_torch_trace_rank_0_8t8iz6h4.log")
    assert ex["detail"] == (f"rank 0 is also in {f0}; this file is another run (written by another "
                            "process: pid 19241, not 12482): not merged")


def test_a_log_split_across_files_is_merged(tmp_path):
    """One process's log cut in two files (same pid, compile ids go on): one rank, indices go on."""
    src = rank0_file().read_bytes()
    cut = src.index(b"\nV", len(src) // 2) + 1  # an entry boundary past the forward's outcome
    (tmp_path / "dedicated_log_torch_trace_rank_0_a.log").write_bytes(src[:cut])
    (tmp_path / "dedicated_log_torch_trace_rank_0_b.log").write_bytes(src[cut:])
    run = load(tmp_path, jobs=1)
    (r0,) = run.ranks
    assert len(r0.files) == 2 and [g.graph_index for g in r0.graphs] == [0, 1]
    assert run.diagnostics.counts == {} and run.duplicated == []


def test_iter_entries_selects_by_type_and_name():
    f0 = rank0_file()
    outs = list(iter_entries(str(f0), lambda t, n: n == "pre_bucketing_fsdp_collectives"))
    assert [(e.rank, e.compile_id, e.line) for e in outs] == [(0, "0/0", 3326), (0, "0/0", 6716)]
    assert outs[1].payload == ("fsdp_groups=['0'], group_size=4, nNodes=1, bucket_cap_mb=27.4, "
                               "all_gather 5->1, reduce_scatter 8->1, all_reduce 0->0")
    starts = list(iter_entries(str(f0), lambda t, n: t == "dynamo_start"))
    assert len(starts) == 1 and starts[0].artifact_name is None and "stack" in starts[0].envelope["dynamo_start"]


def test_graph_sources_pairs_outcomes_with_their_graph_text():
    srcs = list(graph_sources(str(SPMD)))
    assert [(s.rank, s.compile_id, s.graph_index) for s in srcs] == [
        (r, "0/0", i) for r in range(4) for i in (0, 1)]
    fwd, bwd = srcs[0], srcs[1]
    assert fwd.text_artifact == bwd.text_artifact == "before_post_grad_graph"
    assert fwd.text.count("torch.ops._c10d_functional.all_gather_into_tensor.default") == 8
    assert bwd.text.count("torch.ops._c10d_functional.reduce_scatter_tensor.default") == 8
    assert fwd.graph.collectives["all_gather"] == Counts(8, 1)


def test_tracekit_pass_graphs_are_marked_and_use_the_pass_input_graph():
    run = load(FIXTURE_LOGS / "tracekit_pass", jobs=1)
    assert run.ranks and all(g.source == "tracekit" for r in run.ranks for g in r.graphs)
    srcs = list(graph_sources(str(FIXTURE_LOGS / "tracekit_pass")))
    assert srcs and all(s.text_artifact == "tracekit_fsdp_input_graph" for s in srcs)


def test_import_and_summarize_never_import_torch():
    code = (
        "import sys, tracekit\n"
        "from tracekit.cli import main\n"
        "from tracekit.commands.summarize_cmd import summarize\n"
        f"run = tracekit.load({str(SPMD)!r}, jobs=1)\n"
        "from tracekit.render.summary_document import summary_document\n"
        "summary_document(run)\n"
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))\n"
        "print(len(run.ranks))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "4"


def test_a_file_cut_into_segments_reads_as_one(tmp_path, monkeypatch):
    import tracekit.read.segments as segments
    from tracekit.model import Diagnostics
    from tracekit.read.sources import find_logs

    src = rank0_file().read_bytes()
    p = tmp_path / "dedicated_log_torch_trace_rank_0_x.log"
    p.write_bytes(src * 3)  # three runs of 0/0 back to back: indices 0..5 for 0/0
    whole = load(p, jobs=1)
    monkeypatch.setattr(segments, "SPLIT_MIN_BYTES", 1 << 20)
    monkeypatch.setattr(segments, "PARALLEL_MIN_BYTES", 1 << 20)  # the segments read in parallel
    (segs,) = segments.file_segments(find_logs([str(p)], Diagnostics()), 2)
    assert len(segs) == 2 and 0 < segs[1].start < len(src) * 3 and segs[1].rank == 0
    split = load(p, jobs=2)
    assert [g.graph_index for g in split.ranks[0].graphs] == [0, 1, 2, 3, 4, 5]
    assert split.ranks[0].graphs == whole.ranks[0].graphs
    assert [g.line for g in split.ranks[0].graphs][4] == 3326 + 2 * 9441  # third copy's forward
    assert split.diagnostics.counts == whole.diagnostics.counts == {}
