"""Can the GPU's own performance monitors read the clock a power-capped kernel ran at? (GPU only; ~40 s; cupti-python.)

kernel_clock_check.py showed that a power-capped matmul runs at a clock the marker spins around it cannot see, and
that its cycles by its own `%clock64` / `%globaltimer` stay equal beside any neighbour. A backend's kernels cannot
be made to stamp their clock; the GPU's PM sampler (CUPTI's PM Sampling API, through NVIDIA's cupti-python) reads
hardware counters every INTERVAL_NS while any kernel runs, without touching it. Here the same stamped matmul runs
beside the same neighbours with the sampler on, after SUSTAIN_S of the pair back to back, and each call's clock
by the sampler (`sm__cycles_elapsed.avg` over the nanoseconds of the samples wholly inside the call's window: its
programs' first start to last end) is set beside the call's in-kernel clock; beside them the SMs' active cycles
(`sm__cycles_active.avg`, which also tells where the calls are: a persistent matmul keeps every SM busy, the spin
neighbour one of them) and the graphics clock (`gr__cycles_elapsed.max`). A first pass is left out.

The samples are stamped by CUPTI's clock, not `%globaltimer`: the host's clock, which `%globaltimer` trails by a
millisecond or more, one offset per process; and beside Kineto (the harness's CUPTI pass) the host's TSC ticks,
since Kineto registers its own CUPTI timestamp. So the table comes twice: as stamped, then with every window moved
by the offset at which the spin pass's windows hold the busiest SMs (the harness's own fit,
`pm_sampler.fit_offset`); the pass beside the harness's CUPTI pass is fitted to its host windows, as the harness
could, and to the stamps.

Per neighbour: the in-kernel clock, the sampler's SM and graphics clocks inside the calls, the median per-call
difference from the in-kernel clock, and the cycles by each clock; across neighbours, the spread of each.

    PYTHONPATH=. python3 benchmarks/pm_clock_check.py [--json OUT.json] [--calls 40]

Needs `pip install cupti-python`; the sampler is started, read and fitted by the harness's own code
(harness/measure/pm_sampler.py: it loads the libnvperf beside the libcupti in use, and passes libcupti 13.0, the
GPU image's, the profiler host's init struct at the size it knows).
"""
from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bakeoff.harness.measure import pm_sampler as pm  # noqa: E402
from bakeoff.harness.measure.device_time import profile_device_time  # noqa: E402
from benchmarks.kernel_clock_check import (SUSTAIN_S, clocked_matmul_kernel,  # noqa: E402
                                           each_neighbour, median_or_none, print_spreads, profiled_rows, shown,
                                           stamped_pair, stamped_rows)

# The harness's two metrics first (pm_sampler.Sample's columns 2 and 3), then the graphics clock: column 2 + i.
CLOCKS = (("sm", "sm__cycles_elapsed.avg"), ("active", "sm__cycles_active.avg"), ("gr", "gr__cycles_elapsed.max"))
METRICS = tuple(m for _, m in CLOCKS)
RAW: dict[str, Any] = {}  # per pass, the calls' windows and the samples, for --raw


def call_window(stamps: Sequence[Sequence[int]]) -> tuple[int, int]:
    """A call's window in `%globaltimer` ns from its programs' (clock64, ns, clock64, ns) stamps: the first start
    to the last end."""
    return min(r[1] for r in stamps), max(r[3] for r in stamps)


def compare(windows: Sequence[tuple[float, float]], kernel_mhz: Sequence[float | None],
            samples: Sequence[tuple[float, ...]], column: int = 2, shift_ns: float = 0.0) -> dict[str, Any]:
    """Per call, the sampler's clock (the value in `column`) inside its window moved by shift_ns
    (pm_sampler.call_clocks) beside its in-kernel clock; medians over the calls."""
    clocks = pm.call_clocks(windows, samples, shift_ns, column)
    diffs = [m / k - 1 for m, k in zip(clocks, kernel_mhz) if m and k]
    med = median_or_none
    return {"mhz": med([m for m in clocks if m]), "over_kernel": med(diffs),
            "over_kernel_max": max((abs(d) for d in diffs), default=None),
            "samples_inside": pm.samples_inside(windows, samples, shift_ns), "per_call_mhz": clocks}


def row(name: str, windows: Sequence[tuple[float, float]], kernel_mhz: Sequence[float | None],
        samples: Sequence[tuple[float, ...]], shift_ns: float = 0.0) -> dict[str, Any]:
    """One neighbour's row, its windows moved by shift_ns: the in-kernel clock and, per sampled clock, its
    comparison and the calls' median cycles (span x clock, millions)."""
    spans_ms = [(w[1] - w[0]) / 1e6 for w in windows]
    med = median_or_none
    out = {"neighbour": name, "calls": len(windows), "samples": len(samples), "span_ms": med(spans_ms),
           "kernel_mhz": med([k for k in kernel_mhz if k]),
           "kernel_mcycles": med([s * k / 1e3 for s, k in zip(spans_ms, kernel_mhz) if k])}
    for i, (key, _) in enumerate(CLOCKS):
        got = compare(windows, kernel_mhz, samples, 2 + i, shift_ns)
        out.update({f"{key}_{k}": v for k, v in got.items()})
        out[f"{key}_mcycles"] = med([s * m / 1e3 for s, m in zip(spans_ms, got["per_call_mhz"]) if m])
    return out


def fitted(windows: Sequence[tuple[float, float]], samples: Sequence[tuple[float, ...]]) -> dict[str, Any]:
    """Where the samples sit against the calls' windows, by the harness's own fit (pm_sampler.fit_offset, no
    markers): the shift, the SMs' busy share inside the windows there, and unshifted."""
    shift, busy = pm.fit_offset(windows, samples)
    return {"shift_ns": None if shift is None else int(shift), "busy_at_shift": busy if shift is not None else None,
            "busy_unshifted": pm.busy_at(windows, samples, 0.0)[0]}


def time_bases(windows: Sequence[tuple[float, float]], samples: Sequence[tuple[float, ...]]) -> dict[str, Any]:
    """The first and last window and sample timestamps (ns): whether the two share a time base at all."""
    return {"windows_ns": [min(w[0] for w in windows), max(w[1] for w in windows)] if windows else None,
            "samples_ns": [min(x[0] for x in samples), max(x[1] for x in samples)] if samples else None}


def one_pass(kernel: Any, name: str, calls: int, col: Any) -> dict[str, Any]:
    """Sustain the matmul and `name`, then run them `calls` times with the sampler on; the matmul's row."""
    import torch

    pair, stamps, made = stamped_pair(kernel, name, calls)
    col.start()
    for _ in range(calls):
        for t in pair:
            t.call()
    torch.cuda.synchronize()
    col.stop()
    stamped, kernel_mhz = stamped_rows(stamps, made[0], range(calls))
    windows, samples = [call_window(r) for r in stamped], pm.in_ns(pm.decoded(col, METRICS))
    RAW[name] = {"windows_ns": windows, "samples": samples, "kernel_mhz": kernel_mhz}
    return row(name, windows, kernel_mhz, samples) | fitted(windows, samples) | time_bases(windows, samples)


def profiled_pass(kernel: Any, calls: int, col: Any) -> dict[str, Any]:
    """The matmul beside cuBLAS's GEMM profiled as the harness profiles a paired case (Kineto's CUPTI activity
    records, markers, L2 flushes) with the sampler on: does the sampler work beside the CUPTI pass, and can its
    samples be put on the harness's own host windows (perf_counter around each profiled call, synchronized at both
    ends, its markers outside) without the kernel's stamps? The samples come in Kineto's clock (pm_sampler.to_ns);
    each set of windows is fitted to them by the harness's fit (fitted): the host windows, and the stamps to
    check it."""
    import torch

    pair, stamps, made = stamped_pair(kernel, "gemm", calls)
    col.start()
    f = profile_device_time(pair, "cuda", calls, True)["matmul"]
    torch.cuda.synchronize()
    col.stop()
    raw = pm.decoded(col, METRICS)
    samples, per_ns = pm.to_ns(raw)
    stamped, kernel_mhz = stamped_rows(stamps, made[0], profiled_rows(made[0], len(f.span_samples_ms)))
    windows = [call_window(r) for r in stamped]
    host = [(a * 1e9, b * 1e9) for a, b in f.windows_s]
    RAW["gemm+CUPTI"] = {"windows_ns": windows, "samples": raw, "host_windows_s": f.windows_s}
    out = {"neighbour": "gemm+CUPTI", "samples": len(raw), "samples_stamped": len(samples), "ticks_per_ns": per_ns,
           "cupti_spans": len(f.span_samples_ms), "cupti_span_ms": statistics.median(f.span_samples_ms),
           "marker_mhz": median_or_none(f.span_sm_clock_mhz or [])} | time_bases(windows, samples)
    out["kernel_mhz"] = median_or_none([k for k in kernel_mhz if k])
    for key, wins in (("host", host), ("stamps", windows)):
        fit = fitted(wins, samples)
        got = compare(wins, kernel_mhz, samples, 2, fit["shift_ns"]) if fit["shift_ns"] is not None else {
            "mhz": None, "over_kernel": None, "samples_inside": 0}
        out |= {f"{key}_shift_ns": fit["shift_ns"], f"{key}_busy": fit["busy_at_shift"],
                f"{key}_sm_mhz": got["mhz"], f"{key}_sm_over_kernel": got["over_kernel"],
                f"{key}_sm_over_kernel_max": got.get("over_kernel_max"), f"{key}_samples": got["samples_inside"]}
    return out


def realigned(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows again with every pass's windows moved by the shift that puts the spin pass's windows where its
    samples show the SMs busy (the spin keeps one SM of all busy: its edges are sharp): the offset between
    `%globaltimer` and the sampler's clock, one per process. Empty where the spin pass gave none."""
    spin = next((r for r in rows if r["neighbour"] == "spin"), None)
    shift = spin and spin["shift_ns"]
    if shift is None:
        return []
    out = []
    for r in rows:
        raw = RAW[r["neighbour"]]
        moved = [(a + shift, b + shift) for a, b in raw["windows_ns"]]
        out.append(row(r["neighbour"], moved, raw["kernel_mhz"], raw["samples"]) | fitted(moved, raw["samples"])
                   | {"aligned_by_ns": shift})
    return out


def print_table(rows: Sequence[dict[str, Any]]) -> None:
    f = shown
    print(f"{'neighbour':9s} {'span ms':>8s} {'kernel':>7s} {'PM sm':>7s} {'active':>7s} {'PM gr':>7s} "
          f"{'sm/kern':>8s} {'act/kern':>8s} {'gr/kern':>8s} {'inside':>6s} {'Mcyc kern':>9s} {'Mcyc sm':>8s} "
          f"{'Mcyc act':>8s}")
    for r in rows:
        print(f"{r['neighbour']:9s} {f(r['span_ms'], '8.4f')} {f(r['kernel_mhz'], '7.1f')} {f(r['sm_mhz'], '7.1f')} "
              f"{f(r['active_mhz'], '7.1f')} {f(r['gr_mhz'], '7.1f')} {f(r['sm_over_kernel'], '+8.2%')} "
              f"{f(r['active_over_kernel'], '+8.2%')} {f(r['gr_over_kernel'], '+8.2%')} {r['sm_samples_inside']:6d} "
              f"{f(r['kernel_mcycles'], '9.4f')} {f(r['sm_mcycles'], '8.4f')} {f(r['active_mcycles'], '8.4f')}")
    for r in rows:
        print(f"  {r['neighbour']}: SMs busy inside the calls {shown(r['busy_unshifted'], '.3f')}; with the windows "
              f"shifted {shown(r['shift_ns'], '+d')} ns {shown(r['busy_at_shift'], '.3f')}")
    print_spreads(rows, (("span_ms", "span (ms)"), ("kernel_mcycles", "cycles by the in-kernel clock"),
                         ("sm_mcycles", "cycles by the PM sampler's SM clock"),
                         ("active_mcycles", "cycles by the SMs' active cycles"),
                         ("gr_mcycles", "cycles by the PM sampler's graphics clock")))


def print_profiled(r: dict[str, Any]) -> None:
    """The profiled pass: the sampler beside the CUPTI pass, put on the host windows and on the stamps."""
    if "error" in r:
        print(f"beside the CUPTI pass: {r['error']}")
        return
    f = shown
    print(f"beside the CUPTI pass (gemm neighbour): {r['cupti_spans']} spans, median {f(r['cupti_span_ms'], '.4f')} "
          f"ms; {r['samples']} samples ({r['samples_stamped']} stamped, {r['ticks_per_ns']:.5f} ticks per ns); "
          f"in-kernel {f(r['kernel_mhz'], '.1f')} MHz, markers {f(r['marker_mhz'], '.1f')}")
    for key, words in (("host", "the host windows"), ("stamps", "the stamped windows")):
        print(f"  on {words}: shift {f(r[f'{key}_shift_ns'], '+.0f')} ns, SMs busy {f(r[f'{key}_busy'], '.3f')}, "
              f"sampler SM {f(r[f'{key}_sm_mhz'], '.1f')} MHz, per call vs in-kernel median "
              f"{f(r[f'{key}_sm_over_kernel'], '+.2%')} (worst {f(r[f'{key}_sm_over_kernel_max'], '.2%')}), "
              f"{r[f'{key}_samples']} samples inside")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--calls", type=int, default=40, help="calls of the matmul per neighbour")
    ap.add_argument("--raw", help="write each pass's call windows and samples here (gzip JSON)")
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("pm_clock_check: needs a CUDA GPU")
    torch.zeros(1, device="cuda")
    if pm.unavailable():
        raise SystemExit(f"pm_clock_check: {pm.unavailable()}")
    col = pm.collector(0, METRICS)
    print(f"PM sampling on {torch.cuda.get_device_name(0)}: {', '.join(METRICS)} every {pm.INTERVAL_NS} ns")
    kernel = clocked_matmul_kernel()
    try:
        one_pass(kernel, "tiny", 4, col)  # the sampler's first pass: its samples missed its calls
        rows, failed = each_neighbour(lambda name: one_pass(kernel, name, args.calls, col))
        try:
            profiled = profiled_pass(kernel, args.calls, col)
        except Exception as exc:  # noqa: BLE001 - reported, not hidden: whether the two coexist is the question
            profiled = {"error": f"{type(exc).__name__}: {exc}"[:400]}
    finally:
        col.disable()
    print_table(rows)
    aligned = realigned(rows)
    if aligned:
        print(f"the same, with every window moved by the spin pass's shift ({aligned[0]['aligned_by_ns']:+d} ns; "
              "%globaltimer against the sampler's clock):")
        print_table(aligned)
    print_profiled(profiled)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rows": rows, "aligned": aligned, "failed": failed, "profiled": profiled, "metrics": METRICS,
                       "interval_ns": pm.INTERVAL_NS, "gpu": torch.cuda.get_device_name(0), "sustain_s": SUSTAIN_S},
                      fh, indent=1)
    if args.raw:
        with gzip.open(args.raw, "wt") as fh:
            json.dump({"metrics": METRICS, "passes": RAW}, fh)


if __name__ == "__main__":
    main()
