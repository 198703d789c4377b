"""Correctness of one backend's outputs: the fp64 reference, poisoning, and per-seed checks."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from bakeoff.workloads.decompose import to_reference
from bakeoff.workloads.ir import Graph
from bakeoff.workloads.lower_torch import TORCH_DTYPES, lower_torch
from bakeoff.workloads.reference import evaluate_reference

from bakeoff.harness.measure.numerics import ErrorStats, Verdict, error_stats, verdict
from bakeoff.harness.measure.worst_element import worst_element


def reference_outputs(graph: Graph, inputs: Sequence[torch.Tensor], device: str) -> list[torch.Tensor]:
    """float64 outputs: torch on upcast inputs on a GPU, the NumPy evaluator on the CPU."""
    if device.startswith("cuda"):
        fn = lower_torch(to_reference(graph))
        with torch.no_grad():
            return [o.to(torch.float64) for o in fn(*[x.to(torch.float64) for x in inputs])]
    outs = evaluate_reference(graph, [x.detach().to(torch.float64).cpu().numpy() for x in inputs])
    return [torch.from_numpy(o) for o in outs]


def poison_allocator(graph: Graph, device: str) -> None:
    """Fill blocks the size of each output with NaN and free them, so an output the backend allocates but
    never writes reads NaN (torch's caching allocator hands the same blocks back) instead of stale data.

    This reaches only outputs allocated through torch's CUDA caching allocator. On the CPU, torch allocates
    with malloc, which may or may not hand these blocks back (large blocks come as fresh, zeroed pages), and
    a library with its own allocator (ONNX Runtime, IREE, XLA) is reached on no device: an unwritten output
    then reads zeros or stale data and fails as an error beyond tolerance rather than as non-finite; it
    passes only where that data happens to match the reference. The one stale block that would match it,
    eager's second baseline output, is overwritten with NaN before it is freed (case_run._spoil)."""
    poison = [torch.full(tuple(int(d) for d in n.shape), float("nan"), dtype=TORCH_DTYPES[n.dtype], device=device)
              for n in graph.output_nodes]
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


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same shape, dtype and bits, element by element (so NaN equals NaN, and 0.0 differs from -0.0)."""
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        return False
    ints = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return torch.equal(a.contiguous().view(ints), b.contiguous().view(ints))


def check_outputs(graph: Graph, seed: int, outputs: Sequence[Any], eager_outputs: Sequence[torch.Tensor],
                  refs: Sequence[torch.Tensor], eager_vs_refs: Sequence[ErrorStats] | None = None) -> SeedCheck:
    """Compare a backend's outputs with eager's (same dtype) and the fp64 reference.

    With several outputs, the worst one is reported: a failing output before a passing one, then the
    larger relative L2 error against the reference; its verdict and its numbers come together.
    `eager_vs_refs`: eager's error against each reference where already known (the same for every backend
    of a workload, shape, dtype and seed); an output with eager's very bits has eager's error.
    """
    result = SeedCheck(seed)
    if len(outputs) != len(refs):
        result.verdict = Verdict("mismatch", f"{len(outputs)} outputs, expected {len(refs)}", None)
        return result
    judged = []
    for i, (out, eager_out, ref) in enumerate(zip(outputs, eager_outputs, refs)):
        if not isinstance(out, torch.Tensor):
            result.verdict = Verdict("mismatch", f"output is a {type(out).__name__}, not a tensor", None)
            return result
        if tuple(out.shape) != tuple(ref.shape):
            result.verdict = Verdict("mismatch", f"output shape {list(out.shape)} != expected {list(ref.shape)}",
                                     None)
            return result
        if out.dtype != eager_out.dtype:
            result.problems.append(f"output dtype {out.dtype} differs from eager's {eager_out.dtype}")
            out = out.to(eager_out.dtype)
        eager_vs_ref = eager_vs_refs[i] if eager_vs_refs is not None else error_stats(eager_out, ref)
        vs_ref = eager_vs_ref if same_bits(out, eager_out) else error_stats(out, ref)
        judged.append((verdict(vs_ref, eager_vs_ref, eager_out.dtype), vs_ref, error_stats(out, eager_out),
                       eager_vs_ref))
    worst = max(judged, key=lambda j: (j[0].status != "ok", j[1].rel_l2))
    result.verdict, result.vs_ref, result.vs_eager, result.eager_vs_ref = worst
    i = next(k for k, j in enumerate(judged) if j is worst)
    out = outputs[i].to(eager_outputs[i].dtype)
    result.worst_element = worst_element(out, refs[i], eager_outputs[i]).as_dict(i, seed)
    return result
