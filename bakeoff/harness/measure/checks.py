"""Correctness of one backend's outputs: the fp64 reference, poisoning, and per-seed checks."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import torch

from bakeoff.workloads.decompose import to_reference
from bakeoff.workloads.grad import step_output_shapes
from bakeoff.workloads.ir import Graph
from bakeoff.workloads.lower_torch import TORCH_DTYPES, lower_torch
from bakeoff.workloads.reference import evaluate_reference

from bakeoff.harness.measure.numerics import ErrorStats, Verdict, error_stats, verdict
from bakeoff.harness.measure.worst_element import worst_element


def reference_outputs(graph: Graph, inputs: Sequence[torch.Tensor], device: str, grad: bool = False
                      ) -> list[torch.Tensor]:
    """float64 outputs: torch on upcast inputs on a GPU, the NumPy evaluator on the CPU. With `grad` (a
    training step: `inputs` end with the cotangents), the outputs then the gradients, from the NumPy
    reverse-mode rules (workloads/vjp.py) on every device: no torch or JAX autodiff judges them."""
    if grad:
        from bakeoff.workloads.vjp import evaluate_step

        host = [x.detach().to(torch.float64).cpu().numpy() for x in inputs]
        n = len(graph.inputs)
        outs, grads = evaluate_step(graph, host[:n], host[n:])
        return [torch.from_numpy(o).to(device) for o in outs + grads]
    if device.startswith("cuda"):
        fn = lower_torch(to_reference(graph))
        with torch.no_grad():
            return [o.to(torch.float64) for o in fn(*[x.to(torch.float64) for x in inputs])]
    outs = evaluate_reference(graph, [x.detach().to(torch.float64).cpu().numpy() for x in inputs])
    return [torch.from_numpy(o) for o in outs]


def poison_allocator(graph: Graph, device: str, grad: bool = False) -> None:
    """Fill blocks the size of each output with NaN and free them, so an output the backend allocates but
    never writes reads NaN (torch's caching allocator hands the same blocks back) instead of stale data.

    This reaches only outputs allocated through torch's CUDA caching allocator. On the CPU, torch allocates
    with malloc, which may or may not hand these blocks back (large blocks come as fresh, zeroed pages), and
    a library with its own allocator (ONNX Runtime, IREE, XLA) is reached on no device: an unwritten output
    then reads zeros or stale data and fails as an error beyond tolerance rather than as non-finite; it
    passes only where that data happens to match the reference. The one stale block that would match it,
    eager's second baseline output, is overwritten with NaN before it is freed (case_run._spoil)."""
    poison = [torch.full(shape, float("nan"), dtype=TORCH_DTYPES[dtype], device=device)
              for shape, dtype in step_output_shapes(graph, grad)]
    del poison


@dataclass
class SeedCheck:
    """The outcome of checking one seed's outputs (worst output when there are several)."""

    seed: int
    vs_ref: ErrorStats | None = None
    vs_eager: ErrorStats | None = None
    eager_vs_ref: ErrorStats | None = None
    verdict: Verdict | None = None
    problems: list[str] = field(default_factory=list)
    worst_element: dict[str, Any] = field(default_factory=dict)  # of the worst output (worst_element.py)
    # Each output's figures by name (`output_figures`), when the check was given names; the worst one's name.
    per_output: dict[str, dict[str, Any]] = field(default_factory=dict)
    worst_output: str | None = None
    eager_vs_refs: list[ErrorStats] | None = None  # eager's error per output, for later checks of this seed


def output_figures(v: Verdict, vs_ref: ErrorStats, eager_vs_ref: ErrorStats | None) -> dict[str, Any]:
    """One output's verdict and headline errors, as the record's `output_errors` holds them per output:
    status, reason, err_{rel_l2, rmse, max_abs, max_scaled}_vs_fp64, eager_err_rmse_vs_fp64 and
    err_ratio_vs_eager (RMSE over eager's; None where eager is no yardstick). Non-finite as 'inf'/'nan'."""
    def num(x: float | None) -> float | str | None:
        return x if x is None or math.isfinite(x) else str(x)

    return {"status": v.status, "reason": v.reason, "err_rel_l2_vs_fp64": num(vs_ref.rel_l2),
            "err_rmse_vs_fp64": num(vs_ref.rmse), "err_max_abs_vs_fp64": num(vs_ref.max_abs),
            "err_max_scaled_vs_fp64": num(vs_ref.max_scaled),
            "eager_err_rmse_vs_fp64": num(eager_vs_ref.rmse) if eager_vs_ref is not None else None,
            "err_ratio_vs_eager": num(v.err_ratio_vs_eager)}


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same shape, dtype and bits, element by element (so NaN equals NaN, and 0.0 differs from -0.0)."""
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        return False
    ints = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return torch.equal(a.contiguous().view(ints), b.contiguous().view(ints))


def check_outputs(graph: Graph, seed: int, outputs: Sequence[Any], eager_outputs: Sequence[torch.Tensor],
                  refs: Sequence[torch.Tensor], eager_vs_refs: Sequence[ErrorStats] | None = None,
                  names: Sequence[str] | None = None) -> SeedCheck:
    """Compare a backend's outputs with eager's (same dtype) and the fp64 reference.

    With several outputs, the worst one is reported: a failing output before a passing one, then the
    larger relative L2 error against the reference; its verdict and its numbers come together.
    `eager_vs_refs`: eager's error against each reference where already known (the same for every backend
    of a workload, shape, dtype and seed); an output with eager's very bits has eager's error.
    `names`: each output's name (workloads.grad.step_output_names: `out0`, `grad:x`, ...); given, the
    verdict's reason starts with the worst output's name and `per_output` holds every output's figures.
    """
    result = SeedCheck(seed)
    names = list(names) if names is not None else None
    if names is not None and len(names) != len(refs):
        raise ValueError(f"{len(names)} output names for {len(refs)} references")
    if len(outputs) != len(refs):
        result.verdict = Verdict("mismatch", f"{len(outputs)} outputs, expected {len(refs)}", None)
        return result
    judged = []
    for i, (out, eager_out, ref) in enumerate(zip(outputs, eager_outputs, refs)):
        if not isinstance(out, torch.Tensor):
            result.verdict = Verdict("mismatch", f"output is a {type(out).__name__}, not a tensor", None)
            return result
        if tuple(out.shape) != tuple(ref.shape):
            where = f"{names[i]}: " if names else ""
            result.verdict = Verdict("mismatch", f"{where}output shape {list(out.shape)} != expected "
                                                 f"{list(ref.shape)}", None)
            return result
        if out.dtype != eager_out.dtype:
            result.problems.append(f"output dtype {out.dtype} differs from eager's {eager_out.dtype}")
            out = out.to(eager_out.dtype)
        # Each tensor in float64 on the output's device once: the reference (moved there once per check, not
        # per statistic), the output and eager's output, shared by every comparison below.
        ref64 = ref.to(device=out.device, dtype=torch.float64)
        out64, eager64 = out.to(torch.float64), eager_out.to(device=out.device, dtype=torch.float64)
        eager_vs_ref = (eager_vs_refs[i] if eager_vs_refs is not None
                        else error_stats(eager_out, ref, out64=eager64, ref64=ref64))
        vs_ref = eager_vs_ref if same_bits(out, eager_out) else error_stats(out, ref, out64=out64, ref64=ref64)
        judged.append((verdict(vs_ref, eager_vs_ref, eager_out.dtype), vs_ref,
                       error_stats(out, eager_out, out64=out64, ref64=eager64), eager_vs_ref,
                       worst_element(out, ref, eager_out, out64=out64, ref64=ref64).as_dict(i, seed)))
        del ref64, out64, eager64
    worst = max(judged, key=lambda j: (j[0].status != "ok", j[1].rel_l2))
    result.verdict, result.vs_ref, result.vs_eager, result.eager_vs_ref, result.worst_element = worst
    result.eager_vs_refs = [j[3] for j in judged]
    i = next(k for k, j in enumerate(judged) if j is worst)
    if names:
        result.per_output = {name: output_figures(v, vs_ref, e) for name, (v, vs_ref, _, e, _w) in zip(names, judged)}
        result.worst_output = names[i]
        if result.verdict.reason:
            result.verdict = replace(result.verdict, reason=f"{names[i]}: {result.verdict.reason}")
    return result
