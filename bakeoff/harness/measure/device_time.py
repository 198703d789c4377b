"""Device time of one call, from CUPTI (torch.profiler): the span from its first kernel's start to its last
kernel's end, and the sum of its kernels' durations, as distributions over several profiled calls; and the SM
clock each call ran at, read by the markers around it.

CUPTI sees the kernels of every library in the process (JAX/XLA, IREE, ONNX Runtime, TensorRT, torch), on
whatever stream they launch, so this figure is obtained the same way for every backend. Calls are told
apart on the device timeline by markers, each three spin kernels launched back to back on one stream
(`torch.cuda._sleep` of MARK_SPINS cycles: a warm-up spin, MARK_SHORT_CYCLES, MARK_LONG_CYCLES; CUPTI names each
`spin_kernel`):

    lead-in calls; flush; sync; MARK; sync; call; backend sync; sync; MARK; sync

so the kernels of call j are those that start after its first marker and before its second; the cache flush
(a kernel too) lies outside every pair. Synchronizing around each marker keeps kernels on other streams from
overlapping it. A marker's last two spins differ by MARK_SHORT_CYCLES SM cycles, so the difference of their
CUPTI durations reads the SM clock on the device right before and right after each call (measure/marker_clock.py).
A marker costs sum(MARK_SPINS) = 61000 cycles of one thread, 31-55 µs at 1980-1110 MHz, twice per profiled
call: device time between calls, in no call's span or sum (those run from the call's first kernel after its
opening marker to its last before the closing one, and the syncs keep every other kernel off the markers),
so no timed figure contains it; the pause it adds before each call is far shorter than the power
controller's millisecond steps.
The lead-in (LEAD_IN_MS of the target's own calls, unprofiled in effect: outside every
marker pair; none for a call of LEAD_IN_NONE_FROM_MS or more, which loads the device itself) keeps the
device loaded between profiled calls, as a steady loop does: after a pause a
power-capped GPU runs a compute-bound call at a higher clock than it keeps under load (docs/EVIDENCE.md), and the pass would otherwise time every call after the pause of the syncs around the one
before it. Memory copies and memsets are not kernels (`is_kernel_event`) and count in neither number.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Sequence

from bakeoff.harness.measure.kernel_times import kernel_times
from bakeoff.harness.measure.marker_clock import MARK_SPINS, Edges, call_edges, per_call_mhz
from bakeoff.harness.measure.pm_sampler import INTERVAL_NS, MIN_BUSY, Sample, Sampling, call_clocks, fit_offset
from bakeoff.harness.measure.timing import CacheFlusher, Stats, TimedCall, is_kernel_event, stats
from bakeoff.results.call_clocks import MARKER_SOURCE, PM_SOURCE

# Before each profiled call, about this much of the target's own calls (at most LEAD_IN_CALLS calls, at least 1).
LEAD_IN_MS = 2.0
LEAD_IN_CALLS = 8
# A call at least this long gets no lead-in: the profiled call before it (the other target's, or its own) loaded
# the device for that long, and the pause between two profiled calls (the syncs, the markers and the flush, tenths
# of a millisecond) is then under 1% of the load; a lead-in would double the pass of a 1 s call for nothing.
LEAD_IN_NONE_FROM_MS = 50.0
MARK_NAME = "spin_kernel"
SPAN_METHOD = "cupti-span"
SUM_METHOD = "cupti-kernel-sum"


class ProfileError(RuntimeError):
    """The profiled pass did not give a usable figure (markers lost, calls without kernels, ...)."""


@dataclass(frozen=True)
class KernelSpan:
    """One device activity from the profiler: name, start and end in microseconds on the device timeline."""

    name: str
    start_us: float
    end_us: float


@dataclass(frozen=True)
class CallTimes:
    """One profiled call: first-kernel-start to last-kernel-end (ms), summed kernel time (ms), kernel count."""

    span_ms: float
    sum_ms: float
    kernels: int
    launched: tuple[tuple[str, float], ...] = ()  # (kernel name, device µs) of each kernel of the call
    clock_edges_mhz: Edges = (None, None)  # the SM clock read by the marker before it and the marker after it
    clock_error: str | None = None  # why a marker around it gave no clock
    window_us: tuple[float, float] = (0.0, 0.0)  # its first kernel's start and last kernel's end on the timeline
    marker_windows_us: tuple[tuple[float, float], ...] = ()  # the markers before and after it, start to end


@dataclass(frozen=True)
class DeviceFigures:
    """The distributions of a target's profiled calls."""

    span: Stats
    kernel_sum: Stats
    kernel_count: int
    span_samples_ms: list[float]
    sum_samples_ms: list[float]
    kernel_times: list[dict[str, Any]] = field(default_factory=list)  # per kernel name (measure/kernel_times.py)
    windows_s: list[tuple[float, float]] = field(default_factory=list)  # each profiled call's host window
    span_sm_clock_mhz: list[float] = field(default_factory=list)  # the SM clock per profiled call, MHz
    span_sm_clock_source: str | None = None  # where it was read: PM_SOURCE, MARKER_SOURCE, or NVML's
    span_sm_clock_edges_mhz: list[Edges] = field(default_factory=list)  # the markers' readings around each call
    span_sm_clock_error: str | None = None  # why the markers gave no clock for some call
    span_sm_clock_sampler_error: str | None = None  # why the PM sampler gave no clock for some call

    def fields(self, prefix: str = "") -> dict[str, float | int | list[float]]:
        """Record fields: `{prefix}device_span_ms` (median), p20/p80, IQR, n and samples (`_samples_ms`);
        `{prefix}device_ms` (kernel sum, median) with p20/p80; `{prefix}kernel_count` (per call, median); the
        per-call SM clock (`{prefix}device_span_sm_clock_mhz`, `_source`) where every call has one, the markers'
        readings (`_edges_mhz`) and why they gave no clock (`_error`) where they did not."""
        s, k = self.span, self.kernel_sum
        clocked = len(self.span_sm_clock_mhz) == len(self.span_samples_ms)
        return {f"{prefix}device_span_ms": s.median_ms, f"{prefix}device_span_p20_ms": s.p20_ms,
                f"{prefix}device_span_p80_ms": s.p80_ms, f"{prefix}device_span_iqr_rel": s.iqr_rel,
                f"{prefix}device_span_samples_ms": self.span_samples_ms, f"{prefix}device_ms": k.median_ms,
                f"{prefix}device_ms_p20": k.p20_ms, f"{prefix}device_ms_p80": k.p80_ms,
                f"{prefix}kernel_count": self.kernel_count, f"{prefix}profiled_calls": s.n,
                f"{prefix}kernel_times": self.kernel_times,
                **({f"{prefix}device_span_sm_clock_mhz": self.span_sm_clock_mhz,
                    f"{prefix}device_span_sm_clock_source": self.span_sm_clock_source} if clocked else {}),
                **({f"{prefix}device_span_sm_clock_edges_mhz": [list(e) for e in self.span_sm_clock_edges_mhz]}
                   if self.span_sm_clock_edges_mhz else {}),
                **({f"{prefix}device_span_sm_clock_error": self.span_sm_clock_error}
                   if self.span_sm_clock_error else {}),
                **({f"{prefix}device_span_sm_clock_sampler_error": self.span_sm_clock_sampler_error}
                   if self.span_sm_clock_sampler_error else {})}


def lead_in_calls(single_call_ms: float) -> int:
    """Lead-in calls before each profiled call of a call that took `single_call_ms` (host clock, synchronized):
    about LEAD_IN_MS of work, 1 to LEAD_IN_CALLS calls (none when LEAD_IN_CALLS is 0, or for a call of
    LEAD_IN_NONE_FROM_MS or longer)."""
    if not single_call_ms > 0:
        return LEAD_IN_CALLS
    if single_call_ms >= LEAD_IN_NONE_FROM_MS:
        return 0
    return min(LEAD_IN_CALLS, max(1, math.ceil(LEAD_IN_MS / single_call_ms)))


def marker_groups(events: Sequence[KernelSpan], n_calls: int) -> list[tuple[KernelSpan, ...]]:
    """The 2 * `n_calls` markers of a timeline sorted by start, each its len(MARK_SPINS) spin kernels in launch
    order. Raises ProfileError when the spins are not that many per marker (CUPTI dropped records, a marker was
    not launched, a call launched a kernel named spin_kernel, or the timeline has markers of another make), or
    when another kernel starts between the spins of a marker (then the groups are not the markers)."""
    per = len(MARK_SPINS)
    at = [i for i, e in enumerate(events) if MARK_NAME in e.name]
    if len(at) != 2 * per * n_calls:
        raise ProfileError(f"profiler saw {len(at)} marker kernels for {n_calls} calls (expected "
                           f"{2 * per * n_calls}, {per} spins per marker, two markers per call): CUPTI dropped "
                           f"records, a marker was not launched, or a call launched a kernel named {MARK_NAME}")
    groups = [at[m * per:(m + 1) * per] for m in range(2 * n_calls)]
    for m, idx in enumerate(groups):
        split = next((i for i in range(idx[0], idx[-1]) if i + 1 not in idx), None)
        if split is not None:
            raise ProfileError(f"marker {m}'s {per} spin kernels are split by {events[split + 1].name[:200]!r}: a "
                               f"call launched a kernel named {MARK_NAME}, or CUPTI dropped a marker's record")
    return [tuple(events[i] for i in idx) for idx in groups]


def _durations_us(marker: tuple[KernelSpan, ...]) -> tuple[float, float]:
    """The (short, long) spins' CUPTI durations: a marker's last two spins."""
    return marker[-2].end_us - marker[-2].start_us, marker[-1].end_us - marker[-1].start_us


def segment_calls(activities: Iterable[KernelSpan], n_calls: int) -> list[CallTimes]:
    """Split a device timeline into `n_calls` calls bracketed by markers (see the module docstring), with the
    SM clock each marker read.

    `activities` are kernels only (markers included, copies excluded). Raises ProfileError when the markers
    are not the expected groups (`marker_groups`) or when a call launched no kernel. A marker that gives no
    clock costs its calls their clock (CallTimes.clock_error), not their times.
    """
    events = sorted(activities, key=lambda e: (e.start_us, e.end_us))
    markers = marker_groups(events, n_calls)
    kernels = [e for e in events if MARK_NAME not in e.name]
    out = []
    for j in range(n_calls):
        opened, closed = markers[2 * j], markers[2 * j + 1]
        inside = [k for k in kernels if opened[0].start_us <= k.start_us < closed[0].start_us]
        if not inside:
            raise ProfileError(f"profiled call {j} launched no kernel that CUPTI saw")
        first, last = min(k.start_us for k in inside), max(k.end_us for k in inside)
        edges, why = call_edges(_durations_us(opened), _durations_us(closed))
        out.append(CallTimes((last - first) / 1e3, sum(k.end_us - k.start_us for k in inside) / 1e3, len(inside),
                             tuple((k.name, k.end_us - k.start_us) for k in inside), edges, why, (first, last),
                             tuple((m[0].start_us, m[-1].end_us) for m in (opened, closed))))
    return out


def _kernel_spans(events: Iterable[object]) -> list[KernelSpan]:
    """The kernels among torch.profiler events, with their device time range."""
    return [KernelSpan(str(e.name), float(e.time_range.start), float(e.time_range.end))
            for e in events if is_kernel_event(e)]


def figures_of(calls: Sequence[CallTimes]) -> DeviceFigures:
    """Distributions (Stats) of the span and the kernel sum of `calls`; kernel count is the median count; the
    per-call SM clock from the markers where every call has one (measure/marker_clock.py per_call_mhz)."""
    spans, sums = [c.span_ms for c in calls], [c.sum_ms for c in calls]
    counts = sorted(c.kernels for c in calls)
    launched = [k for c in calls for k in c.launched]
    edges = [c.clock_edges_mhz for c in calls]
    clocks, clock_error = per_call_mhz(edges, [c.clock_error for c in calls])
    return DeviceFigures(stats(spans, SPAN_METHOD), stats(sums, SUM_METHOD), counts[len(counts) // 2],
                         spans, sums, kernel_times(launched, len(calls)), span_sm_clock_mhz=clocks,
                         span_sm_clock_source=MARKER_SOURCE if clocks else None,
                         span_sm_clock_edges_mhz=edges if any(e != (None, None) for e in edges) else [],
                         span_sm_clock_error=clock_error)


def cuda_profiler() -> Any:
    """A Kineto session recording device activities only (least overhead), through torch.autograd.profiler's
    class: torch.profiler.profile starts the same session but first asks `hasattr(torch, "_inductor")`, and
    torch's lazy module attribute imports Inductor to answer. On the H200 that import was most of a
    non-Inductor case's `profiling` phase (3.6-6.1 s per case against 0.1 s for Inductor's cases, where it
    was already imported), inside the timing gate."""
    from torch.autograd.profiler import profile

    return profile(use_device="cuda", use_cpu=False, use_kineto=True)


def profile_device_time(targets: Sequence[TimedCall], device: str, calls: int, flush_l2: bool,
                        budget_s: float | None = None, min_calls: int = 3) -> dict[str, DeviceFigures]:
    """Profile `calls` calls of each target, interleaved (A, B, A, B, ...), each bracketed by markers and
    preceded by the cache flush when `flush_l2`; fewer (at least `min_calls` each) once `budget_s` seconds
    of the pass are spent. Returns DeviceFigures per target name (run_pass, then ProfiledPass.figures).

    Raises ProfileError (or the profiler's own error) when no usable figure comes out; the caller records it.
    """
    return run_pass(targets, device, calls, flush_l2, budget_s, min_calls).figures()


@dataclass
class ProfiledPass:
    """A CUPTI pass as it ran: the profiler, which target each profiled call was (`order`), each call's host
    window, and the PM sampler's pass. `figures()` parses the profiler's events and evaluates the sampler's
    samples: host work that needs no device, done after the timing gate is released."""

    prof: Any
    targets: list[str]
    order: list[str]
    windows: list[tuple[float, float]]
    pm: Sampling

    def figures(self) -> dict[str, DeviceFigures]:
        """DeviceFigures per target name; raises ProfileError where the profiler's events do not make one."""
        segments = segment_calls(_kernel_spans(self.prof.function_events), len(self.order))
        by_target: dict[str, list[int]] = {name: [] for name in self.targets}
        for j, name in enumerate(self.order):
            by_target[name].append(j)
        clocks, why = sampled_clocks(segments, self.pm.samples, self.pm.error, list(by_target.values()))
        return {name: with_sampled_clock(replace(figures_of([segments[j] for j in at]),
                                                 windows_s=[self.windows[j] for j in at]),
                                         [clocks[j] for j in at], why)
                for name, at in by_target.items()}


def run_pass(targets: Sequence[TimedCall], device: str, calls: int, flush_l2: bool, budget_s: float | None = None,
             min_calls: int = 3) -> ProfiledPass:
    """The device's part of profile_device_time: the lead-in and profiled calls under the profiler and the
    PM sampler, nothing parsed or evaluated."""
    import torch

    flush = CacheFlusher(device, flush_l2)
    order: list[str] = []
    windows: list[tuple[float, float]] = []  # perf_counter() around each profiled call, synchronized both ends

    def mark() -> None:  # spins back to back on one stream, no sync between: one marker, one clock reading
        torch.cuda.synchronize()
        for cycles in MARK_SPINS:
            torch.cuda._sleep(cycles)
        torch.cuda.synchronize()

    lead_in: dict[str, int] = {}
    for t in targets:  # one unprofiled call each: nothing lazy (allocations, autotuning) lands in the pass
        t0 = time.perf_counter()
        t.call()
        t.sync()
        torch.cuda.synchronize()
        lead_in[t.name] = lead_in_calls((time.perf_counter() - t0) * 1e3)
    deadline = None if budget_s is None else time.perf_counter() + budget_s
    with Sampling(_device_index(device)) as pm, cuda_profiler() as prof:
        for done in range(calls):
            if deadline and done >= min_calls and time.perf_counter() > deadline:
                break
            for t in targets:
                for _ in range(lead_in[t.name]):  # outside every marker pair: in no figure
                    flush()
                    t.call()
                    if not t.events:
                        t.sync()
                t.sync()
                flush()
                mark()
                start = time.perf_counter()
                t.call()
                t.sync()
                torch.cuda.synchronize()
                windows.append((start, time.perf_counter()))
                mark()
                order.append(t.name)
    return ProfiledPass(prof, [t.name for t in targets], order, windows, pm)


def _device_index(device: str) -> int:
    import torch

    return int(device.split(":")[1]) if ":" in device else torch.cuda.current_device()


def sampled_clocks(calls: Sequence[CallTimes], samples: Sequence[Sample], error: str | None = None,
                   groups: Sequence[Sequence[int]] = ()) -> tuple[list[float | None], str | None]:
    """Per call, the SM clock the PM sampler read over its span (measure/pm_sampler.py): the samples put on the
    profiler's timeline by where the calls' spans hold the SMs busy and the markers do not; all None, with why,
    without samples (`error`: the sampler's own reason) or where no offset fits. Where all the calls together do
    not keep the SMs busy enough (a target of one thread beside a matmul), the offset is fitted on the calls of
    one of `groups` (each target's call indices) alone, the busiest that fits: the pass has one offset."""
    if not samples:
        return [None] * len(calls), error or "the PM sampler gave no samples"
    spans = [(c.window_us[0] * 1e3, c.window_us[1] * 1e3) for c in calls]
    quiet = [[(a * 1e3, b * 1e3) for a, b in c.marker_windows_us] for c in calls]
    shift, busy = fit_offset(spans, samples, [w for q in quiet for w in q])
    if shift is None:
        fits = [fit_offset([spans[j] for j in at], samples, [w for j in at for w in quiet[j]]) for at in groups if at]
        shift, busy = max(((s, b) for s, b in fits if s is not None), key=lambda f: f[1], default=(None, busy))
    if shift is None:
        return [None] * len(calls), (f"no offset put the calls on the PM sampler's samples: at best the SMs were "
                                     f"{busy:.0%} busy inside them (under {MIN_BUSY:.0%})")
    return call_clocks(spans, samples, shift), None


def with_sampled_clock(figures: DeviceFigures, clocks: Sequence[float | None], why: str | None = None
                       ) -> DeviceFigures:
    """`figures` with the sampler's per-call clock (PM_SOURCE) where it read every call; the markers' readings
    stay beside them (span_sm_clock_edges_mhz). Otherwise as they are, with why the sampler gave none."""
    missing = sum(c is None for c in clocks)
    if clocks and not missing and len(clocks) == len(figures.span_samples_ms):
        return replace(figures, span_sm_clock_mhz=[float(c) for c in clocks], span_sm_clock_source=PM_SOURCE)
    if why is None and missing:
        why = (f"{missing} of {len(clocks)} profiled calls had no PM sample wholly inside their span (calls under "
               f"two {INTERVAL_NS // 1000} us intervals)")
    return replace(figures, span_sm_clock_sampler_error=why) if why else figures
