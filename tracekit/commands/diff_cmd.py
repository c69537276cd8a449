"""``tracekit diff RUN_A RUN_B``: what changed in FSDP collective bucketing between two runs.

A RUN is whatever ``tracekit summarize`` reads (a log file, a ``.gz`` log, a directory of rank
logs) or a JSON document that ``tracekit summarize --format json`` wrote (``tracekit.summary/2``, or /1),
told apart by content. The comparison itself is :func:`tracekit.analyze.diff.diff_runs`; this module
reads the inputs and renders the result. It never imports torch.

Exit status: 0 (or, with ``--exit-code``, 0 when identical and 1 when the runs differ, as
``git diff --exit-code`` does); 2 on an error (unreadable input, bad summary, no logs), with a
one-line message on stderr.
"""

from __future__ import annotations

import gzip
import os
import sys
import textwrap
from collections.abc import Callable
from typing import Any, NoReturn

import click
import orjson

from tracekit.analyze.diff import Diff, FieldChange, GraphChange, diff_runs, format_ranks
from tracekit.analyze.summarize import graph_label, run_from_document
from tracekit.commands import options
from tracekit.commands.options import examples, format_option, has_log_entries, jobs_option, output_option
from tracekit.commands.output import output_sink
from tracekit.commands.progress import ProgressBar
from tracekit.model import CollectiveSize, Graph, Run
from tracekit.read.sources import GZIP_MAGIC
from tracekit.render.schedule_text import final_change_rows
from tracekit.render.text import (
    UNITS_MB,
    UNITS_SIZES,
    dumps_json,
    escape_controls,
    fmt_mb,
    heading,
    plural,
    table,
)

SUMMARY_PREFIX = "tracekit.summary/"
#: The summary majors this version reads: /1 (per rank) and /2 (ranks grouped by outcome).
SUPPORTED_SUMMARY_MAJORS = (1, 2)
DIFF_FORMATS = ("table", "json", "markdown")
#: Longer rank lists are not put in a section title.
MAX_HEADING_RANKS = 40


class InputError(Exception):
    """An input that cannot be diffed; the message is one line meant for the user."""


# --- reading the inputs --------------------------------------------------------------------------


def sniff_json(path: str) -> Callable[..., Any] | None:
    """How to open the file (``open`` or ``gzip.open``) when its first non-space byte is ``{``
    (looked at through gzip when the file is gzipped): a JSON document, not a glog-prefixed
    compile log. None for anything else."""
    with open(path, "rb") as f:
        head = f.read(4096)
    opener: Callable[..., Any] = open
    if head[:2] == GZIP_MAGIC:
        opener = gzip.open
        with gzip.open(path, "rb") as f:
            head = f.read(4096)
    head = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    return opener if head[:1] == b"{" else None


def summary_major(schema: Any, path: str) -> int:
    """The major version of a ``tracekit.summary/MAJOR[.MINOR]`` schema string, or InputError."""
    if not isinstance(schema, str) or not schema.startswith(SUMMARY_PREFIX):
        raise InputError(
            f"{path}: JSON with schema {schema!r} is not a tracekit summary "
            f"(expected {SUMMARY_PREFIX}{SUPPORTED_SUMMARY_MAJORS[-1]})"
        )
    version = schema[len(SUMMARY_PREFIX) :]
    major = version.split(".", 1)[0]
    if not major.isdigit():
        raise InputError(f"{path}: unreadable summary schema version {schema!r}")
    return int(major)


def run_from_summary(doc: Any, path: str) -> Run:
    """A :class:`Run` rebuilt from a ``tracekit.summary/1.x`` or ``/2.x`` document; keys this
    version does not know are ignored, missing optional ones take their defaults."""
    if not isinstance(doc, dict) or "schema" not in doc:
        raise InputError(f'{path}: JSON without a "schema" key is not a tracekit summary')
    major = summary_major(doc["schema"], path)
    if major not in SUPPORTED_SUMMARY_MAJORS:
        readable = " and ".join(f"{SUMMARY_PREFIX}{m}.x" for m in SUPPORTED_SUMMARY_MAJORS)
        raise InputError(
            f"{path}: summary schema {doc['schema']!r} is not supported (this tracekit reads {readable})"
        )
    for key in ("ranks", "groups"):
        if not isinstance(doc.get(key) or [], list):
            raise InputError(f'{path}: bad summary: "{key}" is not a list')
    try:
        run = run_from_document(doc)  # the model keeps only the keys it knows
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise InputError(f"{path}: bad summary: {e}") from None
    problem = summary_problem(run)
    if problem:
        raise InputError(f"{path}: bad summary: {problem}")
    if not run.paths:
        run.paths = [path]
    return run


def summary_problem(run: Run) -> str:
    """What makes a rebuilt summary unusable (values of the wrong type), or "" when it is fine.
    A summary is untrusted input, like a log."""
    seen: set[Any] = set()
    for r in run.ranks:
        if r.rank is not None and (not isinstance(r.rank, int) or isinstance(r.rank, bool)):
            return f"rank {r.rank!r} is not an integer"
        if r.rank in seen:
            return f"rank {r.rank} appears twice"
        seen.add(r.rank)
        for g in r.graphs:
            if g.group_size is not None and not isinstance(g.group_size, int):
                return f"rank {r.rank} graph {g.label}: group_size {g.group_size!r}"
    return ""


def load_run(
    path: str, jobs: int | None = None, progress: Callable[[int, int], None] | None = None
) -> tuple[Run, str]:
    """Read one RUN argument: ``(run, "summary")`` for a JSON summary, ``(run, "logs")`` else."""
    if not os.path.exists(path):
        raise InputError(f"{path}: no such file or directory")
    if os.path.isfile(path):
        try:
            opener = sniff_json(path)
        except (OSError, EOFError) as e:
            raise InputError(f"{path}: cannot read: {e}") from None
        if opener is not None:
            try:
                with opener(path, "rb") as f:
                    doc = orjson.loads(f.read())
            except orjson.JSONDecodeError as e:
                raise InputError(f"{path}: bad JSON summary: {e}") from None
            except (OSError, EOFError) as e:
                raise InputError(f"{path}: cannot read: {e}") from None
            return run_from_summary(doc, path), "summary"

    try:
        from tracekit.read.reader import load as read_logs  # says why a path holds no log itself

        run = read_logs([path], jobs=jobs, progress=progress)
    except InputError:
        raise
    except Exception as e:  # the reader's errors become one line, never a traceback
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InputError(f"{path}: {msg}") from None
    if not has_log_entries(run):
        why = run.diagnostics.examples[0]["detail"] if run.diagnostics.examples else ""
        bad = run.diagnostics.total
        if why and not run.ranks and run.diagnostics.examples[0]["kind"] == "no_entries":
            raise InputError(why)  # "no log entries in FILE (1 bad line)"
        if why and not run.ranks:
            extra = f" ({why})"
        else:
            extra = f" ({plural(bad, 'bad line')})" if bad else ""
        raise InputError(f"{path}: no torch.compile logs found{extra}")
    return run, "logs"


# --- rendering -----------------------------------------------------------------------------------


def render(diff: Diff, fmt: str) -> str:
    """The diff as text: ``json`` is the ``tracekit.diff/1`` document; ``table`` and ``markdown``
    give the verdict first, then one table per group of ranks that changed the same way."""
    if fmt == "json":
        return dumps_json(diff.to_dict())
    md = fmt == "markdown"
    out = [f"**{diff.verdict}**\n\n" if md else f"{diff.verdict}\n\n"]
    for side, info in (("A", diff.a), ("B", diff.b)):
        diag = sum(info.diagnostics.values())
        ranks = f"rank{'s' if len(info.ranks) != 1 else ''} {format_ranks(info.ranks) or '-'}"
        extra = f", {plural(diag, 'diagnostic')}" if diag else ""
        graphs = plural(info.graphs, "graph")
        line = f"{side}: {info.label} ({info.kind}, {ranks}, {graphs}{extra})"
        out.append(f"- {line}\n" if md else f"{line}\n")
    out.append(f"{'- ' if md else ''}graphs compared: {diff.graphs_compared}\n\n")
    for group in diff.groups:
        n, listed = len(group.ranks), format_ranks(group.ranks)
        if len(listed) <= MAX_HEADING_RANKS:
            out.append(heading(f"rank{'s' if n != 1 else ''} {listed}", fmt))
        else:  # a long list goes under a short title, wrapped
            out.append(heading(f"{n} ranks", fmt))
            out.append("ranks " + "\n      ".join(textwrap.wrap(listed.replace(",", ", "), 94)))
            out.append("\n\n")
        rows = [[cell(v, md) for v in row] for c in group.changes for row in change_rows(c)]
        out.append(table(rows, ["compile id", "graph", "what", "A", "B"], fmt))
        out.append("\n")
    if diff.groups:
        out.append(f"{UNITS_MB}; {UNITS_SIZES}.\n\n")
    for side, only in (("A", diff.ranks_only_in_a), ("B", diff.ranks_only_in_b)):
        if only:
            out.append(f"{'- ' if md else ''}ranks only in {side}: {format_ranks(only)}\n")
    if diff.notes:
        if diff.ranks_only_in_a or diff.ranks_only_in_b:
            out.append("\n")
        for note in diff.notes:
            out.append(f"{'- ' if md else ''}note: {note}\n")
    return "".join(out).rstrip("\n") + "\n"


def cell(text: str, markdown: bool) -> str:
    """A table cell that cannot break the table: names come from untrusted logs."""
    text = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)
    return text.replace("|", "\\|") if markdown else text


def change_rows(c: GraphChange) -> list[list[str]]:
    """Table rows ``[compile id, graph, what, A, B]`` for one graph change."""
    where = [c.compile_id, graph_label(c.graph_index)]
    if c.kind == "only_in_a":
        return [where + ["graph only in A", outcome_text(c.graph), "absent"]]
    if c.kind == "only_in_b":
        return [where + ["graph only in B", "absent", outcome_text(c.graph)]]
    rows = [
        where + row
        for f in c.fields
        for row in (
            final_change_rows(f.a, f.b)
            if f.field == "final"
            else [[f.field, value_text(f, f.a), value_text(f, f.b)]]
        )
    ]
    for s in c.sizes:
        if s.length_a != s.length_b:
            rows.append(where + [f"sizes {s.which}: count", str(s.length_a), str(s.length_b)])
        rows.append(where + [f"sizes {s.which}: first diff #{s.index}", size_text(s.a), size_text(s.b)])
    return rows


def value_text(f: FieldChange, v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, dict) and set(v) == {"before", "after"}:
        return f"{v['before']}->{v['after']}"
    if f.field == "bucket_cap_mb":
        return f"{fmt_mb(v)} MB"
    if isinstance(v, list):
        return ",".join(map(str, v))
    return str(v)


def size_text(c: CollectiveSize | None) -> str:
    return "end of list" if c is None else f"{c.type} {fmt_mb(c.size_mb)} MB ({c.name})"


def outcome_text(g: Graph | None) -> str:
    if g is None:
        return "-"
    counts = ", ".join(f"{t} {c.before}->{c.after}" for t, c in g.collectives.items() if c.before or c.after)
    return f"cap {fmt_mb(g.bucket_cap_mb)} MB" + (f", {counts}" if counts else "")


# --- the command ---------------------------------------------------------------------------------


def fail(message: str) -> NoReturn:
    """One line on stderr, exit status 2."""
    options.fail("diff", f"error: {message}", options.BAD_INPUT)


@click.command("diff", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("run_a", metavar="RUN_A")
@click.argument("run_b", metavar="RUN_B")
@format_option(DIFF_FORMATS, help="Output format; json is the tracekit.diff/1 document.")
@output_option("Write to FILE, not stdout.")
@click.option(
    "--exit-code",
    is_flag=True,
    help="Exit 1 when the runs differ, 0 when identical (like git diff --exit-code).",
)
@jobs_option()
@examples(
    "tracekit diff run_a/ run_b/",
    "tracekit summarize good_run/ --format json > good.json; tracekit diff good.json new_run/ --exit-code",
    "tracekit diff run_a/ run_b/ --format json -o diff.json",
)
def diff(run_a: str, run_b: str, fmt: str, output: str | None, exit_code: bool, jobs: int | None) -> None:
    """Compare the bucketing outcomes of two runs.

    RUN_A and RUN_B are each a compile log, a .gz log, a directory of rank logs, or a JSON file
    written by `tracekit summarize --format json`. Graphs are matched by rank, compile id and
    position. Errors exit 2.
    """
    try:
        with ProgressBar(label="reading A") as bar:
            a, a_kind = load_run(run_a, jobs, bar.wanted)
        with ProgressBar(label="reading B") as bar:
            b, b_kind = load_run(run_b, jobs, bar.wanted)
    except InputError as e:
        fail(str(e))
    result = diff_runs(a, b, a_label=run_a, b_label=run_b, a_kind=a_kind, b_kind=b_kind)
    text = render(result, fmt)
    if fmt != "json":  # a log's escape sequences never reach the terminal raw
        text = escape_controls(text, keep_newlines=True)
    with output_sink(output, command="diff", error_status=2) as write:
        write(text.encode("utf-8"))
    sys.exit(1 if exit_code and not result.identical else 0)
