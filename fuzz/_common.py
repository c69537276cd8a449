"""Shared driver of the fuzz harnesses: atheris (coverage-guided libFuzzer) when installed, else
a deterministic mutation loop over the same seeds, so ``python fuzz/fuzz_X.py -atheris_runs=N``
works either way and ends by printing how many inputs ran clean (``TRACEKIT_FUZZ_FALLBACK=1``
forces the loop even when atheris is installed)."""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
from collections.abc import Callable

try:
    import atheris  # the optional extra: pip install 'tracekit[fuzz]'
except ImportError:  # pragma: no cover - depends on the machine
    atheris = None

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE_LOGS = os.path.join(ROOT, "fixtures", "logs")
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

_PIECES = [b"\n", b"\t", b"\r\n", b"\x00", b"\xff", b"{", b"}", b"[", b"]", b'"', b",", b":",
           b"__", b"(", b")", b"\x1f\x8b", b"9999999999999", b"-1", b"torch.ops.", b"lambda ",
           b"import ", b'"rank": ', b'"has_payload": "', b"Sym(s0)", b"f32[", b"]cpu"]


def mutate(data: bytes, rng: random.Random) -> bytes:
    """A few random byte-level edits of ``data`` (flip, insert, delete, duplicate, cut)."""
    for _ in range(rng.randint(1, 8)):
        n = len(data)
        pos = rng.randrange(n + 1) if n else 0
        op = rng.randrange(6)
        if op == 0 and n:
            i = min(pos, n - 1)
            data = data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1 :]
        elif op == 1:
            data = data[:pos] + rng.choice(_PIECES) + data[pos:]
        elif op == 2:
            data = data[:pos] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 8))) + data[pos:]
        elif op == 3:
            data = data[:pos] + data[pos + rng.randint(1, 200) :]
        elif op == 4:
            k = rng.randint(1, 200)
            data = data[: pos + k] + data[pos : pos + k] + data[pos + k :]
        elif rng.random() < 0.2:
            data = data[:pos]
    return data


def _runs(argv: list[str]) -> int:
    for a in argv:
        if a.startswith("-atheris_runs="):
            return int(a.split("=", 1)[1])
        if a.startswith("-runs="):
            return int(a.split("=", 1)[1])
    return 10_000


def main(test_one_input: Callable[[bytes], None], seeds: list[bytes], argv: list[str] | None = None,
         force_fallback: bool = False) -> int:
    """Fuzz ``test_one_input`` from ``seeds``; returns the number of inputs that ran clean."""
    argv = list(sys.argv if argv is None else argv)
    force_fallback = force_fallback or os.environ.get("TRACEKIT_FUZZ_FALLBACK") == "1"
    if atheris is not None and not force_fallback:
        seed_dir = tempfile.mkdtemp(prefix="tracekit_fuzz_seeds_")
        for i, s in enumerate(seeds):
            with open(os.path.join(seed_dir, f"seed_{i:03d}"), "wb") as f:
                f.write(s)
        if not any(not a.startswith("-") for a in argv[1:]):
            argv.append(seed_dir)  # no corpus directory given: start from the seeds
        atheris.Setup(argv, test_one_input)
        atheris.Fuzz()  # exits the process; libFuzzer prints "Done N runs in S second(s)"
        return 0
    runs = _runs(argv)
    rng = random.Random(1234)
    t0 = time.time()
    for s in seeds:
        test_one_input(s)
    done = len(seeds)
    while done < runs:
        test_one_input(mutate(rng.choice(seeds), rng))
        done += 1
    print(f"fallback fuzzer (no atheris, or TRACEKIT_FUZZ_FALLBACK=1): {done} inputs ran clean in {time.time() - t0:.1f} s")
    return done
