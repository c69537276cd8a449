"""Renderers: turn rows or documents that an analysis made into text. They never read a file.

Every command renders through these, so that ``--format table|json|csv|markdown`` means the same
thing everywhere and the output pipes and diffs well (stable key order, a trailing newline).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from tracekit.model.exact_numbers import exact_mb  # noqa: F401 - render.text.exact_mb, where the commands take it
from tracekit.model.rankset import parse_ranks

FORMATS = ("table", "json", "csv", "markdown")


#: Characters a terminal acts on (C0 and C1 controls, DEL, bidi overrides): text from a log
#: (a bad line, a file name, an artifact's name) never reaches the terminal with them raw.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROLS_BUT_NEWLINE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def escape_controls(text: str, keep_newlines: bool = False) -> str:
    """``text`` with every control character written as an escape (``ESC`` -> ``\\x1b``), so
    that a log's ``ESC[2J`` or OSC title sequence prints as text (table, markdown and CSV;
    JSON escapes them itself). ``keep_newlines``: for a whole report, whose lines end in
    ``\\n``; a cell keeps none.

    >>> escape_controls("a\\x1b[2Jb")
    'a\\\\x1b[2Jb'
    """
    pat = _CONTROLS_BUT_NEWLINE if keep_newlines else _CONTROLS
    return pat.sub(_escape, text)


def _cell(v: Any) -> Any:
    return escape_controls(v) if isinstance(v, str) else v


def dumps_json(doc: Any) -> str:
    """Pretty JSON with sorted keys, for documents (``tracekit.summary/2``, ...)."""
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n"


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str], fmt: str = "table") -> str:
    """A table as plain text (``table``), GitHub markdown (``markdown``) or CSV (``csv``)."""
    if fmt == "csv":
        import csv

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(headers)
        w.writerows(["" if v is None else _cell(v) for v in row] for row in rows)
        return buf.getvalue()
    from tabulate import tabulate

    tablefmt = {"table": "simple", "markdown": "github"}[fmt]
    if not rows:
        return tabulate([], headers=list(headers), tablefmt=tablefmt) + "\n"
    return (
        tabulate(
            [["-" if v is None else _cell(v) for v in row] for row in rows],
            headers=list(headers),
            tablefmt=tablefmt,
            disable_numparse=True,
        )
        + "\n"
    )


def heading(text: str, fmt: str = "table") -> str:
    """A section title in the given format (none in CSV)."""
    if fmt == "markdown":
        return f"## {text}\n\n"
    if fmt == "csv":
        return ""
    return f"{text}\n{'=' * len(text)}\n"


#: No line of text output is wider (tests/render/test_text_width.py).
MAX_COLUMNS = 200


def wrap_clauses(text: str, width: int = MAX_COLUMNS) -> str:
    r"""A one-line text of ``; ``-separated clauses (a verdict) kept to ``width`` columns: when
    longer, it breaks after a ``;`` and goes on two spaces in; a clause longer than ``width``
    stays whole. Short texts come back unchanged.

    >>> wrap_clauses("OK: a; FINDING: b", width=10)
    'OK: a;\n  FINDING: b'
    """
    if len(text) <= width:
        return text
    lines: list[str] = []
    for clause in text.split("; "):
        if lines and len(lines[-1]) + 2 + len(clause) <= width:
            lines[-1] += "; " + clause
        elif lines:
            lines[-1] += ";"
            lines.append("  " + clause)
        else:
            lines.append(clause)
    return "\n".join(lines)


def section_line(title: str, text: str, fmt: str = "table") -> str:
    """A section that is one line (nothing to report): ``Title: text`` in a table report, a
    heading and the line in markdown."""
    if fmt == "markdown":
        return f"{heading(title, fmt)}{text}\n"
    return f"{title}: {text}\n"


#: The unit convention, the same in every command and format (docs/output.md, "Units"): said once under
#: each table that shows sizes.
UNITS_MB = "MB: 2^20 bytes (MiB, as torch's bucket cap)"
#: What an all-gather's size is, where full sizes (MB) and per-rank bytes sit side by side.
UNITS_SIZES = "AG MB: the gathered output, RS/AR: the input"
UNITS_BYTES = "bytes: one rank's input (for AG, its shard: the gathered size / group size)"


def fmt_mb(x: float | None) -> str:
    """Megabytes as text, without trailing noise: 27.4, 0.25, 1024; a value too small for three
    decimals keeps three significant digits (``1e-07``, ``0.000123``), never ``0``."""
    if x is None:
        return "-"
    text = f"{x:.3f}".rstrip("0").rstrip(".")
    if x and text in ("0", "-0"):
        return f"{x:.3g}"
    return text


def fmt_caps(values: Iterable[float | None]) -> dict[float | None, str]:
    """Caps (MB) as text, with as many decimals (3 or more) as it takes to tell every
    distinct one apart: 1.001, 1.002 and 1.0019 read ``1.001``, ``1.002``, ``1.0019``, never two
    ``1.002`` that planned differently; a cap too small for the decimals keeps as many significant
    digits (``1e-07``), never ``0``."""
    distinct = sorted({v for v in values if v is not None})
    texts: dict[float | None, str]

    def text(v: float, decimals: int) -> str:
        t = f"{v:.{decimals}f}".rstrip("0").rstrip(".")
        return f"{v:.{decimals}g}" if v and t in ("0", "-0") else t

    for decimals in range(3, 16):
        texts = {v: text(v, decimals) for v in distinct}
        if len(set(texts.values())) == len(distinct):
            break
    else:
        texts = {v: repr(v) for v in distinct}
    return {None: "-", **texts}


def fmt_counts(c: dict[str, int] | None) -> str:
    """A collective count before and after bucketing, ``{"before": 8, "after": 1}``: ``8->1``."""
    return "-" if not c else f"{c['before']}->{c['after']}"


#: Rank sets longer than this are shortened in tables (JSON has them whole).
MAX_RANKS_CELL = 48


def ranks_cell(ranks: str, limit: int = MAX_RANKS_CELL) -> str:
    """A rank-range string for a table cell: whole up to ``limit`` characters, else cut at a
    comma with the number of ranks left out (``0,2,4,... (+509 more)``). The rank-less log
    (``-`` in a rank set) reads ``rank not logged``: ``-`` is never printed as a rank."""
    if ranks == "-" or ranks.endswith(",-"):
        ranks = ranks[:-1] + "rank not logged"
    if len(ranks) <= limit:
        return ranks
    parts = ranks.split(",")
    shown: list[str] = []
    for p in parts:
        if len(",".join([*shown, p])) > limit - 16:
            break
        shown.append(p)
    rest = len(parse_ranks(",".join(p for p in parts[len(shown) :] if p != "rank not logged")))
    return f"{','.join(shown)},... (+{rest} more)"
