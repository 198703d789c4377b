"""The order in which parallel slots take a run's cases: longest first.

With N slots, a run ends when its last case does; a long case taken last runs on while the other slots have
nothing left (on the H200's three-dtype suite, 2026-12-02, float32 attention and MLP-block cases of 1-2 minutes
each came last in config order). Taking the longest cases first lets the short ones fill in around them.

The estimate only orders cases; no figure depends on it. A case's device work is about its flops at the
matmul rate plus its bytes at the copy rate: `flops + RIDGE_FLOP_PER_BYTE * bytes_moved` (the ridge point of
a GPU like the H200: about 700 TFLOP/s in 16-bit over 4.2 TB/s, rounded down), float32 flops on a GPU
counted FP32_ON_GPU times (no 16-bit tensor cores). A skipped case costs nothing and goes last; ties keep the
config's order.
"""
from __future__ import annotations

from bakeoff.harness.plan.cases import Case

RIDGE_FLOP_PER_BYTE = 100
FP32_ON_GPU = 8


def estimated_work(case: Case) -> float:
    """A relative size of `case`'s work (see the module docstring); 0 for a skipped case."""
    if case.skip_reason:
        return 0.0
    flops = float(case.flops) * (FP32_ON_GPU if case.dtype == "float32" and case.device.startswith("cuda") else 1)
    return flops + RIDGE_FLOP_PER_BYTE * float(case.bytes_moved)


def longest_first(cases: list[Case]) -> list[Case]:
    """`cases` by estimated work, largest first; equal estimates keep their order."""
    return sorted(cases, key=lambda c: -estimated_work(c))
