"""report, compare and dashboard over a store made by a real `bakeoff run` on the CPU (eager and the
fault-injection backend: one label that behaves, one that perturbs its output, one that fails to compile)."""
from __future__ import annotations

import base64
import gzip
import html
import json
import re

import pytest

from browser import artifacts_dir, open_browser
from conftest import SMOKE_GATE, SMOKE_JOBS, bakeoff
from bakeoff.results.report.data import load_run
from bakeoff.results.report.charts_heatmap import speedup_heatmap
from bakeoff.results.report.charts_perf import pareto_front
from bakeoff.results.report.charts_quality import RMSE_MULTIPLIER
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
# Two slots, as the smoke run (conftest.py), where the tests judge no timing (the code view's run).
TWO_SLOTS = ("--jobs", str(SMOKE_JOBS), "--gate", SMOKE_GATE)
N_CHARTS = 4  # plotly charts: latency bars, compile vs latency, error, roofline (the heatmap is HTML)
FOLDED = ("pareto", "latency", "error", "roofline")  # drawn when their folds open


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """One real run of CONFIG through the CLI; its folder, store URL and run id."""
    work = tmp_path_factory.mktemp("report_real")
    (work / "tiny.yaml").write_text(CONFIG)
    db = f"sqlite:///{work / 'r.db'}"
    # One slot: the recommendation's reasons name noisy timings, and a slot timing beside another's work is noisy.
    bakeoff("run", "tiny.yaml", "--db", db, cwd=work, check=True)
    return work, db, Store(db).latest_run_id()


def test_report_is_self_contained_with_every_case(real):
    work, db, run_id = real
    bakeoff("report", "-o", "report.html", "--db", db, cwd=work, check=True)
    html = (work / "report.html").read_text()
    assert (work / "report.html").stat().st_size > 3_000_000  # plotly.js embedded: opens offline
    assert 'src="https://cdn.plot.ly' not in html and "'https://cdn.plot.ly/" not in html and run_id in html
    cases = re.search(r'<table id="cases".*?</table>', html, re.S).group(0)
    assert len(re.findall(r"<tr>", cases)) == N_CASES + 1
    assert "injected compile error" in cases and "mismatch" in cases
    assert html.count('class="plotly-graph-div"') == 0  # charts are drawn when opened; the heatmap is a table
    assert all(f'<div id="{c}" class="lazy-plot">' in html for c in FOLDED)
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
    heat = speedup_heatmap([load_run(Store(db), run_id)])
    hover = [html.unescape(h) for h in re.findall(r'<td class="hm-fail[^"]*" [^>]*title="([^"]*)"', heat)]
    assert len(hover) == 4  # perturb and broken, on both workloads
    assert any("injected compile error" in h for h in hover)
    assert any("mismatch" in h for h in hover)


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
    assert "compared with itself" in proc.stderr


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
    with open_browser() as browser:
        res = browser.open(work / "report.html", {"#speedup td.hm-cell": 1})
        for chart in FOLDED + ("cases",):  # open every fold that holds a chart, and the case table's
            res.evaluate(f"window.bakeoffReveal({chart!r})")
        res.page.wait_for_function("n => document.querySelectorAll('.js-plotly-plot .main-svg').length >= n",
                                   arg=2 * N_CHARTS)
        # Click the latency header: rows with a latency come first, ascending.
        res.page.locator("#cases th", has_text="latency").click()
        order = res.evaluate("""(() => {
            const th = [...document.querySelectorAll('#cases th')].find(h => h.textContent.startsWith('latency'));
            const i = [...th.parentNode.children].indexOf(th);
            return [...document.querySelectorAll('#cases tbody tr')].map(r => r.cells[i].getAttribute('data-v'));
        })()""")
        heat_cells = res.count("#speedup td.hm-cell")
        legends = res.count(".js-plotly-plot .legend")
        shot = res.screenshot(shots / "report.png")
        site = None  # (errors, charts, legends) of a dashboard page
        if (work / "site").exists():
            page = browser.open(work / "site" / "workload-softmax.html", {".js-plotly-plot": 3})
            page.screenshot(shots / "dashboard-real.png")
            site = (page.errors, page.count(".js-plotly-plot"), page.count(".js-plotly-plot .legend"))
    assert res.errors == [], res.errors
    values = [float(v) for v in order if v is not None]
    # eager, same and perturb (timed although it failed the check) have latencies; broken has none: last.
    assert len(values) == 6 and values == sorted(values) and order[6:] == [None] * 2
    assert heat_cells >= 1 and legends == N_CHARTS  # every chart names what it draws
    if site is not None:  # latency, cold compile, error (warm compile is off in CONFIG)
        assert site == ([], 3, 3)
    print(f"\nscreenshot: {shot}")
    assert shot.stat().st_size > 50_000


# The code view over real compilers: Inductor's C++ path, tritongen under Triton's interpreter, XLA on the CPU.
CODE_CONFIG = """
name: report-code
device: cpu
preset: smoke
dtypes: [float32]
workloads: [layernorm_gelu]
backends: {inductor: {}, tritongen: {}, xla: {}}
seeds: [0, 1]
timing: {warmup_s: 0.01, budget_s: 0.05, min_reps: 5}
compile: {warm: false}
timeout_s: 300
"""


@pytest.fixture(scope="module")
def coded(tmp_path_factory):
    """A real run of CODE_CONFIG and its report."""
    work = tmp_path_factory.mktemp("report_code")
    (work / "code.yaml").write_text(CODE_CONFIG)
    db = f"sqlite:///{work / 'c.db'}"
    bakeoff("run", "code.yaml", "--db", db, *TWO_SLOTS, cwd=work, check=True)
    bakeoff("report", "-o", "code.html", "--db", db, cwd=work, check=True)
    return work / "code.html"


def _index(html: str) -> dict:
    return json.loads(re.search(r'<script type="application/json" id="code-index">(.*?)</script>', html, re.S)
                      .group(1))


def test_report_embeds_each_backends_code_compressed_with_its_kernels(coded):
    html = coded.read_text()
    (case,) = _index(html)["cases"]
    by = {b["backend"]: b for b in case["backends"]}
    names = {k: {a["name"] for a in b["artifacts"]} for k, b in by.items()}
    assert {"output_code.py", "graph"} <= names["inductor"]
    assert {"k0_rowreduce.py", "partition.txt"} <= names["tritongen"]
    assert {"hlo_optimized", "stablehlo"} <= names["xla"]
    # Compressed in the page: no generated source in clear text; each blob inflates to its file.
    assert "async_compile" not in html and "def k0_rowreduce(" not in html and "HloModule" not in html
    blob = {a["name"]: a["blob"] for a in by["tritongen"]["artifacts"]}["k0_rowreduce.py"]
    data = re.search(rf'<script type="application/octet-stream" id="blob-{blob}">(.*?)</script>', html).group(1)
    assert "def k0_rowreduce(" in gzip.decompress(base64.b64decode(data)).decode()
    # The kernels as generated (no CUPTI on a CPU), each tied to its source.
    (k0,) = by["tritongen"]["kernels"]
    assert k0["name"] == "k0_rowreduce" and k0["artifact"] == "k0_rowreduce.py" and "gelu" in k0["fused"]
    cpp = [k for k in by["inductor"]["kernels"] if k["name"].startswith("cpp_fused")]
    assert cpp and cpp[0]["artifact"] == "output_code.py" and cpp[0]["origin"] == "Inductor → C++"
    assert by["xla"]["kernels"] and all(k["origin"].startswith("XLA") for k in by["xla"]["kernels"])


def test_code_view_in_chromium_opens_a_case_and_two_backends_side_by_side(coded):
    ready = ".code-text[data-state=ready]"
    with open_browser() as browser:
        page = browser.open(coded, {f"#code-left {ready}": 1, f"#code-right {ready}": 1})
        p = page.page
        p.evaluate("window.bakeoffReveal('cases')")
        p.locator('#cases a.open-code[data-backend="tritongen"]').click()  # the case table's code link
        p.wait_for_selector('#code-left .code-text[data-artifact="k0_rowreduce.py"][data-state=ready]')
        source = p.inner_text("#code-left .code-text")
        table = p.inner_text("#code-left .kernel-table")
        head = p.inner_text("#code-left .kernel-head")
        p.click("#code-left .kernel-table button.open-source")  # the kernel's source line, highlighted
        p.wait_for_selector("#code-left .code-text mark")
        marked = p.inner_text("#code-left .code-text mark")
        p.select_option("#code-right .code-backend", "inductor")
        p.wait_for_selector('#code-right .code-text[data-artifact="output_code.py"][data-state=ready]')
        right = p.inner_text("#code-right .code-text")
        right_table = p.inner_text("#code-right .kernel-table")
        shot = page.screenshot(artifacts_dir() / "report-code.png")
        # A click on a heatmap cell opens that case and backend.
        p.evaluate("""[...document.querySelectorAll('#speedup td[data-x="xla"]')].find(td => td.dataset.case
                      === document.getElementById('code-case').selectedOptions[0].text).click()""")
        p.wait_for_selector('#code-left .code-text[data-artifact="hlo_optimized"][data-state=ready]')
        hlo = p.inner_text("#code-left .code-text")
    assert page.errors == [], page.errors
    assert "@triton.jit" in source and "def k0_rowreduce(" in source
    assert "k0_rowreduce" in table and "tritongen → Triton (rowreduce)" in table
    # On a CPU: no kernel times, said so; no registers or IR under the interpreter, said so.
    assert head.startswith("kernel times not measured: no CUPTI on a CPU") and "launches" not in table
    assert "Triton interpreter: no TTIR/TTGIR/LLVM IR/PTX, registers or shared memory" in table
    assert marked.startswith("def k0_rowreduce(")
    assert "cpp_fused" in right and "cpp_fused" in right_table and "Inductor → C++" in right_table
    # The case's own kernels: not those of the worker's warm-up graph, tanh(x) * 0.8125 - x.
    assert "tanh" not in right_table and "# ---- output code" not in right
    assert hlo.startswith("HloModule")
    assert shot.stat().st_size > 50_000
