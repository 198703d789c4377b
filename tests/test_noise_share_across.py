"""benchmarks/noise_share.py --across-cases: eager's headline for one (workload, dtype) as measured in each case of
a run, its spread in ms and in SM cycles, on made-up flat records with the fields a GPU run writes."""
from __future__ import annotations

import pytest

from benchmarks import noise_share as ns


def own(ms: float, clock_mhz: float | None = None, workload: str = "gemm", dtype: str = "bfloat16",
        run_id: str = "r1", **fields) -> dict:
    """eager's own case: a CUPTI-span headline of five calls at `ms`, each at `clock_mhz` (None: no clocks)."""
    rec = {"run_id": run_id, "adapter": "eager", "backend": "eager", "workload": workload, "dtype": dtype,
           "shape": "M=8192", "headline_method": "cupti-span", "headline_ms": ms, "device_span_samples_ms": [ms] * 5}
    if clock_mhz:
        rec.update(device_span_sm_clock_mhz=[clock_mhz] * 5, device_span_sm_clock_source="marker-spin")
    return {**rec, **fields}


def paired(backend: str, eager_ms: float, clock_mhz: float | None = None, workload: str = "gemm",
           dtype: str = "bfloat16", run_id: str = "r1", **fields) -> dict:
    """Another backend's case with eager's interleaved headline at `eager_ms`, its calls at `clock_mhz`."""
    rec = {"run_id": run_id, "adapter": backend, "backend": backend, "workload": workload, "dtype": dtype,
           "shape": "M=8192", "headline_method": "cupti-span", "headline_ms": 0.5, "eager_headline_ms": eager_ms,
           "eager_device_span_samples_ms": [eager_ms] * 5}
    if clock_mhz:
        rec.update(eager_device_span_sm_clock_mhz=[clock_mhz] * 5, eager_device_span_sm_clock_source="marker-spin")
    return {**rec, **fields}


def test_spread_is_largest_over_smallest():
    assert ns.spread([1.0, 1.03, 1.01]) == pytest.approx(0.03)
    assert ns.spread([1.0]) is None and ns.spread([0.0, 1.0]) is None


def test_a_spread_within_three_percent_in_ms_holds():
    [row] = ns.across_cases([own(1.00), paired("inductor", 1.02), paired("xla", 1.01)])
    assert row["n"] == 3 and row["spread_ms"] == pytest.approx(0.02) and row["holds"] == "ms"
    assert (row["fastest"], row["slowest"]) == ("eager", "inductor")
    assert row["spread_kcycles"] is None and row["clocks"] == 0


def test_a_spread_the_per_call_clocks_account_for_holds_by_the_clock():
    # 10% slower at a 10% lower clock: the same number of cycles
    recs = [own(1.00, 1980.0), paired("inductor", 1.10, 1800.0), paired("xla", 1.0, 1980.0)]
    [row] = ns.across_cases(recs)
    assert row["spread_ms"] == pytest.approx(0.10)
    assert row["spread_kcycles"] == pytest.approx(0.0, abs=1e-9) and row["per_call_clocks"] == 3
    assert row["holds"] == "clock" and row["pm_clocks"] == 0
    # the PM sampler's per-call clocks count as well, and are told apart
    sampled = {"eager_device_span_sm_clock_source": "pm-sampler"}
    recs = [own(1.00, 1980.0), paired("inductor", 1.10, 1800.0, **sampled), paired("xla", 1.0, 1980.0)]
    [row] = ns.across_cases(recs)
    assert row["holds"] == "clock" and row["per_call_clocks"] == 3 and row["pm_clocks"] == 1
    assert " 1+2+0/3 " in ns.across_table([row])


def test_a_spread_the_clock_does_not_account_for_fails():
    [row] = ns.across_cases([own(1.00, 1980.0), paired("inductor", 1.10, 1980.0)])
    assert row["spread_kcycles"] == pytest.approx(0.10) and row["holds"] is False


def test_nvmls_per_call_reading_is_not_used_per_call():
    """A record whose per-call clocks came from NVML (no evidence per call) is read with its median clock."""
    recs = [own(1.00, 1980.0, device_span_sm_clock_source="nvml", headline_sm_clock_mhz_median=1980.0),
            paired("inductor", 1.10, 1800.0, eager_device_span_sm_clock_source="nvml",
                   headline_sm_clock_mhz_median=1980.0)]
    [row] = ns.across_cases(recs)
    assert row["spread_kcycles"] == pytest.approx(0.10) and row["holds"] is False
    assert {m["clock"] for m in ns.eager_measurements(recs)[next(iter(ns.eager_measurements(recs)))]} == {"median"}


def test_without_clocks_an_over_spread_cannot_be_told():
    [row] = ns.across_cases([own(1.00), paired("inductor", 1.10, None)])
    assert row["holds"] is None and row["spread_kcycles"] is None


def test_the_median_clock_stands_in_for_per_call_clocks():
    """Older records: no per-call clocks, the median over the headline's samples (headline_sm_clock_mhz_median)."""
    recs = [own(1.00, headline_sm_clock_mhz_median=1980.0),
            paired("inductor", 1.10, headline_sm_clock_mhz_median=1800.0)]
    [row] = ns.across_cases(recs)
    assert row["clocks"] == 2 and row["per_call_clocks"] == 0
    assert row["spread_kcycles"] == pytest.approx(1.10 * 1800 / 1980 - 1) and row["holds"] == "clock"


def test_one_case_without_a_clock_leaves_cycles_untold():
    [row] = ns.across_cases([own(1.00, 1980.0), paired("inductor", 1.10, None)])
    assert row["clocks"] == 1 and row["spread_kcycles"] is None and row["holds"] is None


def test_groups_are_per_run_workload_and_dtype_and_need_two_cases():
    recs = [own(1.0), paired("xla", 1.2, dtype="float16"), own(1.0, dtype="float16"),
            own(2.0, workload="softmax"), paired("xla", 2.0, run_id="r2", workload="softmax"),
            paired("xla", None)]  # no eager figure: left out
    rows = ns.across_cases(recs)
    assert [(r["workload"], r["dtype"], r["n"]) for r in rows] == [("gemm", "float16", 2)]
    assert rows[0]["spread_ms"] == pytest.approx(0.2)


def test_table_names_each_verdict_and_counts_them():
    rows = ns.across_cases([own(1.0, 1980.0), paired("inductor", 1.1, 1800.0),
                            own(1.0, workload="softmax"), paired("xla", 1.2, workload="softmax"),
                            own(1.0, workload="ew"), paired("xla", 1.01, workload="ew")])
    text = ns.across_table(rows)
    assert "yes, the clock accounts for it" in text and "NO (no clocks)" in text
    assert "3 groups: 1 within 3% in ms, 1 more within it in SM cycles, 0 more within it of a part the clock " \
           "drives and a fixed part, 0 over in all (0 of them a time per case" in text
    assert "1 over in ms without clocks" in text


def _settling(n: int = 20) -> tuple[list[float], list[float]]:
    """Spans of a compute-bound call while the SM clock settles from 1980 to 1320 MHz, and those clocks."""
    clocks = [1320.0 + 660.0 * 0.8 ** i for i in range(n)]
    return [1.6 * 1980.0 / c for c in clocks], clocks


def test_the_share_table_counts_a_latency_at_its_clock_apart_from_a_noisy_one():
    """A latency whose spread the per-call clocks account for is 'at clock', not in `latency ~`; the same spread
    without per-call clocks is noisy, its reason naming the clock's range."""
    spans, clocks = _settling()
    base = {"backend": "eager", "adapter": "eager", "device": "cuda:0", "timing_method": "cuda-events",
            "headline_method": "cupti-span", "device_span_samples_ms": spans, "samples_ms": spans,
            "latency_iqr_rel": 0.01, "gpu_other_processes": [], "headline_sm_clock_mhz_min": int(min(clocks)),
            "headline_sm_clock_mhz_max": int(max(clocks)), "headline_sm_clock_mhz_median": 1400.0,
            "headline_sm_clock_low_share": 0.0}
    at_clock = {**base, "device_span_sm_clock_mhz": clocks, "device_span_sm_clock_source": "marker-spin"}
    text = ns.table([at_clock, base], reasons=False)
    row = next(line for line in text.splitlines() if line.startswith("eager"))
    assert row.split()[1:] == ["2", "0", "(", "0%)", "1", "(", "50%)", "1", "(", "50%)", "1", "1", "(", "50%)"], row


def test_the_clock_order_says_eager_ran_slower_where_the_clock_was_lower():
    """A power-capped GPU: the slower the case, the lower its clock, though not in proportion (cycles over 3%)."""
    recs = [own(1.00, 1960.0), paired("inductor", 1.20, 1400.0), paired("xla", 1.10, 1600.0)]
    [row] = ns.across_cases(recs)
    assert row["holds"] is False and row["clock_order"] == pytest.approx(-1.0)
    assert row["fastest_mhz"] == pytest.approx(1960.0) and row["slowest_mhz"] == pytest.approx(1400.0)
    assert "eager 1960 / inductor 1400" in ns.across_table([row])


def test_a_spread_unrelated_to_the_clock_has_no_clock_order():
    """Same clock everywhere, different times (a memory-bound kernel that differs from process to process)."""
    recs = [own(1.00, 1990.0), paired("inductor", 1.20, 1990.0), paired("xla", 1.10, 1990.0)]
    [row] = ns.across_cases(recs)
    assert row["clock_order"] is None  # one clock: nothing to order by
    [row] = ns.across_cases([own(1.00, 1990.0), paired("inductor", 1.20, 1980.0), paired("xla", 1.10, 1995.0)])
    assert abs(row["clock_order"]) < 1.0
    [short] = ns.across_cases([own(1.00, 1980.0), paired("inductor", 1.10, 1800.0)])
    assert short["clock_order"] is None  # two cases order nothing
    [none] = ns.across_cases([own(1.00), paired("inductor", 1.10), paired("xla", 1.2)])
    assert none["clock_order"] is None and none["fastest_mhz"] is None


def test_cases_that_each_keep_a_time_of_their_own_are_told():
    """Over in ms and in cycles at one clock, each case's samples tight around its own median: a time per case
    (a worker process's), said beside the NO."""
    tight = lambda ms: [ms * f for f in (0.996, 0.999, 1.0, 1.001, 1.004)]  # noqa: E731
    recs = [own(1.00, 1980.0, device_span_samples_ms=tight(1.00)),
            paired("inductor", 1.08, 1980.0, eager_device_span_samples_ms=tight(1.08)),
            paired("xla", 1.04, 1980.0, eager_device_span_samples_ms=tight(1.04))]
    [row] = ns.across_cases(recs)
    assert row["holds"] is False and row["own_time"] and row["median_se"] < 0.01
    assert "NO, each case its own time" in ns.across_table([row])
    assert "(1 of them a time per case" in ns.across_table([row])


def test_a_spread_within_the_samples_noise_is_not_a_time_per_case():
    wide = lambda ms: [ms * f for f in (0.8, 0.9, 1.0, 1.1, 1.2)]  # noqa: E731
    recs = [own(1.00, 1980.0, device_span_samples_ms=wide(1.00)),
            paired("inductor", 1.08, 1980.0, eager_device_span_samples_ms=wide(1.08))]
    [row] = ns.across_cases(recs)
    assert row["holds"] is False and not row["own_time"]
    assert ns.across_table([row]).splitlines()[1].endswith("NO")


def test_cases_whose_times_follow_their_clocks_are_not_a_time_per_case():
    """Slower exactly where the clock read lower (a power cap), though time x clock does not hold them equal: the
    clock's order is the finding, not the process."""
    recs = [own(1.00, 1980.0), paired("inductor", 1.20, 1650.0), paired("xla", 1.10, 1900.0)]
    [row] = ns.across_cases(recs)
    assert row["holds"] is False and row["clock_order"] == pytest.approx(-1.0) and not row["own_time"]


def test_a_call_part_clock_driven_part_fixed_holds_by_the_fit():
    """A GEMM and a memory-bound kernel in one call: 2/3 of its time at the median clock scales as 1 / clock, the
    rest not. Its cycles spread over 3% as well as its ms, yet the cases lie on one curve of their clocks."""
    at = lambda mhz: 1.2 * 1800.0 / mhz + 0.6  # noqa: E731  (ms: 1.2 ms of cycles at 1,800 MHz, 0.6 ms fixed)
    clocks = (1950.0, 1800.0, 1650.0, 1500.0, 1400.0)
    recs = [own(at(clocks[0]), clocks[0])] + [paired(b, at(c), c) for b, c in zip(("inductor", "xla", "iree",
                                                                                    "tritongen"), clocks[1:])]
    [row] = ns.across_cases(recs)
    assert row["spread_ms"] > 0.03 and row["spread_kcycles"] > 0.03 and row["clock_order"] == pytest.approx(-1.0)
    assert row["holds"] == "fit" and not row["own_time"]
    assert row["fit_spread"] == pytest.approx(0.0, abs=1e-6)
    clocked = 1.2 * 1800.0 / 1650.0  # at the median clock, 1,650 MHz
    assert row["fit_share"] == pytest.approx(clocked / (clocked + 0.6), rel=1e-6)
    table = ns.across_table([row])
    assert "yes, the clock for 69% of the time, the rest fixed" in table and "0.0%/69%" in table
    assert "1 more within it of a part the clock drives" in table


def test_the_fit_needs_four_cases_and_the_clocks_order():
    at = lambda mhz: 1200.0 / mhz + 0.6  # noqa: E731
    three = [own(at(1950.0), 1950.0), paired("inductor", at(1600.0), 1600.0), paired("xla", at(1400.0), 1400.0)]
    [row] = ns.across_cases(three)
    assert row["holds"] is False and row["fit_share"] is None  # two parameters from three cases: not told
    # times that do not fall as the clocks rise: no fit holds them, whatever its spread
    shuffled = [own(1.00, 1950.0), paired("inductor", 1.20, 1900.0), paired("xla", 1.05, 1400.0),
                paired("iree", 1.10, 1600.0)]
    [row] = ns.across_cases(shuffled)
    assert row["holds"] is False


def test_the_fit_is_not_tried_where_ms_or_cycles_hold():
    [row] = ns.across_cases([own(1.00, 1980.0), paired("inductor", 1.10, 1800.0), paired("xla", 1.0, 1980.0),
                             paired("iree", 1.01, 1970.0)])
    assert row["holds"] == "clock" and row["fit_share"] is None
    [row] = ns.across_cases([own(1.00), paired("inductor", 1.01), paired("xla", 1.0), paired("iree", 1.02)])
    assert row["holds"] == "ms" and row["fit_share"] is None


def test_a_spread_wider_than_the_clocks_is_a_time_per_case_whatever_their_order():
    """Times 12% apart while the clocks are 1% apart: even in the clocks' order, a clock cannot be why (a call's
    time scales at most as 1 / clock)."""
    tight = lambda ms: [ms * f for f in (0.996, 0.999, 1.0, 1.001, 1.004)]  # noqa: E731
    recs = [own(1.00, 1995.0, device_span_samples_ms=tight(1.00)),
            paired("inductor", 1.06, 1990.0, eager_device_span_samples_ms=tight(1.06)),
            paired("xla", 1.12, 1975.0, eager_device_span_samples_ms=tight(1.12))]
    [row] = ns.across_cases(recs)
    assert row["clock_order"] == pytest.approx(-1.0) and row["holds"] is False and row["own_time"]


def test_clock_fit_recovers_the_two_parts():
    mhz = [1000.0, 1500.0, 2000.0, 2500.0]
    share, spread = ns.clock_fit([2000.0 / f + 0.5 for f in mhz], mhz)
    assert spread == pytest.approx(0.0, abs=1e-6)
    assert share == pytest.approx((2.0 / 1.75) / (2.0 / 1.75 + 0.5), rel=1e-6)  # at the median clock, 1,750 MHz
    assert ns.clock_fit([1.0, 1.1, 1.2], [1.0, 2.0, 3.0]) is None
