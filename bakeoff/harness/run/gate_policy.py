"""Which timing-gate policy a case runs under (run/gate.py), and why: `auto` picks it from how the case's
headline is timed.

A compile on other CPU cores can change what the host clock reads (on the H200, host-timed single calls moved
3-16% under three concurrent compiles) but not what the device's own clock reads (CUDA-event and CUPTI figures
moved under 0.4%, do_bench agreement within 2.6%: benchmarks/gate_disturbance.py). Other cases' kernels do
change it: on the H200 (2026-12-01, configs/h200_checks.yaml, four workers on one GPU under `timers_only`,
other cases' checks, eager baselines and compiles launching kernels while one timed), event-timed medians
rose up to 4x (eager GEMM 8192^3: CUPTI span 1.67 ms, timer 6.41 ms) and a three-kernel CUPTI span 2.9x (XLA's
cuDNN attention 7.23 ms against 2.47 ms alone); only one-kernel spans held (flash attention 1.82 ms). Since
`timers_only` does not hold off other cases' kernels, `auto` keeps every case `exclusive` and says why: the CPU
(every figure is the host clock's), a GPU case without the CUPTI pass (the pipelined host figure), backends
timed with the host clock (JAX/XLA, IREE, ONNX Runtime), and device-timed ones (other cases' kernels).
`timers_only` stays selectable (`timing.gate`, `--gate`) for runs whose other phases launch no kernels.
"""
from __future__ import annotations

from typing import Any

from bakeoff.harness.run.gate import POLICIES

AUTO = "auto"
REQUESTABLE = (AUTO, *POLICIES)


def resolve_gate_policy(requested: str | None, device: str, timing: dict[str, Any],
                        timed_with_events: bool, backend: str) -> tuple[str, str]:
    """(policy, reason) for a case on `device` with `timing` (the case's timing settings) whose backend
    `backend` is (`timed_with_events`) or is not timed with CUDA events. `requested` is the config's
    `timing.gate` (None: auto); an explicit policy is kept as asked."""
    requested = requested or AUTO
    if requested != AUTO:
        if requested not in POLICIES:
            raise ValueError(f"gate policy must be one of {', '.join(REQUESTABLE)}, not {requested!r}")
        return requested, f"timing.gate is {requested}"
    if not device.startswith("cuda"):
        return "exclusive", "auto: on the CPU every figure is read from the host clock"
    if not timing.get("profile", True):
        return "exclusive", "auto: timing.profile is off, so the headline is the pipelined host figure"
    if not timed_with_events:
        return "exclusive", (f"auto: {backend} is timed with the host clock (its timer figure), and its CUPTI span "
                             "counts the gaps between host launches")
    return "exclusive", ("auto: the headline (CUPTI span) and the timer (CUDA events) read the device's clock, "
                         "which other cases' kernels (checks, eager baselines, compiles) disturb")
