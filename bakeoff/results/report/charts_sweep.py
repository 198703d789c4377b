"""Shape sweeps in the report: per sweep (workload, shape base, dtype, the swept dim), latency against the swept
dim per backend (top) with a marker where the point compiled, and the time to the first result at each point
(bottom), on one shared x axis; log axes where the values span more than 10x."""
from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bakeoff.results.report.axes import log_ticks
from bakeoff.results.report.colors import FAILURE_RED, backend_colors
from bakeoff.results.report.data import RunData
from bakeoff.results.report.html import esc, lazy_figure_div

LOG_SPAN = 10.0  # an axis whose values span more than this factor is logarithmic


def _groups(runs: list[RunData]) -> dict[tuple, list[dict[str, Any]]]:
    out: dict[tuple, list[dict[str, Any]]] = {}
    for run in runs:
        for c in run.cases:
            if c.get("sweep"):
                key = (c.get("workload"), c.get("shape"), c.get("dtype"), c.get("sweep_dim"))
                out.setdefault(key, []).append(c)
    return out


def _axis(values: list[float]) -> dict[str, Any]:
    vals = [v for v in values if v and v > 0]
    if vals and max(vals) / min(vals) > LOG_SPAN:
        return log_ticks(vals)
    return {"type": "linear"}


def sweep_figure(cases: list[dict[str, Any]], title: str) -> go.Figure:
    """One sweep's chart (the cases of one workload, shape base, dtype; one line per backend label)."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.65, 0.35],
                        subplot_titles=("headline latency (ms); ◆ = the point compiled",
                                        "time to the first result at the point (s), compile included"))
    colors = backend_colors(c.get("backend") for c in cases)
    dim = cases[0].get("sweep_dim")
    xs, lat, first = [], [], []
    for c in cases:
        label, color = str(c.get("backend")), colors[str(c.get("backend"))]
        pts = sorted(c["sweep"], key=lambda p: p["value"])  # by value; serving order is in the hover
        order = {id(p): i for i, p in enumerate(c["sweep"])}
        hover = [f"{label} · {dim}={p['value']} (served #{order[id(p)] + 1})<br>{p.get('status')}"
                 f"{': ' + str(p.get('reason'))[:120] if p.get('status') != 'ok' else ''}<br>compiles so far "
                 f"{p.get('compiles_so_far')}<br>latency {p.get('headline_ms')} ms ({p.get('headline_method')}, "
                 f"IQR/median {p.get('headline_iqr_rel')})<br>first result {p.get('first_result_s')} s"
                 for p in pts]
        x = [p["value"] for p in pts]
        xs += x
        y = [p.get("headline_ms") for p in pts]
        lat += [v for v in y if v]
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name=label, legendgroup=label,
                                 line={"color": color}, hovertext=hover, hoverinfo="text"), row=1, col=1)
        comp = [p for p in pts if p.get("recompiled")]
        fig.add_trace(go.Scatter(x=[p["value"] for p in comp], y=[p.get("headline_ms") for p in comp],
                                 mode="markers", name=f"{label}: compiled", legendgroup=label, showlegend=False,
                                 marker={"symbol": "diamond-open", "size": 13, "color": color, "line": {"width": 2}},
                                 hoverinfo="skip"), row=1, col=1)
        bad = [p for p in pts if p.get("status") != "ok"]
        if bad:
            fig.add_trace(go.Scatter(x=[p["value"] for p in bad], y=[p.get("headline_ms") or None for p in bad],
                                     mode="markers", name=f"{label}: failed", legendgroup=label, showlegend=False,
                                     marker={"symbol": "x", "size": 12, "color": FAILURE_RED}, hoverinfo="skip"),
                          row=1, col=1)
        f = [p.get("first_result_s") for p in pts]
        first += [v for v in f if v]
        fig.add_trace(go.Scatter(x=x, y=f, mode="lines+markers", name=f"{label}: first result", legendgroup=label,
                                 showlegend=False, line={"color": color, "dash": "dot"},
                                 marker={"symbol": ["diamond" if p.get("recompiled") else "circle" for p in pts]},
                                 hovertext=hover, hoverinfo="text"), row=2, col=1)
    fig.update_xaxes(**_axis(xs), row=1, col=1)
    fig.update_xaxes(**_axis(xs), title_text=str(dim), row=2, col=1)
    fig.update_yaxes(**_axis(lat), title_text="ms", row=1, col=1)
    fig.update_yaxes(**_axis(first), title_text="s", row=2, col=1)
    fig.update_layout(title=title, height=560, margin={"t": 70, "l": 60, "r": 20, "b": 50}, hovermode="closest")
    return fig


def sweep_charts(runs: list[RunData]) -> list[tuple[str, go.Figure]]:
    """(title, figure) per sweep in the runs."""
    out = []
    for (workload, shape, dtype, dim), cases in _groups(runs).items():
        title = f"{workload} [{shape}, {dtype}]: latency and compiles against {dim}"
        out.append((title, sweep_figure(cases, title)))
    return out



def sweep_html(runs: list[RunData]) -> str:
    """The body of the report's "Shape sweeps" section (its heading is the report's): one chart per sweep,
    drawn when the section opens, or "" when the runs have none."""
    figs = sweep_charts(runs)
    if not figs:
        return ""
    parts = ['<p class="note">One case per backend serves every value of the '
             "swept dim in order. Top: the headline latency at each value (the case's timer and headline rules on "
             "a smaller budget per point); a diamond marks a point whose first call compiled (the backend's own "
             "counter). Bottom: the time to the first result at each value, any compile included.</p>"]
    parts += [lazy_figure_div(fig, f"sweep-{i}", esc(title)) for i, (title, fig) in enumerate(figs)]
    return "".join(parts)
