"""The charts: one colour per backend in every chart of the report and the dashboard, a legend on each,
readable log ticks, break-even labels that are not clipped, and time axes that do not zoom to microseconds
around a single run."""
from __future__ import annotations

import datetime as dt
import math
from dataclasses import replace

import pytest

from report_history import REGRESS, write_history
from bakeoff.results.report.axes import log_ticks, tick_text, time_range
from bakeoff.results.report.colors import FAILURE_RED, FIXED, backend_colors
from bakeoff.results.report.dashboard import trend_figure
from bakeoff.results.report.data import load_run
from bakeoff.results.report.charts_perf import compile_vs_latency, latency_bars
from bakeoff.results.report.charts_quality import error_chart, roofline
from bakeoff.results.report.history import METRICS, load_history
from bakeoff.results.store import Store


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    work = tmp_path_factory.mktemp("charts")
    h = write_history(f"sqlite:///{work / 'h.db'}")
    return Store(h.url), h


def _trace_color(trace) -> str | None:
    if getattr(trace, "line", None) is not None and trace.line.color and trace.mode and "lines" in trace.mode:
        return trace.line.color
    return trace.marker.color


def test_a_backend_has_one_colour_in_every_report_chart_and_dashboard_page(history):
    store, h = history
    run = [load_run(store, h.run_ids[-1])]
    seen: dict[str, set[str]] = {}
    figures = [f(run) for f in (latency_bars, compile_vs_latency, error_chart, roofline)]
    hist = load_history(store)
    figures += [trend_figure(hist.series, m) for m in METRICS]
    for fig in figures:
        assert fig is not None and fig.layout.showlegend is True  # every chart names what it draws
        for t in fig.data:
            backend = t.name.split(" · ")[0]
            if backend in FIXED:
                seen.setdefault(backend, set()).add(_trace_color(t))
    assert seen == {b: {FIXED[b]} for b in ("inductor", "xla", "tritongen")}, seen
    # The dashboard's warm-compile chart of a workload with one series: a legend all the same, and
    # Inductor's colour (not the first colour of a palette, which eager has elsewhere).
    (warm,) = [trend_figure([s for s in hist.series if s.workload == REGRESS[0]], "compile_warm_s")]
    (line,) = [t for t in warm.data if t.name.startswith("inductor")]
    assert warm.layout.showlegend is True and line.line.color == FIXED["inductor"] != FIXED["eager"]


def test_other_labels_get_stable_distinct_colours_never_red():
    labels = ["same", "perturb", "broken", "inductor-max", "my-plugin"]
    first = backend_colors(labels + ["eager", "inductor"])
    assert len(set(first.values())) == len(first) and FAILURE_RED not in first.values()
    # A label keeps its colour from page to page whatever built-in backends share the page.
    alone = backend_colors(["inductor-max"])["inductor-max"]
    assert all(backend_colors(["inductor-max", *FIXED][: k + 1])["inductor-max"] == alone for k in range(len(FIXED)))
    assert backend_colors(reversed(labels)) == backend_colors(labels)  # the order of appearance does not matter
    assert first["eager"] == FIXED["eager"] and first["inductor"] == FIXED["inductor"]


@pytest.mark.parametrize("lo,hi", [(0.18, 220.0), (8.6e-8, 1.8e-7), (1e-9, 1e3), (0.3, 0.45), (0.01, 0.5),
                                   (2e-3, 2e-3), (1.0, 1e12)])
def test_log_ticks_are_few_and_on_1_2_5(lo, hi):
    axis = log_ticks([lo, hi])
    ticks, text = axis["tickvals"], axis["ticktext"]
    visible = [t for t in ticks if lo / 1.6 <= t <= hi * 1.6]
    assert 2 <= len(visible) <= 9 or (lo == hi and len(visible) >= 1), (lo, hi, ticks)
    for t, s in zip(ticks, text, strict=True):
        mantissa = t / 10 ** math.floor(math.log10(t) + 1e-9)
        assert round(mantissa, 6) in (1, 1.5, 2, 3, 4, 5, 6, 7, 8, 9), t
        assert len(s) <= 6 and float(s) == pytest.approx(t), (t, s)
    assert axis["minor"] == {"showgrid": False} and axis["type"] == "log"
    assert [tick_text(v) for v in (1e-7, 1.5e-7, 0.001, 250, 2e6)] == ["1e-7", "1.5e-7", "0.001", "250", "2e6"]


def test_break_even_labels_have_room_and_are_not_clipped(history):
    store, h = history
    fig = compile_vs_latency([load_run(store, h.run_ids[-1])])
    labelled = [t for t in fig.data if t.mode == "markers+text"]
    assert labelled and all(t.cliponaxis is False for t in labelled)
    for t in labelled:  # the panel's y range reaches above the point, where its label is drawn
        axis = fig.layout[t.yaxis.replace("y", "yaxis")] if t.yaxis != "y" else fig.layout.yaxis
        assert axis.range[1] >= math.log10(max(t.y)) + 0.3


def test_a_single_run_time_axis_spans_hours_not_microseconds(tmp_path):
    one = dt.datetime(2026, 12, 1, 9, 1, 33, tzinfo=dt.timezone.utc)
    lo, hi = (dt.datetime.fromisoformat(x) for x in time_range([one])["range"])
    assert hi - lo == dt.timedelta(hours=2) and lo < one.replace(tzinfo=None) < hi
    assert "range" not in time_range([one, one + dt.timedelta(days=5)])  # runs days apart: plotly's own range
    store = Store(write_history(f"sqlite:///{tmp_path / 'one.db'}").url)
    single = [replace(s, points=s.points[:1]) for s in load_history(store).series if s.workload == REGRESS[0]]
    fig = trend_figure(single, "headline_ms")  # the first run alone
    lo, hi = (dt.datetime.fromisoformat(x) for x in fig.layout.xaxis.range)
    assert hi - lo == dt.timedelta(hours=2) and fig.layout.xaxis.tickformat == "%Y-%m-%d %H:%M"


@pytest.mark.parametrize("values", [[1.1469e-07, 1.1833e-07, 1.1499e-07], [2e-3, 2e-3], [5.0, 5.2], [0.3, 0.31]])
def test_log_ticks_of_values_a_few_percent_apart_still_show_two_ticks(values):
    """Errors of three backends within 3% of each other: plotly's own range would hold no tick at all."""
    axis = log_ticks(values)
    lo, hi = (10 ** x for x in axis["range"])
    shown = [t for t in axis["tickvals"] if lo <= t <= hi]
    assert len(shown) >= 2 and lo < min(values) and max(values) < hi, (axis, values)
    assert "range" not in log_ticks([0.18, 220.0])  # a wide range keeps plotly's own


def test_each_pareto_panel_has_ticks_inside_its_own_range_and_readable_break_even_labels(history):
    from bakeoff.results.report.charts_perf import _calls

    store, h = history
    fig = compile_vs_latency([load_run(store, h.run_ids[-1])])
    axes = [fig.layout[k] for k in fig.layout if k.startswith(("xaxis", "yaxis")) and fig.layout[k].range]
    assert axes
    for axis in axes:
        lo, hi = axis.range
        assert sum(lo <= math.log10(t) <= hi for t in axis.tickvals) >= 2, (axis.range, axis.tickvals)
    assert [_calls(x) for x in (1.52, 6130.4, 2.4e7)] == ["1.5 calls", "6,130 calls", "2.4e7 calls"]
    assert not any("e+" in s for t in fig.data if t.mode == "markers+text" for s in t.text)


def test_the_case_table_folds_noise_reasons_under_a_details_element():
    """A loaded machine's reasons run to hundreds of characters: shown in the noise column they made every row
    tall; folded, the row stays one line and a click shows each reason whole."""
    from bakeoff.results.report.data import RunData
    from bakeoff.results.report.report_tables import runs_table_html

    reasons = ["host load: the timing thread waited for a CPU 41% of the timing window (limit 5%)",
               "backend IQR/median 0.288 missed the target 0.05 (5.76x)"]
    case = {"workload": "softmax", "shape": "M=37,N=300", "dtype": "float32", "backend": "xla", "status": "ok",
            "measurement_quality": "noisy", "noise_reasons": reasons}
    html = runs_table_html([RunData({"run_id": "r1"}, [case])])
    cell = html[html.index('<details class="noise">'):html.index("</details>")]
    assert "<summary>noisy (2)</summary>" in cell and all(f"<li>{r}</li>" in cell for r in reasons)


def test_a_trend_chart_of_values_orders_of_magnitude_apart_gets_a_log_axis(history):
    store, h = history
    hist = load_history(store)
    values = {m: [p.value for s in hist.series if s.metric == m for p in s.points] for m in METRICS}
    for metric in METRICS:
        fig = trend_figure(hist.series, metric)
        wide = min(values[metric]) > 0 and max(values[metric]) > 20 * min(values[metric])
        assert fig.layout.yaxis.type == ("log" if wide or metric == "err_rel_l2_vs_fp64" else "linear"), metric
    # One backend 1000x slower than another (tritongen under the interpreter beside ONNX Runtime, on a CPU).
    latency = [s for s in hist.series if s.metric == "headline_ms"][:2]
    slow = replace(latency[1], points=[replace(pt, value=pt.value * 1000) for pt in latency[1].points])
    fig = trend_figure([latency[0], slow], "headline_ms")
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis.title.text.endswith("(log)")
    assert len(fig.layout.yaxis.tickvals) >= 2
