"""Why do our GEMM and attention figures read lower than `triton.testing.do_bench`'s? (issue 10, point 4)

Our timer (measure.timing.measure) and do_bench both put CUDA events around each call with the L2 flushed
before it. They differ in how they load the device: do_bench runs its calls back to back for `rep` ms after
a warm-up, while our timer starts every batch of EVENT_BATCH calls with a spin kernel of BLOCK_CYCLES (so the
host runs ahead) and interleaves short windows. On a power-capped GPU the average power of the window sets
the SM clock, and a compute-bound kernel's time follows the clock.

Each variant below times the same compiled call in interleaved rounds, while a thread samples NVML's SM
clock and power draw; the table gives each variant's median ms, its ratio to do_bench, the median SM clock
and power, and ms x MHz (the kernel's length in clock cycles: equal cycles mean the gap is the clock):

- timer: as every record on a GPU takes it: AUTO_SUSTAINED_S of back-to-back calls (measure.figures), then
  measure.timing.measure (warm-up 0.05 s, budget 0.3 s, min 20 samples, L2 flushed): back-to-back batches,
  a spin kernel only when the device caught up with the host;
- timer, no sustained load: the same without the load before it;
- timer, spin every batch: the timer before both changes (every batch of 5 behind a ~1 ms spin, then a sync);
- span: the CUPTI span as records take it: AUTO_SUSTAINED_S of load, then profile_device_time (20 calls, L2
  flushed), each profiled call after its lead-in calls;
- span, old: the pass before both changes (no load first, LEAD_IN_CALLS = 0);
- do_bench: warmup 50 ms, rep 300 ms, median (as benchmarks/validate_timing.py calls it);
- do_bench short: warmup 5 ms, rep 20 ms.

Usage (GPU): python benchmarks/dobench_gap.py [--rounds 3] [--dtype bfloat16] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from bakeoff.backends import backend_class, get_backend  # noqa: E402
from bakeoff.backends.base import TensorSpec  # noqa: E402
from bakeoff.harness.measure import device_time, timing  # noqa: E402
from bakeoff.harness.measure.clocks import sustain_load  # noqa: E402
from bakeoff.harness.measure.figures import AUTO_SUSTAINED_S  # noqa: E402
from bakeoff.harness.measure.environment import _nvml, _nvml_handle  # noqa: E402
from bakeoff.harness.worker.input_tensors import make_inputs  # noqa: E402
from bakeoff.workloads.ir import bind  # noqa: E402
from bakeoff.workloads.suite import builtin_workloads  # noqa: E402

# (workload, preset, backend): compute-bound, memory-bound, and a call the host dispatches slower than it runs.
CASES = [("gemm_bias_gelu", "gpu", "eager"), ("gemm_bias_gelu", "gpu", "inductor"),
         ("gemm_bias_gelu", "gpu", "tritongen"), ("attention", "gpu", "eager"), ("attention", "gpu", "inductor"),
         ("mlp_block", "gpu", "inductor"), ("softmax", "gpu", "inductor"), ("ew_sigmoid_relu", "cpu", "inductor")]


class PowerClock:
    """NVML's SM clock (MHz) and power draw (W) every 5 ms while entered."""

    def __init__(self) -> None:
        self.nv = _nvml()
        self.handle = _nvml_handle(self.nv, 0) if self.nv else None
        self.mhz: list[int] = []
        self.watts: list[float] = []
        self._stop = threading.Event()

    def _loop(self) -> None:
        while not self._stop.wait(0.005):
            self.mhz.append(self.nv.nvmlDeviceGetClockInfo(self.handle, self.nv.NVML_CLOCK_SM))
            self.watts.append(self.nv.nvmlDeviceGetPowerUsage(self.handle) / 1e3)

    def __enter__(self) -> "PowerClock":
        if self.nv:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.nv:
            self._stop.set()
            self._thread.join()

    def medians(self) -> tuple[float, float]:
        med = statistics.median
        return (med(self.mhz) if self.mhz else float("nan"), med(self.watts) if self.watts else float("nan"))


def timer(target: timing.TimedCall, sustained: bool) -> Callable[[], float]:
    def run() -> float:
        if sustained:
            sustain_load([target], AUTO_SUSTAINED_S, "cuda")
        target.samples_ms.clear()
        return timing.measure([target], "cuda", warmup_s=0.05, budget_s=0.3, min_reps=20, max_reps=5000,
                              target_iqr=0.02, flush_l2=True)[target.name].median_ms
    return run


def spin_every_batch(target: timing.TimedCall, batch: int) -> Callable[[], float]:
    """The timer before back-to-back batches: each batch of `batch` calls behind the spin kernel, then a sync."""
    def run() -> float:
        flush = timing.CacheFlusher("cuda", True)
        end_s = time.perf_counter() + 0.05
        while time.perf_counter() < end_s:
            target.call()
            target.sync()
        samples: list[float] = []
        end_s = time.perf_counter() + 0.3
        while len(samples) < 20 or (time.perf_counter() < end_s and timing.stats(samples, "").iqr_rel > 0.02):
            torch.cuda._sleep(timing.BLOCK_CYCLES)
            pairs = timing.enqueue_timed_calls(target, flush, batch)
            target.sync()
            torch.cuda.synchronize()
            samples += [s.elapsed_time(e) for s, e in pairs]
        return statistics.median(samples)
    return run


def span(target: timing.TimedCall, lead_in: bool) -> Callable[[], float]:
    def run() -> float:
        if lead_in:  # as records take it: the load first, then the lead-in before each call
            sustain_load([target], AUTO_SUSTAINED_S, "cuda")
        saved = device_time.LEAD_IN_CALLS
        device_time.LEAD_IN_CALLS = saved if lead_in else 0
        try:
            return device_time.profile_device_time([target], "cuda", 20, True)[target.name].span.median_ms
        finally:
            device_time.LEAD_IN_CALLS = saved
    return run


def do_bench(call: Callable[[], object], warmup: int, rep: int) -> Callable[[], float]:
    import triton.testing

    return lambda: float(triton.testing.do_bench(call, warmup=warmup, rep=rep, return_mode="median"))


def variants(target: timing.TimedCall) -> dict[str, Callable[[], float]]:
    return {"timer": timer(target, True), "timer, no sustained load": timer(target, False),
            "timer, spin every batch": spin_every_batch(target, 5), "span": span(target, True),
            "span, old": span(target, False),
            "do_bench": do_bench(target.call, 50, 300), "do_bench short": do_bench(target.call, 5, 20)}


def host_enqueue_ms(target: timing.TimedCall, calls: int = 20) -> float:
    """Host milliseconds to enqueue one event-timed call, the device kept busy (a host slower than the device
    would make do_bench's events include the host's dispatch)."""
    flush = timing.CacheFlusher("cuda", True)
    torch.cuda.synchronize()
    torch.cuda._sleep(timing.BLOCK_CYCLES * 20)  # ~20 ms of device work: the host never waits on it
    t0 = time.perf_counter()
    timing.enqueue_timed_calls(target, flush, calls)
    ms = (time.perf_counter() - t0) * 1e3 / calls
    torch.cuda.synchronize()
    return ms


def gap(workload: str, preset: str, backend: str, dtype: str, rounds: int) -> list[dict[str, Any]]:
    w = builtin_workloads()[workload]
    graph = bind(w.graph, w.presets[preset], dtype)
    why = backend_class(backend).available() or get_backend(backend).supports(graph, "cuda", dtype, {})
    if why:
        print(f"left out {workload} {backend}: {why}", flush=True)
        return []
    compiled = get_backend(backend).compile(graph, TensorSpec.of_inputs(graph), "cuda", {})
    prepared = compiled.prepare(make_inputs(graph, 0, "cuda"))
    compiled.run(prepared)
    compiled.sync()
    target = timing.TimedCall(backend, lambda: compiled.run(prepared), compiled.sync, True)
    print(f"{workload} {preset} {backend}: the host enqueues a timed call (flush, events, call) in "
          f"{host_enqueue_ms(target):.4f} ms", flush=True)
    seen: dict[str, list[tuple[float, float, float]]] = {}
    for _ in range(rounds):
        for name, run in variants(target).items():
            with PowerClock() as pc:
                ms = run()
            seen.setdefault(name, []).append((ms, *pc.medians()))
    med = statistics.median
    base = med(ms for ms, _, _ in seen["do_bench"])
    rows = []
    for name, values in seen.items():
        ms, mhz, watts = (med(v[i] for v in values) for i in range(3))
        rows.append({"workload": f"{workload} {preset}", "backend": backend, "variant": name, "ms": ms, "vs_do_bench": ms / base - 1,
                     "sm_mhz": mhz, "watts": watts, "kcycles": ms * mhz, "rounds": [list(v) for v in values]})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--json")
    parser.add_argument("--case", action="append", metavar="WORKLOAD/PRESET/BACKEND", help="only these cases")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("dobench_gap needs a CUDA device", file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = []
    print(f"{'workload':20s} {'backend':9s} {'variant':24s} {'ms':>8s} {'vs do_bench':>11s} {'SM MHz':>7s} "
          f"{'W':>5s} {'Mcycles':>8s}")
    cases = [tuple(c.split("/")) for c in args.case] if args.case else CASES
    for workload, preset, backend in cases:
        for r in gap(workload, preset, backend, args.dtype, args.rounds):
            rows.append(r)
            print(f"{r['workload']:20s} {r['backend']:9s} {r['variant']:24s} {r['ms']:8.4f} "
                  f"{100 * r['vs_do_bench']:10.1f}% {r['sm_mhz']:7.0f} {r['watts']:5.0f} {r['kcycles'] / 1e3:8.3f}",
                  flush=True)
        torch.cuda.empty_cache()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
