"""The worker: one case in one fresh process. Compile, check on every seed, measure, write one record.

Run as ``python -m bakeoff.harness.run.worker.main CASE_JSON OUT_JSON PHASE [ARTIFACTS_DIR]`` by the runner, with the
backend's cache folders in the environment. PHASE is ``cold`` (the full case) or ``warm`` (compile only,
reusing the caches the cold process filled, to measure warm compile time and verify the cache hit).
The record is written to OUT_JSON atomically, through the record model (results/record.py: a ColdOutput
or a WarmOutput): a field the model lacks, or a value JSON cannot hold, makes a crash record naming it.
Anything that kills the process leaves no file and the runner records the crash.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bakeoff.results.record import ColdOutput, WarmOutput, invalid_fields

from bakeoff.harness.plan.cases import Case
from bakeoff.backends.base import set_device_work
from bakeoff.harness.run.gate import device_work as gate_device_work, note as gate_note
from bakeoff.harness.run.worker.phases import PhaseLog
from bakeoff.harness.run.worker.steps import (compile_and_first_run, compiling, count_cache_files, error_record,
                                              limit_host_memory)


def init_device(device: str) -> None:
    """Create the device's context now (CUDA: the context and the caching allocator), so that its cost is a
    phase of its own and not part of whatever touches the device first."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.init()
        torch.empty(1, device=device)


def run_warm(case: Case, phases: PhaseLog) -> dict[str, Any]:
    """Compile again in a fresh process with the caches the cold run filled; verify the hit."""
    import torch

    from bakeoff.backends import get_backend
    from bakeoff.backends.base import TensorSpec

    from bakeoff.harness.measure.checks import check_outputs, poison_allocator
    from bakeoff.harness.measure.extra_checks import extra_check_fields
    from bakeoff.harness.run.worker.cold import output_names
    from bakeoff.harness.run.worker.inputs import make_inputs
    from bakeoff.harness.run.worker.process_setup import setup_graph_for, warm_up_process
    from bakeoff.harness.run.worker.shared_reference import shared_reference

    with phases.phase("case_load"):
        graph = case.bound_graph()
    with phases.phase("imports"):
        backend = get_backend(case.backend)
    specs = TensorSpec.of_inputs(graph)
    with phases.phase("inputs"):
        inputs = make_inputs(graph, case.seeds[0], case.device, case.input_files, case.grad)
    # The cache-loaded executable's output is checked as the cold one's: eager and the reference first, as
    # in the cold run, so both compiles start from the same state.
    with phases.phase("eager_baseline"):
        eager_out = get_backend("eager").compile_case(graph, specs, case.device, {}, case.grad)(*inputs)
    group = shared_reference(graph, case.seeds[0], inputs, eager_out, case.device, phases, case.grad)
    with phases.phase("compile_setup"), compiling(backend, case, setup_graph_for(graph)):
        setup = warm_up_process(backend, case, graph, count_cache_files, phase="_warm")
    before = count_cache_files(backend.cache_env)
    torch.manual_seed(case.seeds[0])
    poison_allocator(graph, case.device, case.grad)
    with phases.phase("compile"), compiling(backend, case, graph):
        compiled, _, raw, seconds, total_seconds = compile_and_first_run(backend, graph, specs, case, inputs)
    after = count_cache_files(backend.cache_env)
    with phases.phase("output_check"):  # `warm_output_check` in the record
        check = check_outputs(graph, case.seeds[0], compiled.to_torch(raw), eager_out, group.refs,
                              group.eager_vs_refs, output_names(graph, case.grad))
    hit = compiled.info.cache_hit
    if hit is None and backend.cache_env:
        hit = before > 0 and after == before  # nothing new written: everything came from the cache
    return {**setup, "compile_warm_s": seconds, "compile_warm_total_s": total_seconds, "cache_hit_warm": hit,
            "cache_files_before_warm": before, "cache_files_after_warm": after,
            "compile_stages_warm_s": dict(compiled.info.stages_s), **extra_check_fields(check, "warm")}


def main(argv: list[str], phases: PhaseLog | None = None) -> int:
    phases = phases or PhaseLog(None)
    with phases.phase("case_load"):
        case = Case.from_json(Path(argv[0]).read_text())
    out_path, phase = Path(argv[1]), argv[2]
    artifacts_dir = Path(argv[3]) if len(argv) > 3 else None
    gate_note(f"case {phase} {case.backend} {case.case_id}")
    set_device_work(gate_device_work)  # a compile's marked device work rejoins the gate (Backend.marks_device_work)
    limit_host_memory(case)
    try:
        with phases.phase("device_init"):
            init_device(case.device)
        if phase == "warm":
            record = run_warm(case, phases)
        else:
            with phases.phase("imports"):
                from bakeoff.harness.run.worker.cold import run_cold
                from bakeoff.harness.run.worker.sweep import run_sweep
            record = (run_sweep if case.sweep else run_cold)(case, artifacts_dir, phases)
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
