"""The SM clock read by the CUPTI pass's markers, without a GPU: device timelines built from a known clock per
marker (each marker a warm-up spin, then spins of MARK_SHORT_CYCLES and MARK_LONG_CYCLES plus an overhead), split
into calls,
and carried to the record; broken pairs give no clock, malformed timelines an error."""
from dataclasses import replace

import pytest

from profiled_pass import FakePass

import bakeoff.harness.measure.figures as figures
from bakeoff.harness.measure.device_time import MARK_NAME, KernelSpan, ProfileError, figures_of, segment_calls
from bakeoff.harness.measure.figures import BACKEND_TARGET, EAGER_TARGET, measure_figures
from bakeoff.harness.measure.marker_clock import MARK_LONG_CYCLES, MARK_SHORT_CYCLES, MARK_WARM_CYCLES, spin_pair_mhz
from bakeoff.harness.measure.noise import cycles
from bakeoff.harness.measure.timing import Stats, TimedCall
from bakeoff.results.record import ColdOutput

SPIN = f"void at::cuda::(anonymous namespace)::{MARK_NAME}(long)"
TIMING = {"warmup_s": 0.0, "budget_s": 0.2, "min_reps": 5, "max_reps": 15, "target_iqr": 1e-9, "flush_l2": True,
          "cuda_graph": False, "profile": True}


def _marker(t_us: float, mhz: float, overhead_us: float = 1.7, long_us: float | None = None,
            cold_us: float = 0.4) -> list[KernelSpan]:
    """A marker starting at `t_us`: the warm-up spin (`cold_us` longer: it starts cold), the short spin, then
    the long one, back to back on the same stream, each `overhead_us` plus its cycles at `mhz` (cycles / MHz =
    µs); `long_us` overrides the long spin's duration."""
    warm = cold_us + overhead_us + MARK_WARM_CYCLES / mhz
    short = overhead_us + MARK_SHORT_CYCLES / mhz
    long = overhead_us + MARK_LONG_CYCLES / mhz if long_us is None else long_us
    t1 = t_us + warm + 0.8
    return [KernelSpan(SPIN, t_us, t_us + warm), KernelSpan(SPIN, t1, t1 + short),
            KernelSpan(SPIN, t1 + short + 0.8, t1 + short + 0.8 + long)]


def _timeline(calls_us: list[float], clocks_mhz: list[float], overheads_us: list[float] | None = None,
              lead_in: int = 2) -> list[KernelSpan]:
    """Per call: `lead_in` calls of the target and the flush (outside every marker), a marker, the call (two
    kernels over `calls_us[j]` µs), a marker. Marker m reads `clocks_mhz[m]` (2 per call)."""
    out, t = [], 0.0
    overheads_us = overheads_us or [1.7] * len(clocks_mhz)
    for j, call_us in enumerate(calls_us):
        for _ in range(lead_in):
            out.append(KernelSpan("gemm_lead_in", t, t + call_us))
            t += call_us + 2.0
        out.append(KernelSpan("vectorized_elementwise_kernel<FillFunctor>", t, t + 60.0))  # the flush
        out += _marker(t + 80.0, clocks_mhz[2 * j], overheads_us[2 * j])
        t = out[-1].end_us + 15.0
        out += [KernelSpan("gemm", t, t + call_us * 0.75), KernelSpan("epilogue", t + call_us * 0.8, t + call_us)]
        out += _marker(t + call_us + 20.0, clocks_mhz[2 * j + 1], overheads_us[2 * j + 1])
        t = out[-1].end_us + 30.0
    return out


def test_each_call_gets_the_mean_of_the_clocks_read_before_and_after_it():
    clocks = [1980.0, 1950.0, 1700.0, 1690.0, 1110.0, 1200.0]
    calls_us = [400.0, 450.0, 700.0]
    segs = segment_calls(_timeline(calls_us, clocks, overheads_us=[1.2, 3.0, 1.7, 0.9, 2.2, 1.5])[::-1], 3)
    # the markers' own durations and the lead-in are in no call: each call's span and sum are its own kernels'
    assert [s.span_ms for s in segs] == pytest.approx([c / 1e3 for c in calls_us])
    assert [s.sum_ms for s in segs] == pytest.approx([c * 0.95 / 1e3 for c in calls_us])
    assert [s.kernels for s in segs] == [2, 2, 2]
    # the overhead differs from marker to marker and cancels within each pair
    assert [s.clock_edges_mhz for s in segs] == [pytest.approx(clocks[i:i + 2]) for i in (0, 2, 4)]
    figs = figures_of(segs)
    assert figs.span_sm_clock_mhz == pytest.approx([1965.0, 1695.0, 1155.0])
    assert figs.span_sm_clock_source == "marker-spin" and figs.span_sm_clock_error is None
    fields = figs.fields("eager_")
    assert fields["eager_device_span_sm_clock_mhz"] == pytest.approx([1965.0, 1695.0, 1155.0])
    assert fields["eager_device_span_sm_clock_source"] == "marker-spin"
    assert fields["eager_device_span_sm_clock_edges_mhz"] == [pytest.approx(clocks[i:i + 2]) for i in (0, 2, 4)]
    assert "eager_device_span_sm_clock_error" not in fields


def test_a_clock_read_at_cuptis_timestamp_step_is_within_a_percent():
    """CUPTI's timestamps on Hopper step every 32 ns: each start and end rounded to it, the worst case near the
    highest clock, the reading still lands within 1% of the clock the spins ran at."""
    step = 0.032
    for mhz in (1110.0, 1500.0, 1980.0):
        for offset in (0.0, 0.011, 0.023):
            _, short, long = _marker(100.0 + offset, mhz)
            q = [round(x / step) * step for x in (short.start_us, short.end_us, long.start_us, long.end_us)]
            got, why = spin_pair_mhz(q[1] - q[0], q[3] - q[2])
            assert why is None and got == pytest.approx(mhz, rel=0.01), (mhz, offset, got)


def test_a_broken_pair_costs_its_calls_their_clock_never_gives_a_wrong_one():
    clocks = [1900.0] * 6
    timeline = _timeline([300.0, 300.0, 300.0], clocks)
    spins = [i for i, k in enumerate(timeline) if MARK_NAME in k.name]
    short, long = timeline[spins[7]], timeline[spins[8]]  # call 1's opening marker: its long spin no longer
    timeline[spins[8]] = KernelSpan(long.name, long.start_us, long.start_us + (short.end_us - short.start_us))
    segs = segment_calls(timeline, 3)
    assert segs[1].clock_edges_mhz[0] is None and segs[1].clock_edges_mhz[1] == pytest.approx(1900.0)
    assert "not longer than its short one" in segs[1].clock_error and "before it" in segs[1].clock_error
    assert segs[0].clock_error is None and segs[2].clock_error is None
    figs = figures_of(segs)
    assert figs.span_sm_clock_mhz == [] and figs.span_sm_clock_source is None  # no per-call list: noise needs all
    assert figs.span_sm_clock_error.startswith("1 of 3 profiled calls without a marker clock; call 1: ")
    assert [s.span_ms for s in segs] == pytest.approx([0.3] * 3)  # the times stay
    fields = figs.fields()
    assert "device_span_sm_clock_mhz" not in fields and "device_span_sm_clock_source" not in fields
    assert fields["device_span_sm_clock_edges_mhz"][1][0] is None
    assert "not longer" in fields["device_span_sm_clock_error"]


@pytest.mark.parametrize("long_extra_us, words", [(0.5, "outside 100-3500 MHz"), (400.0, "outside 100-3500 MHz"),
                                                  (-3.0, "not longer")])
def test_an_implausible_reading_is_no_reading(long_extra_us: float, words: str):
    """A difference of 0.5 µs reads 40000 MHz, one of 400 µs 50 MHz: neither is a clock."""
    timeline = _timeline([200.0, 200.0], [1800.0] * 4)
    spins = [i for i, k in enumerate(timeline) if MARK_NAME in k.name]
    short, long = timeline[spins[10]], timeline[spins[11]]  # call 1's closing marker
    duration = short.end_us - short.start_us + long_extra_us
    timeline[spins[11]] = KernelSpan(long.name, long.start_us, long.start_us + duration)
    segs = segment_calls(timeline, 2)
    assert segs[1].clock_edges_mhz[1] is None and words in segs[1].clock_error and "after it" in segs[1].clock_error
    assert figures_of(segs).span_sm_clock_mhz == []


def test_a_lone_marker_or_an_old_single_spin_timeline_is_an_error():
    timeline = _timeline([200.0, 200.0], [1800.0] * 4)
    spins = [i for i, k in enumerate(timeline) if MARK_NAME in k.name]
    with pytest.raises(ProfileError, match="11 marker kernels for 2 calls \\(expected 12, 3 spins per marker"):
        segment_calls([k for i, k in enumerate(timeline) if i != spins[5]], 2)  # CUPTI dropped one spin
    single = [k for n, k in enumerate(timeline) if n not in spins or spins.index(n) % 3 == 0]  # one spin a marker
    with pytest.raises(ProfileError, match="4 marker kernels for 2 calls \\(expected 12"):
        segment_calls(single, 2)
    pairs = [k for n, k in enumerate(timeline) if n not in spins or spins.index(n) % 3 != 0]  # two spins a marker
    with pytest.raises(ProfileError, match="8 marker kernels for 2 calls \\(expected 12"):
        segment_calls(pairs, 2)


def test_a_backends_own_spin_kernel_is_an_error_not_a_marker():
    timeline = _timeline([200.0, 200.0], [1800.0] * 4)
    inside = next(k for k in timeline if k.name == "gemm")
    extra = KernelSpan(SPIN, inside.end_us + 1.0, inside.end_us + 5.0)  # a call that launched a spin_kernel
    with pytest.raises(ProfileError, match="13 marker kernels for 2 calls"):
        segment_calls(timeline + [extra], 2)
    # a dropped spin and the backend's own one: the count matches, the pairs do not
    spins = [i for i, k in enumerate(timeline) if MARK_NAME in k.name]
    with pytest.raises(ProfileError, match="marker 1's 3 spin kernels are split by 'epilogue'"):
        segment_calls([k for i, k in enumerate(timeline) if i != spins[3]] + [extra], 2)


def _stats(ms: float, method: str) -> Stats:
    return Stats(ms, ms * 0.9, ms * 1.1, 0.02, ms, ms * 0.9, 10, method)


class _Nvml:
    """NVML's sampler over the CUPTI pass: a steady 1755 MHz that follows none of the calls."""

    def __init__(self, device, *a):
        self.samples_mhz, self.times_s = [1755, 1755, 1770], [0.0, 1.0, 2.0]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def at(self, windows):
        return [1755.0 for _ in windows]

    def fields(self):
        return {"sm_clock_mhz": 1755.0, "sm_clock_mhz_min": 1755, "sm_clock_mhz_max": 1770, "sm_clock_samples": 3}

    def low_share(self, below):
        return 0.0


def _case(monkeypatch, eager_clocks: list[float]) -> dict:
    """measure_figures on "cuda" with the CUPTI pass's figures parsed from marked timelines: the backend's calls
    take 200 kcycles at the clock of each call, eager's 400 kcycles at `eager_clocks` (4 calls each)."""
    backend_clocks = [1980.0, 1940.0, 1700.0, 1660.0, 1500.0, 1500.0, 1300.0, 1260.0]
    profiled = {}
    for name, kcycles, clocks in ((BACKEND_TARGET, 200.0, backend_clocks), (EAGER_TARGET, 400.0, eager_clocks)):
        calls_us = [kcycles * 1e3 / ((clocks[2 * j] + clocks[2 * j + 1]) / 2) for j in range(4)]
        figs = figures_of(segment_calls(_timeline(calls_us, clocks), 4))
        profiled[name] = replace(figs, windows_s=[(float(j), j + 0.5) for j in range(4)])
    for stub in ("host_latency", "pipelined_latency"):
        monkeypatch.setattr(figures, stub, lambda *a, **k: _stats(0.5, "x"))
    monkeypatch.setattr(figures, "measure", lambda targets, *a, **k: {t.name: _stats(0.4, "ev") for t in targets})
    monkeypatch.setattr(figures, "sustain_load", lambda targets, seconds, device: seconds)
    monkeypatch.setattr(figures, "run_pass", lambda *a, **k: FakePass(lambda: profiled))
    monkeypatch.setattr(figures, "ClockSampler", _Nvml)
    return measure_figures(TimedCall(BACKEND_TARGET, lambda: None, lambda: None),
                           TimedCall(EAGER_TARGET, lambda: None, lambda: None), "cuda", TIMING, capturable=False,
                           bytes_per_call=1)


def test_the_record_takes_the_markers_clock_where_every_call_has_one(monkeypatch):
    eager_clocks = [1960.0, 1920.0, 1680.0, 1640.0, 1480.0, 1480.0, 1280.0, 1240.0]
    out = _case(monkeypatch, eager_clocks)
    assert out["device_span_sm_clock_mhz"] == pytest.approx([1960.0, 1680.0, 1500.0, 1280.0])
    assert out["eager_device_span_sm_clock_mhz"] == pytest.approx([1940.0, 1660.0, 1480.0, 1260.0])
    assert out["device_span_sm_clock_source"] == out["eager_device_span_sm_clock_source"] == "marker-spin"
    # the spans moved by 53% with the clock; in cycles they do not move
    spans = out["device_span_samples_ms"]
    assert max(spans) / min(spans) > 1.5
    assert cycles(spans, out["device_span_sm_clock_mhz"]) == pytest.approx([200.0] * 4)
    # the headline's clock figures from the same per-call clocks, both targets; NVML's window figures kept
    assert out["headline_sm_clock_source"] == "marker-spin"
    assert out["headline_sm_clock_mhz_median"] == pytest.approx((1500.0 + 1660.0) / 2)
    assert (out["headline_sm_clock_mhz_min"], out["headline_sm_clock_mhz_max"]) == (1260, 1960)
    assert out["headline_sm_clock_low_share"] == pytest.approx(2 / 8)  # 1280 and 1260 under 0.9 x 1580
    assert out["sm_clock_mhz"] == 1755.0
    rec = ColdOutput.model_validate({**out, "status": "ok"})  # every new field is declared, typed as written
    assert rec.device_time.span_sm_clock_source == "marker-spin"
    assert rec.eager_device_time.span_sm_clock_edges_mhz[0] == pytest.approx((1960.0, 1920.0))
    assert rec.model_dump()["eager_device_span_sm_clock_edges_mhz"][3] == pytest.approx((1280.0, 1240.0))


def test_nvml_stands_in_for_a_target_whose_markers_gave_no_clock(monkeypatch):
    eager_clocks = [1960.0, 1920.0, 1680.0, 1640.0, 1480.0, 1480.0, 1280.0, 5.0e4]  # the last marker: no clock
    out = _case(monkeypatch, eager_clocks)
    assert out["device_span_sm_clock_source"] == "marker-spin"
    assert out["eager_device_span_sm_clock_source"] == "nvml"
    assert out["eager_device_span_sm_clock_mhz"] == [1755.0] * 4
    assert out["eager_device_span_sm_clock_error"].startswith("1 of 4 profiled calls without a marker clock; call 3")
    assert out["eager_device_span_sm_clock_edges_mhz"][3][1] is None
    # not every target has marker clocks: the headline's clock figures are NVML's, and say so
    assert out["headline_sm_clock_source"] == "nvml" and out["headline_sm_clock_mhz_median"] == 1755.0
    rec = ColdOutput.model_validate({**out, "status": "ok"})
    assert rec.eager_device_time.span_sm_clock_edges_mhz[3][1] is None
