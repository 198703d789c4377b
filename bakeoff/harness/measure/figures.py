"""Every latency figure of one case, and the one headline that means the same thing for every backend.

For the backend and for eager beside it (paired: interleaved, measured the same way) the case gets:
- the timer's figure (`latency_ms_*`, harness.measure.timing.measure: CUDA events for backends on torch's
  stream, else host clock + sync; the cache flushed before each sample), kept so older stores still read;
- the single synchronized call (`host_latency_ms`): host clock, synchronized before and after, dispatch included;
- the pipelined call (`pipelined_ms`): many calls enqueued, one synchronize, per call;
- on a GPU, the device time from CUPTI (`device_span_ms`: first kernel start to last kernel end of one call;
  `device_ms`: its kernels' summed time), as distributions over `profile_calls` profiled calls (fewer, at least
  `min_reps`, once the timer's budget is spent: a long call needs no twenty);
- on a GPU, for capturable backends, CUDA-graph replay (`graph_latency_ms`; about 2 ms of calls per graph,
  replayed up to 20 times within a quarter of the timer's budget, at least `min_reps` times);
- the SM clock during the whole window (`sm_clock_mhz*`, NVML), and over the CUPTI pass alone, the headline's own
  samples (`headline_sm_clock_mhz_median`, `_min`, `_max`, `headline_sm_clock_source`; None on the CPU or
  without the span): the per-call clocks read on the device (`device_span_sm_clock_mhz`: the PM sampler's over
  each call's span, measure/pm_sampler.py, else the pass's markers', measure/marker_clock.py) where every
  profiled call of both targets has one, else NVML's readings over the pass
  (and NVML's per call in its host window for a target whose markers gave none).

The headline (`headline_ms`, `headline_method`): on a GPU, the CUPTI span, the one figure obtained the same way
whatever stream or runtime a backend launches from, with the cache flushed before every call for all of them
alike; where the profiler gives nothing, the pipelined figure, with the reason in `headline_fallback`. On
the CPU (no CUPTI) the timer's figure: host clock around one call and its sync, cache flushed before it.
`speedup_vs_eager` divides eager's headline by the backend's, both of one method, one case, one process; its 95%
interval (`speedup_vs_eager_ci_low`, `_ci_high`) is a paired bootstrap over the headline's interleaved samples
(results/speedup_interval.py), None where the headline has no samples (the pipelined fallback).
"""
from __future__ import annotations

import statistics
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Any, Callable, ContextManager, Mapping

from bakeoff.harness.config.timing import AUTO_SUSTAINED_S, TimingConfig

from bakeoff.harness.measure.clocks import ClockSampler, low_share, sustain_load
from bakeoff.harness.measure.device_time import DeviceFigures, ProfiledPass, run_pass
from bakeoff.harness.measure.noise import CLOCK_DROP_LIMIT
from bakeoff.harness.measure.timing import (Stats, TimedCall, cuda_graph_latency_ms, graph_calls, host_latency,
                                            measure, pipeline_calls, pipeline_memory_cap_bytes,
                                            pipelined_latency)
from bakeoff.results.call_clocks import DEVICE_SOURCES, MARKER_SOURCE, NVML_SOURCE, PM_SOURCE
from bakeoff.results.speedup_interval import interval_fields

# The timing targets' names, internal to one case: never a config label, so a label such as "eager" for
# another adapter cannot collide with the interleaved eager reference.
BACKEND_TARGET = "backend"
EAGER_TARGET = "eager (reference)"


def latency_fields(results: dict[str, Stats], targets: list[TimedCall]) -> dict[str, Any]:
    """The record's timer fields from `measure`'s results for the case's targets; with no eager target
    (the case is eager itself) the eager figures are the backend's own."""
    mine = results[BACKEND_TARGET]
    eager_stats = results.get(EAGER_TARGET, mine)
    eager_target = targets[-1] if EAGER_TARGET in results else targets[0]
    return {
        "latency_ms_median": mine.median_ms, "latency_ms_p20": mine.p20_ms, "latency_ms_p80": mine.p80_ms,
        "latency_iqr_rel": mine.iqr_rel, "n_samples": mine.n, "timing_method": mine.method,
        "samples_ms": targets[0].samples_ms,
        "eager_latency_ms_median": eager_stats.median_ms, "eager_latency_ms_p20": eager_stats.p20_ms,
        "eager_latency_ms_p80": eager_stats.p80_ms, "eager_samples_ms": eager_target.samples_ms,
        "eager_timing_method": eager_stats.method,
        "timer_speedup_vs_eager": _ratio(eager_stats.median_ms, mine.median_ms),
    }


def _ratio(eager_ms: float | None, ms: float | None) -> float | None:
    return eager_ms / ms if eager_ms is not None and ms else None


def _stat_fields(prefix: str, s: Stats) -> dict[str, float]:
    return {f"{prefix}_ms": s.median_ms, f"{prefix}_p20_ms": s.p20_ms, f"{prefix}_p80_ms": s.p80_ms}


def headline_fields(device: str, timer: dict[str, Stats], profiled: dict[str, DeviceFigures] | None,
                    pipelined: dict[str, Stats], profile_note: str | None) -> dict[str, Any]:
    """The headline of the backend and of eager (the same method for both), and the speedup from it.

    `timer`, `profiled` and `pipelined` are keyed by target name (BACKEND_TARGET, EAGER_TARGET when paired);
    `profile_note` says why `profiled` is None on a GPU (profiling off, or the profiler's error). The headline's
    samples are the record's `device_span_samples_ms` (cupti-span) or `samples_ms` (the timer's), not copied."""
    names = [BACKEND_TARGET] + ([EAGER_TARGET] if EAGER_TARGET in timer else [])
    fallback = None
    if not device.startswith("cuda"):
        chosen = {n: timer[n] for n in names}
    elif profiled is not None and all(n in profiled for n in names):
        chosen = {n: profiled[n].span for n in names}
    else:
        chosen = {n: pipelined[n] for n in names}
        fallback = f"no CUPTI span ({profile_note or 'not profiled'}): the pipelined host figure instead"
    mine, eager = chosen[BACKEND_TARGET], chosen.get(EAGER_TARGET, chosen[BACKEND_TARGET])
    out: dict[str, Any] = {
        **_stat_fields("headline", mine), "headline_iqr_rel": mine.iqr_rel, "headline_n": mine.n,
        "headline_method": mine.method, **_stat_fields("eager_headline", eager),
        "speedup_vs_eager": _ratio(eager.median_ms, mine.median_ms),
    }
    if fallback:
        out["headline_fallback"] = fallback
    return out


def measure_figures(backend: TimedCall, eager: TimedCall | None, device: str,
                    timing: TimingConfig | Mapping[str, Any], *,
                    capturable: bool, bytes_per_call: int,
                    phase: Callable[[str], ContextManager[None]] = lambda name: nullcontext()) -> dict[str, Any]:
    """All figures of the case (see the module docstring) as record fields: collect_figures, then its result."""
    return collect_figures(backend, eager, device, timing, capturable=capturable, bytes_per_call=bytes_per_call,
                           phase=phase)()


def collect_figures(backend: TimedCall, eager: TimedCall | None, device: str,
                    timing: TimingConfig | Mapping[str, Any], *,
                    capturable: bool, bytes_per_call: int,
                    phase: Callable[[str], ContextManager[None]] = lambda name: nullcontext()
                    ) -> Callable[[], dict[str, Any]]:
    """Run every timed call of the case and return what turns them into record fields: the host's work on what
    was collected (the profiler's events parsed, the PM sampler's samples evaluated, the clocks fitted), which
    needs no device, so a caller holding the timing gate calls it after releasing the gate. `eager` is None when
    the case is eager itself; `bytes_per_call` (what one call may allocate, at most) bounds the calls kept in
    flight when pipelining. `phase(name)` times each step for the record's phases_s (harness/worker/phases.py)."""
    timing = TimingConfig.of(timing)
    targets = [backend] + ([eager] if eager is not None else [])
    cuda = device.startswith("cuda")
    sustained = sustained_s(timing, device)
    out: dict[str, Any] = {}
    device_pass: DevicePass | None = None
    with ClockSampler(device) as clock:
        with phase("timing"):
            if sustained:
                out["sustained_s"] = sustain_load(targets, sustained, device)
            timer = measure(targets, device, warmup_s=timing.warmup_s, budget_s=timing.budget_s,
                            min_reps=timing.min_reps, max_reps=timing.max_reps,
                            target_iqr=timing.target_iqr, flush_l2=timing.flush_l2)
        out.update(latency_fields(timer, targets))
        with phase("host_latency"):
            pipelined = _host_figures(targets, device, timing, bytes_per_call, out)
        if cuda and timing.cuda_graph and capturable:
            try:
                with phase("graph_replay"):
                    replay = cuda_graph_latency_ms(backend.call, graph_calls(timer[BACKEND_TARGET].median_ms),
                                                   budget_s=_side_budget_s(timing), min_replays=timing.min_reps)
                out.update(graph_latency_ms=replay.median_ms, graph_latency_method=replay.method,
                           graph_replays=replay.n)
            except Exception as exc:  # capture fails for some programs; the reason is a fact worth keeping
                out["graph_latency_error"] = f"{type(exc).__name__}: {exc}"[:500]
        if cuda and timing.profile:
            with phase("profiling"):
                if sustained:  # a top-up: the timer, host figures and replay kept the device loaded
                    out["sustained_s"] += sustain_load(targets, min(sustained, TOP_UP_S), device)
                device_pass = _device_pass(targets, device, timing)

    def finish() -> dict[str, Any]:
        with phase("figures"):
            profiled, note = None, None
            if device_pass is not None:
                profiled, note = _device_fields(device_pass, out)
            elif cuda:
                note = "timing.profile is off"
            out.update(headline_fields(device, timer, profiled, pipelined, note))
            if eager is not None:  # the speedup's 95% interval from the headline's paired samples
                out.update(interval_fields(out))
            out.update(clock.fields())
        return out

    return finish


# Before the CUPTI pass the device has just run the timer, the host figures and the graph replay, which keep it
# busy (half a second or more after the first load); a short top-up covers the gap before the pass, instead of the
# whole load again (another AUTO_SUSTAINED_S would cost 0.25 s more per case on the device).
TOP_UP_S = 0.05


def sustained_s(timing: TimingConfig | Mapping[str, Any], device: str) -> float:
    """The seconds of continuous load `timing.sustained_s` asks for on `device` (auto: AUTO_SUSTAINED_S on a
    GPU, 0 on the CPU, whose figures are taken as before)."""
    value = TimingConfig.of(timing).sustained_s
    if value == "auto":
        return AUTO_SUSTAINED_S if device.startswith("cuda") else 0.0
    return float(value)


def _side_budget_s(timing: TimingConfig) -> float:
    """Seconds for each figure beside the timer's (host latency, pipelined, graph replay): a quarter of the
    timer's budget, at least 50 ms; each still takes its minimum number of samples."""
    return max(0.05, 0.25 * timing.budget_s)


def _host_figures(targets: list[TimedCall], device: str, timing: TimingConfig, bytes_per_call: int,
                  out: dict[str, Any]) -> dict[str, Stats]:
    """The single synchronized call and the pipelined call of each target, into `out`; returns the pipelined
    Stats by target name. Each gets a quarter of the timer's budget (at least 50 ms)."""
    budget_s = _side_budget_s(timing)
    single = {t.name: host_latency(t.call, t.sync, device, budget_s=budget_s) for t in targets}
    cap_bytes = pipeline_memory_cap_bytes(device)
    batch = {t.name: pipeline_calls(single[t.name].median_ms, bytes_per_call, cap_bytes) for t in targets}
    pipelined = {t.name: pipelined_latency(t.call, t.sync, device, batch[t.name], budget_s=budget_s)
                 for t in targets}
    for prefix, name in (("", BACKEND_TARGET), ("eager_", EAGER_TARGET)):
        if name in single:
            out.update(_stat_fields(f"{prefix}host_latency", single[name]))
            out.update(_stat_fields(f"{prefix}pipelined", pipelined[name]))
            out[f"{prefix}pipelined_calls"] = batch[name]
    return pipelined


@dataclass
class DevicePass:
    """The CUPTI pass of a case as it ran (ProfiledPass, or the error that stopped it) and the NVML clock
    readings taken over it."""

    ran: ProfiledPass | None
    error: str | None
    span_clock: ClockSampler


def _device_pass(targets: list[TimedCall], device: str, timing: TimingConfig) -> DevicePass:
    """The CUPTI pass's device work; a profiler failure costs the device figures, not the case."""
    calls = timing.profile_calls
    with ClockSampler(device) as span_clock:  # the SM clock over the span's own samples (the headline's)
        try:
            ran = run_pass(targets, device, calls, timing.flush_l2, budget_s=timing.budget_s,
                           min_calls=min(calls, max(timing.min_reps, 3)))
        except Exception as exc:  # noqa: BLE001 - recorded as profile_error
            return DevicePass(None, f"{type(exc).__name__}: {exc}"[:500], span_clock)
    return DevicePass(ran, None, span_clock)


def _device_fields(device_pass: DevicePass, out: dict[str, Any]
                   ) -> tuple[dict[str, DeviceFigures] | None, str | None]:
    """The CUPTI pass's figures, into `out` (span, kernel sum, kernel count, launch overhead share); returns the
    figures by target name, or None and the profiler's error (also kept as `profile_error`)."""
    error, found = device_pass.error, None
    if device_pass.ran is not None:
        try:
            found = device_pass.ran.figures()
        except Exception as exc:  # noqa: BLE001 - markers lost, calls without kernels: recorded
            error = f"{type(exc).__name__}: {exc}"[:500]
    if found is None:
        out["profile_error"] = error
        return None, error
    span_clock = device_pass.span_clock
    profiled = {name: nvml_fallback(figures, span_clock) for name, figures in found.items()}
    for prefix, name in (("", BACKEND_TARGET), ("eager_", EAGER_TARGET)):
        if name in profiled:
            out.update(profiled[name].fields(prefix))
    out.update(headline_clock_fields(profiled, span_clock))
    lone = out["host_latency_ms"]
    out["launch_overhead_share"] = 1.0 - out["device_ms"] / lone if lone > 0 else None
    return profiled, None


def nvml_fallback(figures: DeviceFigures, span_clock: ClockSampler) -> DeviceFigures:
    """`figures` with NVML's per-call clock (the readings in each call's host window, ClockSampler.at) where its
    markers gave none for some call; as they are otherwise."""
    if figures.span_sm_clock_mhz:
        return figures
    nvml = span_clock.at(figures.windows_s)
    if len(nvml) != len(figures.span_samples_ms):
        return figures
    return replace(figures, span_sm_clock_mhz=nvml, span_sm_clock_source=NVML_SOURCE)


def headline_clock_fields(profiled: dict[str, DeviceFigures], span_clock: ClockSampler) -> dict[str, Any]:
    """The SM clock over the headline's samples: median, lowest, highest and the share of readings over
    CLOCK_DROP_LIMIT under their median, from every target's per-call device clocks (the PM sampler's or the
    markers') where each target has them, else from NVML's readings over the CUPTI pass; {} without a reading."""
    sources = {f.span_sm_clock_source for f in profiled.values()}
    if profiled and sources <= set(DEVICE_SOURCES):
        values = [c for f in profiled.values() for c in f.span_sm_clock_mhz]
        return {"headline_sm_clock_mhz_median": float(statistics.median(values)),
                "headline_sm_clock_mhz_min": int(round(min(values))),
                "headline_sm_clock_mhz_max": int(round(max(values))),
                "headline_sm_clock_low_share": low_share(values, CLOCK_DROP_LIMIT),
                "headline_sm_clock_source": PM_SOURCE if sources == {PM_SOURCE} else MARKER_SOURCE}
    clk = span_clock.fields()
    if "sm_clock_mhz" not in clk:
        return {}
    return {"headline_sm_clock_mhz_median": clk["sm_clock_mhz"], "headline_sm_clock_mhz_min": clk["sm_clock_mhz_min"],
            "headline_sm_clock_mhz_max": clk["sm_clock_mhz_max"],
            "headline_sm_clock_low_share": span_clock.low_share(CLOCK_DROP_LIMIT),
            "headline_sm_clock_source": NVML_SOURCE}
