"""The optional C part of tracekit: the scanner's inner loop (tracekit/read/_scan.c).

Everything else is in pyproject.toml. The extension is optional: where it cannot be compiled
(no C compiler), the install goes on and tracekit reads logs with the same decisions made by a
regex instead (tracekit/read/envelopes.py), about three times slower on large logs.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("tracekit.read._scan", ["tracekit/read/_scan.c"], optional=True,
                             extra_compile_args=["-O2"])])
