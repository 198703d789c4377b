"""Speed charts: latency bars with p20–p80 whiskers, compile vs latency Pareto (the speedup heatmap: charts_heatmap)."""
from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bakeoff.results.report.data import (RunData, case_label, first_result_s, fnum, headline_method, headline_ms,
                                         headline_spread, series_name)
from bakeoff.results.report.axes import log_ticks, tick_text
from bakeoff.results.report.charts_common import rows, series_colors, series_marks, styled


def latency_bars(runs: list[RunData]) -> go.Figure | None:
    """Headline latency (ms, median) per workload and series, whiskers from p20 to p80; log axis."""
    colors, marks = series_colors(runs), series_marks(runs)
    traces: dict[str, dict[str, list]] = {}
    for _, label, c in rows(runs):
        med = headline_ms(c)
        if med is None or c.get("status") != "ok":
            continue
        p20, p80 = headline_spread(c)
        lo, hi = p20 or med, p80 or med
        t = traces.setdefault(series_name(c, label), {"x": [], "y": [], "plus": [], "minus": [], "n": []})
        t["x"].append(case_label(c))
        t["y"].append(med)
        t["plus"].append(max(hi - med, 0.0))
        t["minus"].append(max(med - lo, 0.0))
        t["n"].append(f"{c.get('headline_n') or c.get('n_samples')}, {headline_method(c)}")
    if not traces:
        return None
    fig = go.Figure()
    for name, t in traces.items():
        fig.add_trace(go.Bar(name=name, x=t["x"], y=t["y"], customdata=t["n"],
                             marker=dict(color=colors.get(name), pattern_shape=marks[name][0]),
                             error_y=dict(type="data", symmetric=False, array=t["plus"], arrayminus=t["minus"]),
                             hovertemplate=f"{name}<br>%{{x}}<br>median %{{y:.4g}} ms<br>n=%{{customdata}}"
                                           "<extra></extra>"))
    lows = [y - m for t in traces.values() for y, m in zip(t["y"], t["minus"], strict=True)]
    highs = [y + p for t in traces.values() for y, p in zip(t["y"], t["plus"], strict=True)]
    fig.update_layout(barmode="group", yaxis=dict(title="headline latency ms (median, p20–p80)",
                                                  **log_ticks(lows + highs)))
    return styled(fig, "Latency per workload (headline: CUPTI span on a GPU, host clock on the CPU; median, "
                       "whiskers p20–p80)")


def _calls(n: float) -> str:
    """A break-even label: '1.5 calls', '6,130 calls', '2.4e7 calls' (never '6.13e+03')."""
    return f"{n:.2g} calls" if n < 10 else f"{n:,.0f} calls" if n < 1e5 else f"{tick_text(n)} calls"


def _panel_ticks(log_range: list[float]) -> dict[str, Any]:
    """log_ticks over a panel's own range (log10 units), which the panel keeps: a panel whose points span a
    fraction of a decade still gets ticks when the others span many."""
    ticks = log_ticks([10 ** log_range[0], 10 ** log_range[1]])
    ticks.pop("range", None)
    return ticks


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of points not dominated in (compile s, latency ms), both lower-is-better, by compile time."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], points[i][1]))
    front, best = [], math.inf
    for i in order:
        if points[i][1] < best:
            front.append(i)
            best = points[i][1]
    return front


def compile_vs_latency(runs: list[RunData], columns: int = 3) -> go.Figure | None:
    """One panel per workload/shape/dtype (and run): cold time to first result (compile_total_s) vs latency
    ms per backend, log-log,
    the Pareto front joined and ringed; break-even calls (compile ÷ latency saved vs eager) on hover."""
    colors, marks = series_colors(runs), series_marks(runs)
    panels: dict[str, list[dict[str, Any]]] = {}
    for _, label, c in rows(runs):
        if c.get("status") == "ok" and headline_ms(c) and first_result_s(c):
            panels.setdefault(case_label(c) + (f" {label}" if label else ""), []).append({**c, "_label": label})
    if not panels:
        return None
    n_rows = math.ceil(len(panels) / columns)
    fig = make_subplots(rows=n_rows, cols=columns, subplot_titles=list(panels), horizontal_spacing=0.08,
                        vertical_spacing=min(0.12, 0.5 / max(n_rows, 1)))
    shown: set[str] = set()
    for k, cases in enumerate(panels.values()):
        r, col = k // columns + 1, k % columns + 1
        pts = [(first_result_s(c) or 0.0, headline_ms(c) or 0.0) for c in cases]
        # Room above the highest point for its break-even label, and beside the outermost ones (log units).
        ys, xs = [math.log10(p[1]) for p in pts], [math.log10(p[0]) for p in pts]
        y_range, x_range = [min(ys) - 0.25, max(ys) + 0.45], [min(xs) - 0.35, max(xs) + 0.35]
        fig.update_yaxes(range=y_range, **_panel_ticks(y_range), row=r, col=col)  # each panel its own ticks
        fig.update_xaxes(range=x_range, **_panel_ticks(x_range), row=r, col=col)
        front = pareto_front(pts)
        fx, fy = [pts[i][0] for i in front], [pts[i][1] for i in front]
        fig.add_trace(go.Scatter(x=fx, y=fy, mode="lines+markers", line=dict(color="#444", dash="dot"),
                                 marker=dict(size=16, symbol="circle-open", color="#444"), name="Pareto front",
                                 legendgroup="front", showlegend="front" not in shown, hoverinfo="skip"),
                      row=r, col=col)
        shown.add("front")
        for i, c in enumerate(cases):
            name = series_name(c, c["_label"])
            be = fnum(c.get("break_even_calls"))
            be_text = f"{be:,.0f} calls" if be is not None else ("n/a (eager)" if c.get("backend") == "eager"
                                                                  else "never (not faster than eager)")
            fig.add_trace(go.Scatter(
                x=[pts[i][0]], y=[pts[i][1]], mode="markers+text", name=name, legendgroup=name,
                text=[_calls(be) if be is not None else ""], textposition="top center",
                textfont=dict(size=9), cliponaxis=False,
                showlegend=name not in shown, marker=dict(size=10, color=colors.get(name), symbol=marks[name][1]),
                hovertext=f"{name}<br>first result after {pts[i][0]:.3g} s cold<br>latency {pts[i][1]:.4g} ms<br>"
                          f"break-even {be_text}" + ("<br><b>on the Pareto front</b>" if i in front else ""),
                hoverinfo="text"), row=r, col=col)
            shown.add(name)
    fig.update_xaxes(title_text="cold s to first result, the graph's own (compile_total_s)")
    fig.update_yaxes(title_text="headline latency ms")
    return styled(fig, "Compile time vs latency (Pareto front ringed; break-even calls on hover)",
                  height=140 + 300 * n_rows)
