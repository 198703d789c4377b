"""What a report weighs and how fast it opens: plotly.js, the charts and tables, and the embedded code texts
(gzip + base64, decompressed on demand), against the artifacts' own size; with --browser, what a person sees in
Chromium (Playwright) at 1400×900, checked against the report's targets:

- the first screen shows the scoreboard and the speedup heatmap whole, with at most FIRST_SCREEN_CHARS of text
  (every text node, HTML or chart, that reaches into the first 1400×900);
- the page is at most MAX_HEIGHT_PX tall before anything is opened, and usable (loaded, heatmap shown, code view
  ready; plotly.js is fetched when a folded chart is first opened) within MAX_USABLE_S;
- every workload whose two fastest backends' 95% speedup intervals overlap (report/decision.py, computed here
  from the store) says "tie" in the page's per-workload table;
and the time to show the largest embedded text.

    python benchmarks/report_size.py [RUN_ID ...] [--db URL] [--browser]

Prints one table (a target missed is marked MISSED and the exit status is 1); nothing is written to the store.
The report is built in memory as `bakeoff report` builds it.
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
from bakeoff.results.report.decision import verdicts  # noqa: E402
from bakeoff.results.report.report import render_report  # noqa: E402
from bakeoff.results.report.weights import DEFAULT_WEIGHTS  # noqa: E402
from bakeoff.results.store import Store  # noqa: E402

FIRST_SCREEN = {"width": 1400, "height": 900}
FIRST_SCREEN_CHARS = 2500
MAX_HEIGHT_PX = 12_000
MAX_USABLE_S = 3.0

# The text of every node that reaches into the first screen (closed folds have no boxes), and where the
# scoreboard and the heatmap end; the page's height; the groups the per-workload table calls a tie.
SCREEN_JS = """(() => {
    const W = innerWidth, H = innerHeight, walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    let chars = 0;
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
        const text = n.textContent.trim();
        if (!text || ['SCRIPT', 'STYLE'].includes(n.parentNode.nodeName)) continue;
        const r = document.createRange(); r.selectNodeContents(n);
        if ([...r.getClientRects()].some(b => b.width > 0 && b.top < H && b.bottom > 0 && b.left < W)) chars += text.length;
    }
    const bottom = id => { const e = document.getElementById(id); return e ? e.getBoundingClientRect().bottom : null; };
    const ties = [...document.querySelectorAll('#verdicts tbody tr')].filter(r => r.querySelector('td.tie'))
        .map(r => [...r.cells].slice(0, 3).map(c => c.textContent).join(' '));
    return {chars, height: document.documentElement.scrollHeight, scoreboard: bottom('scoreboard'),
            heatmap: bottom('speedup'), ties};
})()"""

BLOB = re.compile(r'<script type="application/octet-stream" id="blob-\d+">(.*?)</script>', re.S)


def browser_figures(html: str) -> dict:
    """What Chromium shows: `usable_s` (to the loaded page with the heatmap drawn and the first code view
    ready), SCREEN_JS's figures at 1400×900, `show_s` (to show the largest text) and `largest` (its name)."""
    sys.path.insert(0, str(REPO / "tests"))
    from playwright.sync_api import sync_playwright

    import browser as tests_browser

    tests_browser.VIEWPORT = FIRST_SCREEN
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        path = Path(tmp) / "report.html"
        path.write_text(html)
        browser = tests_browser.Browser(pw, tests_browser.chromium_path() or "chromium")
        t0 = time.perf_counter()
        # the code view settled: its text shown, or its note where the store kept no artifacts
        page = browser.open(path, {"#speedup td.hm-cell": 1, "#code-left .code-text:is([data-state=ready], "
                                   "[data-state=note])": 1})
        load_s = time.perf_counter() - t0
        screen = page.evaluate(SCREEN_JS)
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
        return {**screen, "usable_s": load_s, "show_s": show_s, "errors": page.errors,
                "largest": f"{largest['b']} {largest['name']} ({largest['bytes']:,} B)" if largest else "-"}


def _ends(bottom_px: float | None) -> str:
    return "absent" if bottom_px is None else f"ends at {bottom_px:,.0f} px"


def expected_ties(runs: list) -> list[str]:
    """'workload shape dtype' of every group whose two fastest backends' intervals overlap."""
    return [f"{v.workload} {v.shape} {v.dtype}" for v in verdicts(runs)
            if len(v.ranked) > 1 and v.ranked[1].high >= v.ranked[0].low]


def browser_rows(t: Table, html: str, runs: list) -> bool:
    """The --browser rows of the table; False when a target is missed."""
    fig = browser_figures(html)
    want = expected_ties(runs)
    said = set(fig["ties"])
    missed_ties = [w for w in want if w not in said]
    checks = [
        ("page height before anything is opened", f"{fig['height']:,} px", fig["height"] <= MAX_HEIGHT_PX,
         f"≤ {MAX_HEIGHT_PX:,} px"),
        ("text on the first 1400×900 screen", f"{fig['chars']:,} chars", fig["chars"] <= FIRST_SCREEN_CHARS,
         f"≤ {FIRST_SCREEN_CHARS:,}"),
        ("scoreboard whole on the first screen", _ends(fig["scoreboard"]),
         fig["scoreboard"] is not None and fig["scoreboard"] <= FIRST_SCREEN["height"], "≤ 900 px"),
        ("heatmap whole on the first screen", _ends(fig["heatmap"]),
         fig["heatmap"] is not None and fig["heatmap"] <= FIRST_SCREEN["height"], "≤ 900 px"),
        ("load to usable (heatmap drawn, code view ready)", f"{1000 * fig['usable_s']:,.0f} ms",
         fig["usable_s"] <= MAX_USABLE_S, f"≤ {MAX_USABLE_S:g} s"),
        ("ties said / groups whose top two intervals overlap", f"{len(want) - len(missed_ties)} / {len(want)}",
         not missed_ties, "all"),
        ("page errors (console, exceptions)", str(len(fig["errors"])), not fig["errors"], "0"),
    ]
    t.add_section()
    for name, value, ok, target in checks:
        t.add_row(f"Chromium: {name}", value, ("ok " if ok else "MISSED ") + target)
    t.add_row(f"Chromium: show the largest text, {fig['largest']}", f"{fig['show_s']:.3f} s", "")
    for w in missed_ties:
        t.add_row(f"  not called a tie: {w}", "", "")
    return all(ok for _, _, ok, _ in checks)


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
    for col in ("part", "bytes", "share of the page / target"):
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
    ok = browser_rows(t, html, runs) if args.browser else True
    Console(width=130).print(t)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
