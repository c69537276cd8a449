"""Reading rank logs on the workers of an existing Dask distributed cluster (``summarize --dask``).

For thousands of ranks on a shared filesystem, more cores than one machine has can read them:

    client (this process)                       Dask workers (other machines)
    find_logs(PATHs) -> [LogFile], in order
    cut into batches of whole files  ------->   read_batch([LogFile]) -> [FileResult]
    gather as they finish (progress)  <-------  (tracekit.read.reader.read_file on each file)
    put back in file order, _merge -> Run       the same Run a local ``load`` builds

- The client lists the files; the workers open them by the same absolute path, so the logs
  must be visible to every worker at that path (a shared filesystem). A file a worker cannot
  open is an ``unreadable_file`` diagnostic, as in a local run, never a crash.
- Results are put back in the client's file order and merged by the reader's own merge, so the
  summary is the one a local run gives (paths as the user spelled them, not the absolute ones
  the workers were sent), with the files that hold no log and the subdirectories of logs a
  local run lists (``world.not_logs``, ``world.subdirectories``).
- Files are sent in batches (a few per worker thread, at most :data:`MAX_FILES_PER_TASK` files a
  task): 100,000 files are not 100,000 tasks. A file is read by one worker thread, whole.
- The workers need tracekit (this version) and its dependencies installed; they never import
  torch. What travels back is our own dataclasses (pickled by Dask between our processes),
  never anything from a log.
- ``distributed`` is imported only here, and only when :func:`load_with_dask` runs (the
  optional ``dask`` extra).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from typing import Any

from tracekit.model import Diagnostics, Run
from tracekit.model.world import check_world
from tracekit.read.merge import merge_files
from tracekit.read.pairing import FileResult
from tracekit.read.reader import frames_of, path_list, read_file, read_frame_compiles
from tracekit.read.sources import LogFile, find_log_names, sized

#: Seconds to wait for the scheduler to answer, and for a first worker to be there.
CONNECT_TIMEOUT_S = 5
#: Batches per worker thread (uneven file sizes still keep every thread busy) ...
BATCHES_PER_THREAD = 4
#: ... and at most this many files in one task.
MAX_FILES_PER_TASK = 256

#: ``HOST:PORT`` (tcp), ``tcp://HOST:PORT``, or another scheme Dask knows (``tls://``, ``inproc://``)
_ADDRESS_RE = re.compile(r"^(?:(?:tcp://)?(?:\[[0-9a-fA-F:.]+\]|[^\s:/\[\]]+):\d{1,5}|[a-z]+://\S+)$")


class DaskReadError(Exception):
    """The cluster could not be used: unreachable, no workers, a task that failed. One line."""


def require_distributed() -> None:
    """:class:`DaskReadError` saying what to install when the optional ``distributed`` package
    (the ``dask`` extra) is missing: checked before any work."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise DaskReadError(
            "reading on a Dask cluster needs the distributed package: "
            "pip install -e '.[dask]' (or pip install distributed)"
        ) from None


def read_batch(logs: list[LogFile], validate_all: bool = False) -> list[FileResult]:
    """On a worker: read each file whole (:func:`tracekit.read.reader.read_file`), in order."""
    return [read_file(log, validate_all=validate_all) for log in logs]


def split_batches(logs: list[LogFile], n_batches: int) -> list[list[LogFile]]:
    """Contiguous runs of files of about equal bytes (a file goes to the batch its middle byte
    falls in), at most ``n_batches`` of them unless that would put more than
    :data:`MAX_FILES_PER_TASK` files in one."""
    if not logs:
        return []
    n = max(1, min(len(logs), max(n_batches, -(-len(logs) // MAX_FILES_PER_TASK))))
    weights = [lg.size + 1 for lg in logs]  # +1: an empty file still costs an open
    total = sum(weights)
    batches: list[list[LogFile]] = []
    current = -1
    done = 0
    for lg, w in zip(logs, weights, strict=False):
        idx = min(n - 1, int((done + w / 2) * n / total))
        if idx != current or len(batches[-1]) >= MAX_FILES_PER_TASK:
            batches.append([])
            current = idx
        batches[-1].append(lg)
        done += w
    return batches


def _as_client_path(res: FileResult, worker_path: str, path: str) -> FileResult:
    """Name the file as the user gave it, not by the absolute path the worker opened."""
    if worker_path == path:
        return res
    res.path = path
    for g in res.graphs:
        if g.file == worker_path:
            g.file = path
    for ex in res.diagnostics.examples:
        if ex.get("file") == worker_path:
            ex["file"] = path
    return res


def check_address(address: str) -> str:
    address = address.strip()
    if not _ADDRESS_RE.match(address):
        raise DaskReadError(f"--dask {address!r}: expected a scheduler address like tcp://HOST:8786")
    return address if "://" in address else f"tcp://{address}"


class _Unanswered(Exception):
    """A call that :func:`bounded` stopped waiting for."""


def bounded(call: Callable[[], object], seconds: float) -> object:
    """``call()`` in a daemon thread, its result or its exception; :class:`TimeoutError` when
    it has not returned after ``seconds`` (a peer that is not a Dask scheduler can keep
    distributed's handshake waiting for good; the thread is left behind, the command exits)."""
    import threading

    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["result"] = call()
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = e

    t = threading.Thread(target=target, name="tracekit-dask-connect", daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        raise _Unanswered(f"no answer within {seconds:g} s")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]  # the exception the thread caught
    return box["result"]


def connect(address: str, timeout: float, started: float) -> Any:  # distributed.Client (imported lazily)
    """A :class:`distributed.Client` of the scheduler at ``address``, within ``timeout`` seconds
    whatever answers there: an unreachable or silent address, or a peer that speaks another
    protocol (an HTTP server, junk that distributed reads as a frame of exabytes), is one
    :class:`DaskReadError`. ``started``: the ``time.monotonic()`` the wait began (importing
    distributed counts)."""
    import time

    from distributed import Client

    left = max(0.5, timeout - (time.monotonic() - started))
    try:
        # distributed's own timeout first (an unreachable address), ours when it does not keep it
        return bounded(lambda: Client(address, timeout=max(0.25, left - 0.5), set_as_default=False), left)
    except _Unanswered:
        raise DaskReadError(
            f"no Dask scheduler answered at {address} within {timeout:g} s "
            "(is it a Dask scheduler's address?)"
        ) from None
    except (OSError, TimeoutError):
        raise DaskReadError(
            f"cannot reach the Dask scheduler at {address} (no answer within {timeout:g} s)"
        ) from None
    except Exception as e:  # noqa: BLE001 - whatever a peer that is not a scheduler makes distributed raise
        detail = (str(e).splitlines() or [""])[0][:120]
        raise DaskReadError(
            f"--dask {address!r}: not a Dask scheduler ({type(e).__name__}: {detail})"
        ) from None


def load_with_dask(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    address: str,
    progress: Callable[[int, int], None] | None = None,
    *,
    timeout: float = CONNECT_TIMEOUT_S,
    validate_all: bool = False,
) -> Run:
    """Read ``paths`` (files, ``.gz`` files, directories of rank logs) on the workers of the
    Dask scheduler at ``address`` (``tcp://HOST:PORT``) into the :class:`Run` that
    :func:`tracekit.read.reader.load` gives. ``progress(done_bytes, total_bytes)`` is called as
    batches come back. ``validate_all``: check every line (``--strict``). Raises
    :class:`DaskReadError` (one line) when the cluster cannot be used.
    """
    import time

    address = check_address(address)
    # the files as a local run lists them (the same PATH forms as tracekit.read.reader.load)
    paths_given = path_list(paths)
    diagnostics = Diagnostics()
    not_logs: list[str] = []  # the directories' files that hold no log, and subdirectories
    subdirs: list[str] = []  # with logs: in World and the "not a log" list, as a local run says
    logs = sized(find_log_names(paths_given, diagnostics, not_logs, subdirs))
    total = sum(lg.size for lg in logs)

    started = time.monotonic()
    require_distributed()

    client = connect(address, timeout, started)
    results: list[list[FileResult] | None]
    try:
        try:
            bounded(lambda: client.wait_for_workers(1, timeout=timeout), timeout + 1)
        except (OSError, TimeoutError, _Unanswered):
            raise DaskReadError(
                f"the Dask scheduler at {address} has no workers (none joined within {timeout:g} s)"
            ) from None
        threads = sum(client.nthreads().values()) or 1
        sent = [
            [LogFile(os.path.abspath(lg.path), lg.size, lg.rank_hint) for lg in batch]
            for batch in split_batches(logs, threads * BATCHES_PER_THREAD)
        ]
        futures = client.map(read_batch, sent, validate_all=validate_all, pure=False)
        weights = [sum(lg.size for lg in batch) for batch in sent]
        results = gathered(
            futures, client, weights, total, progress, "logs", " (is this tracekit installed on the workers?)"
        )
        # batches keep the files' order: put the results back in it, as the client named them
        sent_paths = [lg.path for batch in sent for lg in batch]
        got = [res for batch in results for res in batch or []]
        ordered = (
            _as_client_path(res, worker_path, lg.path)
            for res, worker_path, lg in zip(got, sent_paths, logs, strict=False)
        )
        run = merge_files(paths_given, ordered, diagnostics)
        run.not_logs = not_logs
        run.subdirs = subdirs
        # no outcome logged (an FSDP2 run): the frame compiles, read on the workers as well
        read_frame_compiles(run, lambda files: _frames_on_workers(client, files, threads))
    finally:
        client.close()
    check_world(run)
    return run


def _frames_on_workers(client: Any, files: list[tuple[str, int | None]], threads: int) -> list[tuple]:
    """:func:`tracekit.read.reader.frames_of` of ``files`` on the workers (absolute paths, in
    batches), in order."""
    n = max(1, min(len(files), threads * BATCHES_PER_THREAD))
    size = min(MAX_FILES_PER_TASK, -(-len(files) // n))
    batches = [[(os.path.abspath(p), r) for p, r in files[i : i + size]] for i in range(0, len(files), size)]
    try:
        got = client.gather(client.map(frames_of, batches, pure=False))
    except Exception as e:  # noqa: BLE001 - a task that failed on a worker, whatever it raised
        detail = (str(e).splitlines() or [""])[0][:200]
        raise DaskReadError(
            f"a Dask worker failed to read frame compiles: {type(e).__name__}: {detail}"
        ) from None
    return [frames for batch in got for frames in batch]


def gathered(
    futures: list[Any],
    client: Any,
    weights: list[int],
    total: int,
    progress: Callable[[int, int], None] | None,
    what: str,
    hint: str = "",
) -> list[Any]:
    """The batches' results, in the order sent, gathered as they finish (``progress`` told the
    ``weights`` of the batches done, out of ``total``). A task that failed on a worker is a
    :class:`DaskReadError`: "a Dask worker failed to read ``what``", its exception, ``hint``."""
    from distributed import as_completed

    index = {fut.key: i for i, fut in enumerate(futures)}
    results: list[Any] = [None] * len(futures)
    done = 0
    for fut in as_completed(futures, loop=client.loop):
        i = index[fut.key]
        try:
            results[i] = fut.result()
        except Exception as e:  # noqa: BLE001 - a task that failed on a worker, whatever it raised
            detail = (str(e).splitlines() or [""])[0][:200]
            raise DaskReadError(
                f"a Dask worker failed to read {what}: {type(e).__name__}: {detail}{hint}"
            ) from None
        done += weights[i]
        if progress is not None:
            progress(done, total)
    return results
