"""The cold run of one case, a composition of the worker's stages (stages.py): baseline, compile, check
every seed, time, check once more."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from bakeoff.harness.measure.checks import SeedCheck, check_outputs, poison_allocator
from bakeoff.harness.measure.environment import gpu_state
from bakeoff.harness.measure.extra_checks import extra_check_fields, fold_extra_check
from bakeoff.harness.plan.cases import Case
from bakeoff.harness.worker.phases import PhaseLog
from bakeoff.harness.worker.shared_reference import GroupReference, shared_reference
from bakeoff.harness.worker.stages import (Baseline, FirstResult, Loaded, StageFailed, baseline, check,
                                               check_other_seeds, compile, eager_executable, error_figures,
                                               failing_as, load_case, load_inputs, output_names, process_setup,
                                               save_artifacts, shape_mismatch, throughput, time_case, verdict_fields,
                                               worst_check)
from bakeoff.harness.worker.compile_step import count_cache_files


def run_cold(case: Case, artifacts_dir: Path | None, phases: PhaseLog) -> dict[str, Any]:
    """The whole case in this (fresh) process. Returns the record's measured fields."""
    loaded = load_case(case, phases)
    graph, backend, seed = loaded.graph, loaded.backend, case.seeds[0]
    with phases.phase("gpu_state"):
        rec: dict[str, Any] = {"gpu_state_before": gpu_state(case.device)}
    torch.manual_seed(seed)
    inputs = load_inputs(case, graph, seed, phases)
    base = baseline(lambda: eager_executable(graph, loaded.specs, case.device, case.grad), inputs, phases,
                    repeat=True)
    rec["eager_deterministic"] = base.deterministic
    group = shared_reference(graph, seed, inputs, base.outputs, case.device, phases, case.grad)
    rec["reference_source"] = {str(seed): group.source}
    rec["cache_files_before_cold"] = count_cache_files(backend.cache_env)  # 0: its own, empty folders
    rec.update(process_setup(case, backend, graph, phases))
    try:
        with failing_as("compile_error"):
            result = compile(case, loaded, inputs, phases)
        rec.update(compile_fields(result))
        with failing_as("runtime_error"):
            first = check(graph, seed, result.compiled.to_torch(result.raw), base, group,
                          output_names(graph, case.grad), phases)
            checks = check_other_seeds(case, graph, result.compiled, base.eager, first, phases, rec["reference_source"])
        rec.update(check_fields(checks))
        if shape_mismatch(worst_check(checks)):
            return rec
        with phases.phase("artifacts"):  # before timing: nothing but the record is left once the gate is released
            rec["artifacts"] = save_artifacts(result.compiled, artifacts_dir)
        with failing_as("runtime_error"):
            rec.update(time_case(case, backend, result, base.eager, base.eager.prepare(inputs), phases))
        rec.update(derived(case, rec))
        with failing_as("runtime_error"):
            after = post_timing_check(case, loaded, result, base, group, first, phases)
    except StageFailed as failed:
        return {**rec, **failed.fields}
    rec.update(extra_check_fields(after, "post_timing"))
    fold_extra_check(rec, "post_timing")
    with phases.phase("gpu_state"):
        rec["gpu_state_after"] = gpu_state(case.device)
    return rec


def compile_fields(result: FirstResult) -> dict[str, Any]:
    """The cold compile's fields: its times, the backend's account of it, and the cache files it wrote."""
    info = result.compiled.info
    return dict(compile_s=result.compile_s, compile_total_s=result.total_s, compile_gate_wait_s=result.gate_wait_s,
                compile_stages_s=dict(info.stages_s),
                compile_notes=list(info.notes), lowering=dict(info.lowering), cache_hit_cold=info.cache_hit,
                cache_files_cold=result.cache_files_after - result.cache_files_before)


def check_fields(checks: list[SeedCheck]) -> dict[str, Any]:
    """The checks' fields: the verdict, the problems seen, the worst element, each output's figures and the
    worst seed's error figures."""
    worst = worst_check(checks)
    return {**verdict_fields(worst, checks), "check_problems": sorted({p for c in checks for p in c.problems}),
            **worst.worst_element, **per_output_fields(checks), **error_figures(worst)}


def post_timing_check(case: Case, loaded: Loaded, result: FirstResult, base: Baseline, group: GroupReference,
                      first: SeedCheck, phases: PhaseLog) -> SeedCheck:
    """One more call after the timed loop, on the first seed's inputs, checked like the first."""
    with phases.phase("post_timing_check"):
        poison_allocator(loaded.graph, case.device, case.grad)
        raw = result.compiled.run(result.prepared)
        result.compiled.sync()
        return check_outputs(loaded.graph, case.seeds[0], result.compiled.to_torch(raw), base.outputs, group.refs,
                             group.eager_vs_refs or first.eager_vs_refs,  # eager's error: known by now
                             output_names(loaded.graph, case.grad))


def per_output_fields(checks: list[SeedCheck]) -> dict[str, Any]:
    """`output_errors`: each output's figures on its worst seed (failing first, then the larger relative L2
    error), with that seed; and `worst_output`, the name the case's verdict is about. {} without names."""
    best: dict[str, dict[str, Any]] = {}
    for c in checks:
        for name, fig in c.per_output.items():
            old = best.get(name)
            rel = fig["err_rel_l2_vs_fp64"]
            key = (fig["status"] != "ok", rel if isinstance(rel, float | int) else float("inf"))
            if old is None or key > old["_key"]:
                best[name] = {**fig, "seed": c.seed, "_key": key}
    if not best:
        return {}
    return {"output_errors": {k: {f: v for f, v in fig.items() if f != "_key"} for k, fig in best.items()},
            "worst_output": worst_check(checks).worst_output}


def derived(case: Case, rec: dict[str, Any]) -> dict[str, Any]:
    """Achieved throughput from the analytic cost model at the headline latency, and break-even calls (the
    graph's own time to its first result over the headline's saving per call against eager)."""
    ms = rec.get("headline_ms") or rec.get("latency_ms_median")
    out = throughput(case.flops, case.bytes_moved, ms)
    eager_ms = rec.get("eager_headline_ms") or rec.get("eager_latency_ms_median")
    if case.backend != "eager" and ms and eager_ms and eager_ms > ms:
        out["break_even_calls"] = rec["compile_total_s"] / ((eager_ms - ms) * 1e-3)
    return out
