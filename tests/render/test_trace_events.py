"""``tracekit replay PATH --trace-out DIR`` (tracekit/render/perfetto.py): one Chrome trace-event
file per cap, checked against the trace-event format's rules and the replay JSON of the same run,
on the real overlap_cap_a / overlap_cap_b fixtures (and spmd_small_cap with --overlap forced)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_LOGS, ROOT

pytest.importorskip("torch")

A, B = FIXTURE_LOGS / "overlap_cap_a", FIXTURE_LOGS / "overlap_cap_b"
TRACKS = {"0/0:0 compute", "0/0:0 communication group 0", "0/0:1 compute", "0/0:1 communication group 0"}
META_NAMES = {"process_name", "thread_name", "process_sort_index", "thread_sort_index"}


def _run(path: Path, out: Path, *args: str) -> tuple[int, dict, str]:
    p = subprocess.run([sys.executable, "-m", "tracekit", "replay", str(path), *args, "--format", "json",
                        "--trace-out", str(out)], capture_output=True, text=True, cwd=ROOT,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    return p.returncode, json.loads(p.stdout), p.stderr


@pytest.fixture(scope="module")
def run_a(tmp_path_factory):
    out = tmp_path_factory.mktemp("trace_a")
    rc, doc, err = _run(A, out, "--cap-mb", "2,64")
    assert rc == 0, err
    return doc, out


@pytest.fixture(scope="module")
def run_b(tmp_path_factory):
    out = tmp_path_factory.mktemp("trace_b")
    rc, doc, err = _run(B, out, "--cap-mb", "1.5")
    assert rc == 0, err
    return doc, out


def _load(path: Path) -> list[dict]:
    d = json.loads(path.read_text())
    assert isinstance(d, dict) and isinstance(d["traceEvents"], list)
    return d["traceEvents"]


def check_trace_event_rules(events: list[dict]) -> None:
    """The trace-event format's rules for the phases we write (X, C, M)."""
    for e in events:
        assert e["ph"] in ("X", "C", "M"), e
        assert isinstance(e["pid"], int) and isinstance(e["name"], str) and e["name"]
        if e["ph"] == "X":
            for k in ("ph", "ts", "dur", "pid", "tid"):
                assert k in e, (k, e)
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
            assert isinstance(e["tid"], int) and isinstance(e.get("args", {}), dict)
        elif e["ph"] == "C":
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
            assert e["args"] and all(isinstance(v, (int, float)) for v in e["args"].values())
        else:
            assert e["name"] in META_NAMES and isinstance(e["args"], dict)
    json.dumps(events, allow_nan=False)  # no NaN/Infinity: not JSON for a trace importer


def check_no_overlap(events: list[dict]) -> None:
    tracks: dict[tuple, list] = {}
    for e in events:
        if e["ph"] == "X":
            tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
    for key, spans in tracks.items():
        spans.sort()
        for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
            assert b1 >= e0 - 1e-6, (key, n0, e0, n1, b1)


def _track_names(events):
    return {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}


def _exposed_ms(events, graph=None):
    return sum(e["dur"] for e in events if e["ph"] == "X" and e["cat"] == "exposed"
               and (graph is None or e["args"]["graph"] == graph)) / 1e3


def test_one_file_per_cap_named_by_the_cap(run_a, run_b):
    assert sorted(p.name for p in run_a[1].iterdir()) == ["cap_1.5MB.json", "cap_2MB.json", "cap_64MB.json"]
    assert sorted(p.name for p in run_b[1].iterdir()) == ["cap_1.5MB.json", "cap_64MB.json"]


@pytest.mark.parametrize("which", ["a", "b"])
def test_every_file_follows_the_rules_has_the_same_tracks_and_no_overlap(which, run_a, run_b):
    doc, out = run_a if which == "a" else run_b
    for p in out.iterdir():
        ev = _load(p)
        check_trace_event_rules(ev)
        check_no_overlap(ev)
        assert _track_names(ev) == TRACKS, p.name
        assert {e["args"]["name"] for e in ev if e["name"] == "process_name"} == {"ranks 0"}


@pytest.mark.parametrize("which", ["a", "b"])
def test_exposed_slices_add_up_to_the_replay_json(which, run_a, run_b):
    doc, out = run_a if which == "a" else run_b
    from tracekit.render.perfetto import cap_file_name

    step = doc["totals"]["step"]
    for i, s in enumerate(step):
        ev = _load(out / cap_file_name(s))
        assert abs(_exposed_ms(ev) - s["exposed_ms"]) <= 1e-3, (s["cap"], _exposed_ms(ev), s["exposed_ms"])
        for g in doc["graphs"]:
            entry = g["reproduction"] if i == 0 else g["replays"][i - 1]
            label = f"{g['compile_id']}:{g['graph_index']}"
            assert abs(_exposed_ms(ev, label) - entry["exposed_ms"]) <= 1e-3


def test_exact_slices_of_the_recorded_small_cap(run_a):
    ev = _load(run_a[1] / "cap_1.5MB.json")
    comm = [e for e in ev if e["ph"] == "X" and e["cat"] == "communication"]
    assert len(comm) == 17  # the final sequence: 6 AG forward, 5 AG + 6 RS backward
    # bytes as summarize counts them: one rank's input (the all-gather's shard, 524,288 B);
    # torch's size_bytes (input + output) beside them
    assert comm[0]["name"] == "all_gather [all_gather_into_tensor] 524,288 B"
    assert (comm[0]["args"]["bytes"], comm[0]["args"]["size_bytes"]) == (524288, 1572864)
    assert (comm[0]["ts"], comm[0]["dur"]) == (0.0, 15.077)
    assert sum(e["args"]["kind"] == "reduce_scatter" for e in comm) == 6
    # torch exposed the forward's first all-gather wholly, then 1.655 us of each of the next five
    exposed = [round(e["dur"], 3) for e in ev if e["ph"] == "X" and e["cat"] == "exposed"
               and e["args"]["graph"] == "0/0:0"]
    assert exposed == [15.077] + [1.655] * 5
    # an exposed collective ends where the compute stream resumes after its wait
    fwd = {e["args"]["collective"]: e for e in ev if e["ph"] == "X" and e["cat"] == "exposed"
           and e["args"]["graph"] == "0/0:0"}
    c1 = next(e for e in comm if e["args"]["members"] == ["all_gather_into_tensor_1"])
    w1 = fwd["all_gather_into_tensor_1"]
    assert abs((c1["ts"] + c1["dur"]) - (w1["ts"] + w1["dur"])) <= 1e-3
    # the memory counter peaks at the graph's peak_memory_bytes (7,864,320 forward, 8,912,900 backward)
    peaks = {}
    for e in ev:
        if e["ph"] == "C":
            peaks[e["name"]] = max(peaks.get(e["name"], 0), e["args"]["bytes"])
    assert peaks == {"0/0:0 memory": 7864320, "0/0:1 memory": 8912900}
    compute = [e for e in ev if e["ph"] == "X" and e["cat"] == "compute" and e["name"].startswith("mm")]
    assert len(compute) == 17  # each mm at its recorded 13.422 us (1 ns may go to rounding)
    assert all(abs(e["dur"] - 13.422) <= 0.0015 for e in compute if e["args"]["graph"] == "0/0:0")


def test_a_bucket_names_its_members(run_a):
    ev = _load(run_a[1] / "cap_64MB.json")
    comm = [e for e in ev if e["ph"] == "X" and e["cat"] == "communication"]
    assert [e["args"]["kind"] for e in comm] == ["all_gather", "all_gather", "reduce_scatter"]
    assert comm[0]["args"]["members"] == [f"all_gather_into_tensor{s}" for s in ["", "_1", "_2", "_3", "_4", "_5"]]
    # the name is bounded: the first two members and the count; args.members has all six
    assert comm[0]["name"] == "all_gather [all_gather_into_tensor, all_gather_into_tensor_1, +4 more] 3,145,728 B"
    # the backward starts where the forward's compute stream ended (its est_ms, 0.1199 ms)
    bwd = [e for e in ev if e["ph"] == "X" and e["args"].get("graph") == "0/0:1"]
    assert abs(min(e["ts"] for e in bwd) - 119.9) < 0.1


def test_a_run_without_a_recorded_schedule_still_gives_valid_traces(tmp_path):
    rc, doc, err = _run(FIXTURE_LOGS / "spmd_small_cap", tmp_path, "--overlap", "--cap-mb", "1")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cap_0.1MB.json", "cap_1MB.json"]
    for i, s in enumerate(doc["totals"]["step"]):
        from tracekit.render.perfetto import cap_file_name

        ev = _load(tmp_path / cap_file_name(s))
        check_trace_event_rules(ev)
        check_no_overlap(ev)
        assert abs(_exposed_ms(ev) - s["exposed_ms"]) <= 1e-3


def test_the_writer_does_not_import_torch_and_reads_a_saved_document(run_b, tmp_path):
    doc, _ = run_b
    saved = tmp_path / "replay.json"
    saved.write_text(json.dumps(doc))
    code = ("import json, sys; from tracekit.render.perfetto import write_traces; "
            f"print(len(write_traces(json.load(open({str(saved)!r})), {str(tmp_path / 'out')!r}))); "
            "assert 'torch' not in sys.modules")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "2"


def test_trace_out_on_a_file_is_a_usage_error_exit_2(tmp_path):
    f = tmp_path / "taken"
    f.write_text("x")
    p = subprocess.run([sys.executable, "-m", "tracekit", "replay", str(B), "--trace-out", str(f)],
                       capture_output=True, text=True, cwd=ROOT,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1].endswith("Invalid value for '--trace-out': "
                                                      f"Directory '{f}' is a file.")
    assert "Traceback" not in p.stderr


def test_each_rank_group_is_a_process_with_the_same_tracks(tmp_path):
    """diverge_rank --all-ranks: ranks 0-2 and rank 3 (two more layers) replay apart; each is a
    process, and its exposed slices add up to its own graphs' exposed_ms (the step total is the
    lowest rank's)."""
    rc, doc, err = _run(FIXTURE_LOGS / "diverge_rank", tmp_path, "--all-ranks", "--overlap")
    assert rc == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cap_27.4MB.json"]
    ev = _load(tmp_path / "cap_27.4MB.json")
    check_trace_event_rules(ev)
    check_no_overlap(ev)
    procs = {e["args"]["name"]: e["pid"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert list(procs) == ["ranks 0-2", "ranks 3"]
    for name, pid in procs.items():
        mine = [e for e in ev if e["pid"] == pid]
        assert {e["args"]["name"] for e in mine if e["name"] == "thread_name"} == TRACKS
        want = sum(g["reproduction"]["exposed_ms"] for g in doc["graphs"] if f"ranks {g['ranks']}" == name)
        assert abs(_exposed_ms(mine) - want) <= 1e-3
    lowest = [e for e in ev if e["pid"] == procs["ranks 0-2"]]
    assert abs(_exposed_ms(lowest) - doc["totals"]["step"][0]["exposed_ms"]) <= 1e-3
    # rank 3's graphs have more layers: 12 matmuls to 9; both run 3 collectives (AG; AG, RS)
    n = {k: sum(e["ph"] == "X" and e["cat"] == "compute" and e["name"].startswith("mm") for e in ev if e["pid"] == p)
         for k, p in procs.items()}
    assert n == {"ranks 0-2": 9, "ranks 3": 12}
    assert [sum(e["ph"] == "X" and e["cat"] == "communication" for e in ev if e["pid"] == p)
            for p in procs.values()] == [3, 3]


@pytest.mark.parametrize("which", ["a", "b"])
def test_an_exposed_collective_ends_where_its_exposed_slice_ends(which, run_a, run_b):
    """On every cap: the compute stream resumes after a wait when the collective is done."""
    for p in (run_a if which == "a" else run_b)[1].iterdir():
        xs = [e for e in _load(p) if e["ph"] == "X"]
        comm = {(e["pid"], e["args"]["graph"], e["args"]["collective"]): e for e in xs if e["cat"] == "communication"}
        exposed = [e for e in xs if e["cat"] == "exposed"]
        assert exposed
        for e in exposed:
            c = comm[(e["pid"], e["args"]["graph"], e["args"]["collective"])]
            assert abs((c["ts"] + c["dur"]) - (e["ts"] + e["dur"])) <= 2e-3, (p.name, e["name"])
            assert c["ts"] <= e["ts"] + 2e-3  # it ran before the stream waited for it


def test_args_use_the_slices_clock_and_bytes_follow_summarize(run_a):
    """One number, one value (issue 39): a collective's args.issued_us is on the slices' clock
    (the step's: the backward's collectives are issued after the forward's 119.9 us at 64 MB, not
    from 0), its bytes are summarize's (one rank's input: at 64 MB the forward's one all-gather of
    3,145,728 B, as summarize says of overlap_cap_b, which ran at 64 MB), torch's size_bytes
    beside them, and the file's metadata names both."""
    from tracekit.render.perfetto import UNITS

    doc, out = run_a
    d = json.loads((out / "cap_64MB.json").read_text())
    assert d["metadata"]["units"] == UNITS
    assert UNITS["clock"].startswith("microseconds from the start of the step")
    ev = d["traceEvents"]
    i = [s["cap"] for s in doc["totals"]["step"]].index("64") - 1
    nodes = {(f"{g['compile_id']}:{g['graph_index']}", n["name"]): n
             for g in doc["graphs"] for n in g["replays"][i]["timeline"]["nodes"] if n["type"] == "collective"}
    # each graph's clock starts where its first compute slice does (the backward after the forward)
    start = {}
    for e in ev:
        if e["ph"] == "X" and e["cat"] == "compute":
            start[e["args"]["graph"]] = min(start.get(e["args"]["graph"], e["ts"]), e["ts"])
    assert start["0/0:0"] == 0.0 and abs(start["0/0:1"] - 119.9) < 0.1
    comm = [e for e in ev if e["ph"] == "X" and e["cat"] == "communication"]
    for e in comm:
        n = nodes[(e["args"]["graph"], e["args"]["collective"])]
        assert abs(e["args"]["issued_us"] - (start[e["args"]["graph"]] + n["start_us"])) <= 1e-3
        assert e["ts"] >= e["args"]["issued_us"] - 1e-3  # never starts before it is issued
        assert e["args"]["size_bytes"] == n["bytes"]  # torch's, as the replay JSON's timeline
    assert min(e["args"]["issued_us"] for e in comm if e["args"]["graph"] == "0/0:1") > 119.8
    assert [(e["args"]["graph"], e["args"]["kind"], e["args"]["bytes"]) for e in comm] == [
        ("0/0:0", "all_gather", 3145728), ("0/0:1", "all_gather", 2621440), ("0/0:1", "reduce_scatter", 6291456)]
