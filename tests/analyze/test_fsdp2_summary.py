"""FSDP2 runs named for what they are: fixtures/logs/fsdp2 (fully_shard per block and root, a
whole-model torch.compile, 2 ranks on the fake process group). No compiled graph holds a
collective; summarize says so, says why from the graph breaks, and shows what the logs hold."""

from __future__ import annotations

from click.testing import CliRunner
from conftest import FIXTURE_LOGS

from tracekit.analyze.notes import why_no_outcome
from tracekit.render.summary_document import summary_document
from tracekit.render.summary_words import no_outcome_text
from tracekit.commands.summarize_cmd import summarize
from tracekit.model import COMPILED, EAGER
from tracekit.read.pairing import build_file
from tracekit.read.parsers import FRAME_PARSERS, parse_graph_inputs
from tracekit.read.reader import load
from tracekit.read.segments import Segment, read_segment
from tracekit.read.sources import LogFile

FSDP2 = FIXTURE_LOGS / "fsdp2"
#: the blocks' Linear(32, 128) and Linear(128, 64), f32, weight and bias, gathered (full size)
BLOCK_BYTES = [(128 * 32 + 128) * 4, (64 * 128 + 64) * 4]


def test_the_reader_keeps_each_frame_compile():
    run = load(FSDP2)
    assert [r.rank for r in run.ranks] == [0, 1]
    for r in run.ranks:
        assert [(f.compile_id, f.name, f.status) for f in r.frames] == [
            ("0/0", "forward", EAGER),
            ("1/0", "forward", COMPILED),
            ("1/1", "forward", COMPILED),
        ]
        root, *blocks = r.frames
        assert root.break_at is not None and root.break_at.endswith(
            "torch/distributed/fsdp/_fully_shard/_fsdp_common.py:30"
        )
        assert root.reason == "Attempted to call function marked as skipped"
        assert (root.has_graph, root.params, root.param_bytes) == (False, 0, None)
        assert [(f.params, f.param_bytes, f.collectives) for f in blocks] == [(2, b, 0) for b in BLOCK_BYTES]


def test_the_document_says_no_compiled_graph_holds_a_collective_and_why():
    doc = summary_document(load(FSDP2))
    v = doc["verdict"]
    assert v["status"] == "no_data"
    assert v["text"] == (
        "NO DATA: no bucketing outcome in the logs; no compiled graph holds a collective "
        "(FSDP2: its collectives run in eager code)"
    )
    assert v["sections"] == ["compiled_regions", "notes"]
    regions = doc["compiled_regions"]
    assert {k: regions[k] for k in ("compiled", "eager", "failed", "param_bytes", "collectives", "fsdp2_breaks")} == {
        "compiled": 2, "eager": 1, "failed": 0, "param_bytes": 49_920, "collectives": 0, "fsdp2_breaks": 1,
    }  # fmt: skip
    assert [g["ranks"] for g in regions["groups"]] == ["0-1"]
    assert [f["break_at"] for f in regions["groups"][0]["frames"]] == [
        "torch/distributed/fsdp/_fully_shard/_fsdp_common.py:30", None, None,
    ]  # fmt: skip
    assert doc["notes"] == [
        "no bucketing recorded: no compiled graph holds a collective (2 compiled regions, 1 frame fell back "
        "to eager), so pre-bucketing has nothing to merge; see Compiled regions",
        "FSDP2 (fully_shard): dynamo skips its hooks (graph breaks at torch/distributed/fsdp/_fully_shard/), "
        "so its collectives run in eager code, one fully_shard unit at a time",
    ]


def test_the_text_shows_regions_eager_frames_and_bytes_and_no_cache_advice():
    res = CliRunner().invoke(summarize, [str(FSDP2)])
    assert res.exit_code == 0, res.output
    out = res.output
    assert out.startswith(
        "Verdict\n=======\nNO DATA: no bucketing outcome in the logs; no compiled graph holds a collective "
        "(FSDP2: its collectives run in eager code)\nWhy: see Compiled regions, Notes below\n"
    )
    section = out.split("Compiled regions (compilation_metrics, dynamo_output_graph, graph breaks)\n", 1)[1]
    rows = [ln.split("  ")[0:1] + [c.strip() for c in ln.split("  ") if c.strip()][1:] for ln in section.splitlines()[4:7]]
    assert rows == [
        ["0/0", "forward (generate.py:436)", "fell back to eager", "-", "-",
         "torch/distributed/fsdp/_fully_shard/_fsdp_common.py:30", "Attempted to call function marked as skipped"],
        ["1/0", "forward (generate.py:428)", "compiled", "2 (16,896)", "0", "-", "-"],
        ["1/1", "forward (generate.py:428)", "compiled", "2 (33,024)", "0", "-", "-"],
    ]  # fmt: skip
    assert (
        "2 regions compiled, taking in 49,920 bytes of parameters; 1 frame fell back to eager; "
        "0 failed to compile; 0 collectives in compiled graphs;"
    ) in section
    assert "no inductor_collective_schedule logged (no compiled graph holds a collective: see Compiled regions)\n" in out
    # nothing to compare is said so (was 'all 2 ranks run the same collectives ... in all 0 graphs with a schedule')
    assert (
        "Schedule consensus: no graph logged the collectives it runs (inductor_collective_schedule): nothing to compare\n"
    ) in out
    # no advice the log gives no ground for: no cache event, so no cache; no overlap-scheduling question
    assert "cache)" not in out and "inductor cache" not in out and "enable_overlap_scheduling" not in out
    assert max(len(ln) for ln in out.splitlines()) <= 200


def test_simplefsdp_graphs_hold_their_collectives_and_frames_are_read_only_without_outcomes():
    # a run with outcomes is not read twice: no frames, no Compiled regions
    run = load(FIXTURE_LOGS / "spmd_auto")
    assert [r.frames for r in run.ranks] == [()] * 4
    assert "compiled_regions" not in summary_document(run)
    # the frame parsers on a SimpleFSDP log: its one frame compiled, its graph all-gathers
    (path,) = run.ranks[0].files
    log = LogFile(path, 0, 0)
    (frame,) = build_file(log, [read_segment(Segment(log), FRAME_PARSERS)], FRAME_PARSERS).frames
    assert (frame.compile_id, frame.status, frame.params, frame.param_bytes, frame.collectives) == (
        "0/0", COMPILED, 8, 74_280, 8,
    )  # fmt: skip  # 8 all-gathers in its code (the comments quoting the source are not calls)


def test_graph_inputs_bytes_from_the_signature():
    sig = (
        'class GraphModule(torch.nn.Module):\n    def forward(self, L_self_modules_w_parameters_weight_: '
        '"bf16[4, 8][8, 1]cuda:0", L_x_: "f32[2, 4][4, 1]cpu", L_p_parameters_s_: "f32[s0][1]cpu"):\n'
        '        ag: "bf16[8][1]cpu" = torch.ops._c10d_functional.all_gather_into_tensor(x, 2, "0")\n'
        '        w: "bf16[8][1]cpu" = torch.ops._c10d_functional.wait_tensor(ag)\n'
    )
    g = parse_graph_inputs(sig)
    assert (g.params, g.param_bytes, g.collectives) == (2, None, 1)  # a symbolic size: bytes unknown
    assert parse_graph_inputs(sig.replace("[s0]", "[6]")).param_bytes == 4 * 8 * 2 + 6 * 4


def test_replay_and_explain_say_why_there_is_no_outcome():
    assert no_outcome_text(why_no_outcome(load(FSDP2))) == (
        "no bucketing recorded: no compiled graph holds a collective (2 compiled regions, 1 frame fell back to "
        "eager), so pre-bucketing has nothing to merge; see Compiled regions in tracekit summarize; "
        "FSDP2 (fully_shard): dynamo skips its hooks (graph breaks at torch/distributed/fsdp/_fully_shard/), "
        "so its collectives run in eager code, one fully_shard unit at a time"
    )


FSDP2_PER_BLOCK = FIXTURE_LOGS / "fsdp2_per_block"
PER_BLOCK_NOTE = (
    "FSDP2 (fully_shard), compiled per block: 2 compiled regions are forwards of fully_shard modules "
    "(FSDPBlock, as the guards name them); FSDP2's hooks run around each in eager code, so its all-gathers "
    "and reduce-scatters run outside compiled graphs, one fully_shard unit at a time"
)


def test_per_block_fsdp2_is_named_from_the_guards():
    # each block sharded, then compiled on its own: no graph break; the guards name FSDPBlock
    run = load(FSDP2_PER_BLOCK)
    for r in run.ranks:
        assert [(f.compile_id, f.status, f.break_at, f.param_bytes, f.fsdp2_module) for f in r.frames] == [
            ("0/0", COMPILED, None, BLOCK_BYTES[0], "FSDPBlock"),
            ("0/1", COMPILED, None, BLOCK_BYTES[1], "FSDPBlock"),
        ]
    # the whole-model compile's blocks are FSDPBlock too; its root frame (eager) has no guards
    assert [f.fsdp2_module for f in load(FSDP2).ranks[0].frames] == [None, "FSDPBlock", "FSDPBlock"]
    doc = summary_document(run)
    assert doc["verdict"]["text"] == (
        "NO DATA: no bucketing outcome in the logs; no compiled graph holds a collective "
        "(FSDP2: its collectives run in eager code)"
    )
    regions = doc["compiled_regions"]
    assert (regions["fsdp2_breaks"], regions["fsdp2_modules"], regions["collectives"]) == (0, 2, 0)
    assert [f["fsdp2_module"] for f in regions["groups"][0]["frames"]] == ["FSDPBlock", "FSDPBlock"]
    assert doc["notes"] == [
        "no bucketing recorded: no compiled graph holds a collective (2 compiled regions), so pre-bucketing "
        "has nothing to merge; see Compiled regions",
        PER_BLOCK_NOTE,
    ]
    assert no_outcome_text(why_no_outcome(run)) == (
        "no bucketing recorded: no compiled graph holds a collective (2 compiled regions), so pre-bucketing "
        "has nothing to merge; see Compiled regions in tracekit summarize; " + PER_BLOCK_NOTE
    )


def test_a_compiled_block_of_no_fsdp2_module_is_not_fsdp2(tmp_path):
    # the same logs with the guards' FSDPBlock type renamed to the plain Block: no FSDP2 said
    import gzip
    import hashlib
    import re

    for src in FSDP2_PER_BLOCK.glob("*.log.gz"):
        text = gzip.decompress(src.read_bytes()).decode()
        old = "torch.distributed.fsdp._fully_shard._fsdp_init.FSDPBlock"
        new = "__main__._fsdp2_rank_main.<locals>.Block"
        out = []
        for entry in re.split(r"\n(?=[VIWEC]\d{4} )", text):
            head, _, payload = entry.partition("\n")
            if old in payload:
                before = hashlib.md5("\n".join(x[1:] for x in payload.split("\n") if x).encode()).hexdigest()
                payload = payload.replace(old, new)
                after = hashlib.md5("\n".join(x[1:] for x in payload.split("\n") if x).encode()).hexdigest()
                head = head.replace(before, after)
            out.append(head + ("\n" + payload if payload else ""))
        (tmp_path / src.name.removesuffix(".gz")).write_text("\n".join(out))
    run = load(tmp_path)
    assert run.diagnostics.counts == {}
    doc = summary_document(run)
    assert doc["verdict"]["text"] == "NO DATA: no bucketing outcome in the logs; no compiled graph holds a collective"
    assert doc["compiled_regions"]["fsdp2_modules"] == 0 and len(doc["notes"]) == 1


def test_replay_and_explain_name_fsdp2_per_block_and_exit_0():
    from tracekit.commands.explain_cmd import explain
    from tracekit.commands.replay_cmd import replay

    wrapped = (
        "note: no bucketing recorded: no compiled graph holds a collective (2 compiled regions), so "
        "pre-bucketing has nothing to merge; see Compiled regions in tracekit summarize;\n"
        "  FSDP2 (fully_shard), compiled per block: 2 compiled regions are forwards of fully_shard modules "
        "(FSDPBlock, as the guards name them);\n"
        "  FSDP2's hooks run around each in eager code, so its all-gathers and reduce-scatters run outside "
        "compiled graphs, one fully_shard unit at a time\n"
    )
    for command, name in ((replay, "replay"), (explain, "explain")):
        res = CliRunner().invoke(command, [str(FSDP2_PER_BLOCK)])
        assert (res.exit_code, res.stderr) == (0, ""), res.output  # nothing to do is no finding, no error
        title = f"Nothing to {name}: no recorded bucketing outcome"
        assert res.stdout == f"{title}\n{'=' * len(title)}\n{wrapped}"
        js = CliRunner().invoke(command, [str(FSDP2_PER_BLOCK), "--format", "json"])
        assert js.exit_code == 0
        import json

        doc = json.loads(js.stdout)
        assert doc["graphs"] == [] and doc["notes"] == [no_outcome_text(why_no_outcome(load(FSDP2_PER_BLOCK)))]
