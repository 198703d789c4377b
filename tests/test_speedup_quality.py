"""The speedup judged on the paired ratios of the headline's interleaved samples, the absolute latency on its own
samples (harness/measure/noise.py), on synthetic interleaved series: a clock shared by both sides cancels in
the ratio, what hits one side does not."""
from __future__ import annotations

import numpy as np

from bakeoff.harness.measure.noise import assess, clock_explains, paired_ratios

N = 20
TARGET = 0.05


def _settling_clock_mhz(n: int = N, start: float = 1980.0, end: float = 1320.0) -> np.ndarray:
    """An H200-like clock settling under sustained tensor-core load: fast at first, then level."""
    return end + (start - end) * np.exp(-np.arange(n) / (n / 4))


def _series(base_ms: float, clock_mhz: np.ndarray, seed: int, jitter: float = 0.005) -> list[float]:
    """A compute-bound call's span at each clock (time follows 1 / clock), with a little independent jitter."""
    rng = np.random.default_rng(seed)
    return list(base_ms * clock_mhz[0] / clock_mhz * (1 + rng.uniform(-jitter, jitter, len(clock_mhz))))


def _rec(backend: list[float], eager: list[float], clock_mhz: np.ndarray, **fields) -> dict:
    rec = {"samples_ms": backend, "latency_iqr_rel": 0.01, "eager_samples_ms": eager, "headline_method": "cupti-span",
           "device_span_samples_ms": backend, "eager_device_span_samples_ms": eager,
           "host_other_cpu_share": 0.01, "host_cpus": 16, "host_run_delay_share": 0.0, "gpu_other_processes": [],
           "headline_sm_clock_mhz_median": float(np.median(clock_mhz)),
           "headline_sm_clock_mhz_min": int(clock_mhz.min()), "headline_sm_clock_mhz_max": int(clock_mhz.max()),
           "headline_sm_clock_low_share": 0.0}
    rec.update(fields)
    return rec


def _assess(rec: dict) -> dict:
    return assess(rec, TARGET, paired=True, host_clock=False)


def test_a_clock_settling_under_both_sides_leaves_the_speedup_clean_and_the_latency_noisy_with_the_clock_named():
    clock = _settling_clock_mhz()
    q = _assess(_rec(_series(1.6, clock, 1), _series(1.8, clock, 2), clock))
    assert q["speedup_quality"] == "clean", q["speedup_noise_reasons"]
    assert q["speedup_iqr_rel"] < 0.01 and q["speedup_drift_rel"] < 0.01
    assert q["headline_quality"] == "noisy"  # the absolute latency really was spread
    backend = [r for r in q["headline_noise_reasons"] if r.startswith("backend headline")]
    moved = f"the SM clock moved {int(clock.min())}-1980 MHz ({1980 / int(clock.min()) - 1:.0%})"
    assert backend and all(moved in r for r in backend), backend


def test_a_jump_of_the_backend_alone_makes_the_speedup_noisy():
    clock = np.full(N, 1755.0)
    backend = _series(1.6, clock, 1)
    backend[N * 2 // 3:] = [x * 1.3 for x in backend[N * 2 // 3:]]  # the backend's last third 30% slower
    q = _assess(_rec(backend, _series(1.8, clock, 2), clock))
    assert q["speedup_quality"] == "noisy"
    assert any(r.startswith("speedup: the paired ratios eager/backend drifted") for r in q["speedup_noise_reasons"])
    assert q["speedup_drift_rel"] > 0.2
    # the clock did not move: the latency's reasons do not blame it
    assert q["headline_quality"] == "noisy" and not any("SM clock moved" in r for r in q["headline_noise_reasons"])


def test_foreign_kernels_landing_on_some_samples_make_the_speedup_noisy_even_unseen_by_nvml():
    clock = np.full(N, 1755.0)
    backend, eager = _series(1.6, clock, 1), _series(1.8, clock, 2)
    rng = np.random.default_rng(7)
    for series in (backend, eager):  # another process's kernels delay a random third of each side's calls
        for i in rng.choice(N, N // 3, replace=False):
            series[i] *= 1 + rng.uniform(0.2, 0.5)
    rec = _rec(backend, eager, clock, gpu_other_processes=None, gpu_process_error="NVML unavailable")
    q = _assess(rec)
    assert q["speedup_quality"] == "noisy"
    assert any("paired ratios eager/backend IQR/median" in r for r in q["speedup_noise_reasons"])


def test_another_process_seen_on_the_gpu_makes_a_clean_looking_speedup_noisy():
    clock = _settling_clock_mhz()
    rec = _rec(_series(1.6, clock, 1), _series(1.8, clock, 2), clock,
               gpu_other_processes=[{"pid": 4242, "sm_util_pct": 35, "mem_util_pct": 5}])
    q = _assess(rec)
    assert q["speedup_iqr_rel"] < 0.01  # the ratios alone look steady
    assert q["speedup_quality"] == "noisy" and any("pid 4242" in r for r in q["speedup_noise_reasons"])


def test_both_sides_moving_together_while_the_clock_held_is_a_noisy_latency_and_a_steady_speedup():
    held = np.full(N, 1980.0)
    load = np.linspace(1.0, 1.3, N)  # something else slowed both sides alike, the SM clock stayed put
    backend = [x * f for x, f in zip(_series(1.6, held, 1), load)]
    eager = [x * f for x, f in zip(_series(1.8, held, 2), load)]
    q = _assess(_rec(backend, eager, held))
    assert q["speedup_iqr_rel"] < 0.01 and q["speedup_quality"] == "clean"  # each pair moved alike
    assert q["headline_quality"] == "noisy"
    assert not any("SM clock moved" in r for r in q["headline_noise_reasons"])  # the clock does not explain it
    # the same slowdown on the backend's side only spreads the ratios
    q = _assess(_rec(backend, _series(1.8, held, 2), held))
    assert q["speedup_quality"] == "noisy"


def test_the_runs_own_gated_workers_count_in_the_summary_not_against_the_headline_or_the_speedup():
    """A worker under the same gate cannot time or check while this case times; what it may run beside (a
    compile's first run) is judged by the samples it would move. An outsider counts against both figures."""
    clock = _settling_clock_mhz()
    sibling = {"pid": 731, "sm_util_pct": 12, "mem_util_pct": 4, "gated_sibling": True}
    q = _assess(_rec(_series(1.6, clock, 1), _series(1.8, clock, 2), clock, gpu_other_processes=[sibling]))
    assert q["speedup_quality"] == "clean"
    assert not any("pid 731" in r for r in q["headline_noise_reasons"])
    assert q["measurement_quality"] == "noisy"
    assert any("1 gated worker(s) of this run used the GPU during timing (pid 731)" in r for r in q["noise_reasons"])
    outsider = {"pid": 4242, "sm_util_pct": 12, "mem_util_pct": 4}
    q = _assess(_rec(_series(1.6, clock, 1), _series(1.8, clock, 2), clock, gpu_other_processes=[sibling, outsider]))
    assert q["speedup_quality"] == "noisy" and q["headline_quality"] == "noisy"
    assert any("1 other process(es) used the GPU during timing (pid 4242)" in r for r in q["speedup_noise_reasons"])


def test_a_gated_sibling_is_told_by_its_environment():
    """GpuWatch marks a process whose environment names this worker's gate; an unreadable or different one
    stays an outsider."""
    import os
    import subprocess
    import sys

    from bakeoff.harness.measure.load_watch import mark_gated_siblings

    env = dict(os.environ, BAKEOFF_GATE="/tmp/bakeoff-gates/cuda0-test")
    same = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                             env=dict(env, BAKEOFF_GATE="/tmp/bakeoff-gates/cuda1-test"))
    try:
        marked = mark_gated_siblings([{"pid": same.pid}, {"pid": other.pid}, {"pid": 2 ** 22 + 7},
                                      {"pid": same.pid, "pid_namespace_unknown": True}],
                                     gate="/tmp/bakeoff-gates/cuda0-test")
    finally:
        same.kill()
        other.kill()
    assert [p.get("gated_sibling") for p in marked] == [True, None, None, None]


def test_eager_alone_has_no_speedup_quality():
    clock = _settling_clock_mhz()
    samples = _series(1.8, clock, 2)
    q = assess({"samples_ms": samples, "latency_iqr_rel": 0.2, "headline_method": "cupti-span",
                "device_span_samples_ms": samples, "headline_sm_clock_mhz_min": 1320,
                "headline_sm_clock_mhz_max": 1980},
               TARGET, paired=False, host_clock=False)
    assert q["speedup_quality"] is None and q["speedup_noise_reasons"] is None and q["speedup_iqr_rel"] is None
    assert q["headline_quality"] == "noisy" and "SM clock moved" in q["headline_noise_reasons"][0]


def test_the_clock_explains_a_spread_only_when_it_moved_at_least_as_much():
    rec = {"headline_sm_clock_mhz_min": 1500, "headline_sm_clock_mhz_max": 1800}  # 20%
    assert clock_explains(0.19, rec) and not clock_explains(0.25, rec)
    assert not clock_explains(0.01, {})  # no clock reading: nothing explained
    older = {"headline_sm_clock_mhz_min": 1500, "sm_clock_mhz_max": 1800}  # the window's highest stands in
    assert clock_explains(0.19, older)


def test_paired_ratios_drop_unusable_pairs_and_cut_to_the_shorter_series():
    assert paired_ratios([1.0, 2.0, 0.0, 4.0, 5.0], [2.0, 2.0, 3.0, float("nan")]) == [2.0, 1.0]


# --- the terminal's "~" sits beside the speedup and reads the speedup's quality ---------------------------------

def _cell_text(records: list[dict]) -> str:
    import io

    from rich.console import Console

    from bakeoff.harness.cli.summary import CompactSummary

    console = Console(width=100, record=True, file=io.StringIO())
    console.print(CompactSummary(records))
    return " ".join(console.export_text().split())


def _row(backend: str, ms: float, **fields) -> dict:
    return {"case_id": f"gemm/M=8/bfloat16/{backend}", "workload": "gemm", "shape": "M=8", "dtype": "bfloat16",
            "backend": backend, "adapter": backend, "status": "ok", "device": "cuda:0", "headline_ms": ms,
            "headline_method": "cupti-span", "speedup_vs_eager": 2.0 / ms, "measurement_quality": "noisy",
            "noise_reasons": ["x"], "headline_quality": "noisy", "headline_noise_reasons": ["spread; SM clock moved"],
            **fields}


def test_a_clean_speedup_beside_a_clock_spread_latency_is_not_marked_a_noisy_speedup_is():
    eager = _row("eager", 2.0, headline_quality="clean", headline_noise_reasons=[])
    clean = _row("inductor", 1.0, speedup_quality="clean", speedup_noise_reasons=[])
    assert "~" not in _cell_text([eager, clean])
    noisy = _row("inductor", 1.0, speedup_quality="noisy", speedup_noise_reasons=["speedup: ratios drifted"])
    text = _cell_text([eager, noisy])
    assert "2× ~" in text and "~ = the speedup's paired samples were noisy" in text
    # eager's own case has no speedup: its mark is its latency's
    assert "baseline ~" in _cell_text([_row("eager", 2.0), clean])


def test_each_calls_own_clock_tells_whether_the_clock_accounts_for_a_latency_spread():
    """With the SM clock read during each profiled call (device_span_sm_clock_mhz) the spread is judged in SM
    cycles (time x clock): a clock settling under the calls accounts for it; a jump the clock did not make
    does not, even though the clock's range over the samples is wide enough to look like it."""
    clock = _settling_clock_mhz()
    backend, eager = _series(1.6, clock, 1), _series(1.8, clock, 2)
    per_call = {"device_span_sm_clock_mhz": list(clock), "eager_device_span_sm_clock_mhz": list(clock),
                "device_span_sm_clock_source": "marker-spin", "eager_device_span_sm_clock_source": "marker-spin"}
    q = _assess(_rec(backend, eager, clock, **per_call))
    # every reason is a spread the calls' own clocks account for: the latency is a figure at its clock, not noise
    assert q["headline_quality"] == "clock" and q["speedup_quality"] == "clean"
    assert all("in SM cycles (each call's time x its clock) the spread is" in r and r.endswith("the clock accounts "
               "for it") for r in q["headline_noise_reasons"]), q["headline_noise_reasons"]
    jumped = list(backend)
    jumped[N // 2:] = [x * 1.25 for x in jumped[N // 2:]]  # slower from the middle on, the clock unchanged by it
    q = _assess(_rec(jumped, eager, clock, **per_call))
    mine = [r for r in q["headline_noise_reasons"] if r.startswith("backend headline")]
    assert mine and all(r.endswith("not the clock alone") for r in mine), mine
    assert q["headline_quality"] == "noisy"  # eager's spread is the clock's, the backend's jump is not
    # a record without per-call clocks read on the device (none, or NVML's) falls back on the clock's range, which
    # names the clock but never clears the mark
    for nvml in ({}, {**per_call, "device_span_sm_clock_source": "nvml", "eager_device_span_sm_clock_source": "nvml"}):
        for series in (backend, jumped):
            q = _assess(_rec(series, eager, clock, **nvml))
            assert any("SM clock moved" in r for r in q["headline_noise_reasons"])
            assert not any("in SM cycles" in r for r in q["headline_noise_reasons"])
            assert q["headline_quality"] == "noisy"


def test_a_clock_quality_needs_every_reason_accounted_for_by_the_calls_own_clocks():
    """'clock' only where the per-call device clocks account for each reason: a lasting clock drop with both series
    steady in cycles is the clock's; the same drop where eager has no per-call clocks, an outsider on the GPU or a
    spread the clock did not make keeps the latency noisy; a steady series with no reason stays clean."""
    clock = _settling_clock_mhz()
    backend, eager = _series(1.6, clock, 1), _series(1.8, clock, 2)
    per_call = {"device_span_sm_clock_mhz": list(clock), "eager_device_span_sm_clock_mhz": list(clock),
                "device_span_sm_clock_source": "marker-spin", "eager_device_span_sm_clock_source": "marker-spin"}
    drop = {"headline_sm_clock_mhz_min": 1100, "headline_sm_clock_low_share": 0.4}  # 40% of readings >10% low
    q = _assess(_rec(backend, eager, clock, **per_call, **drop))
    assert q["headline_quality"] == "clock"
    assert any("under its median" in r for r in q["headline_noise_reasons"]), q["headline_noise_reasons"]
    # eager steady in time, without per-call clocks: the backend's spread is the clock's, the drop is not judged so
    no_eager_clocks = {**per_call, "eager_device_span_sm_clock_source": "nvml"}
    flat_eager = _series(1.8, np.full(N, 1755.0), 2)
    assert _assess(_rec(backend, flat_eager, clock, **no_eager_clocks))["headline_quality"] == "clock"
    q = _assess(_rec(backend, flat_eager, clock, **no_eager_clocks, **drop))
    assert q["headline_quality"] == "noisy"
    outsider = {"gpu_other_processes": [{"pid": 4242, "activity": "used", "gated_sibling": False}]}
    q = _assess(_rec(backend, eager, clock, **per_call, **outsider))
    assert q["headline_quality"] == "noisy" and any("pid 4242" in r for r in q["headline_noise_reasons"])
    level = np.full(N, 1755.0)
    steady = {**per_call, "device_span_sm_clock_mhz": list(level), "eager_device_span_sm_clock_mhz": list(level)}
    q = _assess(_rec(_series(1.6, level, 1), _series(1.8, level, 2), level, **steady))
    assert q["headline_quality"] == "clean" and q["headline_noise_reasons"] == []


def test_the_clock_during_each_call_is_the_readings_inside_its_window_else_the_nearest():
    from bakeoff.harness.measure.clocks import ClockSampler

    sampler = ClockSampler("cuda:0")
    sampler.times_s, sampler.samples_mhz = [0.0, 0.005, 0.010, 0.015, 0.020], [1980, 1950, 1800, 1500, 1470]
    assert sampler.at([(0.004, 0.011), (0.0161, 0.0162), (0.030, 0.031)]) == [1875.0, 1500.0, 1470.0]
    assert ClockSampler("cuda:0").at([(0.0, 1.0)]) == []  # no reading: no per-call clock
