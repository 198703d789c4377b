"""Headless Chromium through Playwright, for the report and dashboard tests: load a page, collect console
errors and uncaught exceptions, wait for elements, take screenshots.

The system Chromium is launched (Playwright cannot download its own browser here); where Chromium or the
`playwright` package is missing the tests skip with the reason, and fail under BAKEOFF_CI=1."""
from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
VIEWPORT = {"width": 1400, "height": 1800}
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"  # git-ignored, kept for a CI job to upload


def chromium_path() -> str | None:
    """The system Chromium, or None when absent."""
    for name in ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    return None


def artifacts_dir(default: Path | None = None) -> Path:
    """Where screenshots go, kept after the test session: $BAKEOFF_TEST_ARTIFACTS, else `default`, else
    tests/artifacts/."""
    path = Path(os.environ.get("BAKEOFF_TEST_ARTIFACTS") or default or ARTIFACTS)
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass
class Page:
    """A loaded page and the errors it raised so far (console errors, uncaught exceptions, failed loads)."""

    page: Any
    errors: list[str] = field(default_factory=list)

    def count(self, selector: str) -> int:
        return self.page.locator(selector).count()

    def evaluate(self, expression: str) -> Any:
        return self.page.evaluate(expression)

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(path), full_page=True)
        return path


class Browser:
    """One Chromium; `open` gives a fresh page per file."""

    def __init__(self, playwright: Any, binary: str) -> None:
        self.browser = playwright.chromium.launch(executable_path=binary, args=FLAGS, headless=True)

    def open(self, file: Path, wait_for: dict[str, int] | None = None, timeout_s: float = 90) -> Page:
        """Open `file` and wait until each selector of `wait_for` matches at least its count."""
        page = self.browser.new_page(viewport=VIEWPORT)
        loaded = Page(page)
        page.on("console", lambda m: loaded.errors.append(f"console: {m.text}") if m.type in ("error", "assert")
                else None)
        page.on("pageerror", lambda exc: loaded.errors.append(f"exception: {exc}"))
        page.on("requestfailed", lambda r: loaded.errors.append(f"load failed: {r.url} {r.failure}"))
        page.goto(file.resolve().as_uri(), wait_until="load", timeout=timeout_s * 1000)
        for selector, n in (wait_for or {}).items():
            page.wait_for_function("([s, n]) => document.querySelectorAll(s).length >= n", arg=[selector, n],
                                   timeout=timeout_s * 1000)
        return loaded


@contextmanager
def open_browser() -> Iterator[Browser]:
    """A Chromium driven by Playwright, or a pytest skip saying what is missing (a failure under BAKEOFF_CI=1:
    ci_required.py)."""
    from ci_required import importorskip, skip_or_fail

    binary = chromium_path()
    if binary is None:
        skip_or_fail("chromium is not installed (Debian: apt-get install chromium; .ci/setup.sh does it)")
    sync_api = importorskip("playwright.sync_api", reason="playwright drives Chromium (pip install '.[test]')")
    with sync_api.sync_playwright() as pw:
        browser = Browser(pw, binary)
        try:
            yield browser
        finally:
            browser.browser.close()
