"""What a report weighs and how fast it opens: plotly.js, the charts and tables, and the embedded code texts
(gzip + base64, decompressed on demand), against the artifacts' own size; with --browser, the time Chromium
takes to load the page and to show the largest text.

    python benchmarks/report_size.py [RUN_ID ...] [--db URL] [--browser]

Prints one table; nothing is written to the store. The report is built in memory as `bakeoff report` builds it.
"""
from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from plotly.offline import get_plotlyjs  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bakeoff.results.report.artifacts import case_artifacts  # noqa: E402
from bakeoff.results.report.data import load_run  # noqa: E402
from bakeoff.results.report.report import render_report  # noqa: E402
from bakeoff.results.report.weights import DEFAULT_WEIGHTS  # noqa: E402
from bakeoff.results.store import Store  # noqa: E402

BLOB = re.compile(r'<script type="application/octet-stream" id="blob-\d+">(.*?)</script>', re.S)


def browser_times_s(html: str) -> tuple[float, float, str]:
    """(seconds to the loaded page with its first code view shown, seconds to show the largest text, its name)."""
    sys.path.insert(0, str(REPO / "tests"))
    from playwright.sync_api import sync_playwright

    from browser import Browser, chromium_path

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        path = Path(tmp) / "report.html"
        path.write_text(html)
        browser = Browser(pw, chromium_path() or "chromium")
        t0 = time.perf_counter()
        page = browser.open(path, {".js-plotly-plot": 1, "#code-left .code-text[data-state=ready]": 1})
        load_s = time.perf_counter() - t0
        largest = page.evaluate("""(() => {
            const index = JSON.parse(document.getElementById('code-index').textContent);
            let best = null;
            index.cases.forEach((c, i) => c.backends.forEach(b => b.artifacts.forEach(a => {
                if (a.blob !== null && (!best || a.bytes > best.bytes)) best = {i, b: b.backend, name: a.name, bytes: a.bytes};
            })));
            return best;
        })()""")
        show_s = 0.0
        if largest:
            p = page.page
            t1 = time.perf_counter()
            p.evaluate(f"window.bakeoffShowCase({largest['i']}, {largest['b']!r})")
            p.select_option("#code-left .code-artifact", largest["name"])
            p.wait_for_selector(f'#code-left .code-text[data-artifact="{largest["name"]}"][data-state=ready]')
            show_s = time.perf_counter() - t1
        browser.browser.close()
        return load_s, show_s, (f"{largest['b']} {largest['name']} ({largest['bytes']:,} B)" if largest else "-")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_ids", nargs="*", help="runs (default: the latest)")
    ap.add_argument("--db", default=None, help="results store URL (default sqlite:///results/bakeoff.db)")
    ap.add_argument("--browser", action="store_true", help="also time the page in Chromium (Playwright)")
    args = ap.parse_args()
    store = Store(args.db)
    runs = [load_run(store, rid) for rid in (args.run_ids or [store.latest_run_id()])]
    html = render_report(runs, DEFAULT_WEIGHTS, "inline")
    texts = [a for r in runs for c in r.cases for a in case_artifacts(c)[0] if a.text is not None]
    blobs = BLOB.findall(html)
    plotly = len(get_plotlyjs())
    total, embedded = len(html.encode()), sum(len(b) for b in blobs)
    t = Table(title=f"report of {', '.join(r.run_id for r in runs)}: {sum(len(r.cases) for r in runs)} cases")
    for col in ("part", "bytes", "share of the page"):
        t.add_column(col, justify="left" if col == "part" else "right")
    rows = [("the whole page (plotly.js inline)", total), ("plotly.js", plotly),
            (f"code texts embedded ({len(blobs)} distinct, gzip + base64)", embedded),
            ("charts, tables, index and script", total - plotly - embedded)]
    for name, n in rows:
        t.add_row(name, f"{n:,}", f"{100 * n / total:.1f}%")
    t.add_section()
    t.add_row(f"the artifacts' texts as saved ({len(texts)} files)", f"{sum(a.size_bytes for a in texts):,}",
              f"compressed to {100 * embedded / max(sum(a.size_bytes for a in texts), 1):.0f}%")
    t.add_row("the page with --cdn (plotly.js from its CDN)", f"{total - plotly:,}", "")
    if args.browser:
        load_s, show_s, what = browser_times_s(html)
        t.add_section()
        t.add_row("Chromium: load, charts drawn, first code view shown", f"{load_s:.2f} s", "")
        t.add_row(f"Chromium: show the largest text, {what}", f"{show_s:.3f} s", "")
    Console().print(t)


if __name__ == "__main__":
    main()
