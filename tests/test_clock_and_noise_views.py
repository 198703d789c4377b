"""Where users look at noise and the clock: the terminal's "~" and `--wide` columns, and `bakeoff compare`.

The mark reads the headline's own quality (headline_quality), the case's measurement_quality only for records
written before it existed; --wide shows the headline's SM clock where it stands apart from the run's typical one,
and the speedup's 95% interval where the record has one; compare calls a latency change the SM clock explains
"clock" (cycle space), judges the speedup by its intervals, and works in time space on records without clocks.
Records are made up here (tests only), with the fields a GPU run writes."""
from __future__ import annotations

import io
import json
import random

import pytest
from rich.console import Console

from bakeoff.harness.cli.summary import CompactSummary, wide_table
from bakeoff.harness.measure.clocks import binned, settle_time_s
from bakeoff.results.report.compare import Thresholds, compare_runs
from bakeoff.results.report.compare_format import to_json, to_markdown, to_text
from bakeoff.results.report.data import RunData
from bakeoff.results.report.report_tables import runs_table_html
from bakeoff.results.report.headline_facts import (clock_limits, headline_noise_note, outside_kernels_ms,
                                                   typical_clock_mhz)

SHAPE = "M=8192,N=8192,K=8192"
HOST_LOAD = "host load: other processes used 1.4 of 16 CPU(s) (69%, limit 10%) during timing"


def gpu_rec(backend: str = "xla", median_ms: float = 1.0, seed: int = 0, workload: str = "gemm", **fields) -> dict:
    """An ok GPU record whose headline is a CUPTI span: 30 samples within ±1% of `median_ms`, clean."""
    rng = random.Random(seed)
    samples = sorted(median_ms * (1 + rng.uniform(-0.01, 0.01)) for _ in range(30))
    return {"case_id": f"{workload}/{SHAPE}/bfloat16/{backend}", "workload": workload, "shape": SHAPE,
            "dtype": "bfloat16", "backend": backend, "adapter": backend.split("-")[0], "status": "ok",
            "device": "cuda:0", "headline_ms": samples[15], "headline_p20_ms": samples[6],
            "headline_p80_ms": samples[24], "headline_method": "cupti-span", "device_span_samples_ms": samples,
            "latency_ms_median": samples[15], "samples_ms": samples, "speedup_vs_eager": 2.0 / samples[15],
            "compile_s": 3.0, "measurement_quality": "clean", "noise_reasons": [], "headline_quality": "clean",
            "headline_noise_reasons": [], **fields}


def render(renderable, width: int = 100) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def compare(base: list[dict], cand: list[dict]):
    env = {"gpu_name": "NVIDIA H200"}
    return compare_runs(RunData({"run_id": "a", "fingerprint": "fp", "environment": env}, base),
                        RunData({"run_id": "b", "fingerprint": "fp", "environment": env}, cand), Thresholds())


def by_metric(case) -> dict:
    return {m.metric: m for m in case.changes}


# --- the terminal's "~" --------------------------------------------------------------------------------------

def test_host_load_alone_leaves_a_device_timed_headline_unmarked():
    loaded = gpu_rec(measurement_quality="noisy", noise_reasons=[HOST_LOAD],
                     host_quality="noisy", host_noise_reasons=[HOST_LOAD])
    text = render(CompactSummary([gpu_rec("eager", 2.0), loaded]))
    assert "~" not in text and "noisy" not in text


def test_a_noisy_headline_is_marked_and_the_legend_says_whose_samples():
    noisy = gpu_rec(headline_quality="noisy", headline_noise_reasons=["backend headline IQR/median 0.2 missed"],
                    measurement_quality="noisy")
    text = render(CompactSummary([gpu_rec("eager", 2.0), noisy]))
    assert "2× ~" in text
    legend = " ".join(text.split())
    assert "~ = the headline's own samples were noisy (headline_noise_reasons in the record)" in legend
    assert "older" not in legend


def test_records_before_the_headline_was_judged_fall_back_to_the_case_quality():
    old = {k: v for k, v in gpu_rec().items() if not k.startswith("headline_quality")}
    old = {k: v for k, v in old.items() if k != "headline_noise_reasons"} | {"measurement_quality": "noisy",
                                                                           "noise_reasons": [HOST_LOAD]}
    # as a store keeps them: the quality in `details`
    stored = {k: v for k, v in old.items() if k not in ("measurement_quality", "noise_reasons")}
    stored["details"] = {"measurement_quality": "noisy", "noise_reasons": [HOST_LOAD]}
    text = " ".join(render(CompactSummary([gpu_rec("eager", 2.0), stored])).split())
    assert "2× ~" in text and "~ = the case's measurement was noisy, host load included (noise_reasons" in text
    assert headline_noise_note(old) == HOST_LOAD


# --- --wide: the clock beside a latency, the speedup's interval ---------------------------------------------

def wide_text(records: list[dict]) -> str:
    return render(wide_table(records), width=400)


def test_wide_shows_a_clock_only_where_it_stands_apart_from_the_runs_typical_one():
    recs = [gpu_rec("eager", 2.0, headline_sm_clock_mhz_median=1980.0),
            gpu_rec("xla", headline_sm_clock_mhz_median=1965.0),  # 0.8% under the typical: not shown
            gpu_rec("iree", headline_sm_clock_mhz_median=1830.0),  # 7% under: shown
            gpu_rec("onnxruntime", headline_sm_clock_mhz_median=1980.0)]
    assert typical_clock_mhz(recs) == pytest.approx(1972.5)
    text = wide_text(recs)
    rows = {line.split("│")[4].strip(): line for line in text.splitlines() if line.startswith("│ gemm")}
    assert "@ 1830 MHz" in rows["iree"]
    assert all("MHz" not in rows[b] for b in ("eager", "xla", "onnxruntime"))
    assert "more than 3% from the run's typical 1972 MHz (median over its cases)" in " ".join(text.split())


def test_a_shown_clock_names_what_held_it():
    """NVML's clock event reasons over the timing window (sm_clock_events, share of the clock samples): a power cap
    set in at least a tenth of them is named beside a shown clock, in --wide and in the report; a rarer one, or
    GpuIdle, is not, and a clock not shown gets no words either."""
    recs = [gpu_rec("eager", 2.0, headline_sm_clock_mhz_median=1980.0, sm_clock_events={"SwPowerCap": 0.9}),
            gpu_rec("onnxruntime", headline_sm_clock_mhz_median=1980.0),
            gpu_rec("tensorrt", headline_sm_clock_mhz_median=1980.0),
            gpu_rec("iree", headline_sm_clock_mhz_median=1830.0, sm_clock_events={"SwPowerCap": 0.62, "GpuIdle": 0.2}),
            gpu_rec("xla", headline_sm_clock_mhz_median=1820.0, sm_clock_events={"SwPowerCap": 0.05, "GpuIdle": 0.9})]
    rows = {line.split("│")[4].strip(): line for line in wide_text(recs).splitlines() if line.startswith("│ gemm")}
    assert "@ 1830 MHz (power cap)" in rows["iree"]
    assert "@ 1820 MHz" in rows["xla"] and "power cap" not in rows["xla"] and "GpuIdle" not in rows["xla"]
    assert "MHz" not in rows["eager"]  # at the run's typical clock: no clock shown, so no reason either
    html = runs_table_html([RunData({"run_id": "a", "fingerprint": "fp", "environment": {}}, recs)])
    assert "@ 1830 MHz (power cap)</span>" in html and "NVML says the power cap held it" in html
    assert html.count("power cap") == 2  # the iree cell only: its title and its text
    assert clock_limits({"sm_clock_events": {"HwThermalSlowdown": 0.3, "SwThermalSlowdown": 0.2,
                                             "SwPowerCap": 0.5}}) == ["power cap", "thermal"]
    assert clock_limits({}) == [] and clock_limits({"sm_clock_events": None}) == []


def test_the_reports_case_table_shows_the_headline_clock_and_marks_one_apart():
    recs = [gpu_rec("eager", 2.0, headline_sm_clock_mhz_median=1980.0, sm_clock_mhz=1700.0),
            gpu_rec("xla", headline_sm_clock_mhz_median=1965.0),
            gpu_rec("iree", headline_sm_clock_mhz_median=1830.0),  # 7% under the run's typical: marked
            gpu_rec("onnxruntime", headline_sm_clock_mhz_median=1980.0),
            gpu_rec("tensorrt", sm_clock_mhz=1500.0)]  # an older record: the window's clock, nothing marked
    html = runs_table_html([RunData({"run_id": "a", "fingerprint": "fp", "environment": {}}, recs)])
    rows = {r.split("</td>")[3].rsplit(">", 1)[-1]: r for r in html.split("<tr")[2:]}
    assert "@ 1830 MHz" in rows["iree"] and html.count(" MHz</span>") == 1
    assert "SM clock MHz (headline)" in html
    cells = {b: [c.rsplit(">", 1)[-1] for c in row.split("</td>")] for b, row in rows.items()}
    assert "1980" in cells["eager"] and "1700" not in cells["eager"]  # the headline's clock, not the window's
    assert "1500 (NVML, window)" in cells["tensorrt"]  # said to be the window's, not the headline's


def test_a_latency_whose_spread_was_the_clocks_carries_its_clock_and_no_noise_mark():
    """headline_quality 'clock' (the samples spread with the SM clock and are steady in cycles): no "~" in the
    compact view, 'clock' in --wide's noise column with its legend, and the latency's clock shown even at the run's
    typical clock, in the terminal and in the report."""
    spread = ["backend headline IQR/median 0.08 missed the target 0.05 (1.6x); in SM cycles (each call's time x "
              "its clock) the spread is 0.6%: the clock accounts for it"]
    at_clock = gpu_rec("inductor", headline_sm_clock_mhz_median=1965.0, headline_quality="clock",
                       headline_noise_reasons=spread, measurement_quality="noisy", noise_reasons=spread)
    recs = [gpu_rec("eager", 2.0, headline_sm_clock_mhz_median=1980.0), at_clock,
            gpu_rec("xla", headline_sm_clock_mhz_median=1965.0)]
    assert "~" not in render(CompactSummary(recs))
    text = wide_text(recs)
    rows = {line.split("│")[4].strip(): line for line in text.splitlines() if line.startswith("│ gemm")}
    assert "@ 1965 MHz" in rows["inductor"] and "clock" in rows["inductor"].split("│")[6]
    assert "MHz" not in rows["xla"] and "MHz" not in rows["eager"]  # the same clock, a clean spread: not shown
    assert "clock: the headline's samples spread with the GPU's SM clock and are steady in SM cycles" in \
        " ".join(text.split())
    assert headline_noise_note(at_clock) is None  # compare and trends name noisy latencies only
    html = runs_table_html([RunData({"run_id": "a", "fingerprint": "fp", "environment": {}}, recs)])
    rows = {r.split("</td>")[3].rsplit(">", 1)[-1]: r for r in html.split("<tr")[2:]}
    assert "@ 1965 MHz" in rows["inductor"] and html.count(" MHz</span>") == 1
    assert "steady in SM cycles" in rows["inductor"]
    assert "<summary>clock (1)</summary>" in rows["inductor"] and "<summary>" not in rows["xla"]


def test_the_reports_noise_column_reads_the_headline_as_the_terminal_does():
    """A device-timed headline clean beside host load says 'others' (the case's reasons folded under it), a noisy
    headline its own reasons, an older record the case's quality."""
    loaded = gpu_rec("xla", measurement_quality="noisy", noise_reasons=[HOST_LOAD])
    noisy = gpu_rec("iree", headline_quality="noisy", headline_noise_reasons=["backend headline drifted"],
                    measurement_quality="noisy", noise_reasons=[HOST_LOAD, "backend headline drifted"])
    old = {k: v for k, v in gpu_rec("onnxruntime").items() if not k.startswith("headline_")} | {
        "measurement_quality": "noisy", "noise_reasons": [HOST_LOAD]}
    html = runs_table_html([RunData({"run_id": "a", "fingerprint": "fp", "environment": {}}, [loaded, noisy, old])])
    rows = {r.split("</td>")[3].rsplit(">", 1)[-1]: r for r in html.split("<tr")[2:]}
    assert "<summary>others (1)</summary>" in rows["xla"]
    assert "<summary>noisy (1)</summary><ul class=\"note\"><li>backend headline drifted</li>" in rows["iree"]
    assert "<summary>noisy (1)</summary>" in rows["onnxruntime"]


def test_wide_shows_no_clock_for_records_without_one():
    text = wide_text([gpu_rec("eager", 2.0), gpu_rec("xla", 0.5)])
    assert "MHz" not in text


def test_wide_shows_time_outside_kernels_only_where_a_call_far_exceeds_its_span():
    recs = [gpu_rec("eager", 33.5, host_latency_ms=33.7, device_span_ms=33.5),  # dispatch: not shown
            gpu_rec("iree", 33.5, host_latency_ms=64.0, device_span_ms=33.5),  # an allocation a call: shown
            gpu_rec("xla", 0.07, host_latency_ms=0.30, device_span_ms=0.07),  # 4x, but under 1 ms: not shown
            gpu_rec("onnxruntime", 3.0, host_latency_ms=3.6, device_span_ms=3.0)]  # 0.6 ms: not shown
    assert [outside_kernels_ms(r) for r in recs] == [None, pytest.approx(30.5), None, None]
    assert outside_kernels_ms({**recs[1], "headline_method": "pipelined"}) is None  # not a span headline
    text = wide_text(recs)
    rows = {line.split("│")[4].strip(): line for line in text.splitlines() if line.startswith("│ gemm")}
    assert "+30.5 outside kernels" in rows["iree"]
    assert all("outside" not in rows[b] for b in ("eager", "xla", "onnxruntime"))
    assert "exceeds its kernels' span" in " ".join(text.split())
    assert "outside" not in wide_text([recs[0]])
    html = runs_table_html([RunData({"run_id": "a", "fingerprint": "fp", "environment": {}}, recs)])
    assert html.count("outside kernels</span>") == 1 and "+30.5 ms outside kernels" in html


def test_wide_shows_the_speedup_interval_only_where_both_ends_exist():
    recs = [gpu_rec("xla", speedup_vs_eager_ci_low=1.91, speedup_vs_eager_ci_high=2.08),
            gpu_rec("iree", speedup_vs_eager_ci_low=None, speedup_vs_eager_ci_high=None),
            gpu_rec("onnxruntime")]  # an older store: no such fields at all
    rows = {line.split("│")[4].strip(): line for line in wide_text(recs).splitlines() if line.startswith("│ gemm")}
    assert "[1.91–2.08]" in rows["xla"]
    assert "2×" in rows["iree"] and "[" not in rows["iree"].split("│")[9]
    assert "[" not in rows["onnxruntime"].split("│")[9]


def test_wide_noise_column_tells_the_headline_from_the_other_figures():
    recs = [gpu_rec("xla", measurement_quality="noisy", noise_reasons=[HOST_LOAD]),
            gpu_rec("iree", headline_quality="noisy", headline_noise_reasons=["x"], measurement_quality="noisy")]
    text = wide_text(recs)
    rows = {line.split("│")[4].strip(): line.split("│")[6].strip() for line in text.splitlines()
            if line.startswith("│ gemm")}
    assert rows == {"xla": "others", "iree": "noisy"}
    assert "others: the headline is clean, other figures were noisy" in " ".join(text.split())


# --- compare: cycle space, intervals, the headline's quality --------------------------------------------------

def test_a_latency_change_the_clock_explains_is_clock_not_a_regression():
    base = gpu_rec(headline_sm_clock_mhz_median=1980.0)
    cand = gpu_rec(median_ms=1.08, seed=1, headline_sm_clock_mhz_median=1830.0)  # +8% time, -7.6% clock
    cmp = compare([base], [cand])
    (case,) = cmp.cases
    lat = by_metric(case)["headline_ms"]
    assert lat.verdict == "clock" and lat.why == "explained by the SM clock: 1980 MHz → 1830 MHz"
    assert lat.rel == pytest.approx(0.08, abs=0.01) and abs(lat.cycles_rel) < 0.01
    assert not case.regressed and not case.improved and case.clock_explained and cmp.regressions == []
    text = to_text(cmp)
    assert "1 latency change(s) explained by the SM clock" in text.splitlines()[0]
    assert "(+" in text and "clock (explained by the SM clock: 1980 MHz → 1830 MHz)" in text  # time space beside
    doc = json.loads(to_json(cmp))["cases"][0]
    assert doc["changes"][0]["verdict"] == "clock" and doc["clock_explained"] and not doc["regressed"]
    assert "#### Latency changes explained by the SM clock (never counted)" in to_markdown(cmp)


def test_a_change_beyond_the_clock_is_still_a_regression_with_its_cycles_shown():
    base = gpu_rec(headline_sm_clock_mhz_median=1980.0)
    cand = gpu_rec(median_ms=1.20, seed=1, headline_sm_clock_mhz_median=1830.0)  # cycles +11%
    (case,) = compare([base], [cand]).regressions
    lat = by_metric(case)["headline_ms"]
    assert lat.verdict == "regressed" and lat.cycles_rel == pytest.approx(1.2 * 1830 / 1980 - 1, abs=0.01)
    assert "at 1980 → 1830 MHz" in to_text(compare([base], [cand]))


def test_each_calls_own_clock_decides_where_the_record_has_it():
    """The candidate's calls ran 10% slower while their own clocks read 10% lower (the clock settling during
    the samples): in cycles nothing changed, though the median clocks of the two runs are the same."""
    base = gpu_rec(headline_sm_clock_mhz_median=1650.0)
    base.update(device_span_sm_clock_mhz=[1650.0] * 30, device_span_sm_clock_source="marker-spin")
    cand = gpu_rec(median_ms=1.10, seed=1, headline_sm_clock_mhz_median=1650.0)
    cand.update(device_span_sm_clock_mhz=[1650.0 / 1.10] * 30, device_span_sm_clock_source="marker-spin")
    lat = by_metric(compare([base], [cand]).cases[0])["headline_ms"]
    assert lat.verdict == "clock" and abs(lat.cycles_rel) < 0.01
    for rec in (base, cand):  # NVML's per-call reading is no evidence per call: the median clocks decide
        rec["device_span_sm_clock_source"] = "nvml"
    assert by_metric(compare([base], [cand]).cases[0])["headline_ms"].verdict == "regressed"
    for rec in (base, cand):
        rec["device_span_sm_clock_source"] = "marker-spin"
    del cand["device_span_sm_clock_mhz"]  # the median clocks alone: the same clock, so a regression
    lat = by_metric(compare([base], [cand]).cases[0])["headline_ms"]
    assert lat.verdict == "regressed" and lat.cycles_rel > 0.05


def test_a_slower_call_at_the_same_clock_is_a_regression():
    base = gpu_rec(headline_sm_clock_mhz_median=1980.0)
    cand = gpu_rec(median_ms=1.08, seed=1, headline_sm_clock_mhz_median=1980.0)
    assert by_metric(compare([base], [cand]).cases[0])["headline_ms"].verdict == "regressed"


@pytest.mark.parametrize("clocks", [(None, None), (1980.0, None), (None, 1830.0)])
def test_without_both_clocks_compare_works_in_time_space(clocks):
    base, cand = gpu_rec(), gpu_rec(median_ms=1.08, seed=1)
    for rec, mhz in zip((base, cand), clocks):
        if mhz is not None:
            rec["headline_sm_clock_mhz_median"] = mhz
    lat = by_metric(compare([base], [cand]).cases[0])["headline_ms"]
    assert lat.verdict == "regressed" and lat.cycles_rel is None and lat.base_clock_mhz is None


def test_a_speedup_change_inside_overlapping_intervals_is_not_significant():
    base = gpu_rec(speedup_vs_eager=2.0, speedup_vs_eager_ci_low=1.80, speedup_vs_eager_ci_high=2.20)
    cand = gpu_rec(speedup_vs_eager=1.85, speedup_vs_eager_ci_low=1.70, speedup_vs_eager_ci_high=1.95)
    sp = by_metric(compare([base], [cand]).cases[0])["speedup_vs_eager"]
    assert sp.verdict == "not significant" and sp.why == "the 95% intervals overlap"
    assert sp.base_interval == (1.80, 2.20)
    assert "2 [1.8–2.2] → 1.85 [1.7–1.95] (-7.5%) n.s. (the 95% intervals overlap)" in to_text(
        compare([base], [cand]))


def test_a_speedup_change_beyond_its_intervals_is_shown_and_never_counted():
    base = gpu_rec(speedup_vs_eager=2.0, speedup_vs_eager_ci_low=1.95, speedup_vs_eager_ci_high=2.05)
    cand = gpu_rec(speedup_vs_eager=1.6, speedup_vs_eager_ci_low=1.55, speedup_vs_eager_ci_high=1.65)
    cmp = compare([base], [cand])
    (case,) = cmp.cases
    assert by_metric(case)["speedup_vs_eager"].verdict == "fell" and not case.regressed and cmp.regressions == []
    assert "| speedup vs eager |" in to_markdown(cmp)


def test_speedups_without_intervals_are_judged_by_the_minimum_change_alone():
    cmp = compare([gpu_rec(speedup_vs_eager=2.0)], [gpu_rec(speedup_vs_eager=2.3)])
    sp = by_metric(cmp.cases[0])["speedup_vs_eager"]
    assert sp.verdict == "rose" and sp.base_interval is None
    eager = compare([gpu_rec("eager", speedup_vs_eager=1.0)], [gpu_rec("eager", speedup_vs_eager=1.0)])
    assert "speedup_vs_eager" not in by_metric(eager.cases[0])


def test_compare_notes_the_headlines_noise_not_the_hosts():
    host_only = gpu_rec(median_ms=1.3, seed=1, measurement_quality="noisy", noise_reasons=[HOST_LOAD])
    (case,) = compare([gpu_rec()], [host_only]).regressions
    assert case.noisy == []
    noisy = gpu_rec(median_ms=1.3, seed=1, headline_quality="noisy",
                    headline_noise_reasons=["SM clock dropped to 1110 MHz during the headline's samples"])
    (case,) = compare([gpu_rec()], [noisy]).regressions
    assert case.noisy == ["candidate: SM clock dropped to 1110 MHz during the headline's samples"]
    # a record written before the headline was judged on its own: the case's reasons, less what cannot move a
    # CUPTI span (host load, the run's own gated workers, the timer's samples)
    timer = "backend IQR/median 0.464 missed the target 0.05 (9.28x)"
    gated = "3 gated worker(s) of this run used the GPU during timing (pid 1, 2, 3)"
    old = {k: v for k, v in host_only.items() if k not in ("headline_quality", "headline_noise_reasons")}
    for reasons in ([HOST_LOAD], [HOST_LOAD, timer, gated]):
        (case,) = compare([gpu_rec()], [old | {"noise_reasons": reasons}]).regressions
        cases_text = to_text(compare([gpu_rec()], [old | {"noise_reasons": reasons}])).split("\n\n", 1)[1]
        assert case.noisy == [] and not case.suspect and "host load" not in cases_text and "REGRESSION" in cases_text
    outsider = "1 other process(es) used the GPU during timing (pid 7)"
    (case,) = compare([gpu_rec()], [old | {"noise_reasons": [HOST_LOAD, outsider]}]).regressions
    assert case.noisy == [f"candidate: {outsider}"] and case.suspect
    # the same reasons beside a headline that is the timer's figure on the host clock all count
    timer_head = {"headline_method": "host-clock+sync+flush", "timing_method": "host-clock+sync+flush"}
    (case,) = compare([gpu_rec(**timer_head)], [old | timer_head | {"noise_reasons": [HOST_LOAD, timer]}]).regressions
    assert case.noisy == [f"candidate: {HOST_LOAD}; {timer}"]


def test_a_side_without_the_headline_clock_uses_nvmls_window_clock_said_so():
    """An older base record has no headline clock but NVML's median over the timing window: cycle space with
    that clock, labelled (NVML), instead of time space alone."""
    base = gpu_rec(sm_clock_mhz=1980.0)
    cand = gpu_rec(median_ms=1.08, seed=1, headline_sm_clock_mhz_median=1830.0, sm_clock_mhz=1900.0)
    lat = by_metric(compare([base], [cand]).cases[0])["headline_ms"]
    assert lat.verdict == "clock" and lat.why == "explained by the SM clock: 1980 MHz (NVML) → 1830 MHz"
    assert (lat.base_clock_mhz, lat.base_clock_source, lat.candidate_clock_source) == (1980.0, "NVML", "headline")
    slower = gpu_rec(median_ms=1.20, seed=1, headline_sm_clock_mhz_median=1830.0)
    cmp = compare([base], [slower])
    assert by_metric(cmp.cases[0])["headline_ms"].verdict == "regressed"
    assert "cycles +10.5% at 1980 (NVML) → 1830 MHz) REGRESSED" in to_text(cmp)
    assert "at 1980 → 1830 MHz (NVML)" in to_text(compare([gpu_rec(headline_sm_clock_mhz_median=1980.0)],
                                                           [gpu_rec(median_ms=1.2, seed=1, sm_clock_mhz=1830.0)]))


def test_a_latency_that_moved_while_the_speedup_held_says_so():
    """+20% at the same clock with the speedup over eager unchanged: still a regression, and the line says that
    eager, timed beside it at the same clock, moved alike; no such note where the speedup fell with it."""
    base = gpu_rec(headline_sm_clock_mhz_median=1980.0, speedup_vs_eager=1.5)
    cand = gpu_rec(median_ms=1.2, seed=1, headline_sm_clock_mhz_median=1980.0, speedup_vs_eager=1.52)
    cmp = compare([base], [cand])
    (case,) = cmp.regressions
    lat = by_metric(case)["headline_ms"]
    assert lat.note == ("speedup over eager held (+1.3%, within 5%): eager, timed beside it at the same clock, "
                        "moved alike")
    assert f"REGRESSED; {lat.note}" in to_text(cmp) and lat.note in to_markdown(cmp)
    fell = gpu_rec(median_ms=1.2, seed=1, headline_sm_clock_mhz_median=1980.0, speedup_vs_eager=1.25)
    assert by_metric(compare([base], [fell]).cases[0])["headline_ms"].note is None


# --- the clock-settle trace (benchmarks/validate_timing.py --clock-settle) -----------------------------------

def test_settle_time_is_when_the_clock_stays_within_2_percent_of_its_final_value():
    t = [i * 0.01 for i in range(2000)]  # 20 s
    mhz = [1980.0 if s < 1.0 else (1860.0 if s < 4.0 else 1800.0) for s in t]
    mhz[300] = 1700.0  # a dip before the level is reached does not count after it
    settled, final = settle_time_s(t, mhz)
    assert final == 1800.0 and settled == pytest.approx(4.0)
    assert settle_time_s(t, [1800.0] * len(t)) == (0.0, 1800.0)
    still_moving = [1980.0 - 10 * s for s in t]  # never level
    assert settle_time_s(t, still_moving)[0] is None
    assert settle_time_s([], []) == (None, None)


def test_binned_gives_median_min_and_count_per_bin():
    rows = binned([0.0, 0.1, 0.2, 1.5], [10.0, 30.0, 20.0, 5.0], [0.0, 1.0, 2.0, 3.0])
    assert rows == [(0.0, 1.0, 20.0, 10.0, 3), (1.0, 2.0, 5.0, 5.0, 1), (2.0, 3.0, None, None, 0)]


def test_a_history_point_is_noisy_by_its_headline_not_by_the_cases_summary():
    """The dashboard's trend marks a point by its headline's own quality: a case whose summary is noisy only by
    what does not touch the headline (host load beside a device-timed span, the run's own gated workers) is not
    a noisy point; a noisy headline is; older records fall back on the case's summary."""
    from bakeoff.results.report.trend import Point

    def point(**rec):
        return Point("r", 0, 1.0, {}, rec=rec)

    summary_only = {"measurement_quality": "noisy", "noise_reasons": [HOST_LOAD], "headline_quality": "clean",
                    "headline_noise_reasons": []}
    assert point(**summary_only).noise is None
    drift = "backend headline drifted during the case"
    assert point(**summary_only | {"headline_quality": "noisy", "headline_noise_reasons": [drift]}).noise == drift
    assert point(measurement_quality="noisy", noise_reasons=[HOST_LOAD]).noise == HOST_LOAD  # an older record


# --- what each view says of a noisy headline, and of a warm compile that failed -----------------------------

def test_the_wide_tables_noise_legend_speaks_of_the_headline_not_the_speedup():
    # a noisy headline with a clean speedup: the wide noise column says noisy, its legend says whose samples
    rec = gpu_rec(headline_quality="noisy", headline_noise_reasons=["backend headline IQR/median 0.2 missed"],
                  speedup_quality="clean", speedup_noise_reasons=[])
    legend = " ".join(wide_text([gpu_rec("eager", 2.0), rec]).split())
    assert "noise: the headline's own samples were noisy" in legend and "paired samples" not in legend
    compact = " ".join(render(CompactSummary([gpu_rec("eager", 2.0), rec])).split())
    assert "2× ~" not in compact  # the compact mark is the speedup's, and it was clean


def test_a_failed_warm_compile_is_said_in_show_and_in_the_reports_case_table():
    rec = gpu_rec("tritongen", compile_s=2.88, compile_warm_s=None,
                  warm_error="RuntimeError: Kernel requires a runtime memory allocation, but no allocator was set")
    assert "2.88 / warm failed" in wide_text([gpu_rec("eager", 2.0), rec])
    notes = " ".join(render(CompactSummary([gpu_rec("eager", 2.0), rec]), width=200).split())
    assert "tritongen warm compile failed in gemm" in notes and "no allocator was set" in notes
    html = runs_table_html([RunData({"run_id": "a", "fingerprint": "fp", "environment": {}}, [rec])])
    assert '<span title="RuntimeError: Kernel requires a runtime memory allocation' in html and ">failed</span>" in html


def test_the_reports_clock_column_names_nvmls_window_clock_where_the_headline_has_none():
    older = gpu_rec("iree", sm_clock_mhz=1590.0)  # a store from before the headline's own clock
    newer = gpu_rec("xla", headline_sm_clock_mhz_median=1468.0, sm_clock_mhz=1590.0)
    html = runs_table_html([RunData({"run_id": "a", "fingerprint": "fp", "environment": {}}, [older, newer])])
    assert html.count("1590 (NVML, window)") == 1 and ">1468</td>" in html  # the newer one: its headline's
