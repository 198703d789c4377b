"""compare, dashboard and report over synthetic histories (made up, tests only; see report_history.py):
a planted 30% step in the last two runs with a driver/torch change, a ±8% noisy series, an ok → mismatch."""
from __future__ import annotations

import json
import random
import re

import pytest

from browser import artifacts_dir, open_browser
from conftest import bakeoff
from report_history import FLIP, N_RUNS, NOISY, REGRESS, write_history
from bakeoff.results.report.data import load_run
from bakeoff.results.report.charts_quality import roofline
from bakeoff.results.report.trend import Point, flag_series, judge
from bakeoff.results.store import Store


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    work = tmp_path_factory.mktemp("history")
    return work, write_history(f"sqlite:///{work / 'h.db'}")


def _points(values: list[float]) -> list[Point]:
    return [Point(f"r{i}", i, v, {"driver": "1"}) for i, v in enumerate(values)]


def test_rule_flags_a_step_and_not_noise():
    false = []  # ±8% uniform noise, no shift: two breaches at the end in at most 1% of the series
    for seed in range(200):  # (a breach stays out of the next baseline, so a low window lasts a night longer)
        rng = random.Random(seed)
        noisy = [1.0 * (1 + rng.uniform(-0.08, 0.08)) for _ in range(20)]
        flag = flag_series(judge(_points(noisy), "headline_ms"))
        false += [seed] if flag is not None and flag.kind == "regression" else []
    assert len(false) <= 2, false
    flat = [1.0, 1.01, 0.99, 1.0, 1.005, 0.995, 1.0, 1.0]
    step = flag_series(judge(_points(flat + [1.3, 1.3]), "headline_ms"))
    assert step is not None and step.kind == "regression" and "1.30×" in step.text
    once = flag_series(judge(_points(flat + [1.3]), "headline_ms"))
    assert once is not None and once.kind == "suspicious"
    # Cold compile needs > 15%: a 12% rise is within T.
    assert flag_series(judge(_points(flat + [1.12, 1.12]), "compile_s")) is None
    assert flag_series(judge(_points([1.0, 1.0, 1.3]), "headline_ms")) is None  # < 3 earlier runs: no judgement


def _flag_rows(html: str) -> list[str]:
    table = re.search(r'<table id="flags".*?</table>', html, re.S)
    if table is None:
        return []
    rows = re.findall(r"<tr>(.*?)</tr>", table.group(0), re.S)[1:]
    return [re.sub(r"<[^>]+>", " ", r) for r in rows]


def test_dashboard_flags_the_planted_regression_and_names_the_environment_change(history, tmp_path):
    work, h = history
    proc = bakeoff("dashboard", "-o", str(tmp_path / "site"), "--db", h.url, cwd=work, check=True)
    assert "3 workload page(s)" in proc.stdout
    assert re.search(r"^2 regression\(s\), 0 suspicious, \d+ of \d+ series judged$", proc.stdout, re.M), proc.stdout
    index = (tmp_path / "site" / "index.html").read_text()
    rows = _flag_rows(index)
    regress = [r for r in rows if REGRESS[0] in r and "headline_ms" in r]
    assert len(regress) == 1 and "regression" in regress[0], rows
    assert "driver 570.86 → 575.51" in regress[0] and "versions.torch 2.12.1 → 2.13.0" in regress[0]
    assert not [r for r in rows if NOISY[0] in r], "the noisy series must not be flagged"
    flip = [r for r in rows if FLIP[0] in r]
    assert len(flip) == 1 and "accuracy" in flip[0] and "ok → mismatch" in flip[0]
    assert f"{N_RUNS} runs" in index and "2 regression(s)" in index
    page = (tmp_path / "site" / f"workload-{REGRESS[0]}.html").read_text()
    assert "⚠ regression" in page or "\\u26a0 regression" in page  # the flagged series' name (JSON-escaped)
    assert (tmp_path / "site" / "plotly.min.js").stat().st_size > 1_000_000


def test_dashboard_fails_on_regression_when_asked(history, tmp_path):
    work, h = history
    proc = bakeoff("dashboard", "-o", str(tmp_path / "site"), "--db", h.url, "--fail-on-regression", cwd=work)
    assert proc.returncode == 1 and "2 regression(s)" in proc.stdout, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "index.html").exists()  # the site is written all the same


def test_compare_exits_1_on_the_planted_regression(history):
    work, h = history
    before, after = h.run_ids[N_RUNS - 3], h.run_ids[-1]
    proc = bakeoff("compare", before, after, "--format", "json", "--db", h.url, cwd=work)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    cases = {c["key"]["workload"]: c for c in doc["cases"]}
    lat = {m["metric"]: m for m in cases[REGRESS[0]]["changes"]}["headline_ms"]
    assert lat["verdict"] == "regressed" and 0.25 < lat["rel"] < 0.35 and lat["p_value"] < 1e-6
    assert cases[FLIP[0]]["status_verdict"] == "regressed" and cases[FLIP[0]]["regressed"]
    assert not cases[NOISY[0]]["changes"][1]["verdict"] == "regressed"  # compile time unchanged
    changed = {e["field"]: (e["before"], e["after"]) for e in doc["environment_changes"]}
    assert changed["driver"] == ("570.86", "575.51") and changed["versions.torch"] == ("2.12.1", "2.13.0")
    md = bakeoff("compare", before, after, "--format", "markdown", "--db", h.url, cwd=work)
    assert md.returncode == 1 and ":x:" in md.stdout and "#### Regressions" in md.stdout
    assert f"| {'/'.join(REGRESS)} |" in md.stdout and "driver 570.86 → 575.51" in md.stdout
    text = bakeoff("compare", "previous", "latest", "--db", h.url, cwd=work)
    assert text.returncode == 1 and "REGRESSION" in text.stdout


def test_compare_exits_0_on_identical_runs(history):
    work, h = history
    for run in (h.run_ids[3], h.run_ids[-1]):
        proc = bakeoff("compare", run, run, "--format", "markdown", "--db", h.url, cwd=work)
        assert proc.returncode == 0, proc.stdout
        assert "0 regression(s)" in proc.stdout and ":white_check_mark:" in proc.stdout


def test_compare_thresholds_are_options(history):
    work, h = history
    before, after = h.run_ids[N_RUNS - 3], h.run_ids[N_RUNS - 2]  # +30% latency, no status change
    assert bakeoff("compare", before, after, "--db", h.url, cwd=work).returncode == 1
    loose = bakeoff("compare", before, after, "--min-latency-change", "0.5", "--db", h.url, cwd=work)
    assert loose.returncode == 0, loose.stdout
    assert bakeoff("compare", before, "nope", "--db", h.url, cwd=work).returncode == 2


def test_report_of_two_runs_labels_series_and_warns_about_fingerprints(history, tmp_path):
    work, h = history
    out = tmp_path / "two.html"
    bakeoff("report", h.run_ids[N_RUNS - 3], h.run_ids[-1], "-o", str(out), "--cdn", "--db", h.url, cwd=work,
            check=True)
    html = out.read_text()
    assert 'id="fingerprint-warning"' in html and "driver 570.86 → 575.51" in html
    for label in ("#1 torch 2.12.1", "#2 torch 2.13.0"):  # run labels in the tables and in the chart series
        assert label in html and json.dumps(f"inductor · {label}")[1:-1] in html
    assert out.stat().st_size < 1_000_000 and "'https://cdn.plot.ly/" in html  # fetched when a chart opens


def test_dashboard_opens_in_chromium(history, tmp_path):
    work, h = history
    site = tmp_path / "site"
    bakeoff("dashboard", "-o", str(site), "--db", h.url, cwd=work, check=True)
    shots = artifacts_dir()  # tests/artifacts/: kept after the session
    with open_browser() as browser:
        index = browser.open(site / "index.html", {"#flags tbody tr": 2})
        index_shot = index.screenshot(shots / "dashboard-index.png")
        assert index.errors == [] and index.count("#flags tbody tr") == 2
        page = browser.open(site / f"workload-{REGRESS[0]}.html", {".js-plotly-plot": 4, ".js-plotly-plot .main-svg": 8})
        charts = page.count(".js-plotly-plot")
        legends = page.count(".js-plotly-plot .legend")  # one series per chart here: a legend all the same
        shot = page.screenshot(shots / "dashboard-workload.png")
    assert page.errors == [], page.errors
    assert charts == 4 and legends == 4
    print(f"\nscreenshots: {index_shot} {shot}")
    assert shot.stat().st_size > 20_000


def test_roofline_draws_measured_ceilings(history):
    _, h = history
    store = Store(h.url)
    run = store.run(h.run_ids[-1])
    store.add_ceilings(run["fingerprint"], "cuda:0", [("copy_gbps", 4000.0, "GB/s", "synthetic (test)"),
                                                       ("matmul_tflops_bfloat16", 800.0, "TFLOP/s", "synthetic (test)")],
                       run["environment"])
    fig = roofline([load_run(store, h.run_ids[-1])])
    roof = [t for t in fig.data if t.name.startswith("roof matmul_tflops_bfloat16")]
    assert len(roof) == 1 and max(roof[0].y) == pytest.approx(800.0)
    assert min(roof[0].y) < 800.0  # the bandwidth slope left of the ridge point
    assert not fig.layout.annotations  # no "no measured ceilings" note
