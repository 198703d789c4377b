"""The HTML report of one or more runs, for choosing a backend. Reads the store only."""
from __future__ import annotations

import datetime as dt
import math
from typing import Any

from bakeoff.results.report.code_view import CODE_CSS, CODE_JS, code_section
from bakeoff.results.report.data import RunData, hardware_name, load_run, run_labels
from bakeoff.results.report.charts_perf import compile_vs_latency, latency_bars, speedup_heatmap
from bakeoff.results.report.charts_quality import error_chart, roofline
from bakeoff.results.report.charts_sweep import sweep_html
from bakeoff.results.report.html import PlotlyJs, esc, figure_div, page
from bakeoff.results.report.robustness import robustness_section
from bakeoff.results.report.report_tables import environment_table, fingerprint_warning, recommendation_table, runs_table_html
from bakeoff.results.report.weights import COMPILE_FLOOR_S, recommend

# (div id, heading, chart function, note when the chart has no data)
CHARTS = (
    ("speedup", "Speedup over eager", speedup_heatmap, "no cases"),
    ("latency", "Latency", latency_bars, "no passing case has a latency"),
    ("pareto", "Compile time vs latency", compile_vs_latency, "no passing case has both compile time and latency"),
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
    code = code_section(runs)
    n_cases = sum(len(r.cases) for r in runs)
    title = "bakeoff report: " + ", ".join(r.run_id for r in runs)
    parts = [f"<h1>{esc(title)}</h1>",
             f'<p class="note">{len(runs)} run(s), {n_cases} cases; generated '
             f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC from the results store (nothing re-run). "
             + "; ".join(f"{esc(labels[r.run_id] or r.run_id)}: {esc(hardware_name(r.env))}, config "
                         f"{esc(r.run.get('config_name'))}, status {esc(r.run.get('status'))}" for r in runs)
             + "</p>",
             fingerprint_warning(runs),
             "<h2>Recommendation</h2>",
             '<p class="note">Per workload, the passing backend with the lowest score = Σ weight × ln(value / best '
             "value among passing backends) over latency (1 / speedup vs eager: the backend's headline over that of "
             "eager timed beside it, the figure of the speedup column; the headline, median ms, where a backend has "
             "no speedup), the graph's own cold time to its first result (s, compile_total_s: the process's one-time "
             "start, compile_process_setup_s, is shown apart and not counted) and error vs fp64 (rel L2). Times "
             f"under {COMPILE_FLOOR_S:g} s count as "
             f"{COMPILE_FLOOR_S:g} s, so eager's millisecond first call does not make every compiler look thousands "
             f"of times slower to start: with these weights a 10 s compile costs {weights.get('compile', 0):g} × "
             f"ln 10 ≈ {weights.get('compile', 0) * math.log(10):.2f} against eager, a 2× speedup earns "
             f"{weights.get('latency', 0):g} × ln 2 ≈ {weights.get('latency', 0) * math.log(2):.2f}. Weights: "
             + esc(", ".join(f"{k}={v:g}" for k, v in weights.items()))
             + " (change with --weights or --weights-file). A pick marked (noisy) rests on a noisy measurement of "
             "itself or of the runner-up.</p>",
             recommendation_table(recs, len(runs) > 1),
             "<h2>Every case</h2><p class=\"note\">Click a header to sort. Latency is the headline, the one "
             "figure measured the same way for every backend (its method under it): on a GPU the CUPTI span from "
             "a call's first kernel start to its last kernel end, on the CPU the host clock around one call and "
             "its sync; median with p20–p80. Speedup is eager's headline over the backend's, measured in the same "
             "worker the same way. Beside it: the CUPTI kernel sum, the pipelined call (many enqueued, one sync), "
             "the single synchronized call, the timer's figure and the SM clock during timing. Compile is the "
             "graph's own; process setup is the one-time start of the backend in a fresh worker. Error is "
             "relative L2 against the float64 reference; ⚑ marks a case that beat the calibrated ceiling; code "
             "opens the case's generated code and kernels.</p>",
             runs_table_html(runs, code.case_of), robustness_section(runs)]
    for div_id, heading, fn, missing in CHARTS:
        parts += [f"<h2>{esc(heading)}</h2>", figure_div(fn(runs), div_id, missing)]
    parts.append(sweep_html(runs))
    parts += ['<h2 id="code">Code and kernels</h2>', code.html, "<h2>Environment</h2>", environment_table(runs)]
    return page(title, "\n".join(parts), plotly_js, CODE_CSS, CODE_JS)
