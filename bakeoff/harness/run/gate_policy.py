"""Which timing-gate policy a case runs under (run/gate.py), and why: `auto` picks it from how the case's
headline is timed.

A compile or a check on other CPU cores can change what the host clock reads (on the H200, host-timed single
calls moved 3-16% under three concurrent compiles) but not what the device's own clock reads (CUDA-event
and CUPTI figures moved under 0.4%, do_bench agreement within 2.6%: benchmarks/gate_disturbance.py). So
`auto` gives `timers_only` (wait only for other timing phases) to a case whose headline and timer figure
both come from the device's clock: on a GPU, with the CUPTI pass on (the headline is the CUPTI span) and a
backend timed with CUDA events (its timer figure). Everything else keeps `exclusive`: the CPU (every figure
is the host clock's), a GPU case without the CUPTI pass (the headline falls back to the pipelined host
figure), and backends timed with the host clock (JAX/XLA, IREE, ONNX Runtime: their timer figure is host
time, and a host-launched graph's CUPTI span counts the gaps between its launches).
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
    return "timers_only", ("auto: the headline (CUPTI span) and the timer (CUDA events) read the device's clock; "
                           "only other timing phases are held off")
