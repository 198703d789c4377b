"""One timer for every backend: adaptive, interleaved, with the cache flushed outside the timed region.

On a GPU, backends that launch on torch's current stream are timed with a pair of CUDA events around each
call (the flush is enqueued before the start event, so it is not timed), EVENT_BATCH calls enqueued back to
back and then synchronized, as triton.testing.do_bench does; the others with the host clock around the
call and the backend's `sync()`, after a device synchronize (their dispatch is included). On the CPU, the
host clock. Targets are sampled in turn (A, B, A, B, ...) so that drift in clocks or load hits all.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

L2_FLUSH_BYTES_GPU = 256 * 2**20
CACHE_FLUSH_BYTES_CPU = 64 * 2**20


@dataclass
class TimedCall:
    """A thing to time: `call` launches one run, `sync` waits for it; `events` says CUDA events may be used."""

    name: str
    call: Callable[[], object]
    sync: Callable[[], None]
    events: bool = False
    samples_ms: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Stats:
    """Summary of latency samples in milliseconds; `iqr_rel` is (p75 - p25) / median."""

    median_ms: float
    p20_ms: float
    p80_ms: float
    iqr_rel: float
    mean_ms: float
    min_ms: float
    n: int
    method: str

    def as_dict(self) -> dict[str, float | int | str]:
        return dict(self.__dict__)


def stats(samples_ms: list[float], method: str) -> Stats:
    """Median, p20, p80, IQR/median, mean, min and n of `samples_ms`."""
    a = np.asarray(samples_ms, dtype=np.float64)
    p20, p25, med, p75, p80 = np.percentile(a, [20, 25, 50, 75, 80])
    return Stats(float(med), float(p20), float(p80), float((p75 - p25) / med) if med > 0 else float("nan"),
                 float(a.mean()), float(a.min()), int(a.size), method)


class CacheFlusher:
    """Writes a buffer larger than the last-level cache (256 MB on a GPU, 64 MB on the CPU)."""

    def __init__(self, device: str, enabled: bool) -> None:
        self.enabled = enabled
        self.cuda = device.startswith("cuda")
        if enabled:
            nbytes = L2_FLUSH_BYTES_GPU if self.cuda else CACHE_FLUSH_BYTES_CPU
            self.buf = torch.empty(nbytes // 4, dtype=torch.int32, device=device)

    def __call__(self) -> None:
        if self.enabled:
            self.buf.zero_()


# Event-timed samples are enqueued this many at a time behind a spin kernel, then synchronized once (as
# do_bench does): the host runs ahead of the device, so per-call host overhead is not counted unless the
# device actually waits for it. `host_latency` measures the other view: one synchronized call at a time.
EVENT_BATCH = 5


# A spin kernel of this many clock cycles (about 1 ms at the H200's 1.98 GHz) starts each batch: the device
# is busy while the host enqueues the batch, as it is after the first calls of do_bench's long loop, so no
# sample waits on the host's dispatch of its own call unless the host is slower than the device throughout.
BLOCK_CYCLES = 2_000_000


def _event_samples(t: TimedCall, flush: CacheFlusher, count: int) -> list[float]:
    pairs = []
    torch.cuda._sleep(BLOCK_CYCLES)
    for _ in range(count):
        flush()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t.call()
        end.record()
        pairs.append((start, end))
    t.sync()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in pairs]


def _host_sample(t: TimedCall, flush: CacheFlusher, cuda: bool) -> float:
    flush()
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    t.call()
    t.sync()
    return (time.perf_counter() - t0) * 1e3


def _samples(t: TimedCall, flush: CacheFlusher, cuda: bool) -> list[float]:
    """One round of samples of `t`: a batch of event-timed calls, or one host-timed call."""
    if cuda and t.events:
        return _event_samples(t, flush, EVENT_BATCH)
    return [_host_sample(t, flush, cuda)]


def host_latency(call: Callable[[], object], sync: Callable[[], None], device: str, reps: int = 20) -> Stats:
    """Per-call latency with the host clock, synchronizing before and after each call: what one call costs
    when nothing is queued, dispatch overhead included."""
    cuda = device.startswith("cuda")
    samples = []
    for _ in range(reps):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        call()
        sync()
        if cuda:
            torch.cuda.synchronize()
        samples.append((time.perf_counter() - t0) * 1e3)
    return stats(samples, "host-clock, synchronized per call")


def method_name(t: TimedCall, cuda: bool, flush: bool) -> str:
    base = f"cuda-events(batch {EVENT_BATCH} behind a spin kernel)" if (cuda and t.events) else "host-clock+sync"
    return base + ("+flush" if flush else "")


def measure(targets: list[TimedCall], device: str, *, warmup_s: float, budget_s: float, min_reps: int,
            max_reps: int, target_iqr: float, flush_l2: bool) -> dict[str, Stats]:
    """Time `targets` interleaved until each has IQR/median <= target_iqr (and >= min_reps samples),
    or the time budget (seconds, for all targets together) ends, or max_reps is reached.

    Every target still gets min_reps samples even past the budget. Returns Stats per target name;
    raw samples stay in each TimedCall's `samples_ms`.
    """
    cuda = device.startswith("cuda")
    flush = CacheFlusher(device, flush_l2)
    t_end = time.perf_counter() + warmup_s
    while True:  # warm-up: at least one call each, then until the warm-up budget is spent
        for t in targets:
            t.call()
            t.sync()
        if time.perf_counter() >= t_end:
            break
    t_end = time.perf_counter() + budget_s
    while True:
        for t in targets:
            t.samples_ms.extend(_samples(t, flush, cuda))
        n = min(len(t.samples_ms) for t in targets)
        if n >= max_reps:
            break
        if n >= min_reps:
            converged = all(stats(t.samples_ms, "").iqr_rel <= target_iqr for t in targets)
            if converged or time.perf_counter() >= t_end:
                break
    return {t.name: stats(t.samples_ms, method_name(t, cuda, flush_l2)) for t in targets}


def cuda_graph_latency_ms(call: Callable[[], object], calls_per_graph: int = 10, replays: int = 20) -> Stats:
    """Per-call latency from replaying a CUDA graph that holds `calls_per_graph` calls (no launch overhead)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm up on a side stream before capture, as torch's docs require
        for _ in range(3):
            call()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls_per_graph):
            call()
    graph.replay()
    torch.cuda.synchronize()
    samples = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / calls_per_graph)
    return stats(samples, f"cuda-graph-replay x{calls_per_graph}")


@dataclass(frozen=True)
class KernelProfile:
    """What CUPTI saw per call: kernels launched, their summed device time (ms), and per kernel name its
    launches, device ms and share (measure/kernel_times.py), longest first."""

    count: int
    device_ms: float
    kernels: list[dict]


def profile_kernels(call: Callable[[], object], sync: Callable[[], None], calls: int = 5) -> KernelProfile:
    """Kernels launched per call, their summed device time per call (ms) and each kernel's, seen by CUPTI
    (torch.profiler).

    CUPTI sees the kernels of every library in the process (JAX, IREE, ONNX Runtime too). Only kernels
    count: memory copies and memsets (CUPTI's gpu_memcpy / gpu_memset activities, e.g. a host-to-device
    upload inside `run`) and GPU-side user annotations are left out of both numbers (see `is_kernel_event`).
    """
    from torch.profiler import ProfilerActivity, profile

    call()
    sync()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:  # device kernels only: less overhead
        for _ in range(calls):
            call()
            sync()
        torch.cuda.synchronize()
    from bakeoff.harness.measure.kernel_times import kernel_times

    launched = [(str(evt.name), evt.device_time if hasattr(evt, "device_time") else evt.cuda_time)
                for evt in prof.events() if is_kernel_event(evt)]
    count, device_us = len(launched), sum(us for _, us in launched)
    return KernelProfile(count // calls if count % calls == 0 else round(count / calls), device_us / calls / 1e3,
                         kernel_times(launched, calls))


# Names CUPTI/Kineto give memory operations on the device timeline ("Memcpy HtoD (Pageable -> Device)",
# "Memset (Device)"), used where the event does not say its activity type.
_NOT_KERNEL_PREFIXES = ("memcpy", "memset")
_NOT_KERNEL_ACTIVITIES = ("gpu_memcpy", "gpu_memset", "gpu_user_annotation", "cuda_runtime", "cuda_driver")


def is_kernel_event(evt: object) -> bool:
    """Whether a torch.profiler event is a device kernel (not a copy, a memset or a user annotation).

    Uses the event's Kineto activity type where torch exposes it (`FunctionEvent.activity_type`: "kernel",
    "gpu_memcpy", "gpu_memset", "gpu_user_annotation", ...), else its device type, annotation flag and name.
    """
    from torch.autograd import DeviceType

    if getattr(evt, "device_type", None) != DeviceType.CUDA:
        return False
    activity = str(getattr(evt, "activity_type", None) or "").lower()
    if activity == "kernel":
        return True
    if activity in _NOT_KERNEL_ACTIVITIES:
        return False
    if getattr(evt, "is_user_annotation", False):
        return False
    return not str(getattr(evt, "name", "")).strip().lower().startswith(_NOT_KERNEL_PREFIXES)
