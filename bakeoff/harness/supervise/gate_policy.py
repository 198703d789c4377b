"""Which timing-gate policy a case runs under (supervise/gate.py), and why: `auto` picks it from how the case's
headline is timed.

What disturbs timing on the H200 (benchmarks/gate_disturbance.py and configs/h200_checks.yaml, 2026-12-01):
- Other cases' kernels do. Four workers under `timers_only` (other cases' checks, eager baselines and
  compiles launching kernels while one timed) raised event-timed medians up to 4x (eager GEMM 8192^3: CUPTI
  span 1.67 ms, timer 6.41 ms) and a three-kernel CUPTI span 2.9x (XLA's cuDNN attention 7.23 ms against
  2.47 ms alone).
- Host-side compiles do not, beyond the quiet spread. Five processes compiling torch.compile graphs (with
  reductions, each run once) beside GPU-sized cases moved CUPTI spans by at most 0.6% (eager softmax +0.2%,
  Inductor LayerNorm +0.6%, tritongen RMSNorm -0.2%, XLA MLP block -0.4%, IREE MLP block +0.1%), CUDA-event
  medians by at most 0.3%, and the host-clock timers of XLA and IREE by 0.9% and 1.1% (quiet spreads
  0.8-3%). Launch-bound 1M-element cases were as noisy alone as beside compiles.
So on a GPU `auto` is `beside_compiles`: a timing phase has the device alone (no other case's inputs,
baselines, references, checks or timing), while other cases' imports and compiles by compilers that time
nothing on the device (Backend.compile_times_on_device) go on. A backend whose compile times candidates on
the device (tritongen's search, XLA's autotuner, TensorRT's tactics, Inductor's max-autotune) holds the gate
while it compiles. On the CPU every figure is the host clock's and a compile takes a core the timer needs:
`exclusive`. Without the CUPTI pass the GPU headline is a host figure: `exclusive`. `timers_only` and
`exclusive` stay selectable (`timing.gate`, `--gate`).
"""
from __future__ import annotations

from typing import Any, Mapping

from bakeoff.harness.config.timing import TimingConfig
from bakeoff.harness.supervise.gate import POLICIES

AUTO = "auto"
REQUESTABLE = (AUTO, *POLICIES)


def resolve_gate_policy(requested: str | None, device: str, timing: TimingConfig | Mapping[str, Any],
                        timed_with_events: bool, backend: str, compile_on_device: str | None = None
                        ) -> tuple[str, str]:
    """(policy, reason) for a case on `device` with `timing` (the case's timing settings) whose backend
    `backend` is (`timed_with_events`) or is not timed with CUDA events, and whose compile times work on the
    device for the reason `compile_on_device` (None: it does not). `requested` is the config's `timing.gate`
    (None: auto); an explicit policy is kept as asked."""
    requested = requested or AUTO
    if requested != AUTO:
        if requested not in POLICIES:
            raise ValueError(f"gate policy must be one of {', '.join(REQUESTABLE)}, not {requested!r}")
        return requested, f"timing.gate is {requested}"
    if not device.startswith("cuda"):
        return "exclusive", ("auto: on the CPU every figure is read from the host clock, which a compile on another "
                             "core moves")
    if not TimingConfig.of(timing).profile:
        return "exclusive", "auto: timing.profile is off, so the headline is the pipelined host figure"
    why = ("auto: the headline (CUPTI span) reads the device's clock; other cases' device work waits while this "
           "case times, their host-side compiles do not (they moved CUPTI spans <= 0.6% on the H200)")
    if not timed_with_events:
        why += f"; {backend}'s timer figure is the host clock's (moved <= 1.1% beside compiles)"
    if compile_on_device:
        why += f"; its own compile holds the gate: {compile_on_device}"
    return "beside_compiles", why
