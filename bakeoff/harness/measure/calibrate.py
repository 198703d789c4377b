"""Measure the device's ceilings: copy bandwidth (GB/s, read + write counted) and matmul TFLOP/s per dtype.

Timed with the same timer as every case (harness.timing.measure), on random data, never zeros.
"""
from __future__ import annotations

from typing import Callable

import torch

from bakeoff.workloads.lower_torch import TORCH_DTYPES

from bakeoff.harness.measure.timing import TimedCall, measure

# Sizes: a copy several times the last-level cache, and a matmul big enough to fill the device.
COPY_BYTES = {"cuda": 2**30, "cpu": 2**28}
MATMUL_N = {"cuda": 8192, "cpu": 1024}


def _time_ms(call: Callable[[], object], device: str, budget_s: float) -> tuple[float, str]:
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    target = TimedCall("ceiling", call, sync, events=device.startswith("cuda"))
    stats = measure([target], device, warmup_s=min(0.5, budget_s), budget_s=budget_s, min_reps=5,
                    max_reps=1000, target_iqr=0.02, flush_l2=False)["ceiling"]
    return stats.median_ms, f"{stats.method}, median of {stats.n}, IQR/median {stats.iqr_rel:.3f}"


def measure_ceilings(device: str, dtypes: list[str], budget_s: float = 2.0) -> list[tuple[str, float, str, str]]:
    """[(name, value, unit, method)]: copy_gbps, and matmul_tflops_<dtype> for each dtype."""
    kind = "cuda" if device.startswith("cuda") else "cpu"
    out = []
    n = COPY_BYTES[kind] // 2
    src = torch.randn(n, device=device, dtype=torch.float32).to(torch.bfloat16)
    dst = torch.empty_like(src)
    ms, how = _time_ms(lambda: dst.copy_(src), device, budget_s)
    out.append(("copy_gbps", 2 * src.numel() * 2 / (ms * 1e-3) / 1e9, "GB/s",
                f"device copy of {src.numel() * 2 / 2**20:.0f} MiB bf16, read + write counted; {how}"))
    del src, dst
    size = MATMUL_N[kind]
    for dtype in dtypes:
        a = torch.randn(size, size, device=device, dtype=torch.float32).to(TORCH_DTYPES[dtype])
        b = torch.randn(size, size, device=device, dtype=torch.float32).to(TORCH_DTYPES[dtype])
        c = torch.empty_like(a)
        ms, how = _time_ms(lambda: torch.mm(a, b, out=c), device, budget_s)
        out.append((f"matmul_tflops_{dtype}", 2 * size**3 / (ms * 1e-3) / 1e12, "TFLOP/s",
                    f"torch.mm {size}^3 {dtype}; {how}"))
    return out
