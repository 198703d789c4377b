"""The cold run of one case, step by step: baseline, compile, check every seed, time, profile."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from bakeoff.backends import get_backend
from bakeoff.backends.base import Backend, Compiled, TensorSpec

from bakeoff.harness.measure.checks import SeedCheck, check_outputs, poison_allocator, same_bits
from bakeoff.harness.measure.extra_checks import extra_check_fields, fold_extra_check
from bakeoff.harness.measure.environment import gpu_state
from bakeoff.harness.measure.load_watch import LoadWatch
from bakeoff.harness.measure.noise import assess as assess_noise
from bakeoff.harness.run.gate import timing_exclusive
from bakeoff.harness.run.worker.inputs import make_inputs
from bakeoff.harness.run.worker.phases import PhaseLog
from bakeoff.harness.run.worker.process_setup import setup_graph_for, warm_up_process
from bakeoff.harness.run.worker.shared_reference import shared_reference
from bakeoff.harness.plan.cases import Case
from bakeoff.harness.measure.figures import BACKEND_TARGET, EAGER_TARGET, latency_fields, measure_figures  # noqa: F401
from bakeoff.harness.measure.timing import TimedCall
from bakeoff.harness.run.worker.steps import compile_and_first_run, compiling, count_cache_files, error_record
from bakeoff.workloads.grad import step_output_names


def _eager_baseline(graph, specs, case: Case, inputs) -> tuple[Compiled, list[torch.Tensor], bool]:
    """Eager's executable and outputs (a training step's: outputs and gradients); run twice, and report
    whether the two runs differ bitwise."""
    eager = get_backend("eager").compile_case(graph, specs, case.device, {}, case.grad)
    first = [o.clone() for o in eager(*inputs)]
    second = eager(*inputs)
    deterministic = all(same_bits(a, b) for a, b in zip(first, second))
    _spoil(second, inputs)
    return eager, first, deterministic


def _spoil(outputs, inputs) -> None:
    """Overwrite freed-to-be outputs with NaN: on the CPU (no caching allocator to poison) a block freed here
    may be handed to the backend next, and an output it never writes would then read eager's exact answer."""
    held = {x.untyped_storage().data_ptr() for x in inputs}
    for out in outputs:
        if out.is_floating_point() and out.untyped_storage().data_ptr() not in held:
            out.fill_(float("nan"))


def _check_seeds(graph, case: Case, compiled: Compiled, eager: Compiled, first: SeedCheck,
                 phases: PhaseLog, sources: dict[str, str]) -> list[SeedCheck]:
    """Check the remaining seeds: fresh inputs, poisoned outputs, run, compare. `sources` gets where each
    seed's reference came from."""
    checks = [first]
    for seed in case.seeds[1:]:
        with phases.phase("inputs"):
            inputs = make_inputs(graph, seed, case.device, case.input_files, case.grad)
        with phases.phase("eager_baseline"):
            eager_out = eager(*inputs)
        group = shared_reference(graph, seed, inputs, eager_out, case.device, phases, case.grad)
        sources[str(seed)] = group.source
        with phases.phase("checks"):
            poison_allocator(graph, case.device, case.grad)
            outs = compiled(*inputs)
            checks.append(check_outputs(graph, seed, outs, eager_out, group.refs, group.eager_vs_refs,
                                        output_names(graph, case.grad)))
    return checks


def output_names(graph, grad: bool) -> list[str] | None:
    """Names for the check of a case's outputs: a training step's, or a forward's with several outputs (a
    verdict then says which one failed); None for one forward output."""
    names = step_output_names(graph, grad)
    return names if len(names) > 1 else None


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
    worst = _worst(checks)
    return {"output_errors": {k: {f: v for f, v in fig.items() if f != "_key"} for k, fig in best.items()},
            "worst_output": worst.worst_output}


def _worst(checks: list[SeedCheck]) -> SeedCheck:
    bad = [c for c in checks if c.verdict and c.verdict.status != "ok"]
    if bad:
        return bad[0]
    return max(checks, key=lambda c: c.vs_ref.rel_l2 if c.vs_ref else 0.0)


def _verdict_fields(worst: SeedCheck, checks: list[SeedCheck]) -> dict[str, Any]:
    """status, reason, err_ratio_vs_eager (of the worst seed's check) and checked_seeds."""
    v = worst.verdict
    return {"status": v.status if v else "mismatch", "reason": v.reason if v else "no output checked",
            "err_ratio_vs_eager": v.err_ratio_vs_eager if v else None, "checked_seeds": [c.seed for c in checks]}


def _timing(case: Case, backend: Backend, compiled: Compiled, prepared: Any, eager: Compiled,
            eager_prepared: Any, phases: PhaseLog) -> dict[str, Any]:
    """Measure while holding the device's timing gate alone: no other worker on it runs meanwhile
    (harness/gate.py). The record gets the seconds waited for the gate and the window it was held."""
    with timing_exclusive() as gate:
        phases.take_gate_wait()
        with LoadWatch(case.device) as load:
            out = _measure_all(case, backend, compiled, prepared, eager, eager_prepared, phases)
    out.update(load.fields())  # what else ran meanwhile, then the quality judged from it and the samples
    host_clock = not (case.device.startswith("cuda") and backend.timed_with_events)
    out.update(assess_noise(out, case.timing["target_iqr"], paired=case.backend != "eager", host_clock=host_clock))
    return {**out, **(gate.summary() if gate is not None else {})}


def timing_targets(case: Case, backend: Backend, compiled: Compiled, prepared: Any, eager: Compiled,
                   eager_prepared: Any) -> list[TimedCall]:
    """The backend's target and, unless the case is eager itself, eager's, interleaved with it.

    Eager is timed by the same method as the backend it is paired with (CUDA events only when the backend
    is event-timed), so speedup_vs_eager divides two figures obtained the same way."""
    targets = [TimedCall(BACKEND_TARGET, lambda: compiled.run(prepared), compiled.sync, backend.timed_with_events)]
    if case.backend != "eager":
        targets.append(TimedCall(EAGER_TARGET, lambda: eager.run(eager_prepared), eager.sync,
                              backend.timed_with_events))
    return targets


def _measure_all(case: Case, backend: Backend, compiled: Compiled, prepared: Any, eager: Compiled,
                 eager_prepared: Any, phases: PhaseLog | None = None) -> dict[str, Any]:
    """Every latency figure of the case and its headline (harness.measure.figures), each step a phase."""
    phases = phases or PhaseLog(None)
    targets = timing_targets(case, backend, compiled, prepared, eager, eager_prepared)
    # A training step is replayed from a CUDA graph only where the backend says its backward captures too.
    grad = getattr(case, "grad", False)  # getattr: tests time case-like objects and backend stand-ins
    capturable = backend.graph_capturable and (not grad or getattr(backend, "grad_graph_capturable", False))
    # The minimum bytes moved (inputs and outputs) bound what calls in flight may allocate when pipelined.
    out = measure_figures(targets[0], targets[1] if len(targets) > 1 else None, case.device, case.timing,
                          capturable=capturable, bytes_per_call=case.bytes_moved, phase=phases.phase)
    if case.device.startswith("cuda") and case.timing.get("cuda_graph", True) and backend.graph_capturable \
            and not capturable:
        out["graph_latency_error"] = (f"not captured: {backend.name}'s forward is CUDA-graph capturable but its "
                                      "training step (backward) is not declared capturable (grad_graph_capturable)")
    return out


def _save_artifacts(compiled: Compiled, artifacts_dir: Path | None) -> dict[str, Any]:
    """Write text artifacts to files; return a summary (sizes, numbers) for the record."""
    arts = compiled.artifacts() or {}
    summary: dict[str, Any] = {}
    for key, value in arts.items():
        if isinstance(value, str | bytes) and artifacts_dir is not None:
            artifacts_dir.mkdir(parents=True, exist_ok=True)
            data = value.encode() if isinstance(value, str) else value
            (artifacts_dir / key.replace("/", "_")).write_bytes(data)
            summary[f"{key}_bytes"] = len(data)
        elif isinstance(value, int | float | bool | list | dict) or value is None:
            summary[key] = value
    return summary


def run_cold(case: Case, artifacts_dir: Path | None, phases: PhaseLog) -> dict[str, Any]:
    """The whole case in this (fresh) process. Returns the record's measured fields."""
    with phases.phase("case_load"):
        graph = case.bound_graph()
    with phases.phase("imports"):
        backend = get_backend(case.backend)
    specs = TensorSpec.of_inputs(graph)
    with phases.phase("gpu_state"):
        rec: dict[str, Any] = {"gpu_state_before": gpu_state(case.device)}
    torch.manual_seed(case.seeds[0])
    with phases.phase("inputs"):
        inputs = make_inputs(graph, case.seeds[0], case.device, case.input_files, case.grad)
    with phases.phase("eager_baseline"):
        eager, eager_out, deterministic = _eager_baseline(graph, specs, case, inputs)
    rec["eager_deterministic"] = deterministic
    group = shared_reference(graph, case.seeds[0], inputs, eager_out, case.device, phases, case.grad)
    rec["reference_source"] = {str(case.seeds[0]): group.source}
    rec["cache_files_before_cold"] = count_cache_files(backend.cache_env)  # 0: its own, empty folders
    with phases.phase("compile_setup"), compiling(backend, case, setup_graph_for(graph)):
        rec.update(warm_up_process(backend, case, graph, count_cache_files))  # the process's one-time start
    cache_before = count_cache_files(backend.cache_env)
    poison_allocator(graph, case.device, case.grad)
    try:
        with phases.phase("compile"), compiling(backend, case, graph):
            compiled, prepared, raw, compile_s, total_s = compile_and_first_run(backend, graph, specs, case, inputs)
    except Exception as exc:
        return {**rec, **error_record("compile_error", exc)}
    rec.update(compile_s=compile_s, compile_total_s=total_s, compile_stages_s=dict(compiled.info.stages_s),
               compile_notes=list(compiled.info.notes), lowering=dict(compiled.info.lowering),
               cache_hit_cold=compiled.info.cache_hit,
               cache_files_cold=count_cache_files(backend.cache_env) - cache_before)
    try:
        with phases.phase("checks"):
            first = check_outputs(graph, case.seeds[0], compiled.to_torch(raw), eager_out, group.refs,
                                  group.eager_vs_refs, output_names(graph, case.grad))
        checks = _check_seeds(graph, case, compiled, eager, first, phases, rec["reference_source"])
    except Exception as exc:
        return {**rec, **error_record("runtime_error", exc)}
    worst = _worst(checks)
    rec.update(_verdict_fields(worst, checks))
    rec["check_problems"] = sorted({p for c in checks for p in c.problems})
    rec.update(worst.worst_element)
    rec.update(per_output_fields(checks))
    for prefix, suffix, stats in (("err", "vs_fp64", worst.vs_ref), ("err", "vs_eager", worst.vs_eager),
                                  ("eager_err", "vs_fp64", worst.eager_vs_ref)):
        if stats is not None:
            rec.update(stats.as_dict(suffix, prefix))
    if worst.verdict and worst.verdict.reason and "output shape" in worst.verdict.reason:
        return rec
    with phases.phase("artifacts"):  # before timing: nothing but the record is left once the gate is released
        rec["artifacts"] = _save_artifacts(compiled, artifacts_dir)
    try:
        rec.update(_timing(case, backend, compiled, prepared, eager, eager.prepare(inputs), phases))
    except Exception as exc:
        return {**rec, **error_record("runtime_error", exc)}
    rec.update(_derived(case, rec))
    try:  # one more call after the timed loop, on the first seed's inputs, checked like the first
        with phases.phase("post_timing_check"):
            poison_allocator(graph, case.device, case.grad)
            raw = compiled.run(prepared)
            compiled.sync()
            after = check_outputs(graph, case.seeds[0], compiled.to_torch(raw), eager_out, group.refs,
                                  group.eager_vs_refs or first.eager_vs_refs,  # eager's error: known by now
                                  output_names(graph, case.grad))
    except Exception as exc:
        return {**rec, **error_record("runtime_error", exc)}
    rec.update(extra_check_fields(after, "post_timing"))
    fold_extra_check(rec, "post_timing")
    with phases.phase("gpu_state"):
        rec["gpu_state_after"] = gpu_state(case.device)
    return rec


def _derived(case: Case, rec: dict[str, Any]) -> dict[str, Any]:
    """Achieved throughput from the analytic cost model at the headline latency, and break-even calls (the
    graph's own time to its first result over the headline's saving per call against eager)."""
    ms = rec.get("headline_ms") or rec.get("latency_ms_median")
    out: dict[str, Any] = {}
    if ms and ms > 0:
        out["achieved_gbps"] = case.bytes_moved / (ms * 1e-3) / 1e9
        out["achieved_tflops"] = case.flops / (ms * 1e-3) / 1e12
    eager_ms = rec.get("eager_headline_ms") or rec.get("eager_latency_ms_median")
    if case.backend != "eager" and ms and eager_ms and eager_ms > ms:
        out["break_even_calls"] = rec["compile_total_s"] / ((eager_ms - ms) * 1e-3)
    return out
