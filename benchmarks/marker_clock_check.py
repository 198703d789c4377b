"""Is the SM clock read from the CUPTI pass's marker spins right? (GPU only; about 15 s.)

The device-timed headline's per-call clock (`device_span_sm_clock_mhz`, source "marker-spin") is read from each
marker's two spins (measure/marker_clock.py): f = cycles / (long spin - short spin). Three checks, one table each:

1. Warm-up bias: markers launched as N, 2N, N, 2N back to back, 30 times after a pause; the first pair starts
   cold (instruction cache, the block's first launch), the second warm. Their readings should agree within about
   0.5% and lie within 1-2% of NVML's on a near-idle device. A gap that grows with the clock says the overhead
   does not cancel (then a third, tiny spin should lead each marker).
2. A tiny call on a near-idle device (the clock steady): every call read, spread across calls under 1%, median
   within 1-2% of NVML's.
3. An 8192^3 bf16 matmul profiled 400 times after 3 s idle, while a power-capped clock falls: the spans times
   the marker clock (SM cycles) should spread far less than the spans in ms, and less than spans x NVML's
   per-call reading; the markers before and after a call should read within 1-2% of each other.

    PYTHONPATH=. python3 benchmarks/marker_clock_check.py [--json OUT.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from torch.autograd.profiler import profile

from bakeoff.harness.measure.clocks import ClockSampler
from bakeoff.harness.measure.device_time import MARK_NAME, _kernel_spans, profile_device_time
from bakeoff.harness.measure.marker_clock import MARK_SHORT_CYCLES, spin_pair_mhz
from bakeoff.harness.measure.noise import iqr_rel
from bakeoff.harness.measure.timing import TimedCall


def spread(values: list[float]) -> float:
    return max(values) / min(values) - 1


def warm_up_bias(rounds: int = 30) -> dict:
    """Check 1: the cold pair's and the warm pair's readings, and NVML's."""
    n = MARK_SHORT_CYCLES
    with ClockSampler("cuda:0") as nv, profile(use_device="cuda", use_cpu=False, use_kineto=True) as prof:
        for _ in range(rounds):
            torch.cuda.synchronize()
            for cycles in (n, 2 * n, n, 2 * n):
                torch.cuda._sleep(cycles)
            torch.cuda.synchronize()
            time.sleep(0.002)
    spins = sorted((k for k in _kernel_spans(prof.function_events) if MARK_NAME in k.name), key=lambda k: k.start_us)
    d = [k.end_us - k.start_us for k in spins]
    cold = [spin_pair_mhz(d[i], d[i + 1])[0] for i in range(0, len(d) - 3, 4)]
    warm = [spin_pair_mhz(d[i + 2], d[i + 3])[0] for i in range(0, len(d) - 3, 4)]
    cold, warm = [c for c in cold if c], [w for w in warm if w]
    return {"spins": len(d), "want": 4 * rounds, "cold_mhz": statistics.median(cold), "cold_spread": spread(cold),
            "warm_mhz": statistics.median(warm), "warm_spread": spread(warm),
            "nvml_mhz": statistics.median(nv.samples_mhz)}


def tiny_call(calls: int = 20) -> dict:
    """Check 2: a tiny call's per-call marker clocks on a near-idle device, and NVML's."""
    a = torch.randn(1024, device="cuda")
    with ClockSampler("cuda:0") as nv:
        f = profile_device_time([TimedCall("tiny", lambda: a + 1, torch.cuda.synchronize)], "cuda", calls, True)["tiny"]
    mk = f.span_sm_clock_mhz or []
    return {"source": f.span_sm_clock_source, "error": f.span_sm_clock_error, "calls": len(f.span_samples_ms),
            "marker_mhz": statistics.median(mk) if mk else None, "marker_spread": spread(mk) if mk else None,
            "nvml_mhz": statistics.median(nv.samples_mhz)}


def falling_clock(calls: int = 400, idle_s: float = 3.0) -> dict:
    """Check 3: a compute-bound call while the clock falls: spread in ms, in marker cycles, in NVML cycles."""
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    mm = TimedCall("mm", lambda: torch.mm(x, x), torch.cuda.synchronize)
    mm.call()
    torch.cuda.synchronize()
    time.sleep(idle_s)
    with ClockSampler("cuda:0") as nv:
        f = profile_device_time([mm], "cuda", calls, True)["mm"]
    spans, mk, nvml = f.span_samples_ms, f.span_sm_clock_mhz or [], nv.at(f.windows_s)
    out: dict = {"source": f.span_sm_clock_source, "error": f.span_sm_clock_error, "calls": len(spans),
                 "ms": {"spread": spread(spans), "iqr_rel": iqr_rel(spans)}}
    if mk:
        kc = [s * c for s, c in zip(spans, mk)]
        out["marker_kcycles"] = {"spread": spread(kc), "iqr_rel": iqr_rel(kc)}
        edges = f.span_sm_clock_edges_mhz or []
        apart = [abs(b - e) / ((b + e) / 2) for b, e in edges]
        out["edges_apart"] = {"median": statistics.median(apart), "max": max(apart)} if apart else None
        out["trace"] = [(i, spans[i], mk[i], nvml[i] if i < len(nvml) else None)
                        for i in range(0, len(spans), max(1, len(spans) // 20))]
    if nvml and len(nvml) == len(spans) and all(nvml):
        kc = [s * c for s, c in zip(spans, nvml)]
        out["nvml_kcycles"] = {"spread": spread(kc), "iqr_rel": iqr_rel(kc)}
    return out


def _print(one: dict, two: dict, three: dict) -> None:
    print(f"1. warm-up bias: {one['spins']} spins (want {one['want']}); cold pair {one['cold_mhz']:.1f} MHz (spread "
          f"{one['cold_spread']:.2%}), warm pair {one['warm_mhz']:.1f} MHz (spread {one['warm_spread']:.2%}); "
          f"cold/warm {one['cold_mhz'] / one['warm_mhz'] - 1:+.2%}; NVML {one['nvml_mhz']:.0f} MHz")
    mk = two["marker_mhz"]
    print(f"2. tiny call: source {two['source']} ({two['error'] or 'no error'}), {two['calls']} calls; markers "
          + (f"{mk:.1f} MHz, spread {two['marker_spread']:.2%}; against NVML {mk / two['nvml_mhz'] - 1:+.2%}"
             if mk else "gave no clock") + f" (NVML {two['nvml_mhz']:.0f} MHz)")
    print(f"3. 8192^3 bf16 matmul after idle: source {three['source']} ({three['error'] or 'no error'}), "
          f"{three['calls']} calls")
    for i, ms, mhz, nv in three.get("trace", []):
        print(f"   call {i:3d}  span {ms:.4f} ms  marker {mhz:7.1f} MHz  NVML {nv or 0:5.0f} MHz  "
              f"kcycles {ms * mhz:8.1f}")
    for key, name in (("ms", "span ms"), ("marker_kcycles", "span x marker"), ("nvml_kcycles", "span x NVML")):
        if key in three:
            print(f"   {name:14s} spread {three[key]['spread']:.2%}  IQR/median {three[key]['iqr_rel']:.2%}")
    if three.get("edges_apart"):
        print(f"   markers before/after a call apart: median {three['edges_apart']['median']:.2%}, "
              f"max {three['edges_apart']['max']:.2%}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write the three checks' figures here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("marker_clock_check: needs a CUDA GPU")
    one, two, three = warm_up_bias(), tiny_call(), falling_clock()
    _print(one, two, three)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"warm_up_bias": one, "tiny_call": two, "falling_clock": three,
                       "gpu": torch.cuda.get_device_name(0)}, f, indent=1)


if __name__ == "__main__":
    main()
