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
by the offset at which the spin pass's windows hold the busiest SMs (`best_shift_ns`); the pass beside the
harness's CUPTI pass is fitted to its host windows, as the harness could, and to the stamps.

Per neighbour: the in-kernel clock, the sampler's SM and graphics clocks inside the calls, the median per-call
difference from the in-kernel clock, and the cycles by each clock; across neighbours, the spread of each.

    PYTHONPATH=. python3 benchmarks/pm_clock_check.py [--json OUT.json] [--calls 40]

Needs `pip install cupti-python` and the libnvperf_host / libnvperf_target beside the libcupti in use on the
loader's path (torch's `nvidia/cu13/lib`: `gpu.sh tritongen` sets LD_LIBRARY_PATH). With a libcupti older than
the binding (13.0 beside cupti-python 13.4, as on the GPU image) the profiler host's init struct is passed at the
older size.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.kernel_clock_check import (SUSTAIN_S, clocked_matmul_kernel,  # noqa: E402
                                           each_neighbour, median_or_none, print_spreads, profiled_rows, shown,
                                           stamped_pair, stamped_rows)

INTERVAL_NS = 20_000
CLOCKS = (("sm", "sm__cycles_elapsed.avg"), ("active", "sm__cycles_active.avg"), ("gr", "gr__cycles_elapsed.max"))
METRICS = tuple(m for _, m in CLOCKS)
RAW: dict[str, Any] = {}  # per pass, the calls' windows and the samples, for --raw
HOST_INIT_BYTES_13_0 = 48  # CUpti_Profiler_Host_Initialize_Params up to pHostObject, before the set name


def sample_mhz(samples: Sequence[tuple[int, int, float]]) -> float | None:
    """The clock over (start ns, end ns, cycles) samples: their cycles over their nanoseconds, in MHz."""
    ns = sum(e - s for s, e, _ in samples)
    return sum(c for _, _, c in samples) / ns * 1e3 if ns > 0 else None


def inside(samples: Sequence[tuple[int, int, float]], window: tuple[int, int]) -> list[tuple[int, int, float]]:
    """The samples that lie wholly inside `window` (start ns, end ns)."""
    return [x for x in samples if x[0] >= window[0] and x[1] <= window[1]]


def call_window(stamps: Sequence[Sequence[int]]) -> tuple[int, int]:
    """A call's window in `%globaltimer` ns from its programs' (clock64, ns, clock64, ns) stamps: the first start
    to the last end."""
    return min(r[1] for r in stamps), max(r[3] for r in stamps)


def compare(windows: Sequence[tuple[int, int]], kernel_mhz: Sequence[float | None],
            samples: Sequence[tuple[int, int, float]]) -> dict[str, Any]:
    """Per call, the sampler's clock inside its window beside its in-kernel clock; medians over the calls."""
    pm, diffs, n_inside = [], [], 0
    for w, k in zip(windows, kernel_mhz):
        got = inside(samples, w)
        n_inside += len(got)
        m = sample_mhz(got)
        pm.append(m)
        if m and k:
            diffs.append(m / k - 1)
    med = median_or_none
    return {"mhz": med([m for m in pm if m]), "over_kernel": med(diffs),
            "over_kernel_max": max((abs(d) for d in diffs), default=None), "samples_inside": n_inside,
            "per_call_mhz": pm}


def row(name: str, windows: Sequence[tuple[int, int]], kernel_mhz: Sequence[float | None],
        samples: Sequence[tuple[int, int, Sequence[float]]]) -> dict[str, Any]:
    """One neighbour's row: the in-kernel clock and, per sampled clock, its comparison and the calls' median
    cycles (span x clock, millions)."""
    spans_ms = [(w[1] - w[0]) / 1e6 for w in windows]
    med = median_or_none
    out = {"neighbour": name, "calls": len(windows), "samples": len(samples), "span_ms": med(spans_ms),
           "kernel_mhz": med([k for k in kernel_mhz if k]),
           "kernel_mcycles": med([s * k / 1e3 for s, k in zip(spans_ms, kernel_mhz) if k])}
    for i, (key, _) in enumerate(CLOCKS):
        got = compare(windows, kernel_mhz, [(s, e, v[i]) for s, e, v in samples])
        out.update({f"{key}_{k}": v for k, v in got.items()})
        out[f"{key}_mcycles"] = med([s * m / 1e3 for s, m in zip(spans_ms, got["per_call_mhz"]) if m])
    return out


def best_shift_ns(windows: Sequence[tuple[int, int]], samples: Sequence[tuple[int, int, Sequence[float]]],
                  reach_ns: int = 4_000_000, step_ns: int = 2_000, center_ns: int = 0) -> dict[str, Any]:
    """Where the samples' timestamps sit against the calls' windows: the shift of the windows (ns, within
    +-reach_ns) under which the samples inside them show the SMs busiest (active over elapsed cycles, summed; the
    stamped matmul keeps every SM busy for its whole window; the middle of the shifts that read within 0.1% of the
    best; searched within center_ns +- reach_ns), with that ratio at the best shift and at none."""
    import numpy as np

    if not windows or not samples:
        return {"shift_ns": None, "busy_at_shift": None, "busy_unshifted": None}
    ws = np.array(sorted(windows), dtype=np.float64)
    st = np.array([x[0] for x in samples], dtype=np.float64)
    en = np.array([x[1] for x in samples], dtype=np.float64)
    sm = np.array([x[2][0] for x in samples], dtype=float)
    act = np.array([x[2][1] for x in samples], dtype=float)

    def busy(shift: int) -> float | None:
        at = np.searchsorted(ws[:, 0] + shift, st, side="right") - 1
        ok = (at >= 0) & (en <= ws[np.clip(at, 0, None), 1] + shift)
        return float(act[ok].sum() / sm[ok].sum()) if ok.sum() >= 10 and sm[ok].sum() > 0 else None

    scored = [(k, b) for k in range(center_ns - reach_ns, center_ns + reach_ns + 1, step_ns)
              if (b := busy(k)) is not None]
    if not scored:
        return {"shift_ns": None, "busy_at_shift": None, "busy_unshifted": None}
    top = max(b for _, b in scored)
    plateau = [k for k, b in scored if b >= top - 1e-3]  # shifts within a sample of the best read alike
    shift = plateau[len(plateau) // 2]
    return {"shift_ns": shift, "busy_at_shift": busy(shift), "busy_unshifted": busy(0)}


def in_ns(samples: Sequence[tuple[int, int, Any]]) -> tuple[list[tuple[float, float, Any]], float]:
    """The samples on a nanosecond scale, and the ticks per ns they came in. Beside a profiler that registers its
    own CUPTI timestamp (Kineto, torch's profiler: the host's TSC) the sampler stamps in that clock's ticks: a
    sample INTERVAL_NS long then spans interval x ticks-per-ns. Samples stamped 0 (none taken) are left out."""
    got = [x for x in samples if x[0] > 0 and x[1] > x[0]]
    if not got:
        return [], 1.0
    per_ns = statistics.median(e - s for s, e, _ in got) / INTERVAL_NS
    per_ns = 1.0 if abs(per_ns - 1) < 0.01 else per_ns
    return [(s / per_ns, e / per_ns, v) for s, e, v in got], per_ns


def shifted(windows: Sequence[tuple[float, float]], shift_ns: float) -> list[tuple[float, float]]:
    return [(a + shift_ns, b + shift_ns) for a, b in windows]


def time_bases(windows: Sequence[tuple[int, int]], samples: Sequence[tuple[int, int, Any]]) -> dict[str, Any]:
    """The first and last window and sample timestamps (ns): whether the two share a time base at all."""
    return {"windows_ns": [min(w[0] for w in windows), max(w[1] for w in windows)] if windows else None,
            "samples_ns": [min(x[0] for x in samples), max(x[1] for x in samples)] if samples else None}


def collector(device: int) -> Any:
    """An enabled PM sampling collector configured for METRICS every INTERVAL_NS."""
    import cupti.cupti as cc
    import cupti.profiler_host as ph
    from cupti import pm_sampling

    col = pm_sampling.Collector(device_index=device)
    col.enable()
    try:
        ph.ProfilerHost(col._chip_name, ph.ProfilerType.PM_SAMPLING).initialize()
    except cc.cuptiError as exc:
        if exc.status != cc.Result.ERROR_INVALID_PARAMETER:
            raise
        print(f"libcupti refused the profiler host's {cc.PROFILER_HOST_INITIALIZE_PARAMS_STRUCT_SIZE}-byte init "
              f"struct: passing the {HOST_INIT_BYTES_13_0}-byte one it knows")
        cc.PROFILER_HOST_INITIALIZE_PARAMS_STRUCT_SIZE = HOST_INIT_BYTES_13_0
    col.configure(metrics=list(METRICS), sampling_interval=INTERVAL_NS,
                  trigger_mode=pm_sampling.TriggerMode.GPU_TIME_INTERVAL)
    return col


def decoded(col: Any) -> list[tuple[int, int, list[float]]]:
    """The samples since the last start: (start ns, end ns, one value per CLOCKS metric)."""
    data = col.decode(max_samples=200_000)
    at = [list(data.metrics).index(m) for _, m in CLOCKS]  # the values come in the decoder's metric order
    return [(s.start_timestamp, s.end_timestamp, [s.metric_values[i] for i in at]) for s in data]


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
    windows, samples = [call_window(r) for r in stamped], decoded(col)
    RAW[name] = {"windows_ns": windows, "samples": samples, "kernel_mhz": kernel_mhz}
    return row(name, windows, kernel_mhz, samples) | best_shift_ns(windows, samples) | time_bases(windows, samples)


def profiled_pass(kernel: Any, calls: int, col: Any) -> dict[str, Any]:
    """The matmul beside cuBLAS's GEMM profiled as the harness profiles a paired case (Kineto's CUPTI activity
    records, markers, L2 flushes) with the sampler on: does the sampler work beside the CUPTI pass, and can its
    samples be put on the harness's own host windows (perf_counter around each profiled call, synchronized at both
    ends, its markers outside) without the kernel's stamps? The samples come in Kineto's clock (in_ns); the offset
    to perf_counter is found as where the SMs are busiest inside the windows (best_shift_ns: from where the first
    sample fell, +-50 ms in 20 us steps, then +-40 us in 1 us), and the same is done for the stamped windows to
    check it."""
    import torch

    from bakeoff.harness.measure.device_time import profile_device_time

    pair, stamps, made = stamped_pair(kernel, "gemm", calls)
    host0_ns = time.perf_counter_ns()
    col.start()
    f = profile_device_time(pair, "cuda", calls, True)["matmul"]
    torch.cuda.synchronize()
    col.stop()
    raw = decoded(col)
    samples, per_ns = in_ns(raw)
    stamped, kernel_mhz = stamped_rows(stamps, made[0], profiled_rows(made[0], len(f.span_samples_ms)))
    windows = [call_window(r) for r in stamped]
    host = [(a * 1e9, b * 1e9) for a, b in f.windows_s]
    RAW["gemm+CUPTI"] = {"windows_ns": windows, "samples": raw, "host_windows_s": f.windows_s, "host0_ns": host0_ns}
    out = {"neighbour": "gemm+CUPTI", "samples": len(raw), "samples_stamped": len(samples), "ticks_per_ns": per_ns,
           "cupti_spans": len(f.span_samples_ms), "cupti_span_ms": statistics.median(f.span_samples_ms),
           "marker_mhz": median_or_none(f.span_sm_clock_mhz or [])} | time_bases(windows, samples)
    out["kernel_mhz"] = median_or_none([k for k in kernel_mhz if k])
    for key, wins, guess in (("host", host, int(samples[0][0] - host0_ns) if samples else 0),
                             ("stamps", windows, None)):
        if guess is None:  # the stamps: where the host fit put each call, less its own start
            shift = out.get("host_shift_ns")
            guess = None if shift is None else int(statistics.median(
                h[0] + shift - w[0] for h, w in zip(host, windows)))
        fit = best_shift_ns(wins, samples, 50_000_000, 20_000, guess) if guess is not None else {"shift_ns": None}
        if fit["shift_ns"] is not None:
            fit = best_shift_ns(wins, samples, 40_000, 1_000, fit["shift_ns"])
        got = compare(shifted(wins, fit["shift_ns"]), kernel_mhz, [(s, e, v[0]) for s, e, v in samples]) \
            if fit["shift_ns"] is not None else {"mhz": None, "over_kernel": None, "samples_inside": 0}
        out |= {f"{key}_shift_ns": fit["shift_ns"], f"{key}_busy": fit.get("busy_at_shift"),
                f"{key}_sm_mhz": got["mhz"], f"{key}_sm_over_kernel": got["over_kernel"],
                f"{key}_sm_over_kernel_max": got.get("over_kernel_max"), f"{key}_samples": got["samples_inside"]}
    return out


def realigned(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows again with every pass's windows moved by the shift that puts the spin pass's windows where its
    samples show the SMs busy (the spin keeps one SM of all busy: its edges are sharp): the offset between
    `%globaltimer` and the sampler's clock, one per process. Empty where the spin pass gave none."""
    spin = RAW.get("spin")
    fit = best_shift_ns(spin["windows_ns"], spin["samples"]) if spin else {"shift_ns": None}
    if fit["shift_ns"] is None:
        return []
    out = []
    for r in rows:
        raw = RAW[r["neighbour"]]
        moved = shifted(raw["windows_ns"], fit["shift_ns"])
        out.append(row(r["neighbour"], moved, raw["kernel_mhz"], raw["samples"]) | best_shift_ns(moved, raw["samples"])
                   | {"aligned_by_ns": fit["shift_ns"]})
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
    col = collector(0)
    print(f"PM sampling on {torch.cuda.get_device_name(0)}: {', '.join(METRICS)} every {INTERVAL_NS} ns")
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
                       "interval_ns": INTERVAL_NS, "gpu": torch.cuda.get_device_name(0), "sustain_s": SUSTAIN_S},
                      fh, indent=1)
    if args.raw:
        import gzip

        with gzip.open(args.raw, "wt") as fh:
            json.dump({"metrics": METRICS, "passes": RAW}, fh)


if __name__ == "__main__":
    main()
