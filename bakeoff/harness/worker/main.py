"""The worker: one case in one fresh process. Compile, check on every seed, measure, write one record.

Run as ``python -m bakeoff.harness.worker.main CASE_JSON OUT_JSON PHASE [ARTIFACTS_DIR]`` by the runner, with the
backend's cache folders in the environment. PHASE is ``cold`` (the full case) or ``warm`` (compile only,
reusing the caches the cold process filled, to measure warm compile time and verify the cache hit).
The record is written to OUT_JSON atomically, through the record model (results/record.py: a ColdOutput
or a WarmOutput): a field the model lacks, or a value JSON cannot hold, makes a crash record naming it.
Anything that kills the process leaves no file and the runner records the crash.
"""
from __future__ import annotations

import os
import resource
import sys
from pathlib import Path
from typing import Any

import torch
from pydantic import ValidationError

from bakeoff.backends.base import set_device_work
from bakeoff.results.record import ColdOutput, WarmOutput, invalid_fields

from bakeoff.harness.plan.cases import Case
from bakeoff.harness.supervise.gate import (device_work as gate_device_work, note as gate_note,
                                            waited_so_far_s as gate_waited_s)
from bakeoff.harness.worker import cold, shape_sweep, warm
from bakeoff.harness.worker.phases import PhaseLog
from bakeoff.harness.worker.errors import error_record


def init_device(device: str) -> None:
    """Create the device's context now (CUDA: the context and the caching allocator), so that its cost is a
    phase of its own and not part of whatever touches the device first."""
    if device.startswith("cuda"):
        torch.cuda.init()
        torch.empty(1, device=device)


def limit_host_memory(case: Case) -> None:
    """Cap the process's address space at the case's `memory_limit_gb` on the CPU (a MemoryError then, not
    the kernel's OOM killer)."""
    if case.memory_limit_gb and not case.device.startswith("cuda"):
        limit = int(case.memory_limit_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def main(argv: list[str], phases: PhaseLog | None = None) -> int:
    phases = phases or PhaseLog(None)
    with phases.phase("case_load"):
        case = Case.from_json(Path(argv[0]).read_text())
    out_path, phase = Path(argv[1]), argv[2]
    artifacts_dir = Path(argv[3]) if len(argv) > 3 else None
    gate_note(f"case {phase} {case.backend} {case.case_id}")
    # a compile's marked device work rejoins the gate (Backend.marks_device_work); its waits are not the compiler's
    set_device_work(gate_device_work, gate_waited_s)
    limit_host_memory(case)
    try:
        with phases.phase("device_init"):
            init_device(case.device)
        if phase == "warm":
            record = warm.run_warm(case, phases)
        else:  # through the modules: a test's sitecustomize may wrap cold.run_cold
            record = (shape_sweep.run_sweep if case.sweep else cold.run_cold)(case, artifacts_dir, phases)
    except BaseException as exc:  # a failure outside the guarded steps is still a record
        if isinstance(exc, KeyboardInterrupt):
            raise
        record = error_record("runtime_error", exc)
    with phases.phase("record"):  # through the record model, then written atomically
        tmp = out_path.with_suffix(".part")
        tmp.write_text(serialize(record, WarmOutput if phase == "warm" else ColdOutput))
        os.replace(tmp, out_path)
    phases.end()
    return 0


def serialize(record: dict[str, Any], model: type[ColdOutput] | type[WarmOutput]) -> str:
    """The phase's result as JSON through its model. One that does not fit (a field the model lacks, a value
    of another type or one JSON cannot hold) becomes a crash record that names the fields."""
    try:
        return model.model_validate(record).model_dump_json(exclude_unset=True)
    except ValidationError as exc:
        reason = f"the worker's result does not fit the record model: {invalid_fields(exc)}"
    return model(status="crash", reason=reason[:2000]).model_dump_json(exclude_unset=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
