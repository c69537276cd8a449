"""Open a page in Debian's chromium, headless, and report what the browser saw: the DOM after the
page's script ran, values of JavaScript expressions, console messages, uncaught exceptions,
browser log entries (CSP violations, failed loads) and every network request.

Talks the DevTools protocol over ``--remote-debugging-pipe`` (fd 3: commands in, fd 4: replies
and events out, each message JSON ended by a NUL byte), so it needs no Python package beyond the
standard library.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
    "--disable-dev-shm-usage",  # containers with a small /dev/shm
]


class BrowserError(RuntimeError):
    pass


@dataclass
class PageVisit:
    dom: str = ""
    values: dict[str, Any] = field(default_factory=dict)
    console: list[tuple[str, str]] = field(default_factory=list)  # (type, text)
    exceptions: list[str] = field(default_factory=list)
    log: list[tuple[str, str]] = field(default_factory=list)  # (level, text)
    requests: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions, browser log errors and warnings."""
        return ([f"console.{t}: {x}" for t, x in self.console if t in ("error", "warning", "assert")]
                + [f"exception: {x}" for x in self.exceptions]
                + [f"log {lv}: {x}" for lv, x in self.log if lv in ("error", "warning")])


class _Pipe:
    """The DevTools pipe of one chromium process."""

    def __init__(self, proc: subprocess.Popen, to_chrome: int, from_chrome: int, deadline: float):
        self.proc, self.out, self.inp, self.deadline = proc, to_chrome, from_chrome, deadline
        self.buf = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None) -> dict[str, Any]:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.out, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str) -> dict[str, Any]:
        for i, ev in enumerate(self.events):
            if ev.get("method") == method:
                return self.events.pop(i)
        while True:
            ev = self._read()
            if ev.get("method") == method:
                return ev
            self.events.append(ev)

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self.buf:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("chromium did not answer in time")
            ready, _, _ = select.select([self.inp], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.inp, 1 << 16)
            if not chunk:
                raise BrowserError(f"chromium closed its pipe (exit {self.proc.poll()})")
            self.buf += chunk
        msg, _, self.buf = self.buf.partition(b"\0")
        return json.loads(msg)


def visit(url: str, profile_dir: str, expressions: dict[str, str] | None = None,
          steps: list[str] | None = None, timeout: float = 60.0) -> PageVisit:
    """Load ``url`` in a fresh headless chromium (profile in ``profile_dir``), wait for its load
    event, run each of ``steps`` (JavaScript), then evaluate ``expressions`` (name -> JavaScript
    expression, values returned as JSON) and the DOM."""
    if not os.path.exists(CHROMIUM):
        raise BrowserError("chromium not found: apt-get install -y chromium (as .ci/run does)")
    r_in, w_in = os.pipe()  # we write commands; chromium reads them on fd 3
    r_out, w_out = os.pipe()  # chromium writes on fd 4; we read
    # numbers above 4, so that bash's 3<&N 4>&M cannot clobber one with the other (dash, Debian's
    # /bin/sh, takes one-digit descriptors only)
    hi_in, hi_out = fcntl.fcntl(r_in, fcntl.F_DUPFD, 10), fcntl.fcntl(w_out, fcntl.F_DUPFD, 10)
    os.close(r_in)
    os.close(w_out)
    cmd = ["/bin/bash", "-c", f'exec "$0" "$@" 3<&{hi_in} 4>&{hi_out} {hi_in}<&- {hi_out}>&-',
           CHROMIUM, *FLAGS, f"--user-data-dir={profile_dir}", "--remote-debugging-pipe",
           "about:blank"]
    proc = subprocess.Popen(cmd, pass_fds=(hi_in, hi_out), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(hi_in)
    os.close(hi_out)
    pipe = _Pipe(proc, w_in, r_out, time.monotonic() + timeout)
    out = PageVisit()
    try:
        target = pipe.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = pipe.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Network", "Page"):
            pipe.send(f"{domain}.enable", session=session)
        pipe.events.clear()  # about:blank's own events
        pipe.send("Page.navigate", {"url": url}, session=session)
        pipe.wait_event("Page.loadEventFired")

        def evaluate(expr: str) -> Any:
            res = pipe.send("Runtime.evaluate", {"expression": expr, "returnByValue": True},
                            session=session)
            if "exceptionDetails" in res:
                out.exceptions.append(_exception_text(res["exceptionDetails"]))
                return None
            return res["result"].get("value")

        for step in steps or []:
            evaluate(step)
        out.values = {name: evaluate(expr) for name, expr in (expressions or {}).items()}
        out.dom = evaluate("document.documentElement.outerHTML")
        evaluate("0")  # a last round trip, so that events the steps caused have arrived
        for ev in pipe.events:
            m, p = ev.get("method"), ev.get("params", {})
            if m == "Runtime.consoleAPICalled":
                text = " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"])
                out.console.append((p["type"], text))
            elif m == "Runtime.exceptionThrown":
                out.exceptions.append(_exception_text(p["exceptionDetails"]))
            elif m == "Log.entryAdded":
                out.log.append((p["entry"]["level"], p["entry"]["text"]))
            elif m == "Network.requestWillBeSent":
                out.requests.append(p["request"]["url"])
        try:
            pipe.send("Browser.close")
        except BrowserError:
            pass
        proc.wait(timeout=30)
    finally:
        os.close(w_in)
        os.close(r_out)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return out


def _exception_text(details: dict[str, Any]) -> str:
    exc = details.get("exception") or {}
    return str(exc.get("description") or details.get("text") or details)
