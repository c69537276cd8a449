"""Fuzz replay's graph parser: any text must end in a linted GraphModule of fake values or a
``GraphTextError``, and nothing in it may run (an audit hook turns any process, write, network
or import-time side effect during a parse into a crash).

    python fuzz/fuzz_graph_text.py -atheris_runs=50000   # atheris (pip install 'tracekit[fuzz]')

Seeds are the real ``before_post_grad_graph`` texts of the fixture logs (spmd_auto and
diverge_rank, rank 3) and a few hostile lines. Without atheris, a seeded mutation loop runs.
"""

from __future__ import annotations

import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

import torch  # noqa: E402  (imported first, uninstrumented: its import probes the machine)
from torch._subclasses.fake_tensor import FakeTensor  # noqa: E402

from tracekit.read.reader import graph_sources  # noqa: E402

if _common.atheris is not None:
    with _common.atheris.instrument_imports(include=["tracekit.replay"]):
        from tracekit.replay.graph_text import GraphTextError, parse_graph_text
else:
    from tracekit.replay.graph_text import GraphTextError, parse_graph_text


def _texts() -> list[str]:
    out = []
    for scenario in ("spmd_auto", "diverge_rank"):
        log = sorted(glob.glob(os.path.join(_common.FIXTURE_LOGS, scenario, "dedicated_log_torch_trace_rank_3_*.log")))[0]
        out += [s.text for s in graph_sources(log) if s.text]
    return out


TEXTS = _texts()
_SMALL = TEXTS[0].split("\n")
SEEDS = [t.encode() for t in TEXTS] + [
    ("\n".join(_SMALL[:3] + _SMALL[-2:])).encode(),
    b"class GraphModule(torch.nn.Module):\n    def forward(self, x: \"f32[99999999999999][1]cpu\"):\n"
    b"        y: \"f32[99999999999999][1]cpu\" = torch.ops.aten.relu.default(x)\n        return (y,)\n",
    b"class GraphModule(torch.nn.Module):\n    def forward(self, x: \"f32[s0][1]cpu\", s0: \"Sym(s0)\"):\n"
    b"        y = __import__('os').system('true')\n        return (x,)\n",
]
SYMBOLS = {"s0": 3, "s1": 5, "s77": 7}

_FORBIDDEN = ("os.system", "subprocess.", "os.exec", "os.spawn", "os.posix_spawn", "os.fork",
              "socket.", "os.remove", "os.rename", "os.mkdir", "os.rmdir", "shutil.", "ctypes.",
              "os.chmod", "os.truncate", "import")
_armed = [False]


class Escape(BaseException):
    """Raised by the audit hook: something ran that a parse must never do."""


def _hook(event: str, args: tuple) -> None:
    if not _armed[0]:
        return
    bad = event.startswith(_FORBIDDEN)
    if event == "open" and len(args) >= 3:
        mode, flags = args[1], args[2]
        bad = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)))
    if bad:
        _armed[0] = False
        raise Escape(f"{event} {args!r}"[:300])


for _t in TEXTS:  # warm up: lazy imports inside torch happen now, not under the hook
    parse_graph_text(_t, SYMBOLS)
sys.addaudithook(_hook)


def test_one_input(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    _armed[0] = True
    try:
        gm = parse_graph_text(text, SYMBOLS)
    except GraphTextError:
        return
    finally:
        _armed[0] = False
    gm.graph.lint()
    for n in gm.graph.nodes:
        v = n.meta.get("val")
        if isinstance(v, torch.Tensor) and not isinstance(v, FakeTensor):
            raise RuntimeError(f"node {n.name} has a real tensor")


if __name__ == "__main__":
    _common.main(test_one_input, SEEDS)
