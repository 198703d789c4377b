"""Accuracy and efficiency charts: error vs fp64 with eager and the tolerance as references, and a roofline."""
from __future__ import annotations

import plotly.graph_objects as go

from bakeoff.results.report.data import RunData, case_label, fnum, series_name
from bakeoff.results.report.axes import log_ticks
from bakeoff.results.report.colors import FAILURE_RED
from bakeoff.results.report.charts_common import rows, series_colors, series_marks, styled

# The verdict's RMSE rule (harness/numerics.py RMSE_MULTIPLIER): a case also passes when its error is at most
# m × eager's error against fp64. Kept here by dtype name so that a report need not import torch;
# tests/test_report.py checks the two agree.
RMSE_MULTIPLIER = {"float32": 2.0, "float16": 3.0, "bfloat16": 3.0, "float64": 2.0}


def error_chart(runs: list[RunData]) -> go.Figure | None:
    """Relative L2 error vs the fp64 reference per case and series (log axis), with eager's own error and the
    tolerance (m × eager's error, the verdict's RMSE rule) drawn as reference ticks: one pair of reference
    traces per run, named after the run when there are several, and each run's markers and ticks placed side
    by side within a case (scattermode group, one offset group per run)."""
    colors = series_colors(runs)
    traces: dict[str, dict[str, list]] = {}
    run_of: dict[str, str] = {}  # series name -> its run's label (the offset group)
    refs: dict[str, dict[str, tuple[float, float]]] = {}  # run label -> case label -> (eager, tolerance)
    for _, label, c in rows(runs):
        err = fnum(c.get("err_rel_l2_vs_fp64"))
        x = case_label(c)
        eager = fnum(c.get("eager_err_rel_l2_vs_fp64"))
        if eager and eager > 0:
            refs.setdefault(label, {})[x] = (eager, eager * RMSE_MULTIPLIER.get(str(c.get("dtype")), 2.0))
        if err is None or err <= 0:
            continue
        name = series_name(c, label)
        run_of[name] = label
        t = traces.setdefault(name, {"x": [], "y": [], "h": [], "sym": []})
        t["x"].append(x)
        t["y"].append(err)
        ratio = fnum(c.get("err_ratio_vs_eager"))
        t["h"].append(f"{name}<br>{x}<br>rel L2 vs fp64 {err:.3g}<br>status {c.get('status')}"
                      + (f"<br>{ratio:.3g}× eager's error" if ratio is not None else ""))
        t["sym"].append("circle" if c.get("status") == "ok" else "x")
    if not traces:
        return None
    fig = go.Figure()
    several = len(refs) > 1 or len(set(run_of.values())) > 1
    size = 34 if not several else max(12, 34 // max(len(refs), 1))
    for label, by_case in refs.items():
        suffix, group = (f" · {label}", label or "run") if several else ("", None)
        xs = list(by_case)
        fig.add_trace(go.Scatter(x=xs, y=[v[0] for v in by_case.values()], mode="markers", name=f"eager's error{suffix}",
                                 offsetgroup=group, legendgroup=group,
                                 marker=dict(symbol="line-ew-open", size=size, color="#555",
                                             line=dict(width=3, color="#555")),
                                 hovertemplate=f"eager vs fp64{suffix} %{{y:.3g}}<extra></extra>"))
        fig.add_trace(go.Scatter(x=xs, y=[v[1] for v in by_case.values()], mode="markers",
                                 name=f"tolerance (m × eager's error){suffix}", offsetgroup=group, legendgroup=group,
                                 marker=dict(symbol="line-ew-open", size=size, color=FAILURE_RED,
                                             line=dict(width=2, color=FAILURE_RED)),
                                 hovertemplate=f"tolerance{suffix} %{{y:.3g}}<extra></extra>"))
    for name, t in traces.items():
        group = (run_of[name] or "run") if several else None
        fig.add_trace(go.Scatter(x=t["x"], y=t["y"], mode="markers", name=name, hovertext=t["h"], hoverinfo="text",
                                 offsetgroup=group, legendgroup=group,
                                 marker=dict(size=11, color=colors.get(name), symbol=t["sym"])))
    if several:
        fig.update_layout(scattermode="group", scattergap=0.3)  # each run's markers and ticks side by side
    fig.update_xaxes(type="category")
    ys = [y for t in traces.values() for y in t["y"]]
    ys += [v for by in refs.values() for pair in by.values() for v in pair]
    fig.update_yaxes(title_text="relative L2 error vs fp64", **log_ticks(ys))
    return styled(fig, "Numeric error vs fp64 (× = failed the check; references: eager's error and the tolerance)")


def roofline(runs: list[RunData]) -> go.Figure | None:
    """Achieved TFLOP/s vs arithmetic intensity (flops / bytes moved, analytic minimum), log-log, with the
    measured roofs (copy GB/s and matmul TFLOP/s from `bakeoff calibrate`) of each run when present."""
    colors, marks = series_colors(runs), series_marks(runs)
    traces: dict[str, dict[str, list]] = {}
    for _, label, c in rows(runs):
        flops, nbytes, tf = fnum(c.get("flops")), fnum(c.get("bytes_moved")), fnum(c.get("achieved_tflops"))
        if c.get("status") != "ok" or not flops or not nbytes or not tf:
            continue
        name = series_name(c, label)
        t = traces.setdefault(name, {"x": [], "y": [], "h": []})
        t["x"].append(flops / nbytes)
        t["y"].append(tf)
        pct = fnum(c.get("pct_of_ceiling"))
        t["h"].append(f"{name}<br>{case_label(c)}<br>{flops / nbytes:.3g} flop/byte<br>{tf:.4g} TFLOP/s, "
                      f"{fnum(c.get('achieved_gbps')) or 0:.4g} GB/s" + (f"<br>{pct:.1f}% of ceiling" if pct else ""))
    if not traces:
        return None
    fig = go.Figure()
    xs = [x for t in traces.values() for x in t["x"]]
    lo, hi = min(xs) / 4, max(xs) * 4
    roofs = 0  # over all runs: the "no measured ceilings" note
    seen: set[str] = set()
    for r in runs:
        fp = r.run.get("fingerprint") or ""
        if fp in seen:
            continue
        seen.add(fp)
        drawn = 0  # this fingerprint's roofs: a copy-only roof when it has no matmul roof
        bw = r.ceilings.get("copy_gbps")
        for name, peak in sorted(r.ceilings.items()):
            if not name.startswith("matmul_tflops") or bw is None:
                continue
            ridge = peak * 1e12 / (bw * 1e9)
            grid = [min(lo, ridge / 4), ridge, max(hi, ridge * 4)]  # the ridge point always in view
            fig.add_trace(go.Scatter(x=grid, y=[min(peak, x * bw / 1e3) for x in grid], mode="lines",
                                     line=dict(dash="dash", width=1.5), name=f"roof {name} ({fp[:6]})",
                                     hovertemplate=f"{name} {peak:.4g} TFLOP/s, copy {bw:.4g} GB/s<extra></extra>"))
            drawn += 1
        if bw is not None and not drawn:
            fig.add_trace(go.Scatter(x=[lo, hi], y=[lo * bw / 1e3, hi * bw / 1e3], mode="lines",
                                     line=dict(dash="dash"), name=f"copy {bw:.4g} GB/s ({fp[:6]})"))
            drawn += 1
        roofs += drawn
    for name, t in traces.items():
        fig.add_trace(go.Scatter(x=t["x"], y=t["y"], mode="markers", name=name, hovertext=t["h"], hoverinfo="text",
                                 marker=dict(size=10, color=colors.get(name), symbol=marks[name][1])))
    if not roofs:
        fig.add_annotation(text="no measured ceilings for these runs' fingerprints: run `bakeoff calibrate`",
                           xref="paper", yref="paper", x=0.5, y=1.04, showarrow=False)
    fig.update_xaxes(title_text="arithmetic intensity (flop / byte, analytic minimum bytes)",
                     **log_ticks(x for tr in fig.data for x in (tr.x or ())))
    fig.update_yaxes(title_text="achieved TFLOP/s", **log_ticks(y for tr in fig.data for y in (tr.y or ())))
    return styled(fig, "Roofline: achieved throughput vs arithmetic intensity")
