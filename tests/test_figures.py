"""Latency figures without a GPU: the device timeline split into calls, the headline chosen the same way for
the backend and eager, the pipelined and single-call figures of a function of known duration, the SM clock
sampler, and the calls kept in flight when pipelining."""
import time
from types import SimpleNamespace

import pytest

from profiled_pass import FakePass

import bakeoff.harness.measure.figures as figures
from bakeoff.harness.measure.clocks import ClockSampler
from bakeoff.harness.measure.device_time import (MARK_NAME, KernelSpan, ProfileError, figures_of,
                                                 segment_calls)
from bakeoff.harness.measure.figures import BACKEND_TARGET, EAGER_TARGET, headline_fields, measure_figures
from bakeoff.harness.measure.timing import Stats, TimedCall, pipeline_calls, pipelined_latency

TIMING = {"warmup_s": 0.0, "budget_s": 0.2, "min_reps": 5, "max_reps": 15, "target_iqr": 1e-9, "flush_l2": False,
          "cuda_graph": False, "profile": True}


def _busy(ms: float):
    """A call lasting `ms` (a sleep: on a loaded machine a busy wait stretches with the CPU share it gets)."""
    return lambda: time.sleep(ms / 1e3)


def _marker(t: float) -> list[KernelSpan]:
    """A marker at `t` us: its three spins back to back, the warm-up 0.5 us, then 10 and 20 us, each plus 1 us of
    overhead (a 2000 MHz clock)."""
    name = f"at::cuda::(anonymous namespace)::{MARK_NAME}(long)"
    return [KernelSpan(name, t - 2.0, t - 0.5), KernelSpan(name, t, t + 11.0), KernelSpan(name, t + 12.0, t + 33.0)]


def _timeline(calls: list[list[tuple[float, float]]]) -> list[KernelSpan]:
    """Markers around each call's kernels (start, end in us), with a flush kernel before every first marker."""
    out, t = [], 0.0
    for kernels in calls:
        out.append(KernelSpan("vectorized_elementwise_kernel<FillFunctor>", t, t + 60.0))  # the flush
        out += _marker(t + 70.0)
        base = t + 110.0
        out += [KernelSpan(f"k{i}", base + s, base + e) for i, (s, e) in enumerate(kernels)]
        end = base + max(e for _, e in kernels)
        out += _marker(end + 10.0)
        t = end + 80.0
    return out


def test_calls_are_split_at_their_markers_and_the_flush_is_left_out():
    calls = [[(0.0, 100.0), (130.0, 180.0)], [(0.0, 90.0)], [(0.0, 100.0), (100.0, 150.0), (400.0, 410.0)]]
    segs = segment_calls(_timeline(calls)[::-1], len(calls))  # any order: sorted by start
    assert [s.kernels for s in segs] == [2, 1, 3]
    assert [s.span_ms for s in segs] == pytest.approx([0.180, 0.090, 0.410])   # first start to last end
    assert [s.sum_ms for s in segs] == pytest.approx([0.150, 0.090, 0.160])    # gaps are not in the sum
    figs = figures_of(segs)
    assert figs.span.median_ms == pytest.approx(0.180) and figs.kernel_count == 2 and figs.span.n == 3
    assert figs.span.method == "cupti-span" and figs.fields()["device_span_samples_ms"] == figs.span_samples_ms


def test_lost_markers_or_a_call_without_kernels_is_an_error_not_a_figure():
    timeline = _timeline([[(0.0, 10.0)], [(0.0, 10.0)]])
    with pytest.raises(ProfileError, match="11 marker kernels for 2 calls"):
        segment_calls([k for i, k in enumerate(timeline) if i != 1], 2)
    empty = [k for k in timeline if not k.name.startswith("k") or k.start_us > 200]
    with pytest.raises(ProfileError, match="call 0 launched no kernel"):
        segment_calls(empty, 2)


def _stats(ms: float, method: str) -> Stats:
    return Stats(ms, ms * 0.9, ms * 1.1, 0.02, ms, ms * 0.9, 10, method)


def _device(ms: float):
    from bakeoff.harness.measure.device_time import CallTimes

    calls = [CallTimes(ms, ms / 2, 3, (("k0", ms * 250), ("k1", ms * 250)))] * 5
    return figures_of(calls)


def test_gpu_headline_is_the_cupti_span_for_backend_and_eager_alike():
    timer = {BACKEND_TARGET: _stats(0.28, "host-clock+sync+flush"), EAGER_TARGET: _stats(0.31, "host-clock+sync+flush")}
    pipelined = {BACKEND_TARGET: _stats(0.12, "p"), EAGER_TARGET: _stats(0.2, "p")}
    out = headline_fields("cuda", timer, {BACKEND_TARGET: _device(0.10), EAGER_TARGET: _device(0.20)}, pipelined, None)
    assert out["headline_ms"] == pytest.approx(0.10) and out["eager_headline_ms"] == pytest.approx(0.20)
    assert out["headline_method"] == "cupti-span" and out["speedup_vs_eager"] == pytest.approx(2.0)
    assert "headline_fallback" not in out


def test_gpu_headline_without_a_profile_is_the_pipelined_figure_and_says_why():
    timer = {BACKEND_TARGET: _stats(0.28, "t"), EAGER_TARGET: _stats(0.31, "t")}
    pipelined = {BACKEND_TARGET: _stats(0.12, "host-clock, pipelined x50"), EAGER_TARGET: _stats(0.24, "p")}
    out = headline_fields("cuda", timer, None, pipelined, "timing.profile is off")
    assert out["headline_ms"] == pytest.approx(0.12) and out["speedup_vs_eager"] == pytest.approx(2.0)
    assert out["headline_method"] == "host-clock, pipelined x50"
    assert "timing.profile is off" in out["headline_fallback"]


def test_cpu_headline_is_the_timer_and_an_eager_case_is_its_own_reference():
    out = headline_fields("cpu", {BACKEND_TARGET: _stats(1.5, "host-clock+sync+flush")}, None,
                          {BACKEND_TARGET: _stats(1.2, "p")}, None)
    assert out["headline_ms"] == out["eager_headline_ms"] == 1.5 and out["speedup_vs_eager"] == 1.0
    assert out["headline_method"] == "host-clock+sync+flush" and "headline_fallback" not in out


def test_every_figure_of_a_cpu_case_of_known_duration():
    backend = TimedCall(BACKEND_TARGET, _busy(2.0), lambda: None)
    eager = TimedCall(EAGER_TARGET, _busy(6.0), lambda: None)
    out = measure_figures(backend, eager, "cpu", TIMING, capturable=False, bytes_per_call=1 << 20)
    # Calls of 2 ms and 6 ms: never less, and on a loaded machine not much more.
    for key in ("latency_ms_median", "headline_ms", "host_latency_ms", "pipelined_ms"):
        assert 2.0 <= out[key] < 5.0, (key, out[key])
    for key in ("eager_latency_ms_median", "eager_headline_ms", "eager_host_latency_ms", "eager_pipelined_ms"):
        assert 6.0 <= out[key] < 12.0, (key, out[key])
    assert out["headline_method"] == out["timing_method"] == "host-clock+sync"
    assert out["speedup_vs_eager"] == pytest.approx(out["eager_headline_ms"] / out["headline_ms"])
    assert out["speedup_vs_eager"] == out["timer_speedup_vs_eager"]  # on the CPU the headline is the timer's
    assert out["pipelined_calls"] >= 5 and "device_span_ms" not in out and "sm_clock_mhz" not in out


def test_gpu_case_gets_span_and_kernel_sum_for_both_targets(monkeypatch):
    for name in ("host_latency", "pipelined_latency"):
        monkeypatch.setattr(figures, name, lambda *a, **k: _stats(0.5, "x"))
    monkeypatch.setattr(figures, "measure", lambda targets, *a, **k: {t.name: _stats(0.4, "ev") for t in targets})
    profiled = {BACKEND_TARGET: _device(0.1), EAGER_TARGET: _device(0.3)}
    monkeypatch.setattr(figures, "run_pass", lambda targets, device, calls, flush, **_: FakePass(lambda: profiled))
    loads = []
    monkeypatch.setattr(figures, "sustain_load", lambda targets, seconds, device: loads.append(seconds) or seconds)
    out = measure_figures(TimedCall(BACKEND_TARGET, lambda: None, lambda: None),
                          TimedCall(EAGER_TARGET, lambda: None, lambda: None), "cuda", TIMING, capturable=False,
                          bytes_per_call=1)
    # sustained_s unset = auto: on a GPU the calls run back to back before the timer, and a top-up before the
    # CUPTI pass (the timer, host figures and replay ran back to back in between)
    assert loads == [figures.AUTO_SUSTAINED_S, figures.TOP_UP_S]
    assert out["sustained_s"] == pytest.approx(figures.AUTO_SUSTAINED_S + figures.TOP_UP_S)
    assert out["device_span_ms"] == pytest.approx(0.1) and out["eager_device_span_ms"] == pytest.approx(0.3)
    assert out["device_ms"] == pytest.approx(0.05) and out["kernel_count"] == 3 and out["eager_kernel_count"] == 3
    assert out["headline_ms"] == out["device_span_ms"] and out["speedup_vs_eager"] == pytest.approx(3.0)
    assert out["timer_speedup_vs_eager"] == pytest.approx(1.0)  # the timer's ratio, kept apart
    assert out["launch_overhead_share"] == pytest.approx(1 - 0.05 / 0.5)
    assert "sm_clock_mhz" in out or "sm_clock_error" in out  # a GPU case always says what the clock was


def test_each_profiled_call_gets_the_clock_read_during_its_window(monkeypatch):
    """The CUPTI pass's host window of each call goes to the span's clock sampler: one clock per span sample,
    for backend and eager; none where the sampler had no reading."""
    from dataclasses import replace

    for name in ("host_latency", "pipelined_latency"):
        monkeypatch.setattr(figures, name, lambda *a, **k: _stats(0.5, "x"))
    monkeypatch.setattr(figures, "measure", lambda targets, *a, **k: {t.name: _stats(0.4, "ev") for t in targets})
    monkeypatch.setattr(figures, "sustain_load", lambda targets, seconds, device: seconds)
    windows = [(float(i), i + 0.5) for i in range(5)]
    profiled = {BACKEND_TARGET: replace(_device(0.1), windows_s=windows),
                EAGER_TARGET: replace(_device(0.3), windows_s=[(w[0] + 0.6, w[1] + 0.6) for w in windows])}
    monkeypatch.setattr(figures, "run_pass", lambda targets, device, calls, flush, **_: FakePass(lambda: profiled))

    class Sampler:
        readings = True

        def __init__(self, device, *a):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

        def at(self, ws):
            return [1980.0 - 100 * lo for lo, _ in ws] if self.readings else []

        def fields(self):
            return {"sm_clock_mhz": 1800.0, "sm_clock_mhz_min": 1500, "sm_clock_mhz_max": 1980,
                    "sm_clock_samples": 10} if self.readings else {"sm_clock_error": "no sample taken"}

        def low_share(self, below):
            return 0.0

    monkeypatch.setattr(figures, "ClockSampler", Sampler)
    args = (TimedCall(BACKEND_TARGET, lambda: None, lambda: None), TimedCall(EAGER_TARGET, lambda: None, lambda: None),
            "cuda", TIMING)
    out = measure_figures(*args, capturable=False, bytes_per_call=1)
    assert out["device_span_sm_clock_mhz"] == [1980.0, 1880.0, 1780.0, 1680.0, 1580.0]
    assert out["eager_device_span_sm_clock_mhz"] == [1920.0, 1820.0, 1720.0, 1620.0, 1520.0]
    Sampler.readings = False
    out = measure_figures(*args, capturable=False, bytes_per_call=1)
    assert "device_span_sm_clock_mhz" not in out and "eager_device_span_sm_clock_mhz" not in out


def test_pipelined_figure_is_per_call():
    stats = pipelined_latency(_busy(1.0), lambda: None, "cpu", calls=10, reps=3)
    assert stats.n == 3 and 1.0 <= stats.median_ms < 2.5 and stats.method == "host-clock, pipelined x10"


def test_calls_in_flight_are_bounded_by_time_and_memory():
    assert pipeline_calls(0.001, 1) == 200          # tiny calls: the upper bound
    assert pipeline_calls(10.0, 1) == 5             # 20 ms of work is 2 calls: the lower bound wins
    assert pipeline_calls(0.1, 2**30) == 4          # 4 GiB of outputs in flight at most
    assert pipeline_calls(0.1, 2**33) == 2          # but always at least two calls
    assert pipeline_calls(25.0, 1) == 4             # fewer than 5 calls hold 100 ms of work: that many
    assert pipeline_calls(1000.0, 1) == 2           # a 1 s call: two calls, not five


def test_a_long_call_is_its_own_lead_in():
    from bakeoff.harness.measure.device_time import LEAD_IN_NONE_FROM_MS, lead_in_calls

    assert lead_in_calls(0.01) == 8 and lead_in_calls(1.7) == 2 and lead_in_calls(20.0) == 1
    assert lead_in_calls(LEAD_IN_NONE_FROM_MS) == 0 and lead_in_calls(1000.0) == 0


def test_clock_sampler_reads_the_sm_clock_through_the_window(monkeypatch):
    import bakeoff.harness.measure.clocks as clocks

    readings = iter(range(1500, 3000, 10))
    nvml = SimpleNamespace(NVML_CLOCK_SM=0, nvmlDeviceGetClockInfo=lambda handle, kind: next(readings))
    monkeypatch.setattr(clocks, "_nvml", lambda: nvml)
    monkeypatch.setattr(clocks, "_nvml_handle", lambda nv, index: "h")
    with ClockSampler("cuda:0", period_s=0.002) as sampler:
        time.sleep(0.05)
    got = sampler.fields()
    assert got["sm_clock_samples"] >= 5 and got["sm_clock_mhz_min"] == 1500
    assert got["sm_clock_mhz_min"] < got["sm_clock_mhz"] < got["sm_clock_mhz_max"]
    assert ClockSampler("cpu").__enter__().fields() == {}
    monkeypatch.setattr(clocks, "_nvml", lambda: None)
    with ClockSampler("cuda") as none:
        pass
    assert none.fields() == {"sm_clock_error": "NVML unavailable"}


def test_clock_sampler_counts_nvmls_clock_event_reasons_over_its_samples(monkeypatch):
    """With each clock sample, NVML's clock event reasons: `sm_clock_events` holds the share of the samples each
    reason was set in ('None' left out); an NVML without the call, or one whose call fails, leaves the clock
    figures as they were and writes no reasons."""
    import bakeoff.harness.measure.clocks as clocks

    masks = iter([4, 4, 5, 1] * 100)  # SwPowerCap = 4, GpuIdle = 1
    nvml = SimpleNamespace(NVML_CLOCK_SM=0, nvmlDeviceGetClockInfo=lambda handle, kind: 1500,
                           nvmlDeviceGetCurrentClocksEventReasons=lambda handle: next(masks),
                           nvmlClocksThrottleReasonGpuIdle=1, nvmlClocksThrottleReasonSwPowerCap=4,
                           nvmlClocksThrottleReasonNone=0)
    monkeypatch.setattr(clocks, "_nvml", lambda: nvml)
    monkeypatch.setattr(clocks, "_nvml_handle", lambda nv, index: "h")
    with ClockSampler("cuda:0", period_s=10.0) as sampler:  # one sample on entry, one on exit
        pass
    for _ in range(2):
        sampler._read()
    assert sampler.fields()["sm_clock_events"] == {"GpuIdle": 0.5, "SwPowerCap": 0.75}

    def broken(handle):
        raise RuntimeError("NVML: not supported")
    nvml.nvmlDeviceGetCurrentClocksEventReasons = broken
    with ClockSampler("cuda:0", period_s=10.0) as failing:
        pass
    got = failing.fields()
    assert "sm_clock_events" not in got and got["sm_clock_mhz"] == 1500 and "sm_clock_error" not in got


def _record(backend: str, timer_ms: float, headline: float | None, method: str = "cupti-span") -> dict:
    rec = {"workload": "ew", "shape": "M=8", "dtype": "bfloat16", "backend": backend, "status": "ok",
           "latency_ms_median": timer_ms, "compile_total_s": 2.0, "err_rel_l2_vs_fp64": 1e-3,
           "timing_method": "host-clock+sync+flush"}
    if headline is not None:
        rec.update(headline_ms=headline, headline_p20_ms=headline * 0.98, headline_p80_ms=headline * 1.02,
                   headline_method=method)
    return rec


def test_recommendation_and_report_rank_by_the_headline_not_the_timer():
    from bakeoff.results.report.report_tables import _latency
    from bakeoff.results.report.weights import DEFAULT_WEIGHTS, recommend

    # The case: XLA host-timed at 0.28 ms, its kernels 0.10 ms; Inductor 0.0975 ms event-timed, 0.12
    # ms span. By the timer XLA looks 2.9x slower; by one figure for both it is the faster.
    cases = [_record("inductor", 0.0975, 0.12), _record("xla", 0.28, 0.10)]
    [rec] = recommend(cases, DEFAULT_WEIGHTS)
    assert rec.backend == "xla" and "0.1 ms (cupti-span)" in rec.reason
    assert "different methods" not in rec.reason
    cell = _latency(cases[1])
    assert cell.sort == pytest.approx(0.10) and "cupti-span" in cell.text
    # An old record (no headline) reads with its timer's figure, and the reason says the methods differ.
    [old] = recommend([_record("inductor", 0.0975, None), _record("xla", 0.28, 0.10)], DEFAULT_WEIGHTS)
    assert old.backend == "inductor" and "latencies of different methods compared" in old.reason


def test_sustained_load_runs_before_sampling_and_is_recorded():
    calls = []
    backend = TimedCall(BACKEND_TARGET, lambda: calls.append(time.perf_counter()), lambda: None)
    t0 = time.perf_counter()
    out = measure_figures(backend, None, "cpu", {**TIMING, "sustained_s": 0.2}, capturable=False, bytes_per_call=1)
    assert out["sustained_s"] >= 0.2
    assert figures.sustained_s({}, "cpu") == 0.0 and figures.sustained_s({"sustained_s": "auto"}, "cpu") == 0.0
    assert figures.sustained_s({"sustained_s": "auto"}, "cuda:1") == figures.AUTO_SUSTAINED_S
    assert figures.sustained_s({"sustained_s": 0}, "cuda") == 0.0  # set to 0: none, on a GPU too
    assert sum(1 for t in calls if t < t0 + 0.2) > 100  # the load ran back to back first


def test_timing_options_are_checked_at_load():
    from bakeoff.harness.config.schema import parse_config
    from bakeoff.harness.config.yaml_lines import ConfigError

    base = "name: t\nworkloads: [softmax]\ntiming: {%s}\n"
    cfg, _ = parse_config(base % "sustained_s: 0.5, profile_calls: 10", "<t>")
    assert cfg.timing.sustained_s == 0.5 and cfg.timing.profile_calls == 10
    for bad in ("sustained_s: -1", "profile_calls: 1"):
        with pytest.raises(ConfigError, match=bad.split(":")[0]):
            parse_config(base % bad, "<t>")


def test_a_weighted_pick_slower_than_eager_says_so_where_eager_was_only_the_baseline():
    from bakeoff.results.report.weights import DEFAULT_WEIGHTS, recommend

    slow = [{**_record("iree", 1.0, 1.0), "speedup_vs_eager": 0.81}, {**_record("xla", 1.3, 1.3), "speedup_vs_eager": 0.62}]
    [rec] = recommend(slow, DEFAULT_WEIGHTS)
    assert rec.backend == "iree" and "slower than eager (0.81×)" in rec.reason
    [fast] = recommend([{**slow[0], "speedup_vs_eager": 1.2}, slow[1]], DEFAULT_WEIGHTS)
    assert "slower than eager" not in fast.reason
    eager = {**_record("eager", 0.81, 0.81), "speedup_vs_eager": 1.0}  # eager a candidate: the weights chose
    assert all("slower than eager" not in r.reason for r in recommend(slow + [eager], DEFAULT_WEIGHTS))
