"""report, compare and dashboard over a store made by a real `bakeoff run` on the CPU (eager and the
fault-injection backend: one label that behaves, one that perturbs its output, one that fails to compile)."""
from __future__ import annotations

import re

import pytest

from browser_cdp import artifacts_dir, evaluate, open_browser
from conftest import bakeoff
from bakeoff.results.report.data import load_run
from bakeoff.results.report.figures_perf import pareto_front, speedup_heatmap
from bakeoff.results.report.figures_quality import RMSE_MULTIPLIER
from bakeoff.results.report.weights import DEFAULT_WEIGHTS, recommend
from bakeoff.results.store import Store

CONFIG = """
name: report-tiny
device: cpu
preset: smoke
dtypes: [float32]
workloads: [ew_sigmoid_relu, softmax]
backends:
  eager: {}
  same: {backend: faulty, mode: none}
  perturb: {backend: faulty, mode: perturb, scale: 0.05}
  broken: {backend: faulty, mode: compile_error}
seeds: [0, 1]
timing: {warmup_s: 0.01, budget_s: 0.05, min_reps: 5}
compile: {warm: false}
timeout_s: 120
"""
N_CASES = 8
N_CHARTS = 5  # speedup heatmap, latency bars, compile vs latency, error, roofline


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """One real run of CONFIG through the CLI; its folder, store URL and run id."""
    work = tmp_path_factory.mktemp("report_real")
    (work / "tiny.yaml").write_text(CONFIG)
    db = f"sqlite:///{work / 'r.db'}"
    bakeoff("run", "tiny.yaml", "--db", db, cwd=work, check=True)
    return work, db, Store(db).latest_run_id()


def test_report_is_self_contained_with_every_case(real):
    work, db, run_id = real
    bakeoff("report", "-o", "report.html", "--db", db, cwd=work, check=True)
    html = (work / "report.html").read_text()
    assert (work / "report.html").stat().st_size > 3_000_000  # plotly.js embedded: opens offline
    assert 'src="https://cdn.plot.ly' not in html and run_id in html
    cases = re.search(r'<table id="cases".*?</table>', html, re.S).group(0)
    assert len(re.findall(r"<tr>", cases)) == N_CASES + 1
    assert "injected compile error" in cases and "mismatch" in cases
    assert html.count('class="plotly-graph-div"') == N_CHARTS
    small = bakeoff("report", run_id, "--cdn", "-o", "small.html", "--db", db, cwd=work, check=True)
    assert "small.html" in small.stdout and (work / "small.html").stat().st_size < 500_000


def test_recommendation_excludes_failed_backends_and_says_why(real):
    work, db, run_id = real
    run = load_run(Store(db), run_id)
    recs = recommend(run.cases, DEFAULT_WEIGHTS)
    assert {r.workload for r in recs} == {"ew_sigmoid_relu", "softmax"}
    for r in recs:
        assert r.backend in ("eager", "same"), r
        assert "excluded: perturb mismatch, broken compile_error" in r.reason and "ms" in r.reason
    # Weights from a YAML file, in the `report: {weights: ...}` form; a bad name is refused with exit code 2.
    (work / "w.yaml").write_text("report:\n  weights: {latency: 1, compile: 5, error: 0}\n")
    bakeoff("report", "--weights-file", "w.yaml", "-o", "w.html", "--db", db, cwd=work, check=True)
    assert "compile=5" in (work / "w.html").read_text()
    bad = bakeoff("report", "--weights", "speed=1", "--db", db, cwd=work)
    assert bad.returncode == 2 and "unknown weight 'speed'" in bad.stderr


def test_heatmap_marks_failures_with_their_reason(real):
    work, db, run_id = real
    fig = speedup_heatmap([load_run(Store(db), run_id)])
    failed = [t for t in fig.data if t.name == "failed"][0]
    assert len(failed.x) == 4  # perturb and broken, on both workloads
    assert any("injected compile error" in h for h in failed.hovertext)
    assert any("mismatch" in h for h in failed.hovertext)


def test_pareto_front_and_tolerance_agree_with_the_harness():
    import torch

    from bakeoff.harness.measure.numerics import RMSE_MULTIPLIER as HARNESS

    assert {str(k).removeprefix("torch."): v for k, v in HARNESS.items()} == RMSE_MULTIPLIER
    assert pareto_front([(1.0, 5.0), (2.0, 4.0), (3.0, 6.0), (0.5, 9.0)]) == [3, 0, 1]
    _ = torch


def test_compare_a_real_run_with_itself_exits_0(real):
    work, db, run_id = real
    proc = bakeoff("compare", run_id, "latest", "--db", db, cwd=work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 regression(s)" in proc.stdout and "no environment change" in proc.stdout


def test_dashboard_of_a_real_run(real):
    work, db, _ = real
    proc = bakeoff("dashboard", "-o", "site", "--db", db, cwd=work, check=True)
    assert "2 workload page(s)" in proc.stdout
    index = (work / "site" / "index.html").read_text()
    assert "1 runs" in index and "workload-softmax.html" in index and "No flags." in index


def test_report_opens_in_chromium_and_sorts(real):
    work, db, _ = real
    if not (work / "report.html").exists():
        bakeoff("report", "-o", "report.html", "--db", db, cwd=work, check=True)
    shots = artifacts_dir()  # tests/artifacts/: kept after the session
    browser = open_browser()
    try:
        res = browser.load(work / "report.html", {".js-plotly-plot": N_CHARTS,
                                                  ".js-plotly-plot .main-svg": 2 * N_CHARTS}, shots / "report.png")
        # Click the latency header: rows with a latency come first, ascending.
        order = evaluate(browser, """(() => {
            const th = [...document.querySelectorAll('#cases th')].find(h => h.textContent.startsWith('latency'));
            const i = [...th.parentNode.children].indexOf(th); th.click();
            return [...document.querySelectorAll('#cases tbody tr')].map(r => r.cells[i].getAttribute('data-v'));
        })()""")
        heat_cells = evaluate(browser, "document.querySelectorAll('#speedup .heatmaplayer image, "
                                       "#speedup .heatmaplayer path').length")
        site = browser.load(work / "site" / "workload-softmax.html", {".js-plotly-plot": 3},
                            shots / "dashboard-real.png") if (work / "site").exists() else None
    finally:
        browser.close()
    assert res.errors == [], res.errors
    assert res.counts[".js-plotly-plot"] == N_CHARTS and res.counts[".js-plotly-plot .main-svg"] >= 2 * N_CHARTS
    values = [float(v) for v in order if v is not None]
    # eager, same and perturb (timed although it failed the check) have latencies; broken has none: last.
    assert len(values) == 6 and values == sorted(values) and order[6:] == [None] * 2
    assert heat_cells >= 1
    if site is not None:  # latency, cold compile, error (warm compile is off in CONFIG)
        assert site.errors == [] and site.counts[".js-plotly-plot"] == 3
    print(f"\nscreenshot: {res.screenshot}")
    assert res.screenshot.stat().st_size > 50_000
