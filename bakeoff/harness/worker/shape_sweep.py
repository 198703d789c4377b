"""The cold run of a shape-sweep case: one server (backends/sweep_server.py), then every value of the swept dim in
the order given, each checked and timed as a normal case is (docs/WORKLOADS.md, "Shape sweeps").

Per point: inputs at that shape from the case's seeds (the same inits), eager's outputs and the shared
float64 reference at that shape; then, synchronised, the time to the first result at that shape (the server's
`at()`, so any compile, + prepare + one run + sync: `first_result_s`), whether it compiled (the server's own
counter before and after: `recompiled`, `compiles_so_far`), the numeric checks of every seed with the normal
verdict rules (measure/checks.py), and the latency with the normal timer and headline (measure/figures.py)
on a smaller budget per point (`point_timing`), holding the device's timing gate for the timing only.
"""
from __future__ import annotations

import time
from typing import Any

import torch

from bakeoff.backends import get_backend
from bakeoff.backends.base import TensorSpec
from bakeoff.backends.sweep import SweepSpec
from bakeoff.workloads import costs
from bakeoff.workloads.ir import Graph

from bakeoff.harness.config.timing import TimingConfig
from bakeoff.harness.measure.checks import poison_allocator
from bakeoff.harness.measure.environment import gpu_state
from bakeoff.harness.plan.cases import Case
from bakeoff.harness.worker.phases import PhaseLog
from bakeoff.harness.worker.shared_reference import shared_reference
from bakeoff.harness.worker.stages import (StageFailed, baseline, check, check_other_seeds, error_figures,
                                               failing_as, load_inputs, process_setup, save_artifacts,
                                               shape_mismatch, throughput, time_alone, verdict_fields, worst_check)
from bakeoff.harness.worker.compile_step import first_result

MIN_POINT_BUDGET_S = 0.05
MIN_POINT_WARMUP_S = 0.01
# A point's status, worst first: a wrong answer served without an error is worse than a loud failure.
SEVERITY = {"mismatch": 3, "oom": 2, "compile_error": 2, "runtime_error": 2, "ok": 0}
_POINT_FIGURES = ("headline_ms", "headline_p20_ms", "headline_p80_ms", "headline_iqr_rel", "headline_n",
                  "headline_method", "headline_fallback", "host_latency_ms")
_ERR_KEYS = ("err_max_abs_vs_fp64", "err_rel_l2_vs_fp64", "err_rmse_vs_fp64", "err_ulp_max_vs_fp64",
             "err_max_abs_vs_eager", "err_rel_l2_vs_eager", "eager_err_rel_l2_vs_fp64")


def spec_of(case: Case) -> SweepSpec:
    sweep = case.sweep
    return SweepSpec(Graph.from_json(sweep.graph), dict(case.dims), sweep.dim, tuple(sweep.values),
                     case.dtype)


def point_timing(timing: TimingConfig, distinct: int) -> TimingConfig:
    """The timing settings of one point: the case's, with `budget_s` and `warmup_s` divided among the sweep's
    distinct shapes (at least MIN_POINT_BUDGET_S and MIN_POINT_WARMUP_S), so a sweep costs about one case's
    timing budget per backend. Every other setting (min_reps, the cache flush, profiling) is the case's."""
    return timing.model_copy(update={"budget_s": max(MIN_POINT_BUDGET_S, timing.budget_s / distinct),
                                     "warmup_s": max(MIN_POINT_WARMUP_S, timing.warmup_s / distinct)})


def _stat(rec: dict[str, Any], key: str) -> Any:
    v = rec.get(key)
    return round(v, 9) if isinstance(v, float) else v


class _Eager:
    """Eager's executable per shape (its PyTorch lowering is built per bound graph: no compile)."""

    def __init__(self, device: str) -> None:
        self.device, self._built = device, {}

    def __call__(self, graph: Graph):
        key = graph.digest()
        if key not in self._built:
            eager = get_backend("eager")
            self._built[key] = eager.compile(graph, TensorSpec.of_inputs(graph), self.device, eager.Options())
        return self._built[key]


def _serve_point(case: Case, backend, server, value: int, graph: Graph, eager: _Eager, timing: TimingConfig,
                 phases: PhaseLog, sources: dict[str, str]) -> dict[str, Any]:
    """One point: first result, checks, timing. Returns the point's fields (an error ends the point only)."""
    seed = case.seeds[0]
    inputs = load_inputs(case, graph, seed, phases, grad=False)
    base = baseline(lambda: eager(graph), inputs, phases, clone=True)
    group = shared_reference(graph, seed, inputs, base.outputs, case.device, phases)
    sources[f"{seed}@{graph.digest()}"] = group.source
    before = server.compiles()
    torch.manual_seed(seed)
    poison_allocator(graph, case.device)
    try:
        with failing_as("compile_error"), phases.phase("compile"):
            result = first_result(lambda: server.at(value, graph, TensorSpec.of_inputs(graph)), inputs)
    except StageFailed as failed:
        return {"compiles_so_far": _safe_compiles(server, before), **_error(failed)}
    point: dict[str, Any] = {"first_result_s": result.total_s, "compiles_so_far": server.compiles()}
    point["recompiled"] = point["compiles_so_far"] > before
    point.update(server.point_facts())
    point["_compiled"] = result.compiled
    try:
        with failing_as("runtime_error"):
            first = check(graph, seed, result.compiled.to_torch(result.raw), base, group, None, phases)
            checks = check_other_seeds(case, graph, result.compiled, base.eager, first, phases, sources)
        worst = worst_check(checks)
        point.update(verdict_fields(worst, checks))
        stats = error_figures(worst)
        point.update({k: _stat(stats, k) for k in _ERR_KEYS if k in stats})
        if shape_mismatch(worst):
            return point
        with failing_as("runtime_error"):
            figures = time_alone(backend, result, graph, case.device, timing, phases)
    except StageFailed as failed:
        return {**point, **_error(failed)}
    point.update({k: figures.get(k) for k in _POINT_FIGURES if k in figures})
    point.update(throughput(costs.flops(graph), costs.min_bytes(graph), figures.get("headline_ms")))
    return point


def _safe_compiles(server, fallback: int) -> int:
    try:
        return server.compiles()
    except Exception:  # noqa: BLE001 - the counter of a failed compile: the point's error says what happened
        return fallback


def _error(failed: StageFailed) -> dict[str, Any]:
    return {"status": failed.fields["status"], "reason": failed.fields["reason"]}


def run_sweep(case: Case, artifacts_dir, phases: PhaseLog) -> dict[str, Any]:
    """The whole sweep case in this (fresh) process. Returns the record's measured fields."""
    spec = spec_of(case)
    with phases.phase("imports"):
        backend = get_backend(case.backend)
    with phases.phase("gpu_state"):
        rec: dict[str, Any] = {"gpu_state_before": gpu_state(case.device)}
    # the process's one-time start, on the tiny graph, inside the gate
    rec.update(process_setup(case, backend, case.bound_graph(), phases, beside_timing=False))
    timing = point_timing(case.timing, spec.distinct())
    rec["sweep_point_budget_s"] = timing.budget_s
    t0 = time.perf_counter()
    try:
        with failing_as("compile_error"), phases.phase("compile"):
            server = backend.serve_sweep(spec, case.device, case.options)
    except StageFailed as failed:
        return {**rec, **failed.fields}
    setup_s = time.perf_counter() - t0
    rec.update(sweep_serving=server.how, sweep_compile_counter=server.counter, sweep_setup_s=setup_s,
               compile_notes=list(server.notes))
    eager, points, sources, compiled = _Eager(case.device), [], {}, None
    seen: set[int] = set()
    for value in spec.values:
        graph = spec.bound_at(value)
        point = {"value": value, "dims": spec.dims_at(value), "new_shape": value not in seen}
        seen.add(value)
        point.update(_serve_point(case, backend, server, value, graph, eager, timing, phases, sources))
        points.append(point)
        compiled = point.pop("_compiled", compiled)
    rec["reference_source"] = sources
    rec.update(sweep_fields(points, setup_s, _safe_compiles(server, None)))
    if compiled is not None:  # the last executable served: for a dynamic server, the one that served them all
        with phases.phase("artifacts"):
            rec["artifacts"] = save_artifacts(compiled, artifacts_dir)
    with phases.phase("gpu_state"):
        rec["gpu_state_after"] = gpu_state(case.device)
    return rec


def sweep_fields(points: list[dict[str, Any]], setup_s: float, compiles: int | None) -> dict[str, Any]:
    """The record's sweep fields from its points: the points, the totals, and the case's status and errors
    (its worst point's: SEVERITY, then the first in serving order)."""
    worst = max(points, key=lambda p: (SEVERITY.get(p.get("status", "mismatch"), 2),
                                       -points.index(p)))
    served = [p["first_result_s"] for p in points if p.get("first_result_s") is not None]
    ok = sum(1 for p in points if p.get("status") == "ok")
    out: dict[str, Any] = {
        "sweep": points,
        "sweep_compiles": compiles,
        "sweep_serve_s": setup_s + sum(served) if len(served) == len(points) else None,
        "sweep_points": len(points), "sweep_points_ok": ok,
        "sweep_recompiled_at": [p["value"] for p in points if p.get("recompiled")],
        "status": worst.get("status", "mismatch"),
        "reason": (f"at {worst['dims']}: {worst.get('reason')}" if worst.get("status") != "ok"
                   else worst.get("reason")),
    }
    out.update({k: worst[k] for k in _ERR_KEYS + ("err_ratio_vs_eager",) if k in worst})
    return out
