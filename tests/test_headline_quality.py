"""Quality per figure: the headline judged by its own samples and what can disturb its method, the host-clock
figures by host load (harness/measure/noise.py), on synthetic records."""
from __future__ import annotations

import random

from bakeoff.harness.measure.noise import assess


def _samples(median: float, n: int = 30, spread: float = 0.01, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [median * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def _gpu_rec(**fields) -> dict:
    """A quiet GPU case whose headline is the CUPTI span."""
    rec = {"samples_ms": _samples(1.0), "latency_iqr_rel": 0.01, "eager_samples_ms": _samples(2.0, seed=1),
           "headline_method": "cupti-span", "headline_iqr_rel": 0.01,
           "device_span_samples_ms": _samples(0.9, seed=2), "eager_device_span_samples_ms": _samples(1.8, seed=3),
           "host_other_cpu_share": 0.01, "host_cpus": 16, "host_run_delay_share": 0.001, "gpu_other_processes": [],
           "headline_sm_clock_mhz_median": 1980.0, "headline_sm_clock_mhz_min": 1965}
    rec.update(fields)
    return rec


def test_a_quiet_gpu_case_is_clean_in_every_figure():
    q = assess(_gpu_rec(), target_iqr=0.05, paired=True, host_clock=False)
    assert (q["measurement_quality"], q["headline_quality"], q["host_quality"]) == ("clean", "clean", "clean")
    assert q["headline_noise_reasons"] == [] and q["host_noise_reasons"] == []


def test_host_load_leaves_a_device_timed_headline_clean_and_marks_the_host_figures():
    q = assess(_gpu_rec(host_other_cpu_share=0.75, host_run_delay_share=0.2), target_iqr=0.05, paired=True,
               host_clock=True)  # a backend timed with the host clock: its timer figures are host figures
    assert q["headline_quality"] == "clean"
    assert q["host_quality"] == "noisy" and len(q["host_noise_reasons"]) == 2
    assert q["measurement_quality"] == "noisy"  # the case's summary still says so


def test_host_load_makes_a_host_timed_headline_noisy():
    rec = {"samples_ms": _samples(1.0), "latency_iqr_rel": 0.01, "eager_samples_ms": _samples(2.0, seed=1),
           "headline_method": "host-clock", "headline_iqr_rel": 0.01, "host_other_cpu_share": 0.5, "host_cpus": 2}
    q = assess(rec, target_iqr=0.05, paired=True, host_clock=True)
    assert q["headline_quality"] == "noisy" and "host load" in q["headline_noise_reasons"][0]
    assert q["host_quality"] == "noisy"


def test_a_drifting_span_series_is_noisy():
    span = [0.9] * 10 + [1.0] * 10 + [1.2] * 10  # the level moved by a third during the headline's samples
    q = assess(_gpu_rec(device_span_samples_ms=span), target_iqr=0.05, paired=True, host_clock=False)
    assert q["headline_quality"] == "noisy" and "backend headline drifted" in q["headline_noise_reasons"][0]
    assert q["host_quality"] == "clean"


def test_the_eager_references_drifting_headline_is_noisy():
    span = [1.8] * 10 + [2.4] * 20
    q = assess(_gpu_rec(eager_device_span_samples_ms=span), target_iqr=0.05, paired=True, host_clock=False)
    assert q["headline_quality"] == "noisy" and "eager headline" in q["headline_noise_reasons"][0]


def test_another_gpu_process_makes_a_device_headline_noisy():
    q = assess(_gpu_rec(gpu_other_processes=[{"pid": 4242, "activity": "used"}]), target_iqr=0.05, paired=True,
               host_clock=False)
    assert q["headline_quality"] == "noisy" and "4242" in q["headline_noise_reasons"][0]


def test_an_sm_clock_drop_during_the_headline_is_a_reason_beside_a_spread_of_its_samples():
    """Older records (no share of low readings): any reading over 10% under the median is a reason, where the
    samples spread; with steady samples the drop did not move the latency."""
    spread = {"device_span_samples_ms": _samples(0.9, seed=2)[:20] + [1.2] * 10}  # a third of them 33% slower
    q = assess(_gpu_rec(headline_sm_clock_mhz_min=1110, headline_iqr_rel=None, **spread), target_iqr=0.05,
               paired=True, host_clock=False)
    assert q["headline_quality"] == "noisy"
    assert any("SM clock dropped to 1110 MHz" in r for r in q["headline_noise_reasons"])
    q = assess(_gpu_rec(headline_sm_clock_mhz_min=1110), target_iqr=0.05, paired=True, host_clock=False)
    assert q["headline_quality"] == "clean" and q["headline_noise_reasons"] == []


def test_a_short_clock_dip_is_not_noise_of_the_headline_a_lasting_drop_is_where_the_spans_moved():
    """A dip in one of 40 clock readings cannot move the median of the spans; a drop over a fifth of them can,
    and is a reason where the spans show it (here: they drift), not where they held."""
    from bakeoff.harness.measure.clocks import ClockSampler
    from bakeoff.harness.measure.noise import CLOCK_DROP_LIMIT

    sampler = ClockSampler("cuda")
    sampler.samples_mhz = [1980] * 39 + [1380]
    dip = sampler.low_share(CLOCK_DROP_LIMIT)
    assert dip == 1 / 40
    q = assess(_gpu_rec(headline_sm_clock_mhz_min=1380, headline_sm_clock_low_share=dip), target_iqr=0.05,
               paired=True, host_clock=False)
    assert q["headline_quality"] == "clean", q["headline_noise_reasons"]
    sampler.samples_mhz = [1980] * 28 + [1500] * 12
    lasting = sampler.low_share(CLOCK_DROP_LIMIT)
    assert lasting == 12 / 40
    q = assess(_gpu_rec(headline_sm_clock_mhz_min=1500, headline_sm_clock_low_share=lasting), target_iqr=0.05,
               paired=True, host_clock=False)
    assert q["headline_quality"] == "clean", "the spans held while the clock read low: the latency did not move"
    late = _samples(0.9, seed=2)[:28] + [1.05] * 12  # the last 30% of the calls slower: drift
    q = assess(_gpu_rec(headline_sm_clock_mhz_min=1500, headline_sm_clock_low_share=lasting, headline_iqr_rel=None,
                        device_span_samples_ms=late), target_iqr=0.05, paired=True, host_clock=False)
    assert q["headline_quality"] == "noisy"
    assert any("for 30% of the headline's clock readings (lowest 1500 MHz" in r for r in q["headline_noise_reasons"])
    assert ClockSampler("cuda").low_share(CLOCK_DROP_LIMIT) is None


def test_without_a_headline_method_the_host_clock_flag_decides():
    q = assess({"samples_ms": _samples(1.0), "latency_iqr_rel": 0.01, "host_other_cpu_share": 0.5, "host_cpus": 2},
               target_iqr=0.05, paired=False, host_clock=False)
    assert q["headline_quality"] == "clean" and q["host_quality"] == "noisy"
