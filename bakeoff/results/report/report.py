"""The HTML report of one or more runs, for choosing a backend. Reads the store only.

The first screen is the decision: the scoreboard (one line per backend) and the speedup heatmap; then the
verdict per workload (winner and margin, or a tie inside the 95% intervals). Everything else is one click
away, in folds: how it is measured and scored, the compile-time/latency trade-off, every case (sort, filter),
robustness, the other charts, sweeps, code and kernels, the environment."""
from __future__ import annotations

import datetime as dt
import math
from typing import Any

from bakeoff.results.report.charts_perf import compile_vs_latency, latency_bars
from bakeoff.results.report.charts_quality import error_chart, roofline
from bakeoff.results.report.charts_sweep import sweep_html
from bakeoff.results.report.code_view import CODE_CSS, CODE_JS, code_section
from bakeoff.results.report.data import RunData, hardware_name, load_run, run_labels
from bakeoff.results.report.decision import MIN_WIN_MARGIN_PCT, SPREAD_RULE
from bakeoff.results.report.html import PlotlyJs, esc, filter_box, fold, lazy_figure_div, page
from bakeoff.results.report.lead import lead
from bakeoff.results.report.report_tables import environment_table, fingerprint_warning, runs_table_html
from bakeoff.results.report.robustness import robustness_section
from bakeoff.results.report.weights import COMPILE_FLOOR_S, recommend
from bakeoff.results.speedup_interval import LEVEL, RESAMPLES

# (div id, heading, chart function, note when the chart has no data): the charts folded below the decision
FOLDED_CHARTS = (
    ("pareto", "Compile time vs latency", compile_vs_latency, "no passing case has both compile time and latency"),
    ("latency", "Latency", latency_bars, "no passing case has a latency"),
    ("error", "Numeric error", error_chart, "no case has an error against fp64"),
    ("roofline", "Roofline", roofline, "no passing case has flops, bytes and throughput"),
)


def build_report(store: Any, run_ids: list[str], weights: dict[str, float], plotly_js: PlotlyJs = "inline") -> str:
    """The report page (HTML text) of `run_ids`, in the order given."""
    runs = [load_run(store, rid) for rid in run_ids]
    return render_report(runs, weights, plotly_js)


def render_report(runs: list[RunData], weights: dict[str, float], plotly_js: PlotlyJs = "inline") -> str:
    labels = run_labels(runs)
    recs = [rec for r in runs for rec in recommend(r.cases, weights, labels[r.run_id])]
    top = lead(runs)
    code = code_section(runs)
    title = "bakeoff report: " + ", ".join(r.run_id for r in runs)
    parts = [f"<h1>{esc(title)}</h1>", _meta(runs, labels), fingerprint_warning(runs), top.scoreboard, top.heatmap,
             '<p class="note">Click a cell for its code and kernels. <a class="reveal" href="#pareto">Compile time '
             'vs latency</a> · <a class="reveal" href="#verdicts">per workload</a> · <a class="reveal" '
             'href="#method">how it is measured and scored</a></p>', top.verdict_section(recs, len(runs) > 1),
             fold("<h2>How it is measured and scored</h2>", _method(weights), fold_id="method")]
    for div_id, heading, fn, missing in FOLDED_CHARTS:
        parts.append(fold(f"<h2>{esc(heading)}</h2>", lazy_figure_div(fn(runs), div_id, missing)))
    n_cases = sum(len(r.cases) for r in runs)
    parts.append(fold(f"<h2>Every case</h2> <span class=\"note\">{n_cases} rows: sort, filter</span>",
                      _CASES_NOTE + filter_box("cases") + runs_table_html(runs, code.case_of)))
    robust = robustness_section(runs)
    if robust:
        parts.append(fold("<h2>Numerical robustness</h2>", robust.removeprefix("<h2>Numerical robustness</h2>")))
    sweeps = sweep_html(runs)
    if sweeps:
        parts.append(fold('<h2 id="sweeps">Shape sweeps</h2>', sweeps))
    parts += [fold('<h2 id="code">Code and kernels</h2>', code.html),
              fold("<h2>Environment</h2>", environment_table(runs))]
    return page(title, "\n".join(parts), plotly_js, CODE_CSS, CODE_JS, lazy_plotly=True)


def _meta(runs: list[RunData], labels: dict[str, str]) -> str:
    n_cases = sum(len(r.cases) for r in runs)
    return (f'<p class="note">{n_cases} cases; generated {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC '
            "from the results store (nothing re-run). "
            + "; ".join(f"{esc(labels[r.run_id] or r.run_id)}: {esc(hardware_name(r.env))}, config "
                        f"{esc(r.run.get('config_name'))}, {esc(r.run.get('status'))}" for r in runs) + "</p>")


_CASES_NOTE = (
    '<p class="note">Click a header to sort; type to filter. Latency is the headline, the one figure measured the '
    "same way for every backend (its method under it): on a GPU the CUPTI span from a call's first kernel start to "
    "its last kernel end, on the CPU the host clock around one call and its sync; median with p20–p80. Speedup is "
    "eager's headline over the backend's, measured in the same worker the same way, with its 95% interval. Beside "
    "it: the CUPTI kernel sum, the pipelined call (many enqueued, one sync), the single synchronized call, the "
    "timer's figure and the SM clock during timing. Compile is the graph's own; process setup is the one-time "
    "start of the backend in a fresh worker. Error is relative L2 against the float64 reference; ⚑ marks a case "
    "that beat the calibrated ceiling; code opens the case's generated code and kernels.</p>")


def _method(weights: dict[str, float]) -> str:
    """The method: speedups, their intervals and ties, the scoreboard, the weighted pick."""
    w_c, w_l = weights.get("compile", 0), weights.get("latency", 0)
    return (
        '<p class="note"><b>Speedup</b> is eager\'s headline over the backend\'s, both timed interleaved in one '
        f"worker. Its <b>{LEVEL:.0%} interval</b> is a paired bootstrap ({RESAMPLES} resamples, fixed seed) of "
        "eager's median over the backend's median across the interleaved sample pairs, stored with the record "
        "at measurement time or, for older records, computed the same way from their stored samples; without "
        f"samples the rule is {esc(SPREAD_RULE)}. Eager's own speedup is exactly 1, and eager takes part in every "
        "verdict, as the paired baseline where it is not a listed backend. A workload's fastest backend <b>wins</b> "
        f"only when its interval lies above every other's and it leads each by at least {MIN_WIN_MARGIN_PCT:g}% "
        "(the intervals are taken within one run and leave out what moves between runs); else the verdict is a "
        "<b>tie</b> naming every backend inside that reach, or says eager was fastest or not distinguishable. The "
        "<b>margin</b> is the fastest speedup over the runner-up's. The <b>scoreboard</b> counts wins and ties per "
        "backend, failures by status, skips by their reason's class; backends are ranked by the geomean over the "
        "cases of each dtype that every backend passed, each one's geomean over its own passing cases and what it "
        "lacks beside it; compile is the graph's own cold time "
        "to its first result (compile_total_s) and the warm time in a fresh process with the caches.</p>"
        '<p class="note">The <b>weighted pick</b> is the passing backend with the lowest score = Σ weight × '
        "ln(value / best value among passing backends) over latency (1 / speedup vs eager), the cold time to the "
        f"first result and error vs fp64 (rel L2). Times under {COMPILE_FLOOR_S:g} s count as {COMPILE_FLOOR_S:g} "
        f"s: with these weights a 10 s compile costs {w_c:g} × ln 10 ≈ {w_c * math.log(10):.2f} against eager, a "
        f"2× speedup earns {w_l:g} × ln 2 ≈ {w_l * math.log(2):.2f}. A pick that would lose to its runner-up "
        "anywhere inside their speedup intervals is shown as a tie. Weights: "
        + esc(", ".join(f"{k}={v:g}" for k, v in weights.items())) + " (change with --weights or "
        "--weights-file).</p>")
