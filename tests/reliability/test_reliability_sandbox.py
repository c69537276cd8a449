"""``tracekit`` never writes outside ``--output`` and never follows a path out of a log.

The real CLI runs in a subprocess under a Python audit hook (``sys.addaudithook``) that records
every ``open`` (path, mode, flags), directory listing, process, socket and file-system change.
The logs are a real fixture with bait added: entries naming files (``str`` intern entries, a
``dump_file`` entry, a ``link`` entry, ``pathname`` keys, an artifact named ``../../...``, size
names and a graph text that point at bait files, an ``fx_graph_runnable`` that would touch a
marker), and a summary JSON whose ``paths``/``files`` point at bait files (read by ``diff``)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURE_LOGS, ROOT

WRAPPER = r'''
import json, os, sys
events = []
WATCH = ("open", "os.listdir", "os.scandir", "os.remove", "os.rename", "os.mkdir", "os.rmdir",
         "os.symlink", "os.link", "os.chmod", "os.chown", "os.truncate", "os.utime", "shutil.",
         "subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
         "socket.", "ctypes.dlopen", "urllib.", "http.", "ftplib.", "webbrowser.")
def hook(ev, args):
    if ev.startswith(WATCH):
        out = []
        for x in args:
            if isinstance(x, (bytes, bytearray)):
                x = os.fsdecode(bytes(x))
            out.append(x if isinstance(x, (str, int, float, type(None))) else repr(x)[:300])
        events.append([ev, out])
sys.addaudithook(hook)
import atexit
@atexit.register
def dump():
    os.write(2, b"\n@@EVENTS@@" + json.dumps(events).encode() + b"\n")
sys.argv = ["tracekit", *sys.argv[1:]]
from tracekit.cli import main
main()
'''

SRC0 = next((FIXTURE_LOGS / "spmd_auto").glob("dedicated_log_torch_trace_rank_0_*.log"))
SRC1 = next((FIXTURE_LOGS / "spmd_auto").glob("dedicated_log_torch_trace_rank_1_*.log"))
PREFIX = "V1202 14:36:46.816000 8062 site-packages/torch/_logging/structured.py:28] "


def _entry(env: dict, payload: str | None = None) -> str:
    if payload is not None:
        env["has_payload"] = hashlib.md5(payload.encode()).hexdigest()
    out = PREFIX + json.dumps(env) + "\n"
    if payload is not None:
        out += "".join("\t" + ln + "\n" for ln in payload.split("\n"))
    return out


def _bait_log(bait: Path, marker: Path) -> str:
    """The fixture log of rank 0 with entries naming bait files, and a hostile graph text."""
    secret = bait / "dedicated_log_torch_trace_rank_5_secret.log"
    ids = {"rank": 0, "frame_id": 0, "frame_compile_id": 0, "attempt": 0}
    extra = "".join([
        _entry({"str": [str(secret), 0]}),
        _entry({"str": ["../" * 12 + str(bait / "up.log")[1:], 1]}),
        _entry({"artifact": {"name": "../" * 12 + str(bait / "escape")[1:], "encoding": "string"},
                **ids}, "written where?"),
        _entry({"dump_file": {"name": str(bait / "dumped.py")}, **ids}, "import os"),
        _entry({"link": {"name": "secret", "url": f"file://{secret}"}, **ids}),
        _entry({"chromium_event": {}, "pathname": str(secret), "filename": str(secret), **ids},
               json.dumps({"args": {"path": str(secret)}})),
        _entry({"artifact": {"name": "fx_graph_runnable", "encoding": "string"}, **ids},
               f"import os\nos.system('touch {marker}')\nopen('{marker}', 'w')"),
    ])
    lines = SRC0.read_text().split("\n")
    i = next(k for k, ln in enumerate(lines) if '"name": "torch_version"' in ln) + 1
    while lines[i].startswith("\t"):  # after the torch_version entry's payload
        i += 1
    lines.insert(i, extra.rstrip("\n"))
    text = "\n".join(lines)
    # the forward's graph text gets a node that names a bait file; its MD5 is recomputed
    ls = text.split("\n")
    g = next(k for k, ln in enumerate(ls) if '"name": "before_post_grad_graph"' in ln)
    end = g + 1
    while ls[end].startswith("\t"):
        end += 1
    ret = max(k for k in range(g + 1, end) if ls[k].startswith("\t        return "))
    ls.insert(ret, f"\t        evil: \"f32[1][1]cpu\" = torch.ops.aten.relu.default(open('{secret}'))")
    payload = "\n".join(x[1:] for x in ls[g + 1 : end + 1])
    env = json.loads(ls[g][ls[g].index("] ") + 2 :])
    env["has_payload"] = hashlib.md5(payload.encode()).hexdigest()
    ls[g] = ls[g][: ls[g].index("] ") + 2] + json.dumps(env)
    return "\n".join(ls)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    base = tmp_path_factory.mktemp("sandbox")
    bait, logs, out, cwd = (base / n for n in ("bait", "logs", "out", "cwd"))
    for d in (bait, logs, out, cwd, base / "tmp"):
        d.mkdir()
    marker = bait / "pwned"
    shutil.copyfile(SRC1, bait / "dedicated_log_torch_trace_rank_5_secret.log")  # a real log
    (logs / SRC0.name).write_text(_bait_log(bait, marker))
    shutil.copyfile(SRC1, logs / SRC1.name)
    return base, bait, logs, out, cwd, marker


def _run(cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess, list]:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1",
           "HOME": str(cwd), "TMPDIR": str(cwd.parent / "tmp")}
    res = subprocess.run([sys.executable, "-c", WRAPPER, *args], capture_output=True, text=True,
                         env=env, cwd=cwd, timeout=300)
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    head, _, tail = res.stderr.rpartition("@@EVENTS@@")
    return res, json.loads(tail)


def _tree(d: Path) -> dict:
    return {str(p.relative_to(d)): (p.lstat().st_size, p.lstat().st_mtime_ns)
            for p in sorted(d.rglob("*"))}


#: What importing torch (replay only) does on its own: probe the temp dir with a file it removes
#: at once, create ``$TMPDIR/torchinductor_<user>``, ask ``nvidia-smi -L`` for GPUs.
TORCH_IMPORT_EVENTS = ("tmpdir", "nvidia-smi -L")


def _torch_import_event(ev: str, args: list, tmp: Path) -> bool:
    if ev in ("open", "os.remove", "os.mkdir") and isinstance(args[0], str):
        return str(Path(args[0]).parent) == str(tmp) or args[0] == str(tmp)
    return ev == "subprocess.Popen" and args[0] == "/bin/sh" and "nvidia-smi -L" in str(args[1])


def _check(events: list, bait: Path, logs: Path, out: Path, allowed_writes: set[Path],
           torch_tmp: Path | None = None) -> None:
    inputs = {str(p) for p in logs.iterdir()}
    prefixes = (sys.prefix, sys.base_prefix, str(ROOT / "tracekit"), str(ROOT / "bucketing"),
                "/proc/", "/sys/", "/dev/")
    for ev, args in events:
        if torch_tmp is not None and _torch_import_event(ev, args, torch_tmp):
            continue
        text = json.dumps(args)
        assert str(bait) not in text, (ev, args)  # no path out of a log is ever followed
        assert not ev.startswith(("subprocess.", "os.system", "os.exec", "os.posix_spawn",
                                  "os.spawn", "socket.", "urllib.", "http.", "webbrowser.")), (ev, args)
        if ev == "open" and isinstance(args[0], str):
            path, mode = args[0], args[1]
            flags = args[2] if isinstance(args[2], int) else 0
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
            if writes:
                assert Path(path).resolve() in allowed_writes, (ev, args)
            else:
                assert path in inputs or path.startswith(prefixes), (ev, args)
        elif ev in ("os.remove", "os.rename", "os.mkdir", "os.rmdir", "os.symlink", "os.chmod",
                    "os.truncate", "shutil.copyfile", "shutil.rmtree"):
            assert all(str(out) in str(a) for a in args if isinstance(a, str)), (ev, args)


def test_summarize_and_diff_write_only_their_output(sandbox):
    base, bait, logs, out, cwd, marker = sandbox
    before = (_tree(bait), _tree(logs))
    summary = out / "summary.json"
    res, events = _run(cwd, "summarize", "-j", "1", str(logs), "--format", "json", "--per-rank", "--output", str(summary))
    assert res.returncode == 0 and res.stdout == ""
    _check(events, bait, logs, out, {summary.resolve()})
    doc = json.loads(summary.read_text())
    assert doc["totals"]["graphs"] == 4 and [r["rank"] for r in doc["ranks"]] == [0, 1]
    # the bait entries are well-formed, merely ignored; ranks 2 and 3 of the group of 4 are missing
    assert doc["diagnostics"]["counts"] == {"missing_rank": 2}

    md = out / "summary.md"
    res, events = _run(cwd, "summarize", "-j", "1", str(logs), "--format", "markdown", "--strict",
                       "--output", str(md))
    assert res.returncode == 1 and md.read_text().startswith("#")  # --strict: ranks 2-3 missing
    _check(events, bait, logs, out, {md.resolve()})

    # a summary document whose paths point at bait files: diff reads it, follows nothing
    hostile = json.loads(summary.read_text())
    secret = str(bait / "dedicated_log_torch_trace_rank_5_secret.log")
    hostile["paths"] = [secret, str(bait)]
    for r in hostile["ranks"]:
        r["files"] = [secret]
        for g in r["graphs"]:
            g["file"] = secret
    doc_a = out / "a.json"
    doc_a.write_text(json.dumps(hostile))
    report = out / "diff.md"
    res, events = _run(cwd, "diff", str(doc_a), str(logs), "--format", "markdown", "--output", str(report))
    assert res.returncode in (0, 1), res.stderr
    assert report.exists()
    events = [e for e in events if not (e[0] == "open" and e[1][0] == str(doc_a))]
    _check(events, bait, logs, out, {report.resolve()})

    assert (_tree(bait), _tree(logs)) == before and not marker.exists()
    assert sorted(p.name for p in out.iterdir()) == ["a.json", "diff.md", "summary.json", "summary.md"]
    assert list(cwd.iterdir()) == []


def test_replay_writes_nothing_and_refuses_the_hostile_graph(sandbox):
    pytest.importorskip("torch")
    base, bait, logs, out, cwd, marker = sandbox
    before = (_tree(bait), _tree(logs), _tree(out))
    res, events = _run(cwd, "replay", str(logs), "--format", "json")
    doc = json.loads(res.stdout)
    _check(events, bait, logs, out, set(), torch_tmp=base / "tmp")
    assert [p.name for p in (base / "tmp").iterdir()] in ([], ["torchinductor_root"])
    assert (_tree(bait), _tree(logs), _tree(out)) == before and not marker.exists()
    assert list(cwd.iterdir()) == []
    assert res.returncode == 1  # the forward was refused (its text calls open()), said so
    fwd, bwd = doc["graphs"]
    assert "call to 'open'" in fwd["error"] and "line 119" in fwd["error"]
    assert bwd.get("error") is None and bwd["reproduced"] is True
