"""Shared paths for the tests. Fixtures are real logs written by torch.compile runs
(fixtures/generate.py); tests assert exact values taken from them."""

from __future__ import annotations

import gzip
import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_LOGS = ROOT / "fixtures" / "logs"


@pytest.fixture
def fixture_logs() -> Path:
    return FIXTURE_LOGS


def rank_log(scenario: str | Path, rank: int) -> Path:
    """The log of ``rank`` in a fixture scenario (a name under fixtures/logs, or a directory):
    ``.log`` or ``.log.gz`` (fixtures/generate.py's GZIPPED scenarios are kept gzipped)."""
    directory = FIXTURE_LOGS / scenario if isinstance(scenario, str) else scenario
    (path,) = [p for p in directory.glob(f"dedicated_log_torch_trace_rank_{rank}_*")
               if p.name.endswith((".log", ".log.gz"))]
    return path


def log_bytes(path: Path) -> bytes:
    """A log's bytes, gunzipped when it is a ``.gz``."""
    data = path.read_bytes()
    return gzip.decompress(data) if path.name.endswith(".gz") else data


def log_text(path: Path) -> str:
    return log_bytes(path).decode("utf-8")


def plain_copy(path: Path, directory: Path) -> Path:
    """``path`` copied into ``directory`` as a plain ``.log`` (gunzipped): a log to edit as text."""
    out = directory / path.name.removesuffix(".gz")
    out.write_bytes(log_bytes(path))
    return out


def plain_copytree(scenario: str | Path, directory: Path) -> Path:
    """Every log of a fixture scenario copied into ``directory`` (made) as plain ``.log`` files."""
    source = FIXTURE_LOGS / scenario if isinstance(scenario, str) else scenario
    directory.mkdir(parents=True, exist_ok=True)
    for p in sorted(source.iterdir()):
        if p.name.endswith((".log", ".log.gz")):
            plain_copy(p, directory)
        elif p.is_file():
            shutil.copy(p, directory / p.name)
    return directory


def bench_module(name: str) -> ModuleType:
    """``bench/NAME.py`` imported as a module (the benchmarks' log makers serve the tests too)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


#: Markers (registered in pyproject.toml): ``torch`` for tests that need torch, ``slow`` for the
#: ones of seconds or more, so that ``pytest -m "not slow"`` is a quick loop. Declared here by
#: folder and module, in one place: a test of tests/replay, tests/explain or tests/bucketing needs
#: torch, as does one of the modules below or one whose name or parameters run replay or explain.
TORCH_FOLDERS = {"replay", "explain", "bucketing"}
TORCH_MODULES = {
    "test_reliability_graph_fuzz", "test_reliability_sandbox", "test_trace_events", "test_report_sweep",
    "test_fixtures_regen", "test_python_api", "test_recommend_rules",
}
#: Modules whose tests take seconds (real compiles and replays, installs, the browser, 10,000-rank
#: and memory runs): `--durations` of the whole suite.
SLOW_MODULES = {
    "test_fixtures_regen", "test_trace_events", "test_bucketing_compile", "test_report_sweep",
    "test_exit_policy", "test_text_width", "test_report_browser", "test_world", "test_reliability_sandbox",
    "test_reader_memory", "test_reader_ten_thousand_ranks", "test_install_no_torch", "test_replay_engine",
    "test_dask_reader", "test_bucketing_parity", "test_reliability_fuzz_harness", "test_reliability_corpus",
    "test_parallel_caps", "test_replay_overlap", "test_replay_all_ranks", "test_replay_not_prebucketed",
    "test_explain_fixtures", "test_explain_not_prebucketed", "test_golden_replays", "test_what_if_reach",
    "test_reliability_properties", "test_reader_many_ranks", "test_replay_progress", "test_replay_partial",
    "test_mesh_what_ifs_reach", "test_sweep_sharing", "test_replay_run_one_document", "test_exit_status",
}


#: Whether torch can be imported here (looked up, not imported: ``-m "not torch"`` runs where it is not).
HAS_TORCH = importlib.util.find_spec("torch") is not None


def _module_needs_torch(path: Path) -> bool:
    return path.parent.name in TORCH_FOLDERS or path.stem in TORCH_MODULES


class _NeedsTorch(pytest.Module):
    """A test module that needs torch, where torch is not installed: skipped before it is imported
    (it may import torch at its top), so that ``pytest -m "not torch"`` collects without error."""

    def collect(self):
        pytest.skip("needs torch, which is not installed", allow_module_level=True)


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    if not HAS_TORCH and _module_needs_torch(module_path):
        return _NeedsTorch.from_parent(parent, path=module_path)
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.fspath))
        module = path.stem
        runs_torch = "replay" in item.name or "explain" in item.name
        if _module_needs_torch(path) or runs_torch:
            item.add_marker(pytest.mark.torch)
        if module in SLOW_MODULES or (runs_torch and path.parent.name not in TORCH_FOLDERS):
            item.add_marker(pytest.mark.slow)
