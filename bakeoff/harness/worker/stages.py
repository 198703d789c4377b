"""The worker's stages, each a named step that returns its part of the record (or what the next stage needs).

A case runs as a composition of them, as tritongen's pipeline runs its passes: the cold run (cold.py), the
warm run (warm.py) and every point of a shape sweep (shape_sweep.py) are

    load_case -> load_inputs -> baseline -> shared_reference -> process_setup -> compile -> check
              -> error_figures -> time

each stage inside its phase of the worker's phase log (phases.py). A stage that fails raises StageFailed
holding the record's error fields (`failing_as`), which ends the composition with what it has so far.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from bakeoff.backends import get_backend
from bakeoff.backends.base import Backend, Compiled, TensorSpec
from bakeoff.workloads import costs
from bakeoff.workloads.grad import step_output_names
from bakeoff.workloads.ir import Graph

from bakeoff.harness.config.timing import TimingConfig
from bakeoff.harness.measure.checks import SeedCheck, check_outputs, poison_allocator, same_bits
from bakeoff.harness.measure.figures import BACKEND_TARGET, EAGER_TARGET, collect_figures
from bakeoff.harness.measure.load_watch import LoadWatch
from bakeoff.harness.measure.noise import assess as assess_noise
from bakeoff.harness.measure.timing import TimedCall
from bakeoff.harness.plan.cases import Case
from bakeoff.harness.supervise.gate import timing_exclusive
from bakeoff.harness.worker.compile_step import (FirstResult, compile_seconds, compiling, count_cache_files,
                                                 first_result)
from bakeoff.harness.worker.errors import error_record
from bakeoff.harness.worker.input_tensors import make_inputs
from bakeoff.harness.worker.phases import PhaseLog
from bakeoff.harness.worker.process_setup import setup_graph_for, warm_up_process
from bakeoff.harness.worker.shared_reference import GroupReference, shared_reference


class StageFailed(Exception):
    """A stage failed; `fields` are the record's status, reason and traceback."""

    def __init__(self, fields: dict[str, Any]) -> None:
        super().__init__(fields.get("reason"))
        self.fields = fields


@contextmanager
def failing_as(status: str) -> Iterator[None]:
    """Turn an exception of the stages inside into StageFailed with `status` (error_record's rules: an
    out-of-memory error is `oom`, a lazy compiler's failure in a first run a `compile_error`)."""
    try:
        yield
    except Exception as exc:
        raise StageFailed(error_record(status, exc)) from exc


@dataclass(frozen=True)
class Loaded:
    """The case's bound graph, its backend and the specs of its inputs."""

    graph: Graph
    backend: Backend
    specs: list[TensorSpec]


def load_case(case: Case, phases: PhaseLog) -> Loaded:
    with phases.phase("case_load"):
        graph = case.bound_graph()
    with phases.phase("imports"):
        backend = get_backend(case.backend)
    return Loaded(graph, backend, TensorSpec.of_inputs(graph))


def load_inputs(case: Case, graph: Graph, seed: int, phases: PhaseLog, grad: bool | None = None) -> list[torch.Tensor]:
    """The inputs of `seed` (worker/input_tensors.py); with the case's `grad` unless told."""
    with phases.phase("inputs"):
        return make_inputs(graph, seed, case.device, case.input_files, case.grad if grad is None else grad)


def eager_executable(graph: Graph, specs: list[TensorSpec], device: str, grad: bool = False) -> Compiled:
    """Eager's executable of `graph` (a training step's with `grad`): no compile, its PyTorch lowering."""
    eager = get_backend("eager")
    return eager.compile_case(graph, specs, device, eager.Options(), grad)


@dataclass
class Baseline:
    """Eager's executable and its outputs on one seed's inputs; `deterministic` whether two runs agreed
    bitwise (None: run once)."""

    eager: Compiled
    outputs: list[torch.Tensor]
    deterministic: bool | None = None


def baseline(make_eager: Callable[[], Compiled], inputs: list[torch.Tensor], phases: PhaseLog, *,
             repeat: bool = False, clone: bool = False) -> Baseline:
    """Eager's outputs (a training step's: outputs and gradients). With `repeat`, run twice and say whether
    the runs differ bitwise; the second run's outputs are spoiled (`spoil`). With `clone`, the outputs are
    copies (so eager's next run cannot overwrite them)."""
    with phases.phase("eager_baseline"):
        eager = make_eager()
        if not repeat:
            out = eager(*inputs)
            return Baseline(eager, [o.clone() for o in out] if clone else out)
        first = [o.clone() for o in eager(*inputs)]
        second = eager(*inputs)
        deterministic = all(same_bits(a, b) for a, b in zip(first, second))
        spoil(second, inputs)
        return Baseline(eager, first, deterministic)


def spoil(outputs, inputs) -> None:
    """Overwrite freed-to-be outputs with NaN: on the CPU (no caching allocator to poison) a block freed here
    may be handed to the backend next, and an output it never writes would then read eager's exact answer."""
    held = {x.untyped_storage().data_ptr() for x in inputs}
    for out in outputs:
        if out.is_floating_point() and out.untyped_storage().data_ptr() not in held:
            out.fill_(float("nan"))


def process_setup(case: Case, backend: Backend, graph: Graph, phases: PhaseLog, *, warm: bool = False,
                  beside_timing: bool = True) -> dict[str, Any]:
    """The process's one-time start on the tiny graph (process_setup.py): its `compile_process_setup*` fields.
    With `beside_timing`, as a compile step (compile_step.compiling: outside the gate where the policy allows)."""
    with phases.phase("compile_setup"):
        if not beside_timing:
            return warm_up_process(backend, case, graph, count_cache_files)
        with compiling(backend, case, setup_graph_for(graph)):
            return warm_up_process(backend, case, graph, count_cache_files, **({"phase": "_warm"} if warm else {}))


def compile(case: Case, loaded: Loaded, inputs: list[torch.Tensor], phases: PhaseLog) -> FirstResult:
    """Poison the allocator, compile the case's graph and run it once (phase `compile`, a compile step)."""
    backend, graph = loaded.backend, loaded.graph
    before = count_cache_files(backend.cache_env)
    poison_allocator(graph, case.device, case.grad)
    with phases.phase("compile"), compiling(backend, case, graph):
        result = first_result(lambda: backend.compile_case(graph, loaded.specs, case.device, case.options,
                                                           case.grad), inputs)
    result.compile_s = compile_seconds(result.compiled, result.total_s, result.first_run_s)
    result.cache_files_before, result.cache_files_after = before, count_cache_files(backend.cache_env)
    return result


def output_names(graph: Graph, grad: bool) -> list[str] | None:
    """Names for the check of a case's outputs: a training step's, or a forward's with several outputs (a
    verdict then says which one failed); None for one forward output."""
    names = step_output_names(graph, grad)
    return names if len(names) > 1 else None


def check(graph: Graph, seed: int, outputs, base: Baseline, group: GroupReference, names: list[str] | None,
          phases: PhaseLog, phase: str = "checks") -> SeedCheck:
    """One seed's check of outputs already computed, against eager's and the reference's."""
    with phases.phase(phase):
        return check_outputs(graph, seed, outputs, base.outputs, group.refs, group.eager_vs_refs, names)


def check_other_seeds(case: Case, graph: Graph, compiled: Compiled, eager: Compiled, first: SeedCheck,
                      phases: PhaseLog, sources: dict[str, str]) -> list[SeedCheck]:
    """`first`, then the case's other seeds: fresh inputs, eager's outputs, the reference, poisoned outputs,
    run, compare. `sources` gets where each seed's reference came from."""
    checks = [first]
    for seed in case.seeds[1:]:
        inputs = load_inputs(case, graph, seed, phases)
        base = baseline(lambda: eager, inputs, phases)
        group = shared_reference(graph, seed, inputs, base.outputs, case.device, phases, case.grad)
        sources[str(seed)] = group.source
        with phases.phase("checks"):
            poison_allocator(graph, case.device, case.grad)
            outs = compiled(*inputs)
            checks.append(check_outputs(graph, seed, outs, base.outputs, group.refs, group.eager_vs_refs,
                                        output_names(graph, case.grad)))
    return checks


def worst_check(checks: list[SeedCheck]) -> SeedCheck:
    """The check the case's verdict is about: the first failing seed, else the largest relative L2 error."""
    bad = [c for c in checks if c.verdict and c.verdict.status != "ok"]
    if bad:
        return bad[0]
    return max(checks, key=lambda c: c.vs_ref.rel_l2 if c.vs_ref else 0.0)


def verdict_fields(worst: SeedCheck, checks: list[SeedCheck]) -> dict[str, Any]:
    """status, reason, err_ratio_vs_eager (of the worst seed's check) and checked_seeds."""
    v = worst.verdict
    return {"status": v.status if v else "mismatch", "reason": v.reason if v else "no output checked",
            "err_ratio_vs_eager": v.err_ratio_vs_eager if v else None, "checked_seeds": [c.seed for c in checks]}


def error_figures(worst: SeedCheck) -> dict[str, Any]:
    """The worst seed's error statistics: the backend's against fp64 and eager, eager's against fp64."""
    out: dict[str, Any] = {}
    for prefix, suffix, stats in (("err", "vs_fp64", worst.vs_ref), ("err", "vs_eager", worst.vs_eager),
                                  ("eager_err", "vs_fp64", worst.eager_vs_ref)):
        if stats is not None:
            out.update(stats.as_dict(suffix, prefix))
    return out


def shape_mismatch(worst: SeedCheck) -> bool:
    """Whether the verdict is about an output's shape (nothing to time then)."""
    return bool(worst.verdict and worst.verdict.reason and "output shape" in worst.verdict.reason)


def save_artifacts(compiled: Compiled, artifacts_dir: Path | None) -> dict[str, Any]:
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


def collect_all(case: Case, backend: Backend, compiled: Compiled, prepared: Any, eager: Compiled,
                eager_prepared: Any, phases: PhaseLog | None = None) -> Callable[[], dict[str, Any]]:
    """Run the case's timed calls (figures.collect_figures, each step a phase); returns what makes every latency
    figure of the case and its headline of them: host work, for after the timing gate."""
    phases = phases or PhaseLog(None)
    timing = TimingConfig.of(case.timing)  # TimingConfig.of: tests time case-like objects with a mapping
    targets = timing_targets(case, backend, compiled, prepared, eager, eager_prepared)
    # A training step is replayed from a CUDA graph only where the backend says its backward captures too.
    grad = getattr(case, "grad", False)  # getattr: tests time case-like objects and backend stand-ins
    capturable = backend.graph_capturable and (not grad or getattr(backend, "grad_graph_capturable", False))
    # The minimum bytes moved (inputs and outputs) bound what calls in flight may allocate when pipelined.
    figures = collect_figures(targets[0], targets[1] if len(targets) > 1 else None, case.device, timing,
                              capturable=capturable, bytes_per_call=case.bytes_moved, phase=phases.phase)

    def finish() -> dict[str, Any]:
        out = figures()
        if case.device.startswith("cuda") and timing.cuda_graph and backend.graph_capturable and not capturable:
            out["graph_latency_error"] = (f"not captured: {backend.name}'s forward is CUDA-graph capturable but its "
                                          "training step (backward) is not declared capturable (grad_graph_capturable)")
        return out

    return finish


def time_case(case: Case, backend: Backend, result: FirstResult, eager: Compiled, eager_prepared: Any,
              phases: PhaseLog) -> dict[str, Any]:
    """Measure while holding the device's timing gate alone: no other worker on it runs meanwhile
    (supervise/gate.py); the figures are made of the timings after it is released. The record gets the
    figures, what else ran meanwhile and the quality judged from it, the seconds waited for the gate and the
    window it was held."""
    with timing_exclusive() as gate:
        phases.take_gate_wait()
        with LoadWatch(case.device) as load:
            figures = collect_all(case, backend, result.compiled, result.prepared, eager, eager_prepared, phases)
    out = figures()
    out.update(load.fields())  # what else ran meanwhile, then the quality judged from it and the samples
    host_clock = not (case.device.startswith("cuda") and backend.timed_with_events)
    out.update(assess_noise(out, case.timing.target_iqr, paired=case.backend != "eager", host_clock=host_clock))
    return {**out, **(gate.summary() if gate is not None else {})}


def time_alone(backend: Backend, result: FirstResult, graph: Graph, device: str, timing: TimingConfig,
               phases: PhaseLog) -> dict[str, Any]:
    """The backend's figures alone (no eager beside it) under the timing gate, made after it is released: a
    sweep point's."""
    compiled, prepared = result.compiled, result.prepared
    call = TimedCall(BACKEND_TARGET, lambda: compiled.run(prepared), compiled.sync, backend.timed_with_events)
    with timing_exclusive():
        phases.take_gate_wait()
        figures = collect_figures(call, None, device, timing, capturable=backend.graph_capturable,
                                  bytes_per_call=costs.min_bytes(graph), phase=phases.phase)
    return figures()


def throughput(flops: int, bytes_moved: int, ms: float | None) -> dict[str, Any]:
    """achieved_gbps and achieved_tflops at `ms` per call (none without a positive latency)."""
    if not ms or ms <= 0:
        return {}
    return {"achieved_gbps": bytes_moved / (ms * 1e-3) / 1e9, "achieved_tflops": flops / (ms * 1e-3) / 1e12}
