"""bucketing.compat checks the signatures of the torch functions we call, not only that they
exist: a release where one no longer takes an argument we pass is refused before any work, with
the call named (the check under test is ours; the signature changed here is torch's, in place)."""

from __future__ import annotations

import inspect
import sys
import types

import pytest
from click.testing import CliRunner

from tests.conftest import FIXTURE_LOGS

torch = pytest.importorskip("torch")

from bucketing import compat  # noqa: E402
from bucketing.compat import BUCKETING_CALLS, TORCH_MERGE_CALLS, Call, call_mismatches  # noqa: E402


@pytest.fixture
def fresh_checks():
    """check_calls answers once per process: forget its answers before and after a test."""
    compat.check_calls.cache_clear()
    yield
    compat.check_calls.cache_clear()


def test_the_installed_torch_takes_every_call():
    from tracekit.replay.comm_estimate import COMM_MODEL_CALLS
    from tracekit.replay.overlap_schedule import SCHEDULER_CALLS

    assert call_mismatches(BUCKETING_CALLS + TORCH_MERGE_CALLS + COMM_MODEL_CALLS + SCHEDULER_CALLS) == []
    assert [c.name for c in SCHEDULER_CALLS] == ["OverlapScheduler", "is_compute_node", "MemoryTracker"]
    assert len(SCHEDULER_CALLS[0].keywords) == 18


def test_a_missing_parameter_is_named(monkeypatch, fresh_checks):
    import torch._inductor.comm_analysis as ca

    def compute_min_saturation_bytes(group_size, coll):  # torch without target_efficiency
        return 0

    monkeypatch.setattr(ca, "compute_min_saturation_bytes", compute_min_saturation_bytes)
    assert call_mismatches(BUCKETING_CALLS) == [
        "torch._inductor.comm_analysis.compute_min_saturation_bytes(_, _, target_efficiency=): "
        "got an unexpected keyword argument 'target_efficiency'"
    ]
    with pytest.raises(compat.UnsupportedTorch) as info:
        compat.check_calls(BUCKETING_CALLS)
    assert str(info.value) == (
        f"torch {torch.__version__} does not take the calls bucketing makes (tested: torch 2.13.0, "
        "2.14.1, 2.15.0): torch._inductor.comm_analysis.compute_min_saturation_bytes(_, _, "
        "target_efficiency=): got an unexpected keyword argument 'target_efficiency'"
    )


def test_a_new_required_parameter_and_a_missing_function_are_named():
    def f(a, b, *, c):
        return a

    module = types.ModuleType("fake_torch_module")
    module.f = f  # type: ignore[attr-defined]
    sys.modules["fake_torch_module"] = module
    try:
        assert call_mismatches((Call("fake_torch_module", "f", 2), Call("fake_torch_module", "g", 1))) == [
            "fake_torch_module.f(_, _): missing a required argument: 'c'",
            "fake_torch_module.g",
        ]
        assert call_mismatches((Call("no_such_torch_module", "f", 1),)) == ["no_such_torch_module"]
    finally:
        del sys.modules["fake_torch_module"]


def test_replay_refuses_a_scheduler_without_a_parameter_we_pass(monkeypatch, fresh_checks):
    """The scheduler's signature lacks ``max_off_bucket_gb``: replay exits 2 before any work,
    naming the call; nothing on stdout."""
    from torch._inductor.fx_passes import overlap_scheduling

    from tracekit.cli import main

    real = inspect.signature(overlap_scheduling.OverlapScheduler)

    def without_max_off_bucket_gb(*args, **kwargs):
        raise AssertionError("never called: the check refuses first")

    without_max_off_bucket_gb.__signature__ = real.replace(  # type: ignore[attr-defined]
        parameters=[p for p in real.parameters.values() if p.name != "max_off_bucket_gb"]
    )
    monkeypatch.setattr(overlap_scheduling, "OverlapScheduler", without_max_off_bucket_gb)
    result = CliRunner().invoke(main, ["replay", str(FIXTURE_LOGS / "spmd_auto")])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.strip().endswith(
        "torch._inductor.fx_passes.overlap_scheduling.OverlapScheduler(_, custom_runtime_estimation=, "
        "collective_bucketing=, max_compute_pre_fetch=, insert_overlap_deps=, collective_estimator=, "
        "compute_estimator=, max_memory_increase_gb=, max_memory_increase_ratio=, "
        "compute_overlap_multipler=, max_in_flight_gb=, max_coll_distance=, "
        "log_final_collectives_estimations=, bucket_exposed_first=, bucket_only_internode_comms=, "
        "enable_fusion_regions=, prioritize_bucketing_during_scheduling=, bucket_mode=, "
        "max_off_bucket_gb=): got an unexpected keyword argument 'max_off_bucket_gb'"
    )
    assert result.stderr.startswith(f"tracekit replay: torch {torch.__version__} does not take the calls")
