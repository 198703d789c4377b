"""Drive headless Chromium through the DevTools protocol: load a page, collect console errors and uncaught
exceptions, count elements, take a screenshot. Used by the report and dashboard tests."""
from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-allow-origins=*", "--window-size=1400,1800", "--hide-scrollbars"]


def chromium_path() -> str | None:
    """The Chromium binary, or None when absent."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    return None


@dataclass
class PageResult:
    """What a loaded page showed: console errors and exceptions (text), the counts asked for, the screenshot."""

    errors: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    screenshot: Path | None = None


class Chromium:
    """A headless Chromium with a fresh profile, driven over one page's DevTools websocket."""

    def __init__(self) -> None:
        import websocket  # websocket-client, from the `test` extra

        binary = chromium_path()
        if binary is None:
            raise RuntimeError("chromium not found")
        self.profile = Path(tempfile.mkdtemp(prefix="bakeoff-chromium-"))
        self.proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-port=0",
                                      "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        for _ in range(100):
            targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
            pages = [t for t in targets if t.get("type") == "page"]
            if pages:
                break
            time.sleep(0.1)
        self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=120, suppress_origin=True)
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command and return its result; events that arrive meanwhile are kept."""
        ident = next(self.ids)
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == ident:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def _wait_event(self, name: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(e.get("method") == name for e in self.events):
                return
            self.ws.settimeout(max(0.1, deadline - time.monotonic()))
            self.events.append(json.loads(self.ws.recv()))
        raise TimeoutError(f"no {name} within {timeout_s} s")

    def count(self, selector: str) -> int:
        res = self.call("Runtime.evaluate", expression=f"document.querySelectorAll({json.dumps(selector)}).length",
                        returnByValue=True)
        return int(res["result"]["value"])

    def load(self, page: Path, selectors: dict[str, int], screenshot: Path, timeout_s: float = 90) -> PageResult:
        """Open `page`, wait for load and until each selector reaches its expected count (or the timeout),
        then return errors, counts and a full-page screenshot."""
        self.events.clear()
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        self.call("Page.navigate", url=page.resolve().as_uri())
        self._wait_event("Page.loadEventFired", timeout_s)
        deadline = time.monotonic() + timeout_s
        counts = {s: self.count(s) for s in selectors}
        while any(counts[s] < n for s, n in selectors.items()) and time.monotonic() < deadline:
            time.sleep(0.25)
            counts = {s: self.count(s) for s in selectors}
        time.sleep(0.5)  # late errors from rendering
        self.call("Runtime.evaluate", expression="1")
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        screenshot.write_bytes(base64.b64decode(shot["data"]))
        return PageResult(_errors(self.events), counts, screenshot)

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:
            pass
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


def _errors(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for e in events:
        p = e.get("params", {})
        if e.get("method") == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append("exception: " + str((d.get("exception") or {}).get("description") or d.get("text")))
        elif e.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
        elif e.get("method") == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
    return out


def evaluate(browser: Chromium, expression: str) -> Any:
    """The value of a JavaScript expression in the loaded page."""
    res = browser.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
    if "exceptionDetails" in res:
        raise RuntimeError(f"{expression}: {res['exceptionDetails']}")
    return res["result"].get("value")


ARTIFACTS = Path(__file__).resolve().parent / "artifacts"  # git-ignored, kept for a CI job to upload


def artifacts_dir(default: Path | None = None) -> Path:
    """Where screenshots go, kept after the test session: $BAKEOFF_TEST_ARTIFACTS, else `default`, else
    tests/artifacts/."""
    import os

    path = Path(os.environ.get("BAKEOFF_TEST_ARTIFACTS") or default or ARTIFACTS)
    path.mkdir(parents=True, exist_ok=True)
    return path


def open_browser() -> Chromium:
    """A Chromium, or a pytest skip saying what is missing (a failure under BAKEOFF_CI=1: ci_required.py)."""
    from ci_required import importorskip, skip_or_fail

    if chromium_path() is None:
        skip_or_fail("chromium is not installed (Debian: apt-get install chromium; .ci/setup.sh does it)")
    importorskip("websocket", reason="websocket-client is needed to drive Chromium (pip install '.[test]')")
    return Chromium()
