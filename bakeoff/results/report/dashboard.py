"""The static dashboard over the store's history: index.html (the latest run's scoreboard, flags, workloads,
runs), latest.html (the latest run's scoreboard, speedup heatmap and per-workload verdicts, as the report leads
with them) and one page per workload with a trend chart per metric, breaching points marked. Reads the store
only."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from bakeoff.results.report.data import RunData, hardware_name, load_run
from bakeoff.results.report.envdiff import describe
from bakeoff.results.report.axes import log_ticks, time_range
from bakeoff.results.report.colors import FAILURE_RED, backend_colors
from bakeoff.results.report.charts_common import styled
from bakeoff.results.report.history import METRICS, CaseHistory, History, Series, load_history
from bakeoff.results.report.html import PLOTLY_FILE, Cell, esc, figure_div, page, table
from bakeoff.results.report.lead import lead
from bakeoff.results.report.weights import DEFAULT_WEIGHTS, recommend
from bakeoff.results.report.trend import COMPILE_ABS_S, MIN_BASELINE, MIN_RISE, WINDOW, clip

TITLES = {"headline_ms": "Latency, headline median (ms)", "compile_s": "Compile, cold (s)",
          "compile_warm_s": "Compile, warm (s)", "err_rel_l2_vs_fp64": "Error vs fp64 (relative L2)"}
SEVERITY = {"regression": 0, "accuracy": 0, "status": 0, "suspicious": 1}
WIDE_SPAN = 20  # a trend chart whose values span more than this factor gets a log axis
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


def page_name(workload: str) -> str:
    """The file of a workload's page: workload-<name>.html with unsafe characters replaced."""
    return "workload-" + re.sub(r"[^A-Za-z0-9_.-]", "_", workload) + ".html"


def trend_figure(series: list[Series], metric: str) -> go.Figure | None:
    """One line per series of `metric` over run start time, coloured by backend (the report's colours), one
    dash per shape/dtype/device of a backend; breaches as red ×, flagged series named so."""
    mine = [s for s in series if s.metric == metric]
    if not mine:
        return None
    colors = backend_colors(s.backend for s in mine)
    variants: dict[str, list[tuple]] = {}  # backend -> its (shape, dtype, hardware) in order
    fig = go.Figure()
    bx, by, bh = [], [], []
    for s in mine:
        kinds = variants.setdefault(s.backend, [])
        if (s.shape, s.dtype, s.hardware) not in kinds:
            kinds.append((s.shape, s.dtype, s.hardware))
        dash = DASHES[kinds.index((s.shape, s.dtype, s.hardware)) % len(DASHES)]
        label = s.name + (f" ⚠ {s.flag.kind}" if s.flag else "")
        hover = [f"{s.name}<br>run {p.run_id}<br>harness {p.env.get('harness_rev')}<br>{p.value:.4g}"
                 + (f"<br>baseline {p.baseline:.4g}, limit {p.limit:.2f}×" if p.baseline else "<br>(no baseline yet)")
                 + (f"<br>{esc(p.note)}" if p.note else "")
                 + (f"<br>noisy: {esc(clip(p.noise, 200))}" if p.noise else "")
                 for p in s.points]
        fig.add_trace(go.Scatter(x=[p.started_at for p in s.points], y=[p.value for p in s.points],
                                 mode="lines+markers", name=label, hovertext=hover, hoverinfo="text",
                                 line=dict(color=colors[s.backend], dash=dash, width=3 if s.flag else 1.5)))
        for p, h in zip(s.points, hover, strict=True):
            if p.breach:
                bx.append(p.started_at)
                by.append(p.value)
                bh.append("<b>breach</b><br>" + h)
    if bx:
        fig.add_trace(go.Scatter(x=bx, y=by, mode="markers", name="breach", hovertext=bh, hoverinfo="text",
                                 marker=dict(symbol="x", size=13, color=FAILURE_RED, line=dict(width=1))))
    values = [p.value for s in mine for p in s.points]
    positive = [v for v in values if v > 0]
    # Log where the series span more than WIDE_SPAN (backends 1000x apart: a linear axis flattens all but one).
    log = metric == "err_rel_l2_vs_fp64" or (len(positive) == len(values) and max(values) > WIDE_SPAN * min(values))
    fig.update_yaxes(title_text=TITLES[metric] + (" (log)" if log and metric != "err_rel_l2_vs_fp64" else ""),
                     **(log_ticks(values) if log else {"type": "linear"}))
    fig.update_xaxes(title_text="run start (UTC)", **time_range(p.started_at for s in mine for p in s.points))
    fig = styled(fig, f"{TITLES[metric]} — threshold T = {MIN_RISE[metric]:.0%}", height=460 + 22 * len(mine))
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.22, x=0))  # long series names: below
    return fig


def _flag_rows(series: list[Series], cases: list[CaseHistory], link: bool) -> list[list[Cell]]:
    rows = []
    for s in series:
        if s.flag:
            last = s.points[-1]
            rows.append((SEVERITY[s.flag.kind], s.workload, [
                Cell(s.flag.kind, SEVERITY[s.flag.kind], "bad" if s.flag.kind == "regression" else "warn"),
                _wl_cell(s.workload, link), Cell(s.name), Cell(s.metric), Cell(f"{last.value:.4g}", last.value, "num"),
                Cell(f"{last.baseline:.4g}" if last.baseline else "-", last.baseline, "num"),
                Cell(s.flag.text), Cell(describe(s.flag.env_changes))]))
    for c in cases:
        if c.flag:
            rows.append((0, c.key[0], [
                Cell(c.flag.kind, 0, "bad"), _wl_cell(c.key[0], link),
                Cell(f"{c.key[3]} · {c.key[1]} · {c.key[2]} · {c.device_name} [{c.hardware}]"), Cell("status"),
                Cell(c.statuses[-1][1]), Cell(c.statuses[-2][1] if len(c.statuses) > 1 else "-"),
                Cell(c.flag.text), Cell(describe(c.flag.env_changes))]))
    return [r for _, _, r in sorted(rows, key=lambda t: (t[0], t[1]))]


def _wl_cell(workload: str, link: bool) -> Cell:
    return Cell(f'<a href="{esc(page_name(workload))}">{esc(workload)}</a>' if link else esc(workload),
                workload, raw=True)


FLAG_HEADERS = ["flag", "workload", "series", "metric", "latest", "baseline", "why", "environment change"]


def _rule_note() -> str:
    return (f'<p class="note">A point breaches when value / baseline &gt; 1 + max(T, 3·MAD/baseline), baseline = '
            f"median of the series' previous {WINDOW} comparable runs (at least {MIN_BASELINE}: the same bound graph "
            "and backend options, and for latency the same timing settings and method; a change of them starts a "
            "new baseline and is never a regression). Breaches in a row stay out of the baseline, so a step stays "
            "flagged run after run; once a value is back within its limit they count again. A compile time must "
            f"also rise by at least {COMPILE_ABS_S:g} s. Two breaches in a row at the end = "
            "regression, one = suspicious; ok → mismatch (accuracy) or ok → another failure is flagged at once. "
            "A series is one workload, shape, dtype and backend on one kind of device (hardware only, so a driver "
            "or library change stays inside the series and is named). A flag resting on a measurement marked "
            "noisy says so.</p>")


LATEST_PAGE = "latest.html"


def _latest_head(run: RunData) -> str:
    return (f"<h2>Latest run: {esc(run.run_id)}</h2><p class=\"note\">{len(run.cases)} cases on "
            f"{esc(hardware_name(run.env))}, config {esc(run.run.get('config_name'))}, {esc(run.run.get('status'))}"
            "</p>")


def render_latest(run: RunData) -> str:
    """The latest run's page: the report's lead (scoreboard, speedup heatmap, per-workload verdicts)."""
    top = lead([run])
    recs = recommend(run.cases, DEFAULT_WEIGHTS)
    body = ['<p><a href="index.html">← dashboard</a></p>', _latest_head(run), top.scoreboard, top.heatmap,
            top.verdict_section(recs, False)]
    return page(f"bakeoff: latest run {run.run_id}", "\n".join(body), "file")


def summary(h: History) -> dict[str, int]:
    """regressions (accuracy and status flags included), suspicious, judged (series judged at their latest
    point) and series: the index's summary and the `dashboard` command's line."""
    kinds = [s.flag.kind for s in h.series if s.flag] + [c.flag.kind for c in h.cases if c.flag]
    return {"regressions": sum(SEVERITY[k] == 0 for k in kinds), "suspicious": kinds.count("suspicious"),
            "judged": sum(1 for s in h.series if s.points and s.points[-1].baseline is not None),
            "series": len(h.series)}


def summary_line(h: History) -> str:
    n = summary(h)
    return (f"{n['regressions']} regression(s), {n['suspicious']} suspicious, {n['judged']} of {n['series']} "
            "series judged")


def render_index(h: History, latest: RunData | None = None) -> str:
    flags = _flag_rows(h.series, h.cases, link=True)
    counts = summary(h)
    n_reg, judged = counts["regressions"], counts["judged"]
    workloads = sorted({s.workload for s in h.series} | {c.key[0] for c in h.cases})
    wl_rows = [[_wl_cell(w, True), Cell(str(sum(s.workload == w for s in h.series)), None, "num"),
                Cell(str(sum(bool(s.flag) for s in h.series if s.workload == w)
                         + sum(bool(c.flag) for c in h.cases if c.key[0] == w)), None, "num")] for w in workloads]
    run_rows = [[Cell(r["run_id"], r["run_id"]), Cell(str(r.get("started_at"))), Cell(str(r.get("config_name"))),
                 Cell(hardware_name(r.get("environment") or {})),
                 Cell(str(r.get("harness_rev"))), Cell(str(r.get("fingerprint"))), Cell(str(r.get("status")))]
                for r in reversed(h.runs)]
    state = "bad" if n_reg else ("ok" if judged else "dim")
    body = [f"<h1>bakeoff dashboard</h1><p>{len(h.runs)} runs, {len(h.series)} series, {judged} of them judged at "
            f"their latest point (a point needs {MIN_BASELINE} earlier comparable runs to be judged); "
            f'<span class="{state}" id="summary">{n_reg} regression(s)</span>, '
            f"{counts['suspicious']} suspicious.</p>"]
    if latest is not None:  # the decision first: the latest run's scoreboard, its heatmap one click away
        body += [_latest_head(latest), lead([latest]).scoreboard,
                 f'<p><a href="{LATEST_PAGE}" id="latest-link">speedup heatmap and per-workload verdicts →</a></p>']
    body += [_rule_note(),
            "<h2>Flags</h2>", table(FLAG_HEADERS, flags, table_id="flags") if flags else "<p>No flags.</p>",
            "<h2>Workloads</h2>", table(["workload", "series", "flags"], wl_rows),
            "<h2>Runs</h2>",
            table(["run", "started", "config", "device", "harness", "fingerprint", "status"], run_rows)]
    return page("bakeoff dashboard", "\n".join(body), "file")


def render_workload(h: History, workload: str) -> tuple[str, int]:
    """A workload's page and how many charts it draws."""
    series = [s for s in h.series if s.workload == workload]
    cases = [c for c in h.cases if c.key[0] == workload]
    flags = _flag_rows(series, cases, link=False)
    body = [f'<p><a href="index.html">← all workloads</a></p><h1>{esc(workload)}</h1>', _rule_note(),
            "<h2>Flags</h2>", table(FLAG_HEADERS, flags, table_id="flags") if flags else "<p>No flags.</p>"]
    charts = 0
    for metric in METRICS:
        fig = trend_figure(series, metric)
        charts += fig is not None
        body += [f"<h2>{esc(TITLES[metric])}</h2>", figure_div(fig, f"trend-{metric}", "no passing values")]
    return page(f"bakeoff: {workload}", "\n".join(body), "file"), charts


def build_dashboard(store: Any, out_dir: Path, h: History | None = None) -> dict[str, int]:
    """Write the site into `out_dir`; returns {file name: number of charts on it} of the index and the workload
    pages (the latest run's page, LATEST_PAGE, is written beside them when the store has a run). `h`: the
    store's history, if already loaded."""
    h = h if h is not None else load_history(store)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / PLOTLY_FILE).write_text(get_plotlyjs())
    latest = load_run(store, h.runs[-1]["run_id"]) if h.runs else None
    written = {"index.html": 0}
    (out_dir / "index.html").write_text(render_index(h, latest))
    if latest is not None:
        (out_dir / LATEST_PAGE).write_text(render_latest(latest))
    for workload in sorted({s.workload for s in h.series} | {c.key[0] for c in h.cases}):
        text, charts = render_workload(h, workload)
        (out_dir / page_name(workload)).write_text(text)
        written[page_name(workload)] = charts
    return written
