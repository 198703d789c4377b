"""The speedup heatmap: workload × backend, one panel per dtype, coloured by log2 speedup over eager.

Each cell shows the speedup; the fastest backend of a row is bold when it wins outright (its 95% interval
clears every other's) and marked ≈ when it ties (report/decision.py); a noisy headline (`headline_quality`,
the case's `measurement_quality` for older records) is marked *; a failed case is a ✗ with its status and
reason on hover. Backends skipped on every case are left out and named in the title (the scoreboard says why).
A cell's customdata is the case's label, so a click can open its code (report/code_view.py).
"""
from __future__ import annotations

import html
import math
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bakeoff.results.report.charts_common import rows, styled
from bakeoff.results.report.colors import FAILURE_RED
from bakeoff.results.report.data import RunData, case_label, headline_ms, headline_quality, run_labels, series_name
from bakeoff.results.report.decision import Speed, Verdict, speed_of, verdicts

ROW_PX = 26


def _row(case: dict[str, Any]) -> str:
    return f"{case.get('workload')} [{case.get('shape')}]"


def speedup_heatmap(runs: list[RunData]) -> go.Figure | None:
    """The heatmap (see the module docstring); None when no case ran."""
    labels = run_labels(runs)
    cells: dict[tuple[str, str, str], dict[str, Any]] = {}  # (dtype, row, series) -> case
    xs, ys, dtypes, skipped_everywhere = [], [], [], {}
    for r in runs:
        for c in r.cases:
            x = series_name(c, labels[r.run_id])
            skipped_everywhere[x] = skipped_everywhere.get(x, True) and c.get("status") == "skipped"
    for _, label, c in rows(runs):
        x, y, dt = series_name(c, label), _row(c), str(c.get("dtype"))
        for seq, v in ((xs, x), (ys, y), (dtypes, dt)):
            seq.append(v) if v not in seq else None
        cells[(dt, y, x)] = c
    if not cells:
        return None
    marks = _leader_marks(runs)
    fig = make_subplots(rows=1, cols=len(dtypes), shared_yaxes=True, subplot_titles=dtypes,
                        horizontal_spacing=0.02)
    lim = max([abs(math.log2(s.speedup)) for c in cells.values() if (s := speed_of(c))] + [1.0])
    for k, dt in enumerate(dtypes, 1):
        grid = [[_cell(cells.get((dt, y, x)), marks) for x in xs] for y in ys]
        fig.add_trace(go.Heatmap(
            z=[[g[0] for g in row] for row in grid], x=xs, y=ys, text=[[g[1] for g in row] for row in grid],
            texttemplate="%{text}", textfont=dict(size=11), hovertext=[[g[2] for g in row] for row in grid], hoverinfo="text",
            customdata=[[g[3] for g in row] for row in grid], coloraxis="coloraxis", xgap=1, ygap=1),
            row=1, col=k)
        _failures(fig, cells, dt, xs, ys, k)
    fig.update_layout(coloraxis=dict(colorscale="RdBu", cmid=0, cmin=-lim, cmax=lim,
                                     colorbar=dict(title="log2<br>speedup", thickness=12)),
                      legend=dict(orientation="h", x=0, y=-0.02, yanchor="top"))
    fig.update_xaxes(type="category", tickangle=-30)
    fig.update_yaxes(type="category", autorange="reversed")
    left_out = [x for x, skipped in skipped_everywhere.items() if skipped]
    title = ("Speedup over eager (× faster; <b>bold</b> wins outright, ≈ ties within the 95% intervals, "
             "* noisy headline, ✗ failed)" + (f"<br><sup>not shown, skipped on every case: "
                                              f"{html.escape(', '.join(left_out))}</sup>" if left_out else ""))
    fig = styled(fig, title, height=150 + ROW_PX * len(ys))
    fig.update_layout(margin=dict(l=10, r=10, t=80 if left_out else 60, b=70), title_font_size=14)
    return fig


def _leader_marks(runs: list[RunData]) -> dict[int, str]:
    """'win' or 'tie' by id() of the leading cases of each verdict."""
    out: dict[int, str] = {}
    for v in verdicts(runs):
        _mark(v, out)
    return out


def _mark(v: Verdict, out: dict[int, str]) -> None:
    if v.winner is not None and len(v.ranked) > 1:
        out[id(v.winner.case)] = "win"
    elif v.is_tie:
        for s in v.tied:
            out[id(s.case)] = "tie"


def _cell(case: dict[str, Any] | None, marks: dict[int, str]) -> tuple[float | None, str, str, str]:
    """(log2 speedup or None, shown text, hover text, case label) of one cell; z None for a failed or
    absent case."""
    if case is None:
        return None, "", "not run", ""
    s = speed_of(case)
    if s is None:
        return None, "", "", case_label(case)
    quality, reasons = headline_quality(case)
    mark = marks.get(id(case))
    text = f"{s.speedup:.2f}" + ("*" if quality == "noisy" else "")
    text = f"<b>{text}</b>" if mark == "win" else ("≈" + text if mark == "tie" else text)
    return math.log2(s.speedup), text, _hover(s, quality, reasons), case_label(case)


def _hover(s: Speed, quality: str | None, reasons: list[str]) -> str:
    eager_ms = s.case.get("eager_headline_ms") or s.case.get("eager_latency_ms_median") or 0.0
    ms = headline_ms(s.case) or 0.0
    lines = [f"{html.escape(s.backend)} / {html.escape(case_label(s.case))}",
             f"speedup {s.speedup:.3g}× (eager {eager_ms:.4g} ms → {ms:.4g} ms)",
             f"95% interval {s.low:.3g}–{s.high:.3g}× ({s.source})", f"headline {quality or 'quality not judged'}"]
    lines += [_wrap(r) for r in reasons[:4]]
    return "<br>".join(lines)


def _failures(fig: go.Figure, cells: dict[tuple[str, str, str], dict[str, Any]], dt: str, xs: list[str],
              ys: list[str], col: int) -> None:
    """The ✗ marks of one panel's failed cases (skipped ones included), status and reason on hover."""
    pts = [(x, y, c) for (d, y, x), c in cells.items() if d == dt and speed_of(c) is None]
    if not pts:
        return
    fig.add_trace(go.Scatter(
        x=[p[0] for p in pts], y=[p[1] for p in pts], mode="text", text=["✗"] * len(pts),
        textfont=dict(color=FAILURE_RED, size=15), customdata=[case_label(p[2]) for p in pts],
        hovertext=[f"{html.escape(x)} / {html.escape(case_label(c))}<br><b>{html.escape(str(c.get('status')))}"
                   f"</b><br>{_wrap(str(c.get('reason') or ''))}" for x, _, c in pts],
        hoverinfo="text", name="failed", legendgroup="failed", showlegend=col == 1), row=1, col=col)


def _wrap(text: str, width: int = 90) -> str:
    """Hover text: at most 600 characters, escaped, broken into lines of `width`."""
    text = text[:600]
    return "<br>".join(html.escape(text[i:i + width]) for i in range(0, len(text), width))
