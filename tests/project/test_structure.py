"""The layout shows the pipeline: no import cycles in ``tracekit/`` or ``bucketing/``,
``bucketing`` never imports ``tracekit``, and parsers select entries of any kind on the fast
path (``create_symbol`` read in the same pass as the graph texts)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from conftest import FIXTURE_LOGS, ROOT
from tracekit.read.parsers import SOURCE_PARSERS, SUMMARY_PARSERS, EntryParser, by_key
from tracekit.read.reader import graph_sources


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """Module -> the project modules it imports (anywhere in it, functions included)."""
    files = {_module_name(p): p for pkg in ("tracekit", "bucketing") for p in (ROOT / pkg).rglob("*.py")}
    out: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    full = f"{node.module}.{a.name}"
                    target = full if full in files else node.module if node.module in files else None
                    if target:
                        out[mod].add(target)
            elif isinstance(node, ast.Import):
                out[mod] |= {a.name for a in node.names if a.name in files}
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    graph = _imports()
    assert "tracekit.read.pairing" in graph["tracekit.read.reader"]  # the scan sees real imports
    assert _cycles(graph) == []


def test_a_cycle_would_be_found():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_bucketing_never_imports_tracekit():
    graph = _imports()
    assert {m: sorted(t for t in ts if t.startswith("tracekit"))
            for m, ts in graph.items() if m.startswith("bucketing")} == \
        {m: [] for m in graph if m.startswith("bucketing")}


def test_parsers_select_artifacts_by_name_and_other_entries_by_type():
    keys = by_key(SOURCE_PARSERS)
    assert ("create_symbol", None) in keys and ("artifact", "before_post_grad_graph") in keys
    assert ("create_symbol", None) not in by_key(SUMMARY_PARSERS)  # summarize does not pay for it


def test_create_symbol_hints_arrive_with_the_graph_sources_in_one_pass(tmp_path):
    src = next((FIXTURE_LOGS / "spmd_auto").glob("*rank_0_*.log"))
    lines = src.read_text(encoding="utf-8").split("\n")
    at = next(i for i, ln in enumerate(lines) if '"name": "before_post_grad_graph"' in ln)
    hint = ('V1202 14:33:40.100000 5389 torch/fx/experimental/symbolic_shapes.py:5137] '
            '{"create_symbol": {"symbol": "s67", "val": "%s", "vr": "[2, int_oo]"}, "rank": 0, '
            '"frame_id": 0, "frame_compile_id": 0, "attempt": 0}')
    lines[at:at] = [hint % 128, hint.replace("s67", "u0") % "u0"]  # an unbacked one gives nothing
    log = tmp_path / src.name
    log.write_text("\n".join(lines), encoding="utf-8")
    opened: list[str] = []
    import builtins
    real_open = builtins.open

    def counting_open(path, *a, **kw):
        opened.append(str(path))
        return real_open(path, *a, **kw)

    builtins.open = counting_open
    try:
        sources = list(graph_sources(str(log)))
    finally:
        builtins.open = real_open
    assert [(s.compile_id, s.graph_index, s.symbol_hints) for s in sources] == \
        [("0/0", 0, {"s67": 128}), ("0/0", 1, {"s67": 128})]
    assert opened.count(str(log)) == 1  # one pass over the log


def test_a_new_entry_kind_is_one_parser():
    """A parser for another entry type works on the fast path with no change to the loop."""
    from tracekit.read.parsers import OutcomeParser
    from tracekit.read.segments import Segment, read_segment
    from tracekit.read.sources import LogFile

    class DynamoStart(EntryParser):
        entry_types = frozenset({"dynamo_start"})
        needs_payload = False

        def parse(self, payload, envelope):
            return len(envelope["dynamo_start"]["stack"])

    src = next((FIXTURE_LOGS / "spmd_auto").glob("*rank_0_*.log"))
    res = read_segment(Segment(LogFile(str(src), src.stat().st_size, 0)), (OutcomeParser(), DynamoStart()))
    kinds = [(key, cid) for key, _v, cid, _line in res.events]
    assert kinds == [(("dynamo_start", None), "0/0"),
                     (("artifact", "pre_bucketing_fsdp_collectives"), "0/0"),
                     (("artifact", "pre_bucketing_fsdp_collectives"), "0/0")]
    assert res.events[0][1] > 0 and res.diagnostics.counts == {}


#: The stages and what each may import: data flows read -> analyze / replay / explain -> render
#: -> commands, over the model (docs/architecture.md). The top-level modules (tracekit/__init__.py,
#: records.py, cli.py, __main__.py) are the public API and the entry point: any stage.
#: The modules of ``bucketing`` that import no torch (its ``__init__`` loads the passes on first use)
#: are one more stage under all: the reader pauses the collector with ``bucketing.gc_pause``.
TORCH_FREE_BUCKETING = {"bucketing", "bucketing.compat", "bucketing.gc_pause"}
STAGE_IMPORTS = {
    "model": set(),
    "read": {"model", "torch-free bucketing"},
    "analyze": {"model", "read", "torch-free bucketing"},
    "replay": {"model", "read", "analyze", "bucketing", "torch-free bucketing"},
    "explain": {"model", "read", "analyze", "replay", "bucketing", "torch-free bucketing"},
    "render": {"model", "analyze", "replay", "explain", "torch-free bucketing"},
    "commands": {"model", "read", "analyze", "replay", "explain", "render", "bucketing", "torch-free bucketing", "top"},
}


def _stage(module: str) -> str:
    parts = module.split(".")
    if module in TORCH_FREE_BUCKETING:
        return "torch-free bucketing"
    if parts[0] == "bucketing":
        return "bucketing"
    return parts[1] if len(parts) > 1 and parts[1] in STAGE_IMPORTS else "top"


def _against_the_flow(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for mod, targets in sorted(graph.items()):
        stage = _stage(mod)
        if stage not in STAGE_IMPORTS:  # bucketing (never imports tracekit) and the top level
            continue
        for t in sorted(targets):
            if _stage(t) != stage and _stage(t) not in STAGE_IMPORTS[stage]:
                out.append(f"{mod} -> {t}")
    return out


def test_data_flows_one_way():
    graph = _imports()
    stages = {_stage(m) for m in graph}
    assert stages == {*STAGE_IMPORTS, "bucketing", "torch-free bucketing", "top"}  # every module is in a stage
    assert "tracekit.model.nouns" in graph["tracekit.render.html"]  # the scan sees real edges
    assert _against_the_flow(graph) == []


def test_an_import_against_the_flow_would_be_found():
    graph = {"tracekit.read.reader": {"tracekit.analyze.summarize", "tracekit.model"},
             "tracekit.render.text": {"tracekit.commands.output"},
             "tracekit.analyze.summarize": {"tracekit.read.reader"}}
    assert _against_the_flow(graph) == ["tracekit.read.reader -> tracekit.analyze.summarize",
                                        "tracekit.render.text -> tracekit.commands.output"]


def test_the_torch_free_part_of_bucketing_imports_no_torch():
    """The reader's stage may import them, so they must stay torch-free; the passes load on use."""
    code = ("import sys\nimport " + ", ".join(sorted(TORCH_FREE_BUCKETING)) + "\n"
            "print('torch' in sys.modules)\nbucketing.plan_fsdp_buckets\nprint('torch' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.stdout == "False\nTrue\n", done.stderr
