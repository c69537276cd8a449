"""Build the corpus of damaged TORCH_TRACE logs (issue 7) from a real fixture log.

Every case is made from a real 4-rank fixture scenario (default ``fixtures/logs/spmd_auto``): a
damaged input, the clean log "minus the damaged entries" it must summarize like, and the
diagnostics (kind, file, line) tracekit must report::

    python tests/corpus/make_corpus.py OUT_DIR [--scenario DIR] [--big-mb 50] [--only NAME,...]

writes ``OUT_DIR/<case>/damaged/...``, ``OUT_DIR/<case>/expected/...`` and
``OUT_DIR/manifest.json`` (one object per case: ``name``, ``damage``, ``inputs`` and
``expected`` (paths to pass to ``tracekit summarize``), ``diagnostics`` (``[kind, file, line]``),
``counts`` (kind -> count), ``same_lines`` (whether line numbers of the expected match)).

The expected log is made by blanking the damaged entries (an entry is its envelope line and its
payload lines) in the clean log: blank lines are skipped by the reader, so line numbers stay
comparable. Nothing big is committed: the tests build the corpus into a temporary directory.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import sys
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SCENARIO = ROOT / "fixtures" / "logs" / "spmd_auto"

_MD5_RE = re.compile(r'"has_payload": "[0-9a-f]{32}"')


@dataclass
class Case:
    """One damaged input and what tracekit must make of it (paths relative to the corpus dir)."""

    name: str
    damage: str
    inputs: list[str]
    expected: list[str]
    diagnostics: list[list]  # [kind, file, line]: each must be among the reported examples
    counts: dict[str, int]  # the exact diagnostics counts
    same_lines: bool = True
    notes: dict = field(default_factory=dict)


# --- reading the clean log ----------------------------------------------------------------------


def rank_file(scenario: Path, rank: int) -> Path:
    """The log of one rank in a scenario directory."""
    return next(scenario.glob(f"dedicated_log_torch_trace_rank_{rank}_*.log"))


def read_lines(path: Path) -> list[str]:
    """The lines of a clean log (it ends with a newline, so the last item is dropped)."""
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def entries(lines: list[str]) -> list[tuple[int, int]]:
    """``(first, end)`` line indices (0-based, end exclusive) of every entry: an envelope line and
    the payload lines (leading tab) after it."""
    out: list[tuple[int, int]] = []
    i, n = 0, len(lines)
    while i < n:
        if not lines[i] or lines[i].startswith("\t"):
            i += 1
            continue
        j = i + 1
        while j < n and lines[j].startswith("\t"):
            j += 1
        out.append((i, j))
        i = j
    return out


def find(lines: list[str], name: str, nth: int = 0) -> tuple[int, int]:
    """The ``nth`` entry whose envelope names the artifact or entry type ``name``."""
    hits = [e for e in entries(lines)
            if f'{{"artifact": {{"name": "{name}"' in lines[e[0]] or f'] {{"{name}": ' in lines[e[0]]]
    return hits[nth]


def blank(lines: list[str], *ents: tuple[int, int]) -> list[str]:
    """A copy of ``lines`` with the given entries replaced by blank lines."""
    out = list(lines)
    for a, b in ents:
        out[a:b] = [""] * (b - a)
    return out


def text(lines: list[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode("utf-8")


def prefix_of(line: str) -> str:
    """The glog prefix of an envelope line (everything up to and including ``] ``)."""
    return line[: line.index("] ") + 2]


def rehash(envelope: str, payload: bytes) -> str:
    """The envelope with ``has_payload`` set to the MD5 of ``payload``."""
    return _MD5_RE.sub(f'"has_payload": "{hashlib.md5(payload).hexdigest()}"', envelope)


# --- the cases ----------------------------------------------------------------------------------


class Builder:
    """Writes the cases of one scenario into ``out``."""

    def __init__(self, scenario: Path, out: Path, big_mb: int) -> None:
        self.scenario = scenario
        self.out = out
        self.big_mb = big_mb
        self.src = rank_file(scenario, 0)
        self.name = self.src.name
        self.lines = read_lines(self.src)
        self.cases: list[Case] = []

    def _write(self, case: str, side: str, data: bytes, name: str | None = None) -> str:
        d = self.out / case / side
        d.mkdir(parents=True, exist_ok=True)
        p = d / (name or self.name)
        p.write_bytes(data)
        return str(p.relative_to(self.out))

    def _single(self, case: str, damage: str, damaged: bytes, expected: bytes,
                diags: list[tuple[str, int]], counts: dict[str, int] | None = None,
                same_lines: bool = True) -> None:
        d = self._write(case, "damaged", damaged)
        e = self._write(case, "expected", expected)
        self.cases.append(Case(
            case, damage, [d], [e], [[k, d, ln] for k, ln in diags],
            counts if counts is not None else _count(k for k, _ in diags), same_lines))

    # one method per case; each returns nothing and appends to self.cases

    def cut_mid_envelope(self) -> None:
        ls = self.lines
        a, _ = find(ls, "pre_bucketing_fsdp_collectives", 1)
        data = text(ls[:a]) + ls[a][: len(ls[a]) // 2].encode()
        self._single("cut_mid_envelope", "file ends in the middle of the backward's outcome envelope",
                     data, text(ls[:a]), [("truncated_entry", a + 1)])

    def cut_mid_payload(self) -> None:
        ls = self.lines
        a, b = find(ls, "before_post_grad_graph", 1)
        mid = (a + b) // 2
        data = text(ls[:mid]) + ls[mid][: len(ls[mid]) // 2].encode()
        self._single("cut_mid_payload", "file ends in the middle of the backward graph's payload",
                     data, text(ls[:a]), [("truncated_entry", mid + 1)])  # the cut line

    def md5_mismatch(self) -> None:
        ls = list(self.lines)
        a, b = find(ls, "pre_bucketing_fsdp_collectives", 0)
        ls[a + 1] = ls[a + 1].replace("all_gather 8->1", "all_gather 9->1")
        self._single("md5_mismatch", "the forward outcome's payload edited, MD5 no longer matches",
                     text(ls), text(blank(self.lines, (a, b))), [("md5_mismatch", a + 1)])

    def invalid_json(self) -> None:
        ls = list(self.lines)
        sizes = find(ls, "pre_bucketing_collective_sizes", 0)
        chrom = find(ls, "chromium_event", 3)
        ls[sizes[0]] = ls[sizes[0]][:-20]
        ls[chrom[0]] = ls[chrom[0]][:-1]  # its closing brace lost
        self._single("invalid_json", "two envelopes that are not JSON (a wanted size artifact, a "
                     "chromium event)", text(ls), text(blank(self.lines, sizes, chrom)),
                     sorted([("bad_json", sizes[0] + 1), ("bad_json", chrom[0] + 1)], key=lambda x: x[1]))

    def json_array(self) -> None:
        ls = list(self.lines)
        a, b = find(ls, "pre_bucketing_collective_sizes_after", 0)
        ls[a] = prefix_of(ls[a]) + '["artifact", {"name": "pre_bucketing_collective_sizes_after"}]'
        self._single("json_array", "an envelope that is a JSON array", text(ls),
                     text(blank(self.lines, (a, b))), [("not_an_object", a + 1)])

    def json_number(self) -> None:
        ls = list(self.lines)
        a, b = find(ls, "pre_bucketing_fsdp_collectives", 1)
        ls[a] = prefix_of(ls[a]) + "6716"
        self._single("json_number", "an envelope that is a JSON number", text(ls),
                     text(blank(self.lines, (a, b))), [("not_an_object", a + 1)])

    def wrong_type_rank(self) -> None:
        ls = list(self.lines)
        out = find(ls, "pre_bucketing_fsdp_collectives", 0)
        chrom = find(ls, "chromium_event", 5)
        ls[out[0]] = ls[out[0]].replace('"rank": 0', '"rank": "0"', 1)
        ls[chrom[0]] = ls[chrom[0]].replace('"rank": 0', '"rank": [0]', 1)
        self._single("wrong_type_rank", "rank is a string (forward outcome) and a list (a chromium "
                     "event)", text(ls), text(blank(self.lines, out, chrom)),
                     sorted([("bad_field_type", out[0] + 1), ("bad_field_type", chrom[0] + 1)],
                            key=lambda x: x[1]))

    def wrong_type_frame_id(self) -> None:
        ls = list(self.lines)
        a, b = find(ls, "pre_bucketing_collective_sizes", 1)
        ls[a] = ls[a].replace('"frame_id": 0', '"frame_id": "0"', 1)
        c, d = find(ls, "pre_bucketing_fsdp_collectives", 1)
        ls[c] = ls[c].replace('"frame_id": 0', '"frame_id": 0.5', 1)
        self._single("wrong_type_frame_id", "frame_id is a string (backward sizes) and a float "
                     "(backward outcome)", text(ls), text(blank(self.lines, (a, b), (c, d))),
                     [("bad_field_type", a + 1), ("bad_field_type", c + 1)])

    def invalid_utf8(self) -> None:
        raw = [ln.encode() for ln in self.lines]
        out = find(self.lines, "pre_bucketing_fsdp_collectives", 0)
        sizes = find(self.lines, "pre_bucketing_collective_sizes", 1)
        raw[out[0]] = raw[out[0]].replace(b'"encoding": "string"', b'"encoding": "str\xffing"', 1)
        bad = raw[sizes[0] + 1].replace(b'"AG"', b'"A\xfe"', 1)
        payload = b"\n".join(r[1:] for r in raw[sizes[0] + 1 : sizes[1]][1:])
        payload = bad[1:] + (b"\n" + payload if payload else b"")
        raw[sizes[0] + 1] = bad
        raw[sizes[0]] = rehash(self.lines[sizes[0]], payload).encode()
        self._single("invalid_utf8", "invalid UTF-8 in the forward outcome's envelope and in the "
                     "backward sizes' payload (its MD5 recomputed, so only UTF-8 is wrong)",
                     b"\n".join(raw) + b"\n", text(blank(self.lines, out, sizes)),
                     [("bad_utf8", out[0] + 1), ("bad_utf8", sizes[0] + 1)])

    def nul_bytes(self) -> None:
        ls = self.lines
        a, b = find(ls, "pre_bucketing_fsdp_collectives", 1)
        _, fwd_end = find(ls, "pre_bucketing_fsdp_collectives", 0)
        raw = [ln.encode() for ln in ls]
        raw[a] = b"\x00" * len(raw[a])  # a crash left zeroed blocks: the envelope is gone
        raw.insert(fwd_end, b"\x00" * 4096)  # a zeroed block between two entries
        exp = blank(ls, (a, b))
        exp.insert(fwd_end, "")
        self._single("nul_bytes", "a line of 4096 NUL bytes between entries, and the backward "
                     "outcome's envelope overwritten by NULs", b"\n".join(raw) + b"\n", text(exp),
                     [("nul_bytes", fwd_end + 1), ("nul_bytes", a + 2)])

    def crlf(self) -> None:
        data = text(self.lines).replace(b"\n", b"\r\n")
        self._single("crlf", "CRLF line ends (copied through a Windows tool)", data,
                     text(self.lines), [("crlf_line_ends", 1)])

    def long_line(self) -> None:
        ls = self.lines
        _, fwd_end = find(ls, "pre_bucketing_fsdp_collectives", 0)
        big = b"x" * (self.big_mb * 1024 * 1024)
        raw = [ln.encode() for ln in ls]
        raw.insert(fwd_end, big)
        exp = list(ls)
        exp.insert(fwd_end, "")
        self._single("long_line", f"a single {self.big_mb} MB line of garbage between entries",
                     b"\n".join(raw) + b"\n", text(exp), [("bad_prefix", fwd_end + 1)])

    def empty_file(self) -> None:
        case = "empty_file"
        inputs, expected = [], []
        for r in range(4):
            src = rank_file(self.scenario, r)
            data = b"" if r == 2 else src.read_bytes()
            inputs.append(self._write(case, "damaged", data, src.name))
            if r != 2:  # an empty file is no log, never a rank: as if it were not there
                expected.append(self._write(case, "expected", data, src.name))
        d = str(Path(inputs[2]).parent)
        self.cases.append(Case(case, "rank 2's file is empty (0 bytes)", [d],
                               [str(Path(expected[0]).parent)], [["no_entries", inputs[2], 0]],
                               {"no_entries": 1, "missing_rank": 1}))

    def truncated_gz(self) -> None:
        clean = text(self.lines)
        gz = gzip.compress(clean, mtime=0)
        cut = len(gz) * 3 // 5
        while True:  # a cut whose decompressed prefix ends inside a line
            prefix = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(gz[:cut])
            if prefix and not prefix.endswith(b"\n") and not clean[len(prefix):].startswith(b"\n"):
                break
            cut += 1
        last_line = prefix.count(b"\n")  # 0-based index of the cut line
        first = next(a for a, b in entries(self.lines) if a <= last_line < b) if \
            any(a <= last_line < b for a, b in entries(self.lines)) else last_line
        case = "truncated_gz"
        d = self._write(case, "damaged", gz[:cut], self.name + ".gz")
        e = self._write(case, "expected", gzip.compress(text(self.lines[:first]), mtime=0), self.name + ".gz")
        self.cases.append(Case(case, "a .gz cut at 60% of its compressed size", [d], [e],
                               [["truncated_entry", d, last_line + 1], ["bad_gzip", d, 0]],
                               {"truncated_entry": 1, "bad_gzip": 1}))

    def junk_dir(self) -> None:
        case = "junk_dir"
        dd = self.out / case / "damaged"
        dd.mkdir(parents=True, exist_ok=True)
        exp = []
        for r in range(4):
            src = rank_file(self.scenario, r)
            shutil.copyfile(src, dd / src.name)
            exp.append(self._write(case, "expected", src.read_bytes(), src.name))
        (dd / "README.txt").write_text("copied from the cluster\n")
        (dd / "core.4242").write_bytes(bytes(range(256)) * 64)
        (dd / "train.log").write_text("step 1 loss 2.3\n")  # a log, but not a trace log
        (dd / "old").mkdir()
        shutil.copyfile(self.src, dd / "old" / self.name)  # not recursed into
        loop = "dedicated_log_torch_trace_rank_7_loop.log"
        os.symlink(loop, dd / loop)  # a link to itself
        os.symlink("loop_b", dd / "loop_a")
        os.symlink("loop_a", dd / "loop_b")
        os.symlink(".", dd / "self")  # a directory loop
        d = str(dd.relative_to(self.out))
        self.cases.append(Case(case, "a directory with unrelated files, a subdirectory, a directory "
                               "symlink loop and a log-named symlink loop", [d],
                               [str(Path(exp[0]).parent)], [["unreadable_file", f"{d}/{loop}", 0]],
                               {"unreadable_file": 1}))

    def unreadable(self) -> None:
        """Tests run as root, where ``chmod 000`` does not stop reading: the unreadable entries
        are a dangling symlink, a directory and a FIFO named like rank logs, and a rank log that
        is a symlink to ``/proc/self/mem`` (opens, then every read fails with EIO)."""
        case = "unreadable"
        dd = self.out / case / "damaged"
        dd.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.src, dd / self.name)
        e = self._write(case, "expected", self.src.read_bytes())
        names = {
            "dangling": "dedicated_log_torch_trace_rank_1_dangling.log",
            "directory": "dedicated_log_torch_trace_rank_2_dir.log",
            "fifo": "dedicated_log_torch_trace_rank_3_fifo.log",
            "eio": "dedicated_log_torch_trace_rank_4_eio.log",
        }
        os.symlink("/nonexistent/rank_1.log", dd / names["dangling"])
        (dd / names["directory"]).mkdir()
        os.mkfifo(dd / names["fifo"])
        os.symlink("/proc/self/mem", dd / names["eio"])
        d = str(dd.relative_to(self.out))
        self.cases.append(Case(case, "a dangling symlink, a directory and a FIFO named like rank "
                               "logs, and a rank log whose reads fail (EIO)", [d],
                               [str(Path(e).parent)],
                               [["unreadable_file", f"{d}/{n}", 0] for n in names.values()],
                               {"unreadable_file": 4}))

    def interleaved(self) -> None:
        l0, l1 = self.lines, read_lines(rank_file(self.scenario, 1))
        e0, e1 = entries(l0), entries(l1)
        e1 = e1[1:]  # rank 1's torch_version entry (no rank) is left out
        merged: list[str] = []
        exp: list[str] = []
        other: list[int] = []
        for i in range(max(len(e0), len(e1))):
            if i < len(e0):
                a, b = e0[i]
                merged += l0[a:b]
                exp += l0[a:b]
            if i < len(e1):
                a, b = e1[i]
                if '"rank": 1' in l1[a]:  # entries without a rank (str, torch_version) are not told apart
                    other.append(len(merged) + 1)
                merged += l1[a:b]
                exp += [""] * (b - a)
        self._single("interleaved", "rank 1's entries interleaved with rank 0's in rank 0's file "
                     "(a forked child writing into its parent's file)", text(merged), text(exp),
                     [("other_rank", ln) for ln in other[:5]], {"other_rank": len(other)})

    def build(self, only: set[str] | None = None) -> list[Case]:
        for name in CASES:
            if only is None or name in only:
                getattr(self, name)()
        return self.cases


CASES = ["cut_mid_envelope", "cut_mid_payload", "md5_mismatch", "invalid_json", "json_array",
         "json_number", "wrong_type_rank", "wrong_type_frame_id", "invalid_utf8", "nul_bytes",
         "crlf", "long_line", "empty_file", "truncated_gz", "junk_dir", "unreadable", "interleaved"]


def _count(kinds) -> dict[str, int]:
    out: dict[str, int] = {}
    for k in kinds:
        out[k] = out.get(k, 0) + 1
    return out


def build_corpus(out: Path, scenario: Path = DEFAULT_SCENARIO, big_mb: int = 50,
                 only: set[str] | None = None) -> list[Case]:
    """Write the corpus into ``out`` (created) and its ``manifest.json``; return the cases."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cases = Builder(Path(scenario), out, big_mb).build(only)
    (out / "manifest.json").write_text(json.dumps([asdict(c) for c in cases], indent=1))
    return cases


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--scenario", type=Path, default=DEFAULT_SCENARIO)
    ap.add_argument("--big-mb", type=int, default=50)
    ap.add_argument("--only", default=None, help="comma-separated case names")
    a = ap.parse_args(argv)
    only = set(a.only.split(",")) if a.only else None
    for c in build_corpus(a.out, a.scenario, a.big_mb, only):
        print(f"{c.name:22} {c.damage}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
