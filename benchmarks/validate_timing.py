"""Validate bakeoff's timer on a GPU: prints a table, writes JSON to $OUT when set.

1. Agreement: our timer (CUDA events, L2 flushed) and our headline (the CUPTI span, L2 flushed), each after
   the sustained load a record on a GPU gets (measure.figures.AUTO_SUSTAINED_S), vs
   `triton.testing.do_bench(return_mode="median")` on the same call, for eager, Inductor and tritongen, on
   five workloads at `gpu` sizes, in three interleaved rounds. Target: within 5%.
2. Reproducibility: a case run 5 times in fresh worker processes (the real worker, a cold compile each);
   spread of its timer medians and headlines (max/min - 1). Target: under 2%.
3. Ceilings measured in the same run (copy GB/s, bf16 matmul TFLOP/s).
4. With --clock-settle, this alone: how long the SM clock takes to settle under sustained compute-bound load (what
   `timing.sustained_s: auto` stands in for, config.timing.AUTO_SUSTAINED_S). The device idles `--settle-idle-s`
   first (as between a compile and the timer), then runs a square matmul back to back, two batches in flight,
   for the given seconds while NVML samples the SM clock every 5 ms. Prints the clock (median, min) and the
   matmul's TFLOP/s (CUDA events) against elapsed seconds, and the time until each stays within 2% of its final
   value (the median of the last fifth). Skips, exit 0, without a CUDA device or NVML.

Usage: python benchmarks/validate_timing.py [--dtype bfloat16] [--repeats 5] [--backend eager ...]
       python benchmarks/validate_timing.py --agreement-only     # 1. alone (`benchmarks/gpu.sh suite` and `timing`)
       python benchmarks/validate_timing.py --clock-settle 60 [--settle-idle-s 5] [--settle-size 8192]
"""
from __future__ import annotations

import argparse
import statistics
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from bakeoff.backends import get_backend  # noqa: E402
from bakeoff.backends.base import TensorSpec  # noqa: E402
from bakeoff.harness.measure.device_time import profile_device_time  # noqa: E402
from bakeoff.harness.measure.calibrate import measure_ceilings  # noqa: E402
from bakeoff.harness.config.timing import AUTO_SUSTAINED_S  # noqa: E402
from bakeoff.harness.measure.clocks import (SETTLE_TOLERANCE, ClockSampler, binned, settle_time_s,  # noqa: E402
                                             sustain_load)
from bakeoff.harness.config.schema import parse_config  # noqa: E402
from bakeoff.harness.plan.workloads import resolve_workloads  # noqa: E402
from bakeoff.harness.supervise.case_process import execute_case  # noqa: E402
from bakeoff.harness.worker.input_tensors import make_inputs  # noqa: E402
from bakeoff.harness.plan.cases import plan_cases  # noqa: E402
from bakeoff.harness.measure.timing import TimedCall, measure  # noqa: E402
from bakeoff.workloads.ir import bind  # noqa: E402
from bakeoff.workloads.suite import builtin_workloads  # noqa: E402

WORKLOADS = ["ew_sigmoid_relu", "layernorm_gelu", "softmax", "gemm_bias_gelu", "attention"]
BACKENDS = ("eager", "inductor", "tritongen")


ROUNDS = 3


def agreement(dtype: str, backends: tuple[str, ...] = BACKENDS) -> list[dict]:
    import triton.testing

    rows = []
    for name in WORKLOADS:
        w = builtin_workloads()[name]
        graph = bind(w.graph, w.presets["gpu"], dtype)
        inputs = make_inputs(graph, 0, "cuda")
        for backend in backends:
            b = get_backend(backend)
            compiled = b.compile(graph, TensorSpec.of_inputs(graph), "cuda", b.Options())
            prepared = compiled.prepare(inputs)
            compiled.run(prepared)
            compiled.sync()
            target = TimedCall(backend, lambda: compiled.run(prepared), compiled.sync, True)
            # Interleaved rounds (ours, span, do_bench; again): a clock that drifts under sustained load
            # (GEMMs are power-bound) moves all three alike instead of whichever ran last.
            timer_ms, span_ms, theirs_ms, ns, iqrs = [], [], [], [], []
            for _ in range(ROUNDS):  # each figure as a record takes it: after the sustained load (figures.py)
                sustain_load([target], AUTO_SUSTAINED_S, "cuda")
                ours = measure([target], "cuda", warmup_s=0.05, budget_s=0.3, min_reps=20, max_reps=5000,
                               target_iqr=0.02, flush_l2=True)[backend]
                timer_ms.append(ours.median_ms)
                ns.append(ours.n)
                iqrs.append(ours.iqr_rel)
                sustain_load([target], AUTO_SUSTAINED_S, "cuda")
                span_ms.append(profile_device_time([target], "cuda", 20, True)[backend].span.median_ms)
                theirs_ms.append(triton.testing.do_bench(lambda: compiled.run(prepared), warmup=50, rep=300,
                                                         return_mode="median"))
            med = statistics.median
            rows.append({"workload": name, "backend": backend, "ours_ms": med(timer_ms), "ours_n": sum(ns),
                         "ours_iqr_rel": med(iqrs), "headline_ms": med(span_ms), "do_bench_ms": med(theirs_ms),
                         "rounds": ROUNDS, "diff_rel": med(timer_ms) / med(theirs_ms) - 1,
                         "headline_diff_rel": med(span_ms) / med(theirs_ms) - 1})
            print(f"{name:18s} {backend:9s} timer {med(timer_ms):.4f} ms, CUPTI span {med(span_ms):.4f} ms, "
                  f"do_bench {med(theirs_ms):.4f} ms (medians of {ROUNDS} interleaved rounds)", flush=True)
            del compiled, prepared
        del inputs
        torch.cuda.empty_cache()
    return rows


def print_agreement(rows: list[dict]) -> None:
    print(f"\n{'workload':18s} {'backend':9s} {'timer ms':>9s} {'n':>5s} {'iqr':>6s} {'span ms':>9s} "
          f"{'do_bench':>9s} {'timer':>7s} {'span':>7s}  <5%?")
    for r in rows:
        ok = abs(r["diff_rel"]) < 0.05 and abs(r["headline_diff_rel"]) < 0.05
        print(f"{r['workload']:18s} {r['backend']:9s} {r['ours_ms']:9.4f} {r['ours_n']:5d} {r['ours_iqr_rel']:6.3f} "
              f"{r['headline_ms']:9.4f} {r['do_bench_ms']:9.4f} {100 * r['diff_rel']:6.1f}% "
              f"{100 * r['headline_diff_rel']:6.1f}%  {'yes' if ok else 'NO'}")


def reproducibility(dtype: str, repeats: int, workload: str, backend: str) -> dict:
    text = (f"name: repro\ndevice: cuda\npreset: gpu\ndtypes: [{dtype}]\nworkloads: [{workload}]\n"
            f"backends: {{{backend}: {{}}}}\nseeds: [0, 1]\ncompile: {{warm: false}}\n"
            "timing: {warmup_s: 0.1, budget_s: 1.0, min_reps: 20, target_iqr: 0.02}\n")
    cfg, where = parse_config(text, "<repro>")
    (case,) = plan_cases(cfg, resolve_workloads(cfg, where, "gpu"), "cuda")
    medians, headlines, speedups, clocks = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeats):
            record = execute_case(case, Path(tmp))
            if record.get("status") != "ok":
                raise RuntimeError(f"case failed: {record.get('status')}: {record.get('reason')}")
            medians.append(record["latency_ms_median"])
            headlines.append(record["headline_ms"])
            # eager ran interleaved in the same process: the ratio of the two headlines, and the SM clock
            speedups.append(record.get("speedup_vs_eager") or float("nan"))
            clocks.append(record.get("sm_clock_mhz"))
            print(f"fresh worker {len(medians)}: {workload}/{backend} timer {medians[-1]:.4f} ms, headline "
                  f"{headlines[-1]:.4f} ms ({record.get('headline_method')}), eager's headline "
                  f"{record.get('eager_headline_ms')} ms, speedup {speedups[-1]:.4f}, SM clock {clocks[-1]} MHz "
                  f"({record.get('sm_clock_mhz_min')}-{record.get('sm_clock_mhz_max')})", flush=True)
    return {"workload": workload, "backend": backend, "medians_ms": medians, "headlines_ms": headlines,
            "speedups": speedups, "sm_clock_mhz": clocks,
            "spread": max(medians) / min(medians) - 1, "headline_spread": max(headlines) / min(headlines) - 1,
            "speedup_spread": max(speedups) / min(speedups) - 1}


SETTLE_EDGES_S = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0,
                  60.0, 90.0, 120.0, 180.0, 240.0, 300.0, 450.0, 600.0)
MATMULS_PER_BATCH = 8


def _matmul_load(seconds: float, size: int, dtype: torch.dtype) -> tuple[list[float], list[float]]:
    """Square matmuls back to back for `seconds`, two batches in flight; (host seconds since the start at which
    each batch was seen done, its TFLOP/s from the CUDA events around it)."""
    a = torch.randn(size, size, device="cuda", dtype=dtype)
    b = torch.randn(size, size, device="cuda", dtype=dtype)
    flop = 2.0 * size**3 * MATMULS_PER_BATCH
    done_s, tflops = [], []
    events = [torch.cuda.Event(enable_timing=True)]
    t0 = time.perf_counter()
    events[0].record()
    while time.perf_counter() - t0 < seconds:
        for _ in range(MATMULS_PER_BATCH):
            torch.mm(a, b)
        events.append(torch.cuda.Event(enable_timing=True))
        events[-1].record()
        if len(events) >= 3:  # the batch before this one: the device already has the next queued
            events[-2].synchronize()
            done_s.append(time.perf_counter() - t0)
            tflops.append(flop / (events[-3].elapsed_time(events[-2]) * 1e-3) / 1e12)
    torch.cuda.synchronize()
    return done_s, tflops


def clock_settle(seconds: float, idle_s: float, size: int, dtype_name: str) -> dict | None:
    """Section 4 (module docstring); None (and a line saying why) where it cannot run."""
    if not torch.cuda.is_available():
        print("clock settle: skipped: no CUDA device")
        return None
    dtype = getattr(torch, dtype_name)
    torch.mm(torch.ones(64, 64, device="cuda", dtype=dtype), torch.ones(64, 64, device="cuda", dtype=dtype))
    torch.cuda.synchronize()  # the library's handle and kernels loaded before the idle spell
    time.sleep(idle_s)
    with ClockSampler("cuda") as clock:
        start = time.perf_counter()
        done_s, tflops = _matmul_load(seconds, size, dtype)
    if not clock.samples_mhz or clock.error:
        print(f"clock settle: skipped: no SM clock reading ({clock.error or 'no sample'})")
        return None
    clock_s = [t - start for t in clock.times_s]
    clock_settle_s, final_mhz = settle_time_s(clock_s, clock.samples_mhz)
    work_settle_s, final_tflops = settle_time_s(done_s, tflops)
    edges = [e for e in SETTLE_EDGES_S if e < seconds] + [seconds]
    print(f"\nSM clock under sustained {size}³ {dtype_name} matmuls on {torch.cuda.get_device_name()} after "
          f"{idle_s:g} s idle ({len(clock.samples_mhz)} NVML samples, {len(tflops)} batches of {MATMULS_PER_BATCH})")
    print(f"{'elapsed s':>15s} {'SM MHz median':>14s} {'min':>6s} {'TFLOP/s':>8s}")
    for (lo, hi, med, low, _), (_, _, rate, _, _) in zip(binned(clock_s, clock.samples_mhz, edges),
                                                         binned(done_s, tflops, edges)):
        print(f"{lo:7.2f}–{hi:<7.2f} {_num(med, '14.0f')} {_num(low, '6.0f')} {_num(rate, '8.1f')}")
    for what, settled, final, unit in (("SM clock", clock_settle_s, final_mhz, "MHz"),
                                       ("matmul TFLOP/s", work_settle_s, final_tflops, "TFLOP/s")):
        when = (f"{settled:.2f} s" if settled is not None
                else "not within the trace (still moving in its last fifth: run longer)")
        print(f"{what} within {SETTLE_TOLERANCE:.0%} of its final {_num(final, '.1f')} {unit} from {when}")
    print(f"(timing.sustained_s: auto is {AUTO_SUSTAINED_S:g} s of load per case)")
    return {"gpu": torch.cuda.get_device_name(), "size": size, "dtype": dtype_name, "idle_s": idle_s,
            "seconds": seconds, "clock_s": clock_s, "sm_clock_mhz": clock.samples_mhz, "batch_done_s": done_s,
            "batch_tflops": tflops, "clock_settle_s": clock_settle_s, "final_sm_clock_mhz": final_mhz,
            "tflops_settle_s": work_settle_s, "final_tflops": final_tflops, "tolerance": SETTLE_TOLERANCE}


def _num(value: float | None, fmt: str) -> str:
    width = fmt.split(".")[0]
    return format(value, fmt) if value is not None else format("-", f">{width or 1}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--backend", action="append", help=f"backends to compare with do_bench (default {BACKENDS})")
    ap.add_argument("--agreement-only", action="store_true", help="only 1.: no ceilings, no fresh-process repeats")
    ap.add_argument("--repro", action="append", metavar="WORKLOAD/BACKEND",
                    help="cases for 2. (default: inductor's ew_sigmoid_relu and softmax)")
    ap.add_argument("--no-ceilings", action="store_true", help="skip 3.")
    ap.add_argument("--clock-settle", type=float, nargs="?", const=60.0, metavar="SECONDS",
                    help="only 4.: the SM clock under SECONDS (default 60) of sustained matmul load")
    ap.add_argument("--settle-idle-s", type=float, default=5.0, help="4.: seconds the device idles first")
    ap.add_argument("--settle-size", type=int, default=8192, help="4.: the square matmul's size")
    args = ap.parse_args()
    out = os.environ.get("OUT")
    if args.clock_settle is not None:
        trace = clock_settle(args.clock_settle, args.settle_idle_s, args.settle_size, args.dtype)
        if out and trace:
            Path(out, "clock_settle.json").write_text(json.dumps(trace, indent=1))
        return
    ap_skip = os.environ.get("SKIP_AGREEMENT") == "1"  # 2. alone (the agreement already ran in this session)
    rows = [] if ap_skip else agreement(args.dtype, tuple(args.backend or BACKENDS))
    print_agreement(rows)
    if args.agreement_only:
        if out:
            Path(out, "do_bench_agreement.json").write_text(json.dumps(
                {"agreement": rows, "gpu": torch.cuda.get_device_name(), "dtype": args.dtype}, indent=1))
        return
    ceilings = [] if args.no_ceilings else measure_ceilings("cuda", [args.dtype])
    pairs = [tuple(x.split("/")) for x in (args.repro or ["ew_sigmoid_relu/inductor", "softmax/inductor"])]
    repro = [reproducibility(args.dtype, args.repeats, w, b) for w, b in pairs] if args.repeats else []
    print("\nceilings (same run):")
    for name, value, unit, method in ceilings:
        print(f"  {name:28s} {value:10.1f} {unit}   {method}")
    print(f"\n{'fresh-process repeats':26s} {'figure':9s} {'medians ms':52s} spread  <2%?")
    for r in repro:
        for figure, key, spread in (("timer", "medians_ms", "spread"), ("headline", "headlines_ms", "headline_spread"),
                                    ("speedup", "speedups", "speedup_spread")):
            meds = ", ".join(f"{m:.4f}" for m in r[key])
            print(f"{r['workload'] + '/' + r['backend']:26s} {figure:9s} {meds:52s} {100 * r[spread]:5.2f}%  "
                  f"{'yes' if r[spread] < 0.02 else 'NO'}")
    if out:
        Path(out, "validate_timing.json").write_text(json.dumps(
            {"ceilings": ceilings, "agreement": rows, "reproducibility": repro,
             "gpu": torch.cuda.get_device_name()}, indent=1))


if __name__ == "__main__":
    main()
