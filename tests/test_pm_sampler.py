"""The PM sampler's per-call SM clock (harness/measure/pm_sampler.py) on synthetic sample streams: its units, the
offset that puts the samples on the profiler's timeline, and that the pass stands without the sampler."""
from __future__ import annotations

import pytest

from bakeoff.harness.measure import pm_sampler as ps
from bakeoff.harness.measure.device_time import CallTimes, DeviceFigures, sampled_clocks, with_sampled_clock
from bakeoff.harness.measure.figures import headline_clock_fields
from bakeoff.harness.measure.timing import stats
from bakeoff.results.call_clocks import MARKER_SOURCE, PM_SOURCE, per_call_clocks

DT = ps.INTERVAL_NS


def timeline(groups: int = 12):
    """A CUPTI pass as the device runs it: per call a lead-in call, the flush, a marker, the profiled call, a
    marker, then an idle gap of varying length (all SMs busy in calls and flushes, one of 132 in a marker, none
    idle). The profiled calls run at 1300 MHz, everything else at 1900. Returns the calls' and markers' windows
    (ns) and a function giving (busy share, MHz) at a time."""
    parts, t = [], 1_000_000
    calls, markers = [], []
    for g in range(groups):
        for kind, length in (("lead", 400_000), ("flush", 100_000), ("marker", 50_000), ("call", 400_000),
                             ("marker", 50_000), ("idle", 200_000 + 37_000 * (g % 5))):
            parts.append((t, t + length, kind))
            (calls if kind == "call" else markers if kind == "marker" else []).append((t, t + length))
            t += length
    busy = {"lead": 1.0, "flush": 1.0, "marker": 1 / 132, "call": 1.0, "idle": 0.0}

    def at(x: float) -> tuple[float, float]:
        for a, b, kind in parts:
            if a <= x < b:
                return busy[kind], 1300.0 if kind == "call" else 1900.0
        return 0.0, 1900.0
    return calls, markers, at, t


def sampled(at, end_ns: int, offset_ns: int, ticks_per_ns: float):
    """Samples every DT over [0, end), stamped offset_ns later in `ticks_per_ns` ticks, as the sampler gives them
    (the first spanning the pause before the pass, one stamped 0)."""
    raw = [(0, 0, 0.0, 0.0), (1, int((offset_ns - 10**9) * ticks_per_ns), 9e9, 1.0)]
    for s in range(0, end_ns, DT):
        busy, mhz = at(s + DT / 2)
        cycles = mhz * DT / 1e3
        raw.append((round((s + offset_ns) * ticks_per_ns), round((s + DT + offset_ns) * ticks_per_ns), cycles,
                    cycles * busy))
    return raw


def test_samples_in_ticks_come_back_in_ns_without_the_empty_and_the_pause():
    raw = [(0, 0, 1.0, 1.0), (2_100, 44_100, 5.0, 5.0), (44_100, 86_100, 6.0, 3.0), (86_100, 9_000_000, 1.0, 1.0)]
    got = ps.in_ns(raw)
    assert [round(s) for s, _, _, _ in got] == [1_000, 21_000]
    assert got[1][1] - got[1][0] == pytest.approx(DT) and got[1][2:] == (6.0, 3.0)
    assert ps.in_ns([(100, 100 + DT, 1.0, 1.0)])[0][:2] == (100, 100 + DT)  # already ns: as they are


@pytest.mark.parametrize("offset_ns, ticks_per_ns, groups", [(2_930_000, 1.0, 12), (146_749_000_000, 2.10005, 12),
                                                              (3_000_000, 2.1, 200)])
def test_the_fit_puts_the_calls_on_the_samples_and_reads_their_own_clock(offset_ns, ticks_per_ns, groups):
    # 200 groups: the pass repeats every 5, and a lag of 5 calls fits as well but for the ends
    calls, markers, at, end = timeline(groups)
    samples = ps.in_ns(sampled(at, end, offset_ns, ticks_per_ns))
    shift, busy = ps.fit_offset(calls, samples, markers)
    assert shift is not None and abs(shift - offset_ns) <= DT and busy > 0.95
    clocks = ps.call_clocks(calls, samples, shift)
    assert all(c == pytest.approx(1300.0, rel=0.01) for c in clocks)
    # the lead-in calls are as busy as the profiled ones: only the markers tell the two apart
    if groups == 12:
        assert abs(ps.fit_offset(calls, samples)[0] - offset_ns) > 100_000
    lead_shift = offset_ns - 550_000
    assert ps.busy_at(calls, samples, lead_shift)[0] == pytest.approx(1.0)
    assert ps.busy_at(markers, samples, lead_shift, whole=False)[0] > 0.5


def test_calls_that_do_not_keep_the_sms_busy_get_no_offset_and_short_calls_no_clock():
    calls, markers, at, end = timeline(6)
    quiet = [(s, e, c, a * 0.2) for s, e, c, a in ps.in_ns(sampled(at, end, 5_000, 1.0))]
    assert ps.fit_offset(calls, quiet, markers)[0] is None
    samples = ps.in_ns(sampled(at, end, 5_000, 1.0))
    short = [(a, a + DT) for a, _ in calls]  # one interval: no sample lies wholly inside unless aligned
    got = ps.call_clocks(short + [(calls[0][0], calls[0][0] + DT // 2)], samples, 5_000 + DT // 3)
    assert got[-1] is None


def test_a_pass_decodes_no_more_samples_than_its_time_allows(monkeypatch):
    asked = {}

    class Data(list):
        metrics = list(ps.METRICS)

        def __iter__(self):  # evaluation, in cupti-python: the collector must be gone by then
            asked["evaluated after disable"] = asked.get("disabled", False)
            return super().__iter__()

    class Sample:
        def __init__(self, t):
            self.start_timestamp, self.end_timestamp, self.metric_values = t, t + DT, [17.0, 16.0]

    class Collector:
        def start(self):
            pass

        def stop(self):
            pass

        def disable(self):
            asked["disabled"] = True

        def decode(self, max_samples):
            asked["max_samples"] = max_samples
            return Data(Sample(1_000 + DT * i) for i in range(5))

    monkeypatch.delenv(ps.ENV_OFF, raising=False)
    monkeypatch.setitem(ps._STATE, "why", None)
    monkeypatch.setattr(ps, "collector", lambda index: Collector())
    with ps.Sampling(0) as pm:
        pass
    assert "evaluated after disable" not in asked  # decoded as the pass ends, evaluated only when read
    assert pm.error is None and len(pm.samples) == 5 and pm.samples[0] == (1_000, 1_000 + DT, 17.0, 16.0)
    assert 1024 <= asked["max_samples"] < 1100 and asked["disabled"] and asked["evaluated after disable"]


def test_samples_that_do_not_evaluate_leave_the_pass_standing_and_say_why(monkeypatch):
    class Data:
        metrics = ["sm__cycles_active.avg"]  # the elapsed cycles are missing from the image

        def __iter__(self):
            return iter(())

    class Collector:
        start = stop = disable = lambda self: None

        def decode(self, max_samples):
            return Data()

    monkeypatch.delenv(ps.ENV_OFF, raising=False)
    monkeypatch.setitem(ps._STATE, "why", None)
    monkeypatch.setattr(ps, "collector", lambda index: Collector())
    with ps.Sampling(0) as pm:
        pass
    assert pm.samples == [] and pm.error.startswith("the PM sampler's samples did not evaluate: ValueError")


def test_without_the_sampler_the_pass_stands_and_says_why(monkeypatch):
    monkeypatch.setenv(ps.ENV_OFF, "0")
    with ps.Sampling(0) as pm:
        pass
    assert pm.samples == [] and "BAKEOFF_PM_SAMPLER=0" in pm.error
    monkeypatch.delenv(ps.ENV_OFF)
    monkeypatch.setitem(ps._STATE, "why", "cupti-python is not installed")
    with ps.Sampling(0) as pm:
        pass
    assert pm.samples == [] and pm.error.startswith("cupti-python")


def figures(n: int, clocks: list[float]) -> DeviceFigures:
    spans = [1.0] * n
    return DeviceFigures(stats(spans, "cupti-span"), stats(spans, "cupti-kernel-sum"), 1, spans, spans,
                         span_sm_clock_mhz=clocks, span_sm_clock_source=MARKER_SOURCE if clocks else None)


def test_the_sampler_clock_replaces_the_markers_only_where_it_read_every_call():
    marked = figures(3, [1900.0, 1900.0, 1890.0])
    got = with_sampled_clock(marked, [1300.0, 1310.0, 1305.0])
    assert got.span_sm_clock_source == PM_SOURCE and got.span_sm_clock_mhz == [1300.0, 1310.0, 1305.0]
    short = with_sampled_clock(marked, [1300.0, None, 1305.0])
    assert short.span_sm_clock_source == MARKER_SOURCE and short.span_sm_clock_mhz == marked.span_sm_clock_mhz
    assert short.span_sm_clock_sampler_error.startswith("1 of 3 profiled calls had no PM sample")
    assert short.fields("eager_")["eager_device_span_sm_clock_sampler_error"] == short.span_sm_clock_sampler_error
    assert with_sampled_clock(marked, []) is marked
    calls = [CallTimes(0.4, 0.4, 1, window_us=(a / 1e3, b / 1e3)) for a, b in timeline(3)[0]]
    assert sampled_clocks(calls, [], "cupti-python is not installed") == ([None] * 3, "cupti-python is not installed")
    off = with_sampled_clock(marked, *sampled_clocks(calls, [], "cupti-python is not installed"))
    assert off.span_sm_clock_source == MARKER_SOURCE and off.span_sm_clock_sampler_error.startswith("cupti-python")
    # samples that no offset puts the calls on (the SMs a fifth busy): why, and the markers' clock stands
    _, markers, at, end = timeline(3)
    idle = [(s, e, c, a * 0.2) for s, e, c, a in ps.in_ns(sampled(at, end, 5_000, 1.0))]
    clocks, why = sampled_clocks([CallTimes(0.4, 0.4, 1, window_us=c.window_us,
                                            marker_windows_us=()) for c in calls], idle)
    assert clocks == [None] * 3 and why.startswith("no offset put the calls on the PM sampler's samples")


def test_the_headline_clock_names_the_sampler_only_when_every_target_had_it():
    class NoNvml:
        def fields(self):
            return {}
    pm = with_sampled_clock(figures(2, [1900.0, 1900.0]), [1300.0, 1320.0])
    both = headline_clock_fields({"backend": pm, "eager": pm}, NoNvml())
    assert both["headline_sm_clock_source"] == PM_SOURCE and both["headline_sm_clock_mhz_min"] == 1300
    mixed = headline_clock_fields({"backend": pm, "eager": figures(2, [1900.0, 1880.0])}, NoNvml())
    assert mixed["headline_sm_clock_source"] == MARKER_SOURCE
    rec = {"headline_method": "cupti-span", "device_span_samples_ms": [1.0, 1.0],
           "device_span_sm_clock_mhz": [1300.0, 1320.0], "device_span_sm_clock_source": PM_SOURCE}
    assert per_call_clocks(rec) == [1300.0, 1320.0]


def test_a_pass_beside_a_target_that_leaves_the_sms_idle_fits_on_the_busy_targets_calls():
    """A matmul paired with a one-thread spin (kernel_clock_check's spin neighbour): together their calls keep the
    SMs under MIN_BUSY, so the offset comes from the matmul's calls alone, and both targets get their clocks."""
    parts, t = [], 1_000_000
    for g in range(12):
        for target, length, busy_share, mhz in (("mm", 400_000, 1.0, 1300.0), ("spin", 2_000_000, 1 / 132, 1900.0)):
            for kind, n in (("lead", length), ("flush", 100_000), ("marker", 50_000), (target, length),
                            ("marker", 50_000), ("idle", 200_000 + 37_000 * (g % 5))):
                share = {"lead": busy_share, "flush": 1.0, "marker": 1 / 132, "idle": 0.0}.get(kind, busy_share)
                parts.append((t, t + n, kind, share, mhz if kind == target else 1900.0))
                t += n

    def at(x):
        for a, b, _, share, clock in parts:
            if a <= x < b:
                return share, clock
        return 0.0, 1900.0

    marked = [i for i, p in enumerate(parts) if p[2] in ("mm", "spin")]
    calls = [CallTimes(1.0, 1.0, 1, window_us=(parts[i][0] / 1e3, parts[i][1] / 1e3),
                       marker_windows_us=((parts[i - 1][0] / 1e3, parts[i - 1][1] / 1e3),
                                          (parts[i + 1][0] / 1e3, parts[i + 1][1] / 1e3))) for i in marked]
    samples = ps.in_ns(sampled(at, t, 2_930_000, 1.0))
    clocks, why = sampled_clocks(calls, samples)
    assert clocks == [None] * len(calls) and "busy inside them" in why  # together: mostly one thread's spin
    clocks, why = sampled_clocks(calls, samples, groups=[list(range(0, 24, 2)), list(range(1, 24, 2))])
    assert why is None
    assert all(c == pytest.approx(1300.0, rel=0.01) for c in clocks[0::2])
    assert all(c == pytest.approx(1900.0, rel=0.01) for c in clocks[1::2])
