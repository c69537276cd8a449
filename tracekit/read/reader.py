"""The reader: log files -> a :class:`tracekit.model.Run` (and graph sources for replay).

The pipeline, one module a step, data flowing one way::

    sources    find and open files (plain, .gz, directories of rank logs)
    envelopes  lines -> wanted envelope lines and payloads (Scanner), checked cheaply
    entries    -> decoded, checked entries (Entry)
    parsers    -> values, one parser per entry kind (EntryParser)
    pairing    -> graphs per rank and compile id (RankBuilder), files merged into a Run
    segments   files and segments of large files read in parallel processes

Public functions:

- :func:`load` ``(paths, *, jobs=None, strict=False, progress=None) -> Run``: every file, in
  parallel processes (up to ``jobs``, default the machine's cores; a large uncompressed file
  is cut into segments at entry boundaries), merged per rank.
- :func:`graph_sources` ``(paths, diagnostics=None)``: for every recorded bucketing outcome, the
  graph text it was computed from and the symbol hints of its compile id, for replay (one pass
  over each file).
- :func:`read_file`: one file, in this process.

How a file is read (one pass, constant memory; see :class:`tracekit.read.envelopes.Scanner`): the
file is read in 1 MiB chunks; one regex pass per chunk skips, inside the regex engine, payload
lines (a leading tab) and every ordinary envelope that no parser wants; only wanted, unusual or
bad lines reach Python. Only wanted envelopes are decoded with orjson, and only the payloads
their parsers need are assembled and MD5-checked.

Diagnostics kinds (stable strings; each counted, first few with file and line; valid entries
around a bad one are still used; ``--strict`` makes any of them exit status 1):

- ``bad_prefix``: an envelope line without a valid glog prefix.
- ``bad_json``: an envelope that is not JSON (checked for every wanted envelope, and for any
  envelope that fails the cheap shape check: not ending in ``}``, or non-ASCII).
- ``bad_utf8``: an envelope or kept payload that is not UTF-8.
- ``not_an_object``: an envelope that is JSON but not an object.
- ``bad_field_type``: ``rank``/``frame_id``/... not an int, an artifact without a string name,
  ``has_payload`` not a string.
- ``orphan_payload``: payload lines no envelope owns (after a blank line, at the start of the
  file, or after an envelope without ``has_payload``).
- ``missing_payload``: ``has_payload`` set but no payload line follows.
- ``md5_mismatch``: a kept payload whose MD5 is not its ``has_payload``.
- ``truncated_entry``: the file ends inside an entry (no final newline).
- ``other_rank``: an entry of another rank than the file's.
- ``unreadable_file``: a path that does not exist or cannot be read.
- ``no_log_files``: a directory without log files.
- ``bad_gzip``: a ``.gz`` file that is corrupt or cut short (what was read before is used).
- ``bad_artifact``: an artifact payload its parser could not parse (e.g. a malformed
  ``pre_bucketing_fsdp_collectives`` line or sizes JSON).
- ``nul_bytes``: a line with NUL bytes (a crash leaves zeroed blocks), instead of ``bad_prefix``.
- ``crlf_line_ends``: the file has CRLF line ends (read as LF; reported once).
- Files that are no rank (:func:`tracekit.read.merge.merge_files`; listed in ``world.unplaced``):
  ``no_entries`` (bad lines only: "no log entries in FILE"), ``unplaced_rank`` (a rank that is
  not one), ``unknown_rank`` (rank-less among ranked logs); ``copied_file``: a byte-identical
  copy of a rank's log, read once.
- ``empty_file``: the file is empty.

Not detected, on purpose (speed): bad JSON or bad UTF-8 inside envelopes and payloads summarize
skips, when the envelope still has the shape of one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterable, Iterator

from bucketing.gc_pause import gc_paused
from tracekit.model import Diagnostics, FrameCompile, Run
from tracekit.model.nouns import plural
from tracekit.read import segments
from tracekit.read.interning import BuildMemo
from tracekit.read.merge import merge_files
from tracekit.read.pairing import (
    FileBuilder,
    FileResult,
    GraphSource,
    NotPrebucketedSource,
    SegmentResult,
    build_file,
)
from tracekit.read.parsers import FRAME_PARSERS, NOT_PREBUCKETED_PARSERS, SOURCE_PARSERS, SUMMARY_PARSERS
from tracekit.read.segments import Segment, default_jobs, file_segments, read_segment, read_segments
from tracekit.read.sources import LogFile, find_log_names, find_logs, rank_from_name, sized

__all__ = [
    "GraphSource",
    "StrictError",
    "NotPrebucketedSource",
    "graph_and_not_prebucketed_sources",
    "checked_load",
    "graph_sources",
    "holds_compile_log",
    "load",
    "no_log_detail",
    "no_log_reason",
    "read_file",
]


class StrictError(Exception):
    """Raised by ``load(strict=True)`` when the logs had any bad input; carries the Run."""

    def __init__(self, run: Run) -> None:
        super().__init__(f"{plural(run.diagnostics.total, 'bad input')}: {run.diagnostics.counts}")
        self.run = run


def read_file(
    log: LogFile | str, on_chunk: Callable[[int], None] | None = None, validate_all: bool = False
) -> FileResult:
    """Read one whole file into a :class:`tracekit.read.pairing.FileResult`, in this process
    (``validate_all``: check every line, as ``--strict`` does)."""
    if isinstance(log, str):
        log = LogFile(log, 0, rank_from_name(log))
    return build_file(
        log, [read_segment(Segment(log), on_chunk=on_chunk, validate_all=validate_all)], SUMMARY_PARSERS
    )


def holds_compile_log(run: Run) -> bool:
    """False when nothing in the input looked like a compile log: no rank, or only a rank-less
    one with no graph, no compile, no compiled graph and no cache hit (an empty or foreign
    file). A rank-less log with compiles but no collective (tlparse's ``simple.log``) is a log."""
    return any(
        r.rank is not None or r.graphs or r.compiles or r.compiled_graphs or r.cache_hits for r in run.ranks
    )


def no_log_detail(run: Run) -> str:
    """Why ``run`` holds no compile log, in the reader's own words: the first file that held no
    entry, or whose rank cannot be placed (``no log entries in FILE (N bad lines)``), a folder
    whose logs are in its subdirectories, else ``no log could be read``."""
    for e in run.diagnostics.examples:
        if e["kind"] in ("no_entries", "unplaced_rank"):
            return str(e["detail"])
    for e in run.diagnostics.examples:
        if e["kind"] == "no_log_files" and "subdirectories" in e["detail"]:
            return f"{e['file']}: {e['detail']}"
    return "no log could be read"


def no_log_reason(run: Run) -> str | None:
    """None when ``run`` holds a compile log (:func:`holds_compile_log`); else why not, in one
    line (:func:`no_log_detail`). The one check of the paths read: every command exits 2 with
    it, and :func:`checked_load` raises it."""
    return None if holds_compile_log(run) else no_log_detail(run)


def checked_load(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    *,
    jobs: int | None = None,
    strict: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Run:
    """:func:`load`, for the Python API (``tracekit.load``): ``FileNotFoundError`` for a path
    that does not exist (before anything is read) or a directory that holds no log file, when
    nothing else was read; ``ValueError`` (:func:`no_log_reason`) when the files hold no
    compile log. It never returns an empty Run for a typo."""
    import errno

    for p in path_list(paths):
        if not os.path.lexists(p):
            raise FileNotFoundError(errno.ENOENT, "no such file or directory", p)
    run = load(paths, jobs=jobs, strict=strict, progress=progress)
    if not run.ranks and not run.unplaced and "no_log_files" in run.diagnostics.counts:
        where = next(e for e in run.diagnostics.examples if e["kind"] == "no_log_files")
        raise FileNotFoundError(errno.ENOENT, where["detail"], where["file"])
    why = no_log_reason(run)
    if why is not None:
        raise ValueError(why)
    return run


def path_list(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> list[str]:
    """PATH arguments (one, or several) as a list of strings, as every reader takes them."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    return [os.fspath(p) for p in paths]


@gc_paused()
def load(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    *,
    jobs: int | None = None,
    strict: bool = False,
    validate_all: bool | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Run:
    """Read log files, ``.gz`` logs or directories of rank logs into a :class:`Run`.

    ``jobs``: worker processes (default: the machine's cores). Files are read in parallel, and
    a large uncompressed file is cut at entry boundaries into ``jobs`` segments, or whole
    rounds of ``jobs`` segments of at most 128 MiB (:func:`tracekit.read.segments.segment_count`),
    read in parallel and applied to the file's builder in order, each as it comes (pairing by
    compile id sees the file whole), by a standard process pool over batches of files. A listing
    of 16,384 files or more is sent to the workers before the files' sizes are taken: they take them as they read, and this process
    sums them meanwhile for ``progress`` only (:func:`tracekit.read.segments.read_listed`). Results are merged as they come (memory holds
    the model, not every file's results, nor every segment's).
    ``validate_all`` (default: ``strict``): decode and check every line, not only the entries
    tracekit reads (slower). ``strict``: raise :class:`StrictError` (carrying the Run) if any
    bad input was seen. The world checks (:func:`tracekit.model.world.check_world`: missing ranks)
    are added to the diagnostics. ``progress(done_bytes, total_bytes)`` is called as files are
    read (bytes on disk).
    """
    from tracekit.model.world import check_world

    paths_given = path_list(paths)
    diagnostics = Diagnostics()
    not_logs: list[str] = []
    subdirs: list[str] = []
    names = find_log_names(paths_given, diagnostics, not_logs, subdirs)
    jobs = default_jobs() if jobs is None else max(1, int(jobs))
    validate_all = strict if validate_all is None else validate_all
    total = done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(done, total)

    def count(size: int) -> None:
        nonlocal total
        total = size

    parts: Generator[tuple[Segment, SegmentResult], None, None]
    if jobs > 1 and len(names) >= segments.EARLY_MIN_FILES:
        # the workers take the sizes; this process too, while they read, for a progress total
        parts = segments.read_listed(names, jobs, tick, None if progress is None else count, validate_all)
    else:
        logs = sized(names)
        count(sum(lg.size for lg in logs))
        tasks = [seg for segs in file_segments(logs, jobs) for seg in segs]
        del logs  # the segments hold the files: read_segments drops each once read
        parts = read_segments(tasks, jobs, tick, progress is not None, validate_all=validate_all)
    del names

    memo = BuildMemo()  # a schedule's collectives, and sizes, made once for every file, not once a graph

    def files() -> Iterator[FileResult]:
        fb: FileBuilder | None = None
        for seg, part in parts:
            if fb is None:
                fb = FileBuilder(seg.log, SUMMARY_PARSERS, memo=memo)
            fb.add(part)  # applied now (a large file's segments are never all held)
            del part
            if seg.end is None:  # the file's last segment
                yield fb.finish()
                fb = None

    try:
        run = merge_files(paths_given, files(), diagnostics)
    finally:  # the workers end here, also on an error or Ctrl-C: the caller holding the error
        parts.close()  # (its traceback holds this frame, and so the pool) holds no process
    run.not_logs = not_logs
    run.subdirs = subdirs
    read_frame_compiles(run)
    check_world(run)
    if strict and run.diagnostics.total:
        raise StrictError(run)
    return run


def frames_of(files: list[tuple[str, int | None]]) -> list[tuple[FrameCompile, ...]]:
    """For each ``(path, rank)``: that rank's frame compiles in the file
    (:data:`tracekit.read.parsers.FRAME_PARSERS`); ``()`` for a file whose entries are another
    rank's. Plain data in and out: a Dask worker runs it too (:mod:`tracekit.read.dask_reader`)."""
    out: list[tuple[FrameCompile, ...]] = []
    for path, rank in files:
        log = LogFile(path, 0, rank_from_name(path))
        res = build_file(log, [read_segment(Segment(log), FRAME_PARSERS)], FRAME_PARSERS)
        out.append(tuple(res.frames) if res.rank == rank else ())
    return out


def read_frame_compiles(
    run: Run,
    read: Callable[[list[tuple[str, int | None]]], list[tuple[FrameCompile, ...]]] = frames_of,
) -> None:
    """When no rank logged a bucketing outcome but some compiled, read each rank's files again
    for its frame compiles (``Rank.frames``, :func:`frames_of`, or ``read``, which answers for
    the same ``(path, rank)`` list in order: on a Dask cluster, its workers): what the logs hold
    instead (summarize's Compiled regions). A second pass in that case only, so a run with
    outcomes pays nothing for it; its bad lines were counted by the first."""
    if any(r.graphs for r in run.ranks) or not any(r.compiles for r in run.ranks):
        return
    got = iter(read([(path, r.rank) for r in run.ranks for path in r.files]))
    for r in run.ranks:
        frames: list[FrameCompile] = []
        for _ in r.files:
            frames += next(got)
        r.frames = tuple(frames)


def graph_sources(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    diagnostics: Diagnostics | None = None,
    progress: Callable[[int, int], None] | None = None,
    *,
    logs: list[LogFile] | None = None,
) -> Iterator[GraphSource]:
    """Every recorded bucketing outcome with the graph text it was computed from, streaming.
    ``progress(done_bytes, total_bytes)`` after each file.

    Yields :class:`GraphSource` ``(rank, compile_id, graph_index, graph, text, text_artifact,
    symbol_hints)`` in file order, files one after another (no parallelism: texts can be
    large), each file read once. The text is:

    - for our pass (``source == "tracekit"``): the ``tracekit_fsdp_input_graph`` logged just
      before the outcome;
    - for stock torch: the nearest preceding ``before_post_grad_graph`` of the same rank and
      compile id (the graph before post-grad passes; pre-bucketing runs on it after the
      earlier post-grad passes, so node names match but a few nodes may differ);
    - ``None`` when neither was logged (``text_artifact`` is then ``None``).

    ``symbol_hints`` are the ``create_symbol`` hints of the compile id in that file. Graph
    indices are per file (as in :func:`load` for a rank with one file). ``logs``: the files
    already found (:func:`tracekit.read.sources.find_logs`), so they are not looked for again
    (``paths`` is then ignored).
    """
    yield from _sources(paths, diagnostics, progress, logs, SOURCE_PARSERS, not_prebucketed=False)


def graph_and_not_prebucketed_sources(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    diagnostics: Diagnostics | None = None,
    progress: Callable[[int, int], None] | None = None,
    *,
    logs: list[LogFile] | None = None,
) -> Iterator[GraphSource | NotPrebucketedSource]:
    """:func:`graph_sources`, and every graph never pre-bucketed (a schedule without outcome:
    :class:`tracekit.read.pairing.NotPrebucketedSource`, with its ``before_post_grad_graph`` text and
    the forward outcome of its compile id), each file read once, in file order; ``progress``
    and ``logs`` as in :func:`graph_sources`."""
    yield from _sources(paths, diagnostics, progress, logs, NOT_PREBUCKETED_PARSERS, not_prebucketed=True)


def _sources(paths, diagnostics, progress, logs, parsers, *, not_prebucketed: bool):
    """The loop of :func:`graph_sources` and :func:`graph_and_not_prebucketed_sources`: each file
    read once with ``parsers``; a file whose rank cannot be placed is left out, and said."""
    diag = diagnostics if diagnostics is not None else Diagnostics()
    logs = find_logs(path_list(paths), diag) if logs is None else logs
    total, done = sum(lg.size for lg in logs), 0
    for lg in logs:
        out: list[GraphSource | NotPrebucketedSource] = []
        res = build_file(
            lg,
            [read_segment(Segment(lg), parsers)],
            parsers,
            sink=out.append,
            **({"not_prebucketed_sink": out.append} if not_prebucketed else {}),
        )
        diag.merge(res.diagnostics)
        done += lg.size
        if progress is not None:
            progress(done, total)
        if res.rank is None and res.bad_rank is not None:  # never replayed as a rank "-"
            diag.add("unplaced_rank", res.path, 0, f"not placed: {res.bad_rank}; the file is left out")
            continue
        yield from out
