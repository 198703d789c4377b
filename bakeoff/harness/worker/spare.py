"""A pre-started worker: a process that gets ready for a case before it has one, then runs exactly one.

Getting ready is what every fresh worker does first and what measures nothing: start the interpreter,
import torch and the measuring code, create the device's context (and, when asked, start CUPTI once). A
spare does it while the case before it still runs, holding the device's gate shared as a busy worker does
(so its device work never overlaps a timing phase; under `beside_compiles` its imports and the profiler's
start are host work, harness/supervise/gate.py), then leaves the gate, writes READY_FILE and waits on stdin.

It imports no compiler: no backend's compiler (Triton, JAX, IREE, ONNX Runtime, TensorRT), nor torch's
Inductor and Dynamo, so every variable a case sets for them (its empty cache folders, TRITON_INTERPRET,
XLA_FLAGS) is still read for the first time after the case arrives. READY_FILE lists the modules it did
import, and the orchestrator (supervise/prestart.py) refuses a spare for a case whose environment changes a
variable that one of those could already have read; that case gets a fresh process.

The case arrives as one JSON line, {"argv": [...], "env": {...}}: the environment replaces this process's
own wholesale, and the case runs as in a fresh worker (entry.run_case). A spare whose stdin closes before
a case arrives exits.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable, ContextManager

from bakeoff.harness.supervise.gate import ENV_POLICY, ENV_WAIT_FILE, current_gate, note

ENV_SPARE_DEVICE = "BAKEOFF_SPARE_DEVICE"  # the device to make a context on ("cpu": none)
ENV_SPARE_PROFILER = "BAKEOFF_SPARE_PROFILER"  # "1": start the profiler (CUPTI) once while getting ready

# Modules whose import reads environment variables a case may set; a spare must not have imported them
# (checked by the orchestrator from READY_FILE's list, supervise/prestart.py).
WATCHED_MODULES = ("torch._inductor", "torch._dynamo", "triton", "jax", "jaxlib", "iree.compiler",
                   "iree.runtime", "onnxruntime", "tensorrt")


def get_ready(device: str, profiler: bool,
              host_work: Callable[[], ContextManager[Any]] = nullcontext) -> dict[str, float]:
    """Import what every case needs and make the device's context. Returns seconds per step. The imports and
    the profiler's start run inside `host_work()` (the gate's Gate.host_work: beside other cases' timing under
    `beside_compiles`); making the context is device work, inside the gate."""
    t0 = time.perf_counter()
    note("phase spare_imports")
    with host_work():
        import torch

        import bakeoff.harness.worker.cold  # noqa: F401  (the measuring code, numpy, scipy)
        import bakeoff.harness.worker.main  # noqa: F401
        from bakeoff.backends import REGISTRY, backend_class

        for name in REGISTRY:  # adapter modules only: they import their compiler lazily, in compile()
            backend_class(name)
    t1 = time.perf_counter()
    steps = {"imports": t1 - t0}
    note("phase spare_device_init")
    if device.startswith("cuda") and torch.cuda.is_available():
        from bakeoff.harness.measure.environment import gpu_state
        from bakeoff.harness.worker.main import init_device

        init_device(device)
        gpu_state(device)  # NVML's initialization
        steps["device_init"] = time.perf_counter() - t1
        if profiler:
            t2 = time.perf_counter()
            note("phase spare_profiler_start")
            with host_work():  # CUPTI's libraries and buffers, and one 16-element kernel: like a first run
                start_profiler_once(device)
            steps["profiler_start"] = time.perf_counter() - t2
    return steps


def start_profiler_once(device: str) -> None:
    """One short Kineto session on a trivial kernel (measure.device_time.cuda_profiler, as the case's CUPTI pass
    uses), so the case's pass does not pay CUPTI's start-up (library load, activity buffers). It imports no
    compiler: torch.profiler.profile would import Inductor (and Dynamo) on start, which would make this
    spare unusable for every Inductor and Triton case (WATCHED_MODULES)."""
    import torch

    if not device.startswith("cuda"):
        from torch.autograd.profiler import profile

        with profile():  # the same class on the host: what a test on a CPU machine can check
            torch.ones(16).add_(1)
        return
    from bakeoff.harness.measure.device_time import cuda_profiler

    x = torch.ones(16, device=device)
    with cuda_profiler():
        x.add_(1)
        torch.cuda.synchronize()


def serve(ready_file: str, run_case: Callable[[list[str]], int]) -> int:
    """Get ready, report it, wait for one case and run it with `run_case` (entry.run_case, passed in: the
    entry module imports this one); returns the exit code."""
    gate = current_gate()
    if gate is not None:
        gate.note("spare")
        gate.enter_shared()  # busy from here; host work inside get_ready may leave the hold (beside_compiles)
    steps = get_ready(os.environ.get(ENV_SPARE_DEVICE, "cpu"), os.environ.get(ENV_SPARE_PROFILER) == "1",
                      gate.host_work if gate is not None else nullcontext)
    if gate is not None:
        gate.leave_shared()  # idle from here: a spare must not hold off anyone's timing while it waits
    watched = sorted(m for m in WATCHED_MODULES if m in sys.modules)
    tmp = ready_file + ".part"
    Path(tmp).write_text(json.dumps({"ready_s": steps, "watched_modules_imported": watched,
                                     "ready_at": time.time()}))
    os.replace(tmp, ready_file)
    line = sys.stdin.readline()
    if not line.strip():
        return 0  # the orchestrator closed us without a case
    message = json.loads(line)
    os.environ.clear()
    os.environ.update(message["env"])
    tempfile.tempdir = None  # chosen again from the case's TMPDIR (its case folder), should anything have asked
    if gate is not None:
        gate.rebind(os.environ.get(ENV_WAIT_FILE), os.environ.get(ENV_POLICY))
    return run_case(message["argv"])
