"""Does eager's time for a workload depend on where its input lies in device memory? (GPU only; ~20 s.)

Each worker process allocates its buffers after its own history of allocations, so the same eager call reads
its input from a different address in each case of a run. Here each workload's eager reference (the suite's
graph at its `gpu` preset, lowered to torch as the harness runs it) reads its first input from views at
OFFSETS_KIB into one pool, in ROUNDS rounds over the offsets, each call after bakeoff's L2 flush (a 256 MB
`zero_()`) between CUDA events, as the harness's timer enqueues them (`CacheFlusher`, `enqueue_timed_calls`);
per offset, the median of its rounds' medians. The spread across offsets is the address's part; the spread of
one offset's rounds (the same place, timed again later) is what the clock and everything else moves in that
time. An address spread well over the repeat spread means that eager's
time for that workload depends on where its input lies, and its figure in a case carries that.

    PYTHONPATH=. python3 benchmarks/address_check.py [--workloads rmsnorm softmax] [--dtypes bfloat16]
        [--json OUT.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.noise_share import spread  # noqa: E402  (max / min - 1 over two or more values, else None)

WORKLOADS = ("rmsnorm", "layernorm_gelu", "softmax", "ew_sigmoid_relu", "ew_gelu_silu_gate")
OFFSETS_KIB = (0, 4, 64, 512, 1024, 1536, 4096, 12288)  # from the pool's start (2 MiB-aligned)
ROUNDS, CALLS = 3, 40


def summarise(ms: dict[int, list[float]]) -> dict[str, Any]:
    """`ms`: per offset (KiB), one median per round. The per-offset medians, their spread (the address's part),
    the widest spread of one offset's rounds (the repeat's part), and the slowest and fastest offsets."""
    per_offset = {off: statistics.median(v) for off, v in ms.items()}
    repeat = [spread(v) for v in ms.values()]
    return {"ms_by_offset_kib": per_offset, "address_spread": spread(list(per_offset.values())),
            "repeat_spread": max((r for r in repeat if r is not None), default=None),
            "slowest_kib": max(per_offset, key=per_offset.get), "fastest_kib": min(per_offset, key=per_offset.get)}


def placed(pool: Any, offset_kib: int, like: Any) -> Any:
    """A view of `pool` (one flat tensor of `like`'s dtype) shaped as `like`, starting `offset_kib` KiB in."""
    start = offset_kib * 1024 // like.element_size()
    return pool[start:start + like.numel()].view(like.shape)


def time_workload(name: str, dtype: str) -> dict[int, list[float]]:
    """Per offset, the median ms of each round's CALLS flushed calls of the workload's eager reference."""
    import torch

    from bakeoff.harness.measure.timing import CacheFlusher, TimedCall, enqueue_timed_calls
    from bakeoff.harness.worker.input_tensors import make_inputs
    from bakeoff.workloads.ir import bind
    from bakeoff.workloads.lower_torch import lower_torch
    from bakeoff.workloads.suite import builtin_workloads

    w = builtin_workloads()[name]
    graph = bind(w.graph, dict(w.presets["gpu"]), dtype)
    eager = lower_torch(graph)
    xs = make_inputs(graph, 0, "cuda")
    first = xs[0].contiguous()
    pool = torch.empty(first.numel() + max(OFFSETS_KIB) * 1024 // first.element_size(), dtype=first.dtype,
                       device="cuda")
    flush = CacheFlusher("cuda", True)  # the harness's own flush, before each call
    ms: dict[int, list[float]] = {off: [] for off in OFFSETS_KIB}
    for _ in range(ROUNDS):
        for off in OFFSETS_KIB:
            args = [placed(pool, off, first).copy_(first), *xs[1:]]
            call = TimedCall(name, lambda: eager(*args), torch.cuda.synchronize, events=True)
            call.call()
            pairs = enqueue_timed_calls(call, flush, CALLS)
            torch.cuda.synchronize()
            ms[off].append(statistics.median(s.elapsed_time(e) for s, e in pairs))
    return ms


def print_table(rows: Sequence[dict[str, Any]]) -> None:
    print(f"{'workload':18s} {'dtype':9s} {'address':>8s} {'repeat':>7s}  ms by input offset (KiB)")
    for r in rows:
        fmt = lambda s: "-" if s is None else f"{s:.1%}"  # noqa: E731 (spread: None under two values)
        by = " ".join(f"{off}:{ms:.4f}" for off, ms in r["ms_by_offset_kib"].items())
        print(f"{r['workload']:18s} {r['dtype']:9s} {fmt(r['address_spread']):>8s} {fmt(r['repeat_spread']):>7s}  {by}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", nargs="*", default=list(WORKLOADS))
    ap.add_argument("--dtypes", nargs="*", default=["bfloat16"])
    ap.add_argument("--json", help="write every round's medians and the summaries here")
    args = ap.parse_args()
    rows = []
    for name in args.workloads:
        for dtype in args.dtypes:
            ms = time_workload(name, dtype)
            rows.append({"workload": name, "dtype": dtype, "rounds_ms": ms, **summarise(ms)})
    print_table(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
