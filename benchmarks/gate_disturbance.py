"""Does work in other processes disturb timing on this GPU? The evidence for `timing.gate: auto`.

On the lent GPU, from the repo root (carry .gpu and .gpudeps: `bash benchmarks/gpu.sh pack`), one call:

    bash benchmarks/gpu.sh disturbance                        # = the GPU set-up, then the line below
    python3 benchmarks/gate_disturbance.py --compilers 3 --rounds 5 --json $OUT/gate_disturbance.json

Real cases, compiled by the harness's own backends (eager, Inductor, tritongen, XLA, IREE; a backend that
is not installed is left out, and says so), among them host-launched multi-kernel graphs (XLA's and IREE's
mlp_block, where launch gaps between kernels could widen the CUPTI span) and a launch-bound one (1M
elements). Each is timed by every method a record uses: the backend's timer (CUDA events for backends on
torch's stream, the host clock for the others: measure.timing.measure), the CUPTI span
(measure.device_time), the host clock around one synchronized call (host_latency), and for event-timed
backends triton.testing.do_bench; under each condition:

- quiet: nothing else runs;
- compile xN: N other processes compile fresh graphs with torch.compile (CPU work on other cores plus the
  compiled graph's first run): what `timers_only` lets overlap a timing phase;
- compile+check xN: the same plus a worker's GPU work between compiles (an eager run, a float64 product);
- context xN (`--modes context`): N loops each starting fresh processes that only create the device's CUDA
  context and exit, as a pre-started worker's `device_init` does (worker/spare.py): whether that step could
  run beside timing (it holds the gate shared today).

Prints per case, method and condition the median of the round medians, their spread ((max - min) / median
over the rounds), the typical IQR/median of a round and the ratio to quiet; then, per timing method and
what `auto` gives it (run/gate_policy.py), the largest shift from quiet and the largest spread: the rule
holds when the figures auto leaves to `timers_only` (CUPTI span and CUDA events of event-timed backends)
move no more than the quiet spread. Needs a CUDA device.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # torch allocates on the same GPU

import torch  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bakeoff.backends import backend_class, get_backend  # noqa: E402
from bakeoff.backends.base import TensorSpec  # noqa: E402
from bakeoff.harness.measure.device_time import profile_device_time  # noqa: E402
from bakeoff.harness.measure.timing import TimedCall, host_latency, measure  # noqa: E402
from bakeoff.harness.supervise.gate_policy import resolve_gate_policy  # noqa: E402
from bakeoff.harness.worker.input_tensors import make_inputs  # noqa: E402
from bakeoff.workloads.ir import bind  # noqa: E402
from bakeoff.workloads.suite import builtin_workloads  # noqa: E402

# (backend, workload, preset): short kernels to multi-kernel blocks, device-launched and host-launched.
CASES = [("eager", "ew_sigmoid_relu", "cpu"), ("eager", "softmax", "gpu"), ("inductor", "layernorm_gelu", "gpu"),
         ("inductor", "ew_sigmoid_relu", "cpu"), ("tritongen", "rmsnorm", "gpu"), ("xla", "mlp_block", "gpu"),
         ("xla", "ew_sigmoid_relu", "cpu"), ("iree", "mlp_block", "gpu")]

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

# A background loop of fresh processes that each create the device's CUDA context (and NVML's), then exit.
CONTEXT = r"""
import os, subprocess, sys
ready, stop = sys.argv[2], sys.argv[3]
child = "import torch; torch.cuda.init(); torch.empty(1, device='cuda'); import pynvml; pynvml.nvmlInit()"
i = 0
while not os.path.exists(stop):
    subprocess.run([sys.executable, "-c", child], check=True)
    i += 1
    if i == 1:
        open(ready, "w").close()
"""


@dataclass
class Target:
    """One compiled case: what `auto` gives it, and its call."""

    label: str
    backend: str
    events: bool
    policy: str
    call: Callable[[], object]
    sync: Callable[[], None]


def build_targets(cases: list[tuple[str, str, str]], dtype: str) -> tuple[list[Target], list[str]]:
    """Compile each case with the harness's backend; returns the targets and why any case was left out."""
    targets, skipped = [], []
    for backend, workload, preset in cases:
        cls = backend_class(backend)
        w = builtin_workloads()[workload]
        graph = bind(w.graph, w.presets[preset], dtype)
        why = cls.available() or get_backend(backend).supports(graph, "cuda", dtype, cls.Options())
        if why:
            skipped.append(f"{backend} {workload}: {why}")
            continue
        try:
            compiled = get_backend(backend).compile(graph, TensorSpec.of_inputs(graph), "cuda", cls.Options())
            prepared = compiled.prepare(make_inputs(graph, 0, "cuda"))
            compiled.run(prepared)
            compiled.sync()
        except Exception as exc:  # noqa: BLE001 - a backend that fails here is reported, not fatal
            skipped.append(f"{backend} {workload}: {type(exc).__name__}: {exc}"[:200])
            continue
        policy = resolve_gate_policy("auto", "cuda:0", {"profile": True}, cls.timed_with_events, backend)[0]
        shape = "x".join(str(v) for v in w.presets[preset].values())
        targets.append(Target(f"{backend} {workload} {shape}", backend, cls.timed_with_events, policy,
                              lambda c=compiled, p=prepared: c.run(p), compiled.sync))
    return targets, skipped


def one_round(t: Target) -> dict[str, tuple[float, float]]:
    """(median ms, IQR/median) per method for one round of `t`."""
    timed = TimedCall("k", t.call, t.sync, events=t.events)
    stats = measure([timed], "cuda", warmup_s=0.05, budget_s=0.25, min_reps=10, max_reps=10_000,
                    target_iqr=0.05, flush_l2=True)["k"]
    out = {("timer: CUDA events" if t.events else "timer: host clock"): (stats.median_ms, stats.iqr_rel)}
    span = profile_device_time([timed], "cuda", 20, True)["k"].span
    out["CUPTI span"] = (span.median_ms, span.iqr_rel)
    lone = host_latency(t.call, t.sync, "cuda")
    out["host, one call"] = (lone.median_ms, lone.iqr_rel)
    if t.events:
        try:
            from triton.testing import do_bench
        except ImportError:
            return out
        q20, q50, q80 = do_bench(t.call, warmup=25, rep=100, quantiles=[0.2, 0.5, 0.8])
        out["do_bench"] = (q50, (q80 - q20) / q50 if q50 else float("nan"))
    return out


def measure_condition(targets: list[Target], rounds: int) -> dict[tuple[str, str], list]:
    results: dict[tuple[str, str], list] = {}
    for _ in range(rounds):
        for t in targets:
            for method, value in one_round(t).items():
                results.setdefault((t.label, method), []).append(value)
    return results


def start_background(n: int, mode: str, folder: Path) -> tuple[list[subprocess.Popen], Path]:
    stop = folder / f"stop-{mode}"
    procs = []
    for i in range(n):
        cache = folder / f"{mode}-{i}"
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
               "TRITON_CACHE_DIR": str(cache / "triton")}
        script = CONTEXT if mode == "context" else BACKGROUND
        procs.append(subprocess.Popen([sys.executable, "-c", script, mode, str(folder / f"ready-{mode}-{i}"),
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


def rows_of(conditions: dict[str, dict], targets: list[Target]) -> list[dict[str, Any]]:
    """One row per case, method and condition: median, spread of round medians, IQR, ratio to quiet."""
    policy = {t.label: (t.backend, t.policy) for t in targets}
    rows = []
    for key, quiet_values in conditions["quiet"].items():
        base = statistics.median(v[0] for v in quiet_values)
        for cond, results in conditions.items():
            values = results.get(key)
            if not values:
                continue
            medians = [v[0] for v in values]
            med = statistics.median(medians)
            rows.append({"case": key[0], "backend": policy[key[0]][0], "auto_policy": policy[key[0]][1],
                         "method": key[1], "condition": cond, "median_us": 1e3 * med,
                         "spread_rel": (max(medians) - min(medians)) / med,
                         "iqr_rel": statistics.median(v[1] for v in values), "vs_quiet": med / base})
    return rows


def print_tables(rows: list[dict[str, Any]], title: str) -> None:
    console = Console(width=160)
    table = Table(title=title, header_style="bold")
    for col in ("case", "method", "condition", "median us", "spread of medians %", "IQR/median %", "x quiet"):
        table.add_column(col, justify="left" if col in ("case", "method", "condition") else "right")
    last = None
    for r in rows:
        if last and (r["case"], r["method"]) != last:
            table.add_section()
        last = (r["case"], r["method"])
        table.add_row(r["case"], r["method"], r["condition"], f"{r['median_us']:.2f}", f"{100 * r['spread_rel']:.1f}",
                      f"{100 * r['iqr_rel']:.1f}", f"{r['vs_quiet']:.3f}")
    console.print(table)
    summary = Table(title="per backend and method: quiet spread vs the largest shift and spread under other work",
                    header_style="bold")
    for col in ("backend", "method", "auto gives", "quiet spread %", "max |shift| %", "max spread %"):
        summary.add_column(col, justify="left" if col in ("backend", "method", "auto gives") else "right")
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["backend"], r["method"], r["auto_policy"]), []).append(r)
    for (backend, method, policy), rs in groups.items():
        quiet = [r for r in rs if r["condition"] == "quiet"]
        busy = [r for r in rs if r["condition"] != "quiet"]
        if not busy:
            continue
        summary.add_row(backend, method, policy, f"{100 * max(r['spread_rel'] for r in quiet):.1f}",
                        f"{100 * max(abs(r['vs_quiet'] - 1) for r in busy):.1f}",
                        f"{100 * max(r['spread_rel'] for r in busy):.1f}")
    console.print(summary)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--compilers", type=int, default=3, help="background processes (e.g. --jobs minus one)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--json", help="write the rows to this file")
    parser.add_argument("--modes", nargs="+", default=["compile", "compile+check"],
                        choices=["compile", "compile+check", "context"], help="background conditions, in order")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("gate_disturbance needs a CUDA device", file=sys.stderr)
        return 2
    t0 = time.time()
    targets, skipped = build_targets(CASES, args.dtype)
    for why in skipped:
        print(f"left out: {why}", flush=True)
    print(f"{len(targets)} cases compiled in {time.time() - t0:.0f} s", flush=True)
    conditions: dict[str, dict] = {"quiet": measure_condition(targets, args.rounds)}
    with tempfile.TemporaryDirectory(prefix="gate-disturbance-") as tmp:
        for mode in args.modes:
            procs, stop = start_background(args.compilers, mode, Path(tmp))
            try:
                conditions[f"{mode} x{args.compilers}"] = measure_condition(targets, args.rounds)
            finally:
                stop_background(procs, stop)
            rows = rows_of(conditions, targets)
            title = (f"timing under other processes' work ({torch.cuda.get_device_name()}, {args.dtype}, "
                     f"{args.rounds} rounds, {time.time() - t0:.0f} s)")
            print_tables(rows, title)  # so far, should a time limit cut the rest
            if args.json:
                Path(args.json).write_text(json.dumps({"rows": rows, "skipped": skipped, "compilers": args.compilers,
                                                       "rounds": args.rounds, "dtype": args.dtype}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
