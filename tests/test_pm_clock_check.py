"""benchmarks/pm_clock_check.py: the PM sampler's clock over the samples inside each call's window, set beside the
call's in-kernel clock, on made-up samples and stamps (the GPU run is the benchmark itself)."""
from __future__ import annotations

import pytest

from bakeoff.harness.measure import pm_sampler as pm
from benchmarks import kernel_clock_check as kc
from benchmarks import pm_clock_check as pc


def test_sample_clock_is_their_cycles_over_their_nanoseconds():
    # 19,800 cycles in 10,000 ns twice: 1980 MHz; no samples or no time: no clock
    assert pm.call_clocks([(0, 20_000)], [(0, 10_000, 19_800.0), (10_000, 20_000, 19_800.0)], 0) == [
        pytest.approx(1980.0)]
    assert pm.call_clocks([(0, 30_000)], [(0, 10_000, 20_000.0), (10_000, 30_000, 20_000.0)], 0) == [
        pytest.approx(40_000 / 30_000 * 1e3)]
    assert pm.call_clocks([(0, 10)], [], 0) == [None] and pm.call_clocks([(0, 10)], [(5, 5, 1.0)], 0) == [None]


def test_only_samples_wholly_inside_a_call_count_for_it():
    samples = [(0, 10, 1.0), (10, 20, 2.0), (20, 30, 3.0), (25, 40, 4.0)]
    assert pm.samples_inside([(5, 30)], samples) == 2
    assert pm.call_clocks([(5, 30)], samples, 0) == [pytest.approx((2.0 + 3.0) / 20 * 1e3)]
    # the window: the programs' first start to their last end, in %globaltimer ns
    assert pc.call_window([(0, 105, 9, 300), (0, 100, 9, 290), (0, 120, 9, 310)]) == (100, 310)


def test_a_call_without_samples_inside_gives_no_clock_and_no_difference():
    got = pc.compare([(0, 20_000), (100_000, 101_000)], [1980.0, 1500.0],
                     [(0, 10_000, 19_800.0), (10_000, 20_000, 19_800.0), (100_500, 101_500, 2_000.0)])
    assert got["per_call_mhz"] == [pytest.approx(1980.0), None]
    assert got["over_kernel"] == pytest.approx(0.0) and got["samples_inside"] == 2 and got["mhz"] == 1980.0


def test_rows_put_each_call_in_cycles_by_the_kernel_and_by_each_sampled_clock():
    # two 1 ms calls at an in-kernel 1500 MHz; the SM counter agrees, the SMs were active 90% of it, the graphics
    # clock reads 20% above
    windows = [(0, 1_000_000), (2_000_000, 3_000_000)]
    samples = [(s, s + 500_000, 750_000.0, 675_000.0, 900_000.0) for s in (0, 500_000, 2_000_000, 2_500_000)]
    r = pc.row("gemm", windows, [1500.0, 1500.0], samples)
    assert r["span_ms"] == pytest.approx(1.0) and r["kernel_mcycles"] == pytest.approx(1.5)
    assert r["sm_mhz"] == pytest.approx(1500.0) and r["sm_over_kernel"] == pytest.approx(0.0)
    assert r["gr_mhz"] == pytest.approx(1800.0) and r["gr_over_kernel"] == pytest.approx(0.2)
    assert r["active_mhz"] == pytest.approx(1350.0) and r["active_over_kernel"] == pytest.approx(-0.1)
    assert r["sm_mcycles"] == pytest.approx(1.5) and r["gr_mcycles"] == pytest.approx(1.8)
    assert r["calls"] == 2 and r["samples"] == 4 and r["sm_samples_inside"] == 4
    # across neighbours: the sampled cycles spread as the sampled clock misreads, the kernel's hold
    spin = pc.row("spin", windows, [1400.0, 1400.0], [(s, e, sm * 1.1, act, gr) for s, e, sm, act, gr in samples])
    assert kc.cycles_spread([r, spin], "sm_mcycles") == pytest.approx(1.65 / 1.5 - 1)


def test_the_fit_finds_where_the_samples_sit_against_the_windows():
    # calls of 1 ms every 11 ms, the SMs fully busy inside them and 1/132 busy between (a one-thread spin); the
    # samples' clock runs 300 us behind the windows'
    lag = 300_000
    windows = [(k * 11_000_000, k * 11_000_000 + 1_000_000) for k in range(20)]
    samples = []
    for t in range(0, 220_000_000, 20_000):
        busy = any(s <= t < e for s, e in windows)
        samples.append((t - lag, t - lag + 20_000, 30.0, 30.0 if busy else 30.0 / 132, 40.0))
    got = pc.fitted(windows, samples)
    assert abs(got["shift_ns"] + lag) <= 20_000  # within one sample
    assert got["busy_at_shift"] == pytest.approx(1.0)
    assert got["busy_unshifted"] < 0.8
    # the row at that shift reads the calls' own clock: 30 cycles a 20 us sample, 1.5 MHz
    assert pc.row("spin", windows, [1.5] * 20, samples, got["shift_ns"])["sm_over_kernel"] == pytest.approx(0.0)


def test_the_fit_without_samples_inside_says_none():
    got = pc.fitted([(0, 1000)], [(10**12, 10**12 + 20_000, 1.0, 1.0)])
    assert got == {"shift_ns": None, "busy_at_shift": None, "busy_unshifted": None}
