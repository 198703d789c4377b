"""One timer for every backend: adaptive, interleaved, with the cache flushed outside the timed region.

On a GPU, backends that launch on torch's current stream are timed with a pair of CUDA events around each
call (the flush is enqueued before the start event, so it is not timed), in batches of EVENT_BATCH calls
enqueued back to back, each batch read while the next one runs, so the device never pauses between samples
of a device-bound call, as in triton.testing.do_bench's loop; the others with the host clock around the
call and the backend's `sync()`, after a device synchronize (their dispatch is included). On the CPU, the
host clock. Targets are sampled in turn (A, B, A, B, ...) so that drift in clocks or load hits all.
This is the timer's figure (`latency_ms_*`); the single synchronized call and the pipelined call are here
too, the CUPTI device time is in device_time.py, and figures.py picks the headline among them.
"""
from __future__ import annotations

import math
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


# Event-timed samples come in batches of this many calls, a pair of CUDA events around each (the flush
# enqueued before its start event). Batches follow each other without a pause: a batch is enqueued before the
# one before it is read (waiting on its last event), so the device runs a device-bound call back to back, as
# in triton.testing.do_bench's long loop. A pause would change the figure itself: on the power-capped H200 a
# GEMM timed in batches of 5 behind a 1 ms rest read 5-9% faster than do_bench's loop, and as fast as
# do_bench's loop once the rests were gone (docs/EVIDENCE.md).
EVENT_BATCH = 5


# A spin kernel of this many clock cycles (about 1 ms at the H200's 1.98 GHz) starts a batch only when the
# device has caught up with the host (the first batch, or a call the host dispatches more slowly than the
# device runs it): the device is busy while the host enqueues the batch, so no sample waits on the host's
# dispatch of its own call unless the host is slower than the device throughout.
BLOCK_CYCLES = 2_000_000


def enqueue_timed_calls(t: TimedCall, flush: CacheFlusher,
                        count: int) -> list[tuple[torch.cuda.Event, torch.cuda.Event]]:
    """Enqueue `count` calls of `t`, each after the flush and between a pair of CUDA events; returns the pairs."""
    pairs = []
    for _ in range(count):
        flush()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t.call()
        end.record()
        pairs.append((start, end))
    return pairs


class EventBatches:
    """Event-timed batches on the device, the newest still in flight (`pending`) while the host enqueues the
    next; `spins` counts the batches that started behind the spin kernel."""

    def __init__(self) -> None:
        self.pending: tuple[TimedCall, list] | None = None
        self.spins = 0

    def add(self, t: TimedCall, flush: CacheFlusher, count: int) -> None:
        """Enqueue `count` event-timed calls of `t`, then read the batch before them."""
        if self.pending is None or self.pending[1][-1][1].query():  # the device has run everything queued
            torch.cuda._sleep(BLOCK_CYCLES)
            self.spins += 1
        pairs = enqueue_timed_calls(t, flush, count)
        self.read()
        self.pending = (t, pairs)

    def read(self) -> None:
        """Wait for the batch in flight and add its samples to its target."""
        if self.pending is None:
            return
        t, pairs = self.pending
        self.pending = None
        pairs[-1][1].synchronize()
        t.samples_ms.extend(start.elapsed_time(end) for start, end in pairs)

    def finish(self, targets: list[TimedCall]) -> None:
        """Read the last batch, then let each target's own sync and the device finish."""
        self.read()
        for t in targets:
            if t.events:
                t.sync()
        torch.cuda.synchronize()


def _host_sample(t: TimedCall, flush: CacheFlusher, cuda: bool) -> float:
    flush()
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    t.call()
    t.sync()
    return (time.perf_counter() - t0) * 1e3


def host_latency(call: Callable[[], object], sync: Callable[[], None], device: str, reps: int = 20,
                 budget_s: float | None = None) -> Stats:
    """Per-call latency with the host clock: one call and the backend's own `sync()`, the device idle before it
    (what one call costs when nothing is queued, dispatch included; no cache flush). The device synchronize
    that leaves it idle is outside the timed region, as in the timer's host samples: a JAX user waits with
    block_until_ready, not with cudaDeviceSynchronize. Stops after `reps` calls, or once `budget_s` seconds are
    spent with at least 3 calls taken."""
    cuda = device.startswith("cuda")
    samples: list[float] = []
    deadline = None if budget_s is None else time.perf_counter() + budget_s
    while len(samples) < reps and not (deadline and len(samples) >= 3 and time.perf_counter() > deadline):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        call()
        sync()
        samples.append((time.perf_counter() - t0) * 1e3)
    if cuda:
        torch.cuda.synchronize()
    return stats(samples, HOST_SINGLE_METHOD)


HOST_SINGLE_METHOD = "host-clock, synchronized per call"
PIPELINED_METHOD = "host-clock, pipelined"
# A pipelined batch aims at this much wall time, within these bounds on the number of calls. The lower bound
# (the first call's dispatch is exposed, the others' hidden) gives way to 2 calls where fewer than 5 already
# hold PIPELINE_LONG_BATCH_S of work: a dispatch (a millisecond at most) is then under 1% of the batch, and a
# 1 s call is not run ten times for this figure.
PIPELINE_BATCH_S = 0.02
PIPELINE_CALLS = (5, 200)
PIPELINE_LONG_BATCH_S = 0.1


# What calls in flight may allocate, at most: this much, or on a GPU this share of its free memory where that is
# more. A 4 GiB cap alone held a pipelined batch of 8192x8192 bf16 calls to 4-16 (JAX's own loop runs ~100), so
# the first call's exposed dispatch weighed 6-25% in each per-call figure.
PIPELINE_MEMORY_BYTES = 4 * 2**30
PIPELINE_MEMORY_SHARE = 0.25


def pipeline_memory_cap_bytes(device: str) -> int:
    """Bytes that a pipelined batch's calls in flight may allocate on `device`: PIPELINE_MEMORY_BYTES, or on a
    GPU PIPELINE_MEMORY_SHARE of the memory free there now where that is more."""
    if not device.startswith("cuda") or not torch.cuda.is_available():
        return PIPELINE_MEMORY_BYTES
    free_bytes, _ = torch.cuda.mem_get_info(torch.device(device))
    return max(PIPELINE_MEMORY_BYTES, int(free_bytes * PIPELINE_MEMORY_SHARE))


def pipeline_calls(single_call_ms: float, bytes_per_call: int,
                   memory_cap_bytes: int = PIPELINE_MEMORY_BYTES) -> int:
    """Calls per pipelined batch: about PIPELINE_BATCH_S of work, at least PIPELINE_CALLS[0] calls or, fewer,
    PIPELINE_LONG_BATCH_S of work (at least 2 calls), and few enough that what calls in flight allocate (each may
    allocate its outputs, as XLA's do; `bytes_per_call` at most) stays under `memory_cap_bytes`."""
    lo, hi = PIPELINE_CALLS
    if single_call_ms > 0:
        lo = min(lo, max(2, math.ceil(PIPELINE_LONG_BATCH_S * 1e3 / single_call_ms)))
    want = int(PIPELINE_BATCH_S * 1e3 / single_call_ms) if single_call_ms > 0 else hi
    by_memory = max(2, memory_cap_bytes // max(bytes_per_call, 1))
    return max(2, min(max(lo, min(hi, want)), by_memory))


def pipelined_latency(call: Callable[[], object], sync: Callable[[], None], device: str, calls: int,
                      reps: int = 5, budget_s: float | None = None) -> Stats:
    """Per-call wall time of `calls` calls enqueued back to back and synchronized once (host clock), as a
    model's steady loop sees it: where the host dispatches faster than the device runs, the device time;
    else the host's dispatch time. No cache flush between calls (a flush on torch's stream would not be
    ordered with a backend's own stream); the batch ends at the backend's `sync()`, the device synchronize
    outside the timed region, as in `host_latency`. `reps` batches (at least 2 when `budget_s` runs out)."""
    cuda = device.startswith("cuda")
    samples: list[float] = []
    deadline = None if budget_s is None else time.perf_counter() + budget_s
    while len(samples) < reps and not (deadline and len(samples) >= 2 and time.perf_counter() > deadline):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        sync()
        samples.append((time.perf_counter() - t0) * 1e3 / calls)
    if cuda:
        torch.cuda.synchronize()
    return stats(samples, f"{PIPELINED_METHOD} x{calls}")


def method_name(t: TimedCall, cuda: bool, flush: bool) -> str:
    base = (f"cuda-events(back-to-back batches of {EVENT_BATCH}, a spin kernel when the device caught up)"
            if (cuda and t.events) else "host-clock+sync")
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
    batches = EventBatches() if cuda else None
    while True:
        for t in targets:
            if batches is not None and t.events:
                batches.add(t, flush, EVENT_BATCH)
            else:
                if batches is not None:
                    batches.read()  # the host-timed sample synchronizes the device anyway
                t.samples_ms.append(_host_sample(t, flush, cuda))
        n = min(len(t.samples_ms) for t in targets)  # the batch still in flight is not counted yet
        if n >= max_reps:
            break
        if n >= min_reps:
            converged = all(stats(t.samples_ms, "").iqr_rel <= target_iqr for t in targets)
            if converged or time.perf_counter() >= t_end:
                break
    if batches is not None:
        batches.finish(targets)
    return {t.name: stats(t.samples_ms, method_name(t, cuda, flush_l2)) for t in targets}


# A replayed graph holds about this much work: 10 calls of a short call, fewer of a long one (at least 1).
GRAPH_REPLAY_MS = 2.0
GRAPH_CALLS = (1, 10)


def graph_calls(single_call_ms: float) -> int:
    """Calls per captured CUDA graph for a call of `single_call_ms`: about GRAPH_REPLAY_MS of work, within
    GRAPH_CALLS. A replay's own launch (microseconds) is then a negligible share of a long call, as it is
    of ten short ones."""
    if not single_call_ms > 0:
        return GRAPH_CALLS[1]
    return max(GRAPH_CALLS[0], min(GRAPH_CALLS[1], round(GRAPH_REPLAY_MS / single_call_ms)))


def cuda_graph_latency_ms(call: Callable[[], object], calls_per_graph: int = 10, replays: int = 20,
                          budget_s: float | None = None, min_replays: int = 5) -> Stats:
    """Per-call latency from replaying a CUDA graph that holds `calls_per_graph` calls (no launch overhead):
    `replays` replays, or fewer (at least `min_replays`) once `budget_s` seconds of replaying are spent."""
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
    samples: list[float] = []
    deadline = None if budget_s is None else time.perf_counter() + budget_s
    while len(samples) < replays and not (deadline and len(samples) >= min_replays
                                          and time.perf_counter() > deadline):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / calls_per_graph)
    return stats(samples, f"cuda-graph-replay x{calls_per_graph}")


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
