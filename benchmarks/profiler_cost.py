"""What one CUPTI pass (measure.device_time.profile_device_time) costs in a worker, and what makes it cost.

On the H200 (issue 10), records showed a `profiling` phase of about 4 s per case for eager, tritongen, XLA and
IREE but 0.1 s for Inductor, in pre-started workers that had already started the profiler once
(worker/spare.py). This script replays a worker's life in one fresh process and times the pass after each
step, so the step that makes it cheap (or dear) shows:

    python3 benchmarks/profiler_cost.py [--device cuda:0] [--workload softmax] [--preset gpu]

Steps: a spare's get_ready (imports, context, the profiler started once); an eager case's baseline; then
passes of that case's eager call; then importing torch._dynamo and torch._inductor; then one tiny
torch.compile; passes after each. Each pass is timed as a whole, and its parts: entering the profiler, the
body (the calls), leaving it (CUPTI flush, kineto's processing) and reading the events.

Found with it (H200, 2026-12-01): the spare's profiler start took 5.07 s and importing Inductor afterwards
0.00 s: torch.profiler.profile's start asks `hasattr(torch, "_inductor")`, which imports Inductor. That import,
not CUPTI, was the 4-6 s `profiling` phase of non-Inductor cases; measure.device_time.cuda_profiler avoids it.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def timed_pass(call, sync, device: str) -> dict[str, float]:
    """One pass like profile_device_time's (20 calls between markers), split into its parts, in seconds."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from bakeoff.harness.measure.device_time import MARK_CYCLES, _kernel_spans

    def mark() -> None:
        torch.cuda.synchronize()
        torch.cuda._sleep(MARK_CYCLES)
        torch.cuda.synchronize()

    call()
    sync()
    t0 = time.perf_counter()
    prof = profile(activities=[ProfilerActivity.CUDA])
    prof.__enter__()
    t1 = time.perf_counter()
    for _ in range(20):
        mark()
        call()
        sync()
        mark()
    t2 = time.perf_counter()
    prof.__exit__(None, None, None)
    t3 = time.perf_counter()
    n = len(_kernel_spans(prof.events()))
    t4 = time.perf_counter()
    return {"enter": t1 - t0, "body": t2 - t1, "exit": t3 - t2, "events": t4 - t3, "total": t4 - t0, "kernels": n}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--workload", default="softmax")
    parser.add_argument("--preset", default="gpu")
    args = parser.parse_args()
    t0 = time.perf_counter()
    from bakeoff.harness.worker.spare import get_ready

    ready = get_ready(args.device, profiler=True)
    print(f"get_ready: {', '.join(f'{k} {v:.2f} s' for k, v in ready.items())} ({time.perf_counter() - t0:.1f} s)")
    import torch

    from bakeoff.backends import get_backend
    from bakeoff.backends.base import TensorSpec
    from bakeoff.harness.worker.input_tensors import make_inputs
    from bakeoff.workloads.ir import bind
    from bakeoff.workloads.suite import builtin_workloads

    w = builtin_workloads()[args.workload]
    graph = bind(w.graph, w.presets[args.preset], "bfloat16")
    eager = get_backend("eager").compile(graph, TensorSpec.of_inputs(graph), args.device, {})
    prepared = eager.prepare(make_inputs(graph, 0, args.device))
    rows = []

    def passes(label: str, n: int) -> None:
        for i in range(n):
            r = timed_pass(lambda: eager.run(prepared), eager.sync, args.device)
            rows.append((f"{label} #{i + 1}", r))

    passes("after get_ready", 3)
    t = time.perf_counter()
    import torch._dynamo  # noqa: F401
    import torch._inductor  # noqa: F401
    rows.append((f"(import dynamo+inductor {time.perf_counter() - t:.2f} s)", None))
    passes("after importing inductor", 2)
    t = time.perf_counter()
    f = torch.compile(lambda x: torch.tanh(x) * 0.8125 - x)
    f(torch.randn(3, 5, device=args.device))
    torch.cuda.synchronize()
    rows.append((f"(tiny torch.compile {time.perf_counter() - t:.2f} s)", None))
    passes("after a torch.compile", 2)
    print(f"{'pass':32s} {'total s':>8s} {'enter':>7s} {'body':>7s} {'exit':>7s} {'events':>7s} kernels")
    for label, r in rows:
        if r is None:
            print(label)
            continue
        print(f"{label:32s} {r['total']:8.3f} {r['enter']:7.3f} {r['body']:7.3f} {r['exit']:7.3f} "
              f"{r['events']:7.3f} {r['kernels']}")
    print(f"CUDA_MODULE_LOADING={os.environ.get('CUDA_MODULE_LOADING')!r}, torch {torch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
