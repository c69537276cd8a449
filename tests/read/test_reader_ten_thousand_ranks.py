"""10,000 small rank logs (bench/make_ranks.py --small) read with at most 32 open files and no
process per file: every rank read, the diverging ones told apart. (100,000 are timed by
bench/bench_ranks.py --huge: too slow for a test on 2 cores.)"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap

import pytest

from conftest import FIXTURE_LOGS, ROOT

_spec = importlib.util.spec_from_file_location("bench_make_ranks", ROOT / "bench" / "make_ranks.py")
make_ranks = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = make_ranks
_spec.loader.exec_module(make_ranks)

N = 10_000

#: Run in a child: a low open-file limit, os.fork counted, then load with 1 and 2 jobs.
CHILD = textwrap.dedent("""
    import json, os, resource, sys
    resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))
    forks = 0
    real_fork = os.fork

    def counting_fork():
        global forks
        forks += 1
        return real_fork()

    os.fork = counting_fork
    import tracekit
    import tracekit.read.segments
    from tracekit.model.rankset import format_ranks

    tracekit.read.segments.PARALLEL_MIN_BYTES = 0  # 65 MiB: workers whatever the threshold

    out = {}
    for jobs in (1, 2):
        before = forks
        run = tracekit.load(sys.argv[1], jobs=jobs)
        groups = {}
        for r in run.ranks:
            key = " ".join(f"{g.label}:{g.collectives['all_gather'].before}->{g.collectives['all_gather'].after}"
                           f",{g.collectives['reduce_scatter'].before}->{g.collectives['reduce_scatter'].after}"
                           for g in r.graphs)
            groups.setdefault(key, []).append(r.rank)
        out[jobs] = {"ranks": len(run.ranks), "files": sum(len(r.files) for r in run.ranks),
                     "groups": {k: format_ranks(v) for k, v in groups.items()},
                     "diagnostics": run.diagnostics.counts, "forks": forks - before}
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def ten_thousand(tmp_path_factory):
    out = tmp_path_factory.mktemp("ranks10k")
    diverge = make_ranks.rank_log(FIXTURE_LOGS / "diverge_rank", 3)
    made = make_ranks.make_ranks(out, N, diverge={300: diverge, 777: diverge, N - 1: diverge}, small=True)
    assert made.ranks == N
    return out


def test_ten_thousand_small_rank_logs_with_32_open_files(ten_thousand):
    r = subprocess.run([sys.executable, "-c", CHILD, str(ten_thousand)], capture_output=True, text=True,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    for jobs in ("1", "2"):
        got = out[jobs]
        assert (got["ranks"], got["files"], got["diagnostics"]) == (N, N, {}), (jobs, got)
        assert got["groups"] == {
            "0/0:0:8->1,0->0 0/0:1:5->1,8->1": "0-299,301-776,778-9998",
            "0/0:0:10->1,0->0 0/0:1:7->1,10->1": "300,777,9999",
        }
    assert out["1"]["forks"] == 0  # read in this process
    assert out["2"]["forks"] == 2  # two workers, whatever the number of files
