"""Fuzz the reader: any bytes, plain or gzipped, or spliced into a real log, must be read
without an exception escaping :func:`tracekit.read.reader.read_file`, and no outcome may be made up.

    python fuzz/fuzz_reader.py -atheris_runs=200000      # atheris (pip install 'tracekit[fuzz]')
    python fuzz/fuzz_reader.py -atheris_runs=20000 CORPUS_DIR

Seeds are slices of the real fixture log ``fixtures/logs/spmd_auto`` (rank 0): the forward's
size and outcome entries, the file head, a graph text entry. The first input byte picks how the
rest is presented: as is, gzipped, cut gzip, or between the real head and the real outcomes.
Without atheris, a seeded mutation loop runs instead (same harness, same checks).
"""

from __future__ import annotations

import glob
import gzip
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

if _common.atheris is not None:
    with _common.atheris.instrument_imports(include=["tracekit"]):
        from tracekit.read.reader import read_file
else:
    from tracekit.read.reader import read_file

LOG = sorted(glob.glob(os.path.join(_common.FIXTURE_LOGS, "spmd_auto", "dedicated_log_torch_trace_rank_0_*.log")))[0]
CLEAN = open(LOG, "rb").read()
_LINES = CLEAN.split(b"\n")
OUTCOME = b"pre_bucketing_fsdp_collectives"


def _slice(name: bytes, before: int = 0, nth: int = 0) -> bytes:
    """The entry naming ``name`` (and ``before`` lines before it), with its payload lines."""
    hits = [i for i, ln in enumerate(_LINES) if b'"name": "' + name + b'"' in ln]
    i = hits[nth]
    j = i + 1
    while j < len(_LINES) and _LINES[j].startswith(b"\t"):
        j += 1
    return b"\n".join(_LINES[max(0, i - before) : j]) + b"\n"


SEEDS = [
    _slice(b"pre_bucketing_collective_sizes_after") + _slice(OUTCOME),
    _slice(b"pre_bucketing_collective_sizes") + _slice(OUTCOME, nth=1),
    b"\n".join(_LINES[:40]) + b"\n",
    _slice(b"fx_bucketing_passes_all_gather_buckets", before=3),
    b"",
]
HEAD = b"\n".join(_LINES[:30]) + b"\n"
TAIL = _slice(OUTCOME, nth=1)
PATH = os.path.join("/dev/shm" if os.path.isdir("/dev/shm") else "/tmp",
                    f"dedicated_log_torch_trace_rank_0_fuzz{os.getpid()}.log")


def test_one_input(data: bytes) -> None:
    mode, body = (data[0] % 4, data[1:]) if data else (0, data)
    if mode == 1:
        body = gzip.compress(body, mtime=0)
    elif mode == 2:
        z = gzip.compress(body, mtime=0)
        body = z[: max(2, len(z) * 2 // 3)]
    elif mode == 3:
        body = HEAD + body + TAIL
    with open(PATH, "wb") as f:
        f.write(body)
    try:
        res = read_file(PATH)  # must never raise
    finally:
        os.remove(PATH)  # atheris ends the process with exit(): leave nothing behind
    plain = body if mode in (0, 3) else data
    if len(res.graphs) > plain.count(OUTCOME):
        raise RuntimeError(f"{len(res.graphs)} outcomes read from {plain.count(OUTCOME)} outcome entries")


if __name__ == "__main__":
    _common.main(test_one_input, SEEDS)
