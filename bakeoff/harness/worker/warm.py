"""The warm run of one case, a composition of the worker's stages (stages.py): compile again in a fresh
process with the caches the cold run filled, check the cache-loaded executable, say whether it hit."""
from __future__ import annotations

from typing import Any

import torch

from bakeoff.harness.measure.extra_checks import extra_check_fields
from bakeoff.harness.plan.cases import Case
from bakeoff.harness.worker.phases import PhaseLog
from bakeoff.harness.worker.shared_reference import shared_reference
from bakeoff.harness.worker.stages import (baseline, check, compile, eager_executable, load_case, load_inputs,
                                               output_names, process_setup)


def run_warm(case: Case, phases: PhaseLog) -> dict[str, Any]:
    """Compile again in a fresh process with the caches the cold run filled; verify the hit. A failure
    propagates (the worker's main records it)."""
    loaded = load_case(case, phases)
    graph, backend, seed = loaded.graph, loaded.backend, case.seeds[0]
    inputs = load_inputs(case, graph, seed, phases)
    # The cache-loaded executable's output is checked as the cold one's: eager and the reference first, as
    # in the cold run, so both compiles start from the same state.
    base = baseline(lambda: eager_executable(graph, loaded.specs, case.device, case.grad), inputs, phases)
    group = shared_reference(graph, seed, inputs, base.outputs, case.device, phases, case.grad)
    setup = process_setup(case, backend, graph, phases, warm=True)
    torch.manual_seed(seed)
    result = compile(case, loaded, inputs, phases)
    # `warm_output_check` in the record
    checked = check(graph, seed, result.compiled.to_torch(result.raw), base, group, output_names(graph, case.grad),
                    phases, phase="output_check")
    before, after = result.cache_files_before, result.cache_files_after
    hit = result.compiled.info.cache_hit
    if hit is None and backend.cache_env:
        hit = before > 0 and after == before  # nothing new written: everything came from the cache
    return {**setup, "compile_warm_s": result.compile_s, "compile_warm_total_s": result.total_s,
            "cache_hit_warm": hit, "cache_files_before_warm": before, "cache_files_after_warm": after,
            "compile_stages_warm_s": dict(result.compiled.info.stages_s), **extra_check_fields(checked, "warm")}
