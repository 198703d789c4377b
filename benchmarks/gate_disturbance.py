"""Does work in other processes disturb timing on this GPU? The evidence for the timing gate's policy.

    python benchmarks/gate_disturbance.py [--compilers 3] [--rounds 5] [--dtype bfloat16]

Times a few short kernels with the harness's own timer (CUDA events, batches behind a spin kernel, L2
flushed: measure.timing.measure), with the host clock one synchronized call at a time (host_latency), and
with triton.testing.do_bench where Triton is installed, under each condition:

- quiet: nothing else runs;
- compile: N other processes compile fresh graphs with torch.compile (CPU work on other cores, plus the
  compiled graph's first run) -- what `timing: {gate: timers_only}` lets overlap a timing phase;
- compile+check: the same, plus the GPU work a worker does between compiles (an eager run and a float64
  reference): what timers_only also lets overlap when several workers share one GPU;
- after profiler: quiet again, in this process after one torch.profiler session (what
  `timing: {profiler_warmup: true}` does before a case is timed).

Prints, per kernel, method and condition: the median of the round medians, their spread ((max - min) /
median over the rounds), the typical IQR/median within a round, and the ratio to the quiet median. Needs a
CUDA device; the table is what decides whether the gate can stop holding off compiles.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bakeoff.harness.measure.timing import TimedCall, host_latency, measure  # noqa: E402

# A background worker: compile a new graph (a new constant: a new FX graph and new Triton kernels, so
# every round is a cache miss), run it once, and with "check" also do a worker's GPU checks.
BACKGROUND = r"""
import os, sys, time, torch
mode, ready, stop = sys.argv[1], sys.argv[2], sys.argv[3]
x = torch.randn(2048, 2048, device="cuda")
i = 0
while not os.path.exists(stop):
    i += 1
    c = 1.0 + i * 1e-3
    def f(a, c=c):
        return torch.nn.functional.gelu(a * c).softmax(-1) + a.sum(-1, keepdim=True) * c
    torch._dynamo.reset()
    torch.compile(f, dynamic=False)(x)
    torch.cuda.synchronize()
    if mode == "compile+check":
        f(x)
        (x.double() @ x.double().T).sum().item()
    if i == 1:
        open(ready, "w").close()
"""


def kernels(dtype: torch.dtype) -> dict[str, Callable[[], object]]:
    """Short kernels, from a few microseconds (launch-bound) to tens of microseconds on an H200."""
    dev = "cuda"
    a, b = torch.randn(2**20, device=dev, dtype=dtype), torch.randn(2**20, device=dev, dtype=dtype)
    big = torch.randn(2**24, device=dev, dtype=dtype)
    rows = torch.randn(4096, 4096, device=dev, dtype=dtype)
    m1, m2 = torch.randn(2048, 2048, device=dev, dtype=dtype), torch.randn(2048, 2048, device=dev, dtype=dtype)
    ln = torch.nn.LayerNorm(4096, device=dev, dtype=dtype)
    return {"add 1M": lambda: a + b, "gelu 16M": lambda: torch.nn.functional.gelu(big),
            "softmax 4096x4096": lambda: rows.softmax(-1), "mm 2048^3": lambda: m1 @ m2,
            "layernorm 4096x4096": lambda: ln(rows)}


def one_round(fn: Callable[[], object]) -> dict[str, tuple[float, float]]:
    """(median ms, IQR/median) per method for one round of `fn`."""
    sync = torch.cuda.synchronize
    out = {}
    target = TimedCall("k", fn, sync, events=True)
    stats = measure([target], "cuda", warmup_s=0.05, budget_s=0.25, min_reps=10, max_reps=10_000,
                    target_iqr=0.05, flush_l2=True)["k"]
    out["events (harness)"] = (stats.median_ms, stats.iqr_rel)
    lone = host_latency(fn, sync, "cuda")
    out["host, one call"] = (lone.median_ms, lone.iqr_rel)
    try:
        from triton.testing import do_bench
    except ImportError:
        return out
    q20, q50, q80 = do_bench(fn, warmup=25, rep=100, quantiles=[0.2, 0.5, 0.8])
    out["do_bench"] = (q50, (q80 - q20) / q50 if q50 else float("nan"))
    return out


def measure_condition(fns: dict[str, Callable[[], object]], rounds: int) -> dict[tuple[str, str], list]:
    results: dict[tuple[str, str], list] = {}
    for _ in range(rounds):
        for name, fn in fns.items():
            for method, value in one_round(fn).items():
                results.setdefault((name, method), []).append(value)
    return results


def start_background(n: int, mode: str, folder: Path) -> tuple[list[subprocess.Popen], Path]:
    stop = folder / f"stop-{mode}"
    procs = []
    for i in range(n):
        cache = folder / f"{mode}-{i}"
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
               "TRITON_CACHE_DIR": str(cache / "triton")}
        procs.append(subprocess.Popen([sys.executable, "-c", BACKGROUND, mode, str(folder / f"ready-{mode}-{i}"),
                                       str(stop)], env=env))
    deadline = time.time() + 600
    while not all((folder / f"ready-{mode}-{i}").exists() for i in range(n)):  # each has compiled once
        if any(p.poll() is not None for p in procs) or time.time() > deadline:
            raise RuntimeError(f"a background {mode} process died or never compiled")
        time.sleep(0.2)
    return procs, stop


def stop_background(procs: list[subprocess.Popen], stop: Path) -> None:
    stop.touch()
    for p in procs:
        try:
            p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def profiler_session() -> None:
    from torch.profiler import ProfilerActivity, profile

    x = torch.ones(16, device="cuda")
    with profile(activities=[ProfilerActivity.CUDA]):
        x.add_(1)
        torch.cuda.synchronize()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--compilers", type=int, default=3, help="background processes (e.g. --jobs minus one)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("gate_disturbance needs a CUDA device", file=sys.stderr)
        return 2
    fns = kernels(getattr(torch, args.dtype))
    conditions: dict[str, dict] = {}
    t0 = time.time()
    conditions["quiet"] = measure_condition(fns, args.rounds)
    with tempfile.TemporaryDirectory(prefix="gate-disturbance-") as tmp:
        for mode in ("compile", "compile+check"):
            procs, stop = start_background(args.compilers, mode, Path(tmp))
            try:
                conditions[f"{mode} x{args.compilers}"] = measure_condition(fns, args.rounds)
            finally:
                stop_background(procs, stop)
            print_table(conditions, args, time.time() - t0)  # so far, should a time limit cut the rest
    profiler_session()
    conditions["after profiler"] = measure_condition(fns, args.rounds)
    print_table(conditions, args, time.time() - t0)
    return 0


def print_table(conditions: dict[str, dict], args: argparse.Namespace, seconds: float) -> None:
    table = Table(title=f"timing under other processes' work ({torch.cuda.get_device_name()}, {args.dtype}, "
                        f"{args.rounds} rounds, {seconds:.0f} s)", header_style="bold")
    for col in ("kernel", "method", "condition", "median us", "spread of medians %", "IQR/median %", "x quiet"):
        table.add_column(col, justify="left" if col in ("kernel", "method", "condition") else "right")
    quiet = conditions["quiet"]
    for key in quiet:
        base = statistics.median(v[0] for v in quiet[key])
        for cond, results in conditions.items():
            values = results.get(key)
            if not values:
                continue
            medians = [v[0] for v in values]
            med = statistics.median(medians)
            table.add_row(key[0], key[1], cond, f"{1e3 * med:.2f}",
                          f"{100 * (max(medians) - min(medians)) / med:.1f}",
                          f"{100 * statistics.median(v[1] for v in values):.1f}", f"{med / base:.3f}")
        table.add_section()
    Console(width=150).print(table)


if __name__ == "__main__":
    sys.exit(main())
