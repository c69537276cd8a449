"""``tracekit.read.output_code``: which wait ends which collective, read off the profiled
fixtures' ``inductor_output_code`` (as text: the generated module is never run)."""

from __future__ import annotations

from conftest import ROOT
from tracekit.read.output_code import wait_orders, waits_of

PROFILED = ROOT / "fixtures" / "profiled"


def test_the_12mb_backward_waits_out_of_issue_order():
    """Its backward issues AG AG AG RS RS RS and waits AG0, RS3, AG1, RS4, AG2, RS5."""
    assert wait_orders([str(PROFILED / "gloo_cap_12mb" / "logs")]) == {
        (0, "0/0", 0): [0, 1, 2],
        (0, "0/0", 1): [0, 3, 1, 4, 2, 5],
        (1, "0/0", 0): [0, 1, 2],
        (1, "0/0", 1): [0, 3, 1, 4, 2, 5],
    }


def test_the_1mb_run_waits_in_issue_order():
    orders = wait_orders([str(PROFILED / "gloo_cap_1mb" / "logs")])
    assert orders[(0, "0/0", 0)] == list(range(8)) and orders[(1, "0/0", 1)] == list(range(15))


def test_buffers_named_by_out_or_assignment_and_reused():
    code = "\n".join(
        [
            "        # Topologically Sorted Source Nodes: [all_gather_into_tensor]",
            "        torch.ops._c10d_functional.all_gather_into_tensor_out.default(buf0, 2, '0', out=buf0)",
            "        buf1 = torch.ops._c10d_functional.reduce_scatter_tensor.default(buf9, 'sum', 2, '0')",
            "        torch.ops._c10d_functional.wait_tensor.default(buf1)",
            "        torch.ops._c10d_functional.wait_tensor.default(buf0)",
            "        torch.ops._c10d_functional.all_gather_into_tensor_out.default(buf0, 2, '0', out=buf0)",
            "        torch.ops._c10d_functional.wait_tensor.default(buf0)",
        ]
    )
    assert waits_of(code) == [1, 0, 2]
    assert waits_of("        torch.ops._c10d_functional.wait_tensor.default(buf7)") is None
