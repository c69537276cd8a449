"""``python -m tracekit``: the same as the ``tracekit`` command."""

from tracekit.cli import run

run()
