"""One case's record built from its parts: the fields of the planned case, what its worker processes
returned (the cold and warm workers' outputs and the supervisor's process facts, supervise/case_process.py),
and its ceiling's shares; validated whole by the record model (results/record.py). The orchestrator writes
what `build_record` returns.
"""
from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from bakeoff.results.record import CaseFields, CaseRecord, ProcessFields, invalid_fields
from bakeoff.workloads.costs import bound_kind
from bakeoff.workloads.inits import describe_inputs

from bakeoff.harness.measure.ceiling_share import ceiling_fields
from bakeoff.harness.plan.cases import Case
from bakeoff.harness.plan.digests import case_digests


def build_record(case: Case, result: dict[str, Any], ceilings: dict[str, float]) -> CaseRecord:
    """The case's record, built from its parts: its planned fields (`case_fields`), what its workers
    returned, and its ceiling's shares. A result that
    does not fit the record model (an unknown field, a wrong type: a worker of another bakeoff, a harness
    bug) becomes a crash record naming the fields, with the process facts that do fit."""
    identity = case_fields(case).model_dump()
    record = {**identity, **result}
    record.setdefault("status", "crash")
    ceiling = ceiling_for(case, ceilings)
    if ceiling and (record.get("headline_ms") or record.get("latency_ms_median")):
        record.update(ceiling_fields(record, ceiling, ceilings))
    try:
        return CaseRecord.model_validate(record)
    except ValidationError as exc:
        reason = f"the case's result does not fit the record model: {invalid_fields(exc)}"
    facts: dict[str, Any] = {}
    for name in ProcessFields.model_fields:
        try:
            facts.update(ProcessFields.model_validate({name: result.get(name)}).model_dump(include={name}))
        except ValidationError:
            pass
    return CaseRecord(**identity, **facts, status="crash", reason=reason[:2000],
                      attempt=result.get("attempt") if isinstance(result.get("attempt"), int) else None)


def ceiling_for(case: Case, ceilings: dict[str, float]) -> tuple[str, float] | None:
    """The ceiling that bounds this case: matmul TFLOP/s for compute-bound graphs, copy GB/s otherwise.

    With both ceilings measured, the measured ridge point decides; with one missing, the cost model's
    (workloads.costs.bound_kind) does, and a case bound by the missing ceiling gets none (None): a
    compute-bound case is never measured against copy bandwidth, nor a memory-bound one against matmul."""
    intensity = case.flops / max(case.bytes_moved, 1)
    key = f"matmul_tflops_{case.dtype}"
    if key in ceilings and "copy_gbps" in ceilings:
        ridge = ceilings[key] * 1e12 / (ceilings["copy_gbps"] * 1e9)
        return (key, ceilings[key]) if intensity > ridge else ("copy_gbps", ceilings["copy_gbps"])
    if key not in ceilings and "copy_gbps" not in ceilings:
        return None

    wanted = key if bound_kind(case.bound_graph(), grad=getattr(case, "grad", False)) == "compute" else "copy_gbps"
    return (wanted, ceilings[wanted]) if wanted in ceilings else None


def case_fields(case: Case) -> CaseFields:
    """The record fields that come from the case itself."""
    swept = (case.sweep.dim, case.sweep.values) if case.sweep else None
    sweep = {"sweep_dim": case.sweep.dim, "sweep_values": list(case.sweep.values)} if case.sweep else {}
    return CaseFields(case_id=case.case_id, workload=case.workload_label, grad=case.grad, preset=case.preset,
                      shape=case.shape, dtype=case.dtype, backend=case.label, adapter=case.backend,
                      device=case.device, flops=case.flops, bytes_moved=case.bytes_moved, dims=case.dims,
                      options=case.options_given, seeds=list(case.seeds),
                      inputs=describe_inputs(case.bound_graph(), case.input_files),
                      # digested with every default filled in: `{}` and `{mode: default}` ran the same
                      **case_digests(case.graph, case.options.model_dump(mode="json"), case.timing.model_dump(),
                                     case.grad, swept), **sweep)
