"""Does the harness's per-call clock read the clock a compute-bound call ran at, whatever ran beside it? (GPU
only; ~50 s.)

The harness reads a call's SM clock with the GPU's PM sampler over the call's span where cupti-python is
installed (measure/pm_sampler.py), else from the marker spins just before and just after it
(measure/marker_clock.py). Inside a power-capped kernel the clock may differ from the clock around it, which no
marker can see. Here a persistent bf16 matmul (Triton, one program per SM) reads `%clock64` and `%globaltimer`
where each program starts and ends, so its cycles over its nanoseconds are the clock the kernel itself ran at. It
is profiled as the harness profiles a paired case (`profile_device_time`: it and a neighbour interleaved, each
call between markers, the L2 flushed before each), after SUSTAIN_S of the pair back to back, beside neighbours
that load the GPU differently:

- `tiny`: a one-element add (the device idles between the matmul's calls),
- `spin`: one thread spinning 20M cycles (about 10 ms at low power: a slow, low-power neighbour's calls),
- `copy`: a 1 GiB elementwise kernel (memory-bound),
- `gemm`: torch.mm on 8192^3 bf16 (cuBLAS: the pair holds the GPU at its power limit).

Per neighbour: the matmul's span, the harness's clock ("marker" in the table; its source and the markers' own
reading below it), the in-kernel clock, NVML's clock, and the span in cycles by the harness's clock and by the
in-kernel clock. Where the cycles by the in-kernel clock agree across neighbours and those by the harness's clock
do not, the matmul's time moved with its own clock and the harness misread it; where neither agrees, part of the
call's time does not scale with the SM clock. Last, the profiled pass's wall time with the sampler on and off,
in the timing gate and after it.

    PYTHONPATH=. python3 benchmarks/kernel_clock_check.py [--json OUT.json] [--calls 60]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any, Callable, Sequence

from bakeoff.harness.measure.clocks import ClockSampler
from bakeoff.harness.measure.device_time import profile_device_time, run_pass
from bakeoff.harness.measure.pm_sampler import ENV_OFF
from bakeoff.harness.measure.timing import TimedCall

NEIGHBOURS = ("tiny", "spin", "copy", "gemm")
SUSTAIN_S = 3.0  # the pair back to back before each pass: the power controller's clock settles within 2-3 s
SIZE = 8192  # the matmul's M = N = K
BM, BN, BK = 128, 256, 64


def median_or_none(xs: Sequence[float]) -> float | None:
    """The median of `xs`, None where there are none."""
    return statistics.median(xs) if xs else None


def shown(value: float | None, spec: str) -> str:
    """`value` in `spec`, "-" where there is none."""
    return "-" if value is None else format(value, spec)


def program_mhz(stamps: Sequence[Sequence[int]]) -> list[float]:
    """Each program's clock in MHz from its (clock64 start, globaltimer ns start, clock64 end, globaltimer ns
    end); programs whose timer did not advance are left out."""
    return [(c1 - c0) / (t1 - t0) * 1e3 for c0, t0, c1, t1 in stamps if t1 > t0 and c1 > c0]


def profiled_rows(calls_made: int, profiled: int) -> list[int]:
    """Which of the matmul's calls (0, 1, ... in launch order) the pass profiled: one unprofiled call first, then
    per profiled call the same number of lead-in calls and the profiled one (device_time.profile_device_time)."""
    if profiled <= 0 or (calls_made - 1) % profiled:
        raise ValueError(f"{calls_made} calls do not split into 1 + {profiled} equal groups")
    group = (calls_made - 1) // profiled
    return [1 + k * group + group - 1 for k in range(profiled)]


def cycles_spread(rows: Sequence[dict[str, Any]], key: str) -> float | None:
    """max / min - 1 over the neighbours' medians of `key` (None where one lacks it)."""
    values = [r[key] for r in rows]
    if any(v is None for v in values) or not values:
        return None
    return max(values) / min(values) - 1


def summarise(name: str, spans_ms: Sequence[float], marker_mhz: Sequence[float],
              kernel_mhz: Sequence[float | None], nvml_mhz: Sequence[float | None]) -> dict[str, Any]:
    """One neighbour's row: medians of the matmul's span and clocks, and of its cycles (span x clock) by each;
    a call whose programs gave no in-kernel reading (None) is left out of the in-kernel figures."""
    med = median_or_none
    nv = [x for x in nvml_mhz if x]
    inside = [(s, k) for s, k in zip(spans_ms, kernel_mhz) if k]
    paired = [(m, k) for m, k in zip(marker_mhz, kernel_mhz) if k]
    return {"neighbour": name, "calls": len(spans_ms), "span_ms": med(spans_ms), "marker_mhz": med(marker_mhz),
            "kernel_mhz": med([k for _, k in inside]), "nvml_mhz": med(nv),
            "marker_mcycles": med([s * m / 1e3 for s, m in zip(spans_ms, marker_mhz)]),
            "kernel_mcycles": med([s * k / 1e3 for s, k in inside]),
            "marker_over_kernel": med([m / k - 1 for m, k in paired])}


def _register_reads() -> tuple[Any, Any]:
    """Triton functions reading the SM's `%clock64` and the device's `%globaltimer` (ns) where they are called."""
    import triton
    import triton.language as tl

    @triton.jit
    def clock64():
        return tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)

    @triton.jit
    def globaltimer():
        return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False,
                                         pack=1)

    return clock64, globaltimer


def clocked_matmul_kernel() -> Any:
    """The persistent matmul, its programs stamping their start and end (built here: needs Triton)."""
    import triton
    import triton.language as tl

    clock64, globaltimer = _register_reads()

    @triton.jit
    def _stamp():
        return clock64(), globaltimer()

    @triton.jit(do_not_specialize=["row"])
    def clocked_matmul(a, b, c, stamps, row, S: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                       BK: tl.constexpr, PROGRAMS: tl.constexpr):
        pid = tl.program_id(0)
        c0, t0 = _stamp()
        for tile in range(pid, (S // BM) * (S // BN), PROGRAMS):
            rm = (tile // (S // BN)) * BM + tl.arange(0, BM)
            rn = (tile % (S // BN)) * BN + tl.arange(0, BN)
            rk = tl.arange(0, BK)
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for k in range(0, S, BK):
                x = tl.load(a + rm[:, None] * S + (k + rk)[None, :])
                y = tl.load(b + (k + rk)[:, None] * S + rn[None, :])
                acc = tl.dot(x, y, acc)
            tl.store(c + rm[:, None] * S + rn[None, :], acc.to(tl.bfloat16))
        c1, t1 = _stamp()
        out = stamps + (row * PROGRAMS + pid) * 4
        tl.store(out, c0)
        tl.store(out + 1, t0)
        tl.store(out + 2, c1)
        tl.store(out + 3, t1)

    return clocked_matmul


def spinning_kernel() -> Any:
    """One thread spinning until its SM's clock64 has advanced CYCLES (a kernel of its own name)."""
    import triton
    import triton.language as tl

    clock64, _ = _register_reads()

    @triton.jit
    def neighbour_spin(out, CYCLES: tl.constexpr):
        c0 = clock64()
        c = c0
        while c - c0 < CYCLES:
            c = clock64()
        tl.store(out, c - c0)

    return neighbour_spin


def neighbour_call(name: str) -> Any:
    """The neighbour's TimedCall."""
    import torch

    sync = torch.cuda.synchronize
    if name == "tiny":
        one = torch.zeros(1, device="cuda")
        return TimedCall("tiny", lambda: one + 1, sync)
    if name == "spin":  # not torch.cuda._sleep: CUPTI names that `spin_kernel`, as the markers
        spin, out = spinning_kernel(), torch.zeros(1, device="cuda", dtype=torch.int64)
        return TimedCall("spin", lambda: spin[(1,)](out, CYCLES=20_000_000, num_warps=1), sync)
    if name == "copy":  # a kernel (torch.add), not copy_: a device-to-device copy_ is a memcpy, which the
        # profile's kernel spans do not see
        src = torch.zeros(2 ** 28, device="cuda", dtype=torch.float32)  # 1 GiB read, 1 GiB written
        dst = torch.empty_like(src)
        return TimedCall("copy", lambda: torch.add(src, 1.0, out=dst), sync)
    x = torch.randn(SIZE, SIZE, device="cuda", dtype=torch.bfloat16)
    return TimedCall("gemm", lambda: torch.mm(x, x), sync)


def stamped_pair(kernel: Any, name: str, calls: int) -> tuple[list[Any], Any, list[int]]:
    """The matmul (each call stamping the next row of `stamps`) and the neighbour `name` as TimedCalls, sustained
    back to back for SUSTAIN_S; the pair, the stamps (rows enough for a profile of `calls`) and the count of
    matmul calls made since the sustain."""
    import torch

    programs = torch.cuda.get_device_properties(0).multi_processor_count
    a, b = (torch.randn(SIZE, SIZE, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    c = torch.empty_like(a)
    stamps = torch.zeros((4 * calls * 10 + 16, programs, 4), device="cuda", dtype=torch.int64)
    made = [0]

    def matmul() -> None:
        kernel[(programs,)](a, b, c, stamps, made[0] % stamps.shape[0], S=SIZE, BM=BM, BN=BN, BK=BK,
                            PROGRAMS=programs, num_warps=8, num_stages=3)
        made[0] += 1

    pair = [TimedCall("matmul", matmul, torch.cuda.synchronize), neighbour_call(name)]
    end = time.perf_counter() + SUSTAIN_S
    while time.perf_counter() < end:  # a pair at a time: the launch queue never runs seconds ahead of the clock
        for t in pair:
            t.call()
        torch.cuda.synchronize()
    made[0] = 0
    return pair, stamps, made


def stamped_rows(stamps: Any, made: int, rows: Sequence[int]) -> tuple[list[Any], list[float | None]]:
    """The stamps of the matmul's calls `rows` and each call's in-kernel clock (the median over its programs)."""
    if made > stamps.shape[0]:
        raise RuntimeError(f"{made} matmul calls overran the {stamps.shape[0]} stamp rows")
    got = stamps[list(rows)].tolist()
    return got, [statistics.median(m) if (m := program_mhz(r)) else None for r in got]


def one_pass(kernel: Any, name: str, calls: int) -> dict[str, Any]:
    """Sustain the matmul and `name` back to back, then profile them paired; the matmul's row for `name`."""
    pair, stamps, made = stamped_pair(kernel, name, calls)
    with ClockSampler("cuda:0") as nv:
        f = profile_device_time(pair, "cuda", calls, True)["matmul"]
    _, kernel_mhz = stamped_rows(stamps, made[0], profiled_rows(made[0], len(f.span_samples_ms)))
    out = summarise(name, f.span_samples_ms, f.span_sm_clock_mhz or [], kernel_mhz, nv.at(f.windows_s))
    out["marker_error"] = f.span_sm_clock_error
    out["clock_source"] = f.span_sm_clock_source  # the harness's per-call clock: the PM sampler's, or the markers'
    out["edges_mhz"] = median_or_none([(a + b) / 2 for a, b in f.span_sm_clock_edges_mhz if a and b])
    return out


def each_neighbour(one_pass_for: Callable[[str], dict[str, Any]]
                   ) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """The rows of `one_pass_for(name)` over NEIGHBOURS; a neighbour whose pass fails is named (printed, and in the
    second list) and the others still make the table."""
    rows, failed = [], []
    for name in NEIGHBOURS:
        try:
            rows.append(one_pass_for(name))
        except Exception as exc:  # noqa: BLE001 - reported, not hidden
            failed.append({"neighbour": name, "error": f"{type(exc).__name__}: {exc}"[:400]})
            print(f"{name}: {failed[-1]['error']}")
    return rows, failed


def print_spreads(rows: Sequence[dict[str, Any]], keys: Sequence[tuple[str, str]]) -> None:
    """Per (row key, words): the spread of that figure across the neighbours."""
    for key, words in keys:
        s = cycles_spread(rows, key)
        print(f"across neighbours, {words}: " + ("-" if s is None else f"{s:.2%}"))


def print_table(rows: Sequence[dict[str, Any]]) -> None:
    print(f"{'neighbour':9s} {'calls':>5s} {'span ms':>8s} {'marker':>7s} {'kernel':>7s} {'NVML':>6s} "
          f"{'Mcyc marker':>11s} {'Mcyc kernel':>11s} {'marker/kernel':>13s}")
    for r in rows:
        f = shown
        print(f"{r['neighbour']:9s} {r['calls']:5d} {f(r['span_ms'], '8.4f')} {f(r['marker_mhz'], '7.1f')} "
              f"{f(r['kernel_mhz'], '7.1f')} {f(r['nvml_mhz'], '6.0f')} {f(r['marker_mcycles'], '11.4f')} "
              f"{f(r['kernel_mcycles'], '11.4f')} {f(r['marker_over_kernel'], '+13.2%')}")
    print_spreads(rows, (("span_ms", "span (ms)"), ("marker_mcycles", "cycles by the harness's per-call clock"),
                         ("kernel_mcycles", "cycles by the in-kernel clock")))
    print("the harness's per-call clock ('marker' above): " + ", ".join(
        f"{r['neighbour']} {r.get('clock_source')} (markers {shown(r.get('edges_mhz'), '.1f')} MHz)" for r in rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--calls", type=int, default=60, help="profiled calls of the matmul per neighbour")
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("kernel_clock_check: needs a CUDA GPU")
    kernel = clocked_matmul_kernel()
    rows, failed = each_neighbour(lambda name: one_pass(kernel, name, args.calls))
    print_table(rows)
    cost = sampler_cost(kernel, args.calls)
    print("the profiled pass (gemm neighbour), wall s in the gate + after it: " + ", ".join(
        f"{k} {v['wall_s']:.2f} + {v['figures_s']:.2f} ({v['source']})" for k, v in cost.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "failed": failed, "sampler_cost": cost, "gpu": torch.cuda.get_device_name(0),
                       "sustain_s": SUSTAIN_S}, f, indent=1)


def sampler_cost(kernel: Any, calls: int) -> dict[str, dict[str, Any]]:
    """The harness's profiled pass of the matmul beside cuBLAS's GEMM, timed on the host with the PM sampler on
    (where it is available) and off: what the sampler adds inside the timing gate (its start and decode: the
    pass, `wall_s`) and after it (its samples evaluated and fitted, with the profiler's events: `figures_s`)."""
    out, before = {}, os.environ.get(ENV_OFF)
    try:
        for label, switch in (("sampler on", "1"), ("sampler off", "0")):
            os.environ[ENV_OFF] = switch
            pair, _, _ = stamped_pair(kernel, "gemm", calls)
            t0 = time.perf_counter()
            ran = run_pass(pair, "cuda", calls, True)
            t1 = time.perf_counter()
            f = ran.figures()["matmul"]
            out[label] = {"wall_s": t1 - t0, "figures_s": time.perf_counter() - t1, "samples": len(ran.pm.samples),
                          "source": f.span_sm_clock_source, "sampler_error": f.span_sm_clock_sampler_error}
    finally:
        if before is None:
            os.environ.pop(ENV_OFF, None)
        else:
            os.environ[ENV_OFF] = before
    return out


if __name__ == "__main__":
    main()
