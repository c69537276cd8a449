"""A real torch.compile run (CPU, fake process group) with ``bucketing.install()``: the log
holds our artifacts, torch's own pre-bucketing does not run, overlap scheduling still does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from logtext import artifacts

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import torch
    import torch._inductor.config as inductor_config
    import torch._inductor.utils as inductor_utils
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    import torch.utils._runtime_estimation as runtime_estimation
    from torch.testing._internal.distributed.fake_pg import FakeStore

    import bucketing

    def fixed_dram_gbps():
        return 2000

    inductor_utils.get_gpu_dram_gbps = fixed_dram_gbps  # CPU: no triton bandwidth query
    runtime_estimation.get_gpu_dram_gbps = fixed_dram_gbps

    def fixed_estimate(node, override_size=None):
        return 0.01

    torch.set_num_threads(1)
    inductor_config.force_disable_caches = True
    inductor_config.compile_threads = 1
    opts = inductor_config.aten_distributed_optimizations
    opts.enable_overlap_scheduling = True
    opts.custom_runtime_estimation = fixed_estimate
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=4)

    shards = [torch.randn(n) for n in (4096, 1024, 256)]

    def step(x, a, b, c):
        for shard, rows in ((a, 128), (b, 32), (c, 8)):
            full = funcol.all_gather_tensor(shard, 0, dist.group.WORLD).view(rows, -1)
            x = torch.relu(x[:, :rows] @ full)
        return x

    with bucketing.installed() as our_pass:
        out = torch.compile(step)(torch.randn(4, 128), *shards)
    print("REPORT", our_pass.last_report.summary_line())
    print("RESTORED", inductor_config.post_grad_custom_post_pass, opts.pre_bucketing_fsdp_collectives)
    """
)



def test_compile_with_install_emits_our_artifacts(tmp_path: Path) -> None:
    env = dict(os.environ, TORCH_TRACE=str(tmp_path), PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=240, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "REPORT fsdp_groups=['0'], group_size=4, nNodes=1, bucket_cap_mb=27.4, all_gather 3->1" in done.stdout
    assert "RESTORED None True" in done.stdout

    logs = sorted(tmp_path.glob("dedicated_log_torch_trace_rank_0_*.log"))
    assert len(logs) == 1
    arts = artifacts(logs[0].read_text())
    names = [name for name, _, _ in arts]

    ours = [i for i, name in enumerate(names) if name.startswith("tracekit_fsdp_")]
    assert [names[i] for i in ours] == ["tracekit_fsdp_input_graph", "tracekit_fsdp_buckets"]
    summaries = [(src, payload) for name, src, payload in arts if name == "pre_bucketing_fsdp_collectives"]
    assert summaries == [
        (
            "bucketing/artifacts.py",
            "fsdp_groups=['0'], group_size=4, nNodes=1, bucket_cap_mb=27.4, "
            "all_gather 3->1, reduce_scatter 0->0, all_reduce 0->0",
        )
    ]
    assert not any(src.endswith("fx_passes/fsdp.py") for _, src, _ in arts)
    assert not any(name.startswith("fx_bucketing_passes_") for name in names)
    # order: input graph, buckets, summary, then inductor's overlap scheduler on our result
    summary_at = names.index("pre_bucketing_fsdp_collectives")
    assert ours[0] < ours[1] < summary_at < names.index("overlap_scheduling_graph_before")
    assert "overlap_scheduling_graph_after" in names

    buckets = json.loads(next(p for n, _, p in arts if n == "tracekit_fsdp_buckets"))
    assert buckets["schema"] == "tracekit.buckets/1"
    assert buckets["cap_source"] == "saturation" and round(buckets["cap_mb"], 2) == 27.38
    assert [[m["name"] for m in b] for b in buckets["buckets"]["AG"]] == [
        ["all_gather_into_tensor", "all_gather_into_tensor_1", "all_gather_into_tensor_2"]
    ]
    assert [m["bytes"] for m in buckets["buckets"]["AG"][0]] == [65536, 16384, 4096]
    graph_text = next(p for n, _, p in arts if n == "tracekit_fsdp_input_graph")
    assert 'all_gather_into_tensor: "f32[16384][1]cpu"' in graph_text
    overlap_input = next(p for n, _, p in arts if n == "overlap_scheduling_graph_before")
    assert "all_gather_into_tensor_out" in overlap_input
