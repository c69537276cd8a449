"""``summarize --dask``: the fixture logs read by the workers of a real Dask cluster (a
``distributed.LocalCluster`` with two worker processes, started once for this module) give the
same summary document, byte for byte, as a local run; an unusable cluster is one line, exit 2."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
from click.testing import CliRunner

from conftest import FIXTURE_LOGS, ROOT
from tracekit.commands.summarize_cmd import summarize
from tracekit.read.dask_reader import MAX_FILES_PER_TASK, load_with_dask, split_batches
from tracekit.read.sources import LogFile

distributed = pytest.importorskip("distributed")  # the `dask` extra


@pytest.fixture(scope="module")
def scheduler() -> str:
    """The address of a real scheduler with two single-threaded worker processes."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster:
        yield cluster.scheduler_address


def _summary(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(summarize, [*args, "--format", "json", "--per-rank"], catch_exceptions=False)
    return res.exit_code, res.output


@pytest.mark.parametrize("scenario", ["diverge_rank", "spmd_auto"])
def test_summary_on_dask_is_the_local_one(scheduler, scenario):
    path = str(FIXTURE_LOGS / scenario)
    code, on_dask = _summary("--dask", scheduler, path)
    local_code, local = _summary(path)
    assert code == local_code == 0
    assert on_dask == local
    doc = json.loads(on_dask)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1, 2, 3]
    forward = doc["ranks"][3]["graphs"][0]
    assert (forward["compile_id"], forward["graph_index"]) == ("0/0", 0)
    ag = forward["collectives"]["all_gather"]
    assert (ag["before"], ag["after"]) == ((10, 1) if scenario == "diverge_rank" else (8, 1))
    assert doc["ranks"][3]["files"] == [str(FIXTURE_LOGS / scenario / n) for n in
                                        sorted(p.name for p in (FIXTURE_LOGS / scenario).glob("*rank_3_*"))]


def test_an_fsdp2_run_on_dask_shows_its_compiled_regions(scheduler):
    # no rank logged an outcome: the frame compiles are read in a second pass, on the workers
    # too, so --dask gives the local summary, Compiled regions included, byte for byte
    path = str(FIXTURE_LOGS / "fsdp2")
    code, on_dask = _summary("--dask", scheduler, path)
    local_code, local = _summary(path)
    assert code == local_code == 0
    assert on_dask == local
    doc = json.loads(on_dask)
    regions = doc["compiled_regions"]
    assert regions, doc.keys()
    table = CliRunner().invoke(summarize, ["--dask", scheduler, path], catch_exceptions=False).output
    assert table == CliRunner().invoke(summarize, [path], catch_exceptions=False).output
    assert "2 regions compiled, taking in 49,920 bytes of parameters; 1 frame fell back to eager" in table
    assert "Why: see Compiled regions, Notes below" in table


def test_relative_paths_are_named_as_given(scheduler, monkeypatch):
    # The workers open the absolute path (their working directory is not the client's); the
    # summary names files as the user spelled them, as a local run does.
    monkeypatch.chdir(FIXTURE_LOGS)
    code, on_dask = _summary("--dask", scheduler, "spmd_small_cap")
    assert code == 0 and on_dask == _summary("spmd_small_cap")[1]
    doc = json.loads(on_dask)
    assert doc["ranks"][0]["files"][0].startswith("spmd_small_cap/dedicated_log_torch_trace_rank_0_")
    assert doc["ranks"][0]["graphs"][1]["collectives"]["reduce_scatter"] == {"before": 8, "after": 5}
    assert doc["diagnostics"]["counts"] == {}


def test_a_file_the_workers_cannot_see_is_a_diagnostic(scheduler, monkeypatch, tmp_path):
    # The client lists a file that is gone when a worker opens it (a filesystem the workers do
    # not share): the other files are summarized, the missing one is an unreadable_file.
    import tracekit.read.dask_reader as dr

    gone = tmp_path / "dedicated_log_torch_trace_rank_9_gone.log"
    real_find = dr.find_log_names

    def listed_then_deleted(paths, diagnostics, skipped=None, subdirs=None):
        return real_find(paths, diagnostics, skipped, subdirs) + [(str(gone), 9)]

    monkeypatch.setattr(dr, "find_log_names", listed_then_deleted)
    run = load_with_dask([str(FIXTURE_LOGS / "spmd_auto")], scheduler)
    assert [r.rank for r in run.ranks] == [0, 1, 2, 3]
    assert run.diagnostics.counts == {"unreadable_file": 1}
    assert run.diagnostics.examples[0]["file"] == str(gone)
    assert run.diagnostics.examples[0]["detail"] == "No such file or directory"


def test_progress_reaches_the_total(scheduler):
    calls = []
    load_with_dask([str(FIXTURE_LOGS / "spmd_auto_gz")], scheduler, progress=lambda d, t: calls.append((d, t)))
    total = sum(p.stat().st_size for p in (FIXTURE_LOGS / "spmd_auto_gz").glob("*.log.gz"))
    assert calls and calls[-1] == (total, total)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("address,message", [
    (f"tcp://127.0.0.1:{_free_port()}", "cannot reach the Dask scheduler at tcp://127.0.0.1:"),
    ("no-port-here", "expected a scheduler address like tcp://HOST:8786"),
])
def test_unusable_scheduler_is_one_line_and_exit_2(address, message):
    out = subprocess.run([sys.executable, "-m", "tracekit", "summarize", "--dask", address,
                          str(FIXTURE_LOGS / "spmd_auto")], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracekit summarize: ") and message in lines[0], out.stderr


def test_jobs_and_dask_exclude_each_other():
    res = CliRunner().invoke(summarize, ["--dask", "tcp://127.0.0.1:8786", "-j", "2", str(FIXTURE_LOGS / "spmd_auto")])
    assert res.exit_code == 2 and "--jobs does not apply with --dask" in res.output


def test_batches_keep_file_order_and_bound_the_tasks():
    logs = [LogFile(f"r{i}.log", size, i) for i, size in enumerate([10] * 6 + [1000] + [10] * 5)]
    batches = split_batches(logs, 4)
    assert [lg for b in batches for lg in b] == logs
    assert [len(b) for b in batches] == [6, 1, 5]  # the big file alone; never more than asked
    many = [LogFile(f"r{i}.log", 5, i) for i in range(100_000)]
    batches = split_batches(many, 8)
    assert len(batches) == -(-100_000 // MAX_FILES_PER_TASK) == 391
    assert max(len(b) for b in batches) == MAX_FILES_PER_TASK
    assert [lg for b in batches for lg in b] == many
    assert split_batches([], 8) == [] and split_batches(logs[:2], 8) == [[logs[0]], [logs[1]]]


@pytest.mark.parametrize("with_dask", [False, True])
def test_only_dask_imports_distributed_and_nothing_imports_torch(scheduler, with_dask):
    args = ["summarize", str(FIXTURE_LOGS / "diverge_rank"), "--format", "csv"]
    args += ["--dask", scheduler] if with_dask else []
    code = ("import sys\nfrom tracekit.cli import main\n"
            f"try:\n    main({args!r})\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
            "print(sorted({'torch', 'dask', 'distributed'} & set(sys.modules)), file=sys.stderr)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "outcome,3,1,0/0,backward,,,,,0,4,1,27.4,7,1,10,1,0,0,0.56,0.559,,,," in out.stdout.splitlines()
    imported = out.stderr.strip().splitlines()[-1]
    assert imported == ("['dask', 'distributed']" if with_dask else "[]")


def test_a_scheduler_without_workers_is_an_error_not_a_hang():
    from tracekit.read.dask_reader import DaskReadError

    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as empty:
        with pytest.raises(DaskReadError, match=r"^the Dask scheduler at \S+ has no workers "
                                                r"\(none joined within 1 s\)$"):
            load_with_dask([str(FIXTURE_LOGS / "spmd_auto")], empty.scheduler_address, timeout=1)


class _PeerThatIsNotDask:
    """A server on 127.0.0.1 that is no Dask scheduler, for the length of a ``with`` block: a
    plain HTTP server (``http``), or a raw TCP server that answers every connection with junk
    bytes and hangs up (``junk``). It stops itself at the block's end, and after 60 s at most."""

    def __init__(self, kind: str):
        import http.server
        import socketserver
        import threading

        if kind == "http":
            class Http(http.server.BaseHTTPRequestHandler):
                timeout = 10  # a client that sends no whole request is dropped

            self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Http)
        else:
            class Junk(socketserver.BaseRequestHandler):
                def handle(self):
                    self.request.sendall(b"\xff" * 64 + b"HTTP/1.0 200 OK\r\n\r\n" + bytes(range(256)) * 8)

            self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Junk)
        self.server.daemon_threads = True
        self.address = "tcp://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.timer = threading.Timer(60, self.server.shutdown)

    def __enter__(self):
        self.thread.start()
        self.timer.start()
        return self

    def __exit__(self, *exc):
        self.timer.cancel()
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("kind, message", [
    ("http", "no Dask scheduler answered at tcp://127.0.0.1:{port} within 5 s (is it a Dask scheduler's address?)"),
    ("junk", "--dask 'tcp://127.0.0.1:{port}': not a Dask scheduler ("),
])
def test_an_address_that_is_not_a_dask_scheduler_is_one_line_and_exit_2(kind, message):
    # a plain HTTP server kept distributed's handshake waiting for good; junk bytes were read
    # as a frame length (a MemoryError of exabytes, or a ValueError)
    with _PeerThatIsNotDask(kind) as peer:
        out = subprocess.run([sys.executable, "-m", "tracekit", "summarize", "--dask", peer.address,
                              str(FIXTURE_LOGS / "spmd_auto")], capture_output=True, text=True, cwd=ROOT,
                             timeout=60)
    port = peer.address.rsplit(":", 1)[1]
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracekit summarize: " + message.format(port=port)), out.stderr


def test_the_wait_for_a_peer_that_is_not_dask_is_the_timeout_given():
    from tracekit.read.dask_reader import DaskReadError

    with _PeerThatIsNotDask("http") as peer:
        with pytest.raises(DaskReadError, match=r"^no Dask scheduler answered at \S+ within 1 s"):
            load_with_dask([str(FIXTURE_LOGS / "spmd_auto")], peer.address, timeout=1)


def test_files_that_are_no_log_and_subdirectories_are_said_on_dask_as_locally(scheduler, tmp_path):
    """world.not_logs, world.subdirectories and the text's "not a log" list: the same bytes with
    --dask as without (a copy of spmd_auto with a README and a subdirectory of logs)."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(FIXTURE_LOGS / "spmd_auto", run)
    (run / "notes.txt").write_text("not a log\n")
    shutil.copytree(FIXTURE_LOGS / "spmd_small_cap", run / "older")
    code, on_dask = _summary("--dask", scheduler, str(run))
    local_code, local = _summary(str(run))
    assert code == local_code == 0
    assert on_dask == local
    world = json.loads(on_dask)["world"]
    assert (world["not_logs"], world["subdirectories"]) == ([str(run / "notes.txt")], [str(run / "older")])
    text = CliRunner().invoke(summarize, ["--dask", scheduler, str(run)], catch_exceptions=False)
    local_text = CliRunner().invoke(summarize, [str(run)], catch_exceptions=False)
    assert text.output == local_text.output
    assert "notes.txt" in text.output
