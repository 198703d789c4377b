"""The worst element of an output: where it is furthest outside tolerance against the float64 reference.

"Furthest" is |value - reference| / (atol + rtol x |reference|) with assert_close's default (rtol, atol)
for the output dtype, the quantity whose maximum decides that check; an element whose finiteness differs
from the reference's (NaN or inf where the reference is finite, or the other way, or an infinity of the
other sign) counts as infinitely far. Ties go to the first element in row-major order, so an output that
matches everywhere names its first element. Computed on the output's device.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from bakeoff.harness.measure.numerics import ASSERT_CLOSE_TOL


def _json_float(x: float) -> float | str:
    """`x`, or 'nan' / 'inf' / '-inf' (JSON, and so the store, has no spelling for them)."""
    return x if math.isfinite(x) else str(x)


@dataclass(frozen=True)
class WorstElement:
    """One element of one output: its index, the backend's value, the reference's, eager's, and how far
    outside tolerance it is (a multiple of atol + rtol x |reference|; inf for a finiteness mismatch)."""

    index: tuple[int, ...]
    value: float
    reference: float
    eager: float | None
    tol_ratio: float

    def as_dict(self, output: int, seed: int) -> dict[str, object]:
        """The record's fields: worst_elem_{index, value, ref, eager, tol_ratio, output, seed}; non-finite
        numbers as the strings 'nan', 'inf', '-inf'."""
        return {"worst_elem_index": list(self.index), "worst_elem_value": _json_float(self.value),
                "worst_elem_ref": _json_float(self.reference),
                "worst_elem_eager": None if self.eager is None else _json_float(self.eager),
                "worst_elem_tol_ratio": _json_float(self.tol_ratio), "worst_elem_output": output,
                "worst_elem_seed": seed}


def tolerance_ratio(out: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Per element, |out - ref| / (atol + rtol |ref|) in float64 (inf where finiteness disagrees, 0 where
    both are the same non-finite value)."""
    rtol, atol = ASSERT_CLOSE_TOL.get(out.dtype, (0.0, 0.0))
    o = out.to(torch.float64)
    r = ref.to(device=out.device, dtype=torch.float64)
    finite_o, finite_r = torch.isfinite(o), torch.isfinite(r)
    both = finite_o & finite_r
    ratio = ((o - r).abs() / (atol + rtol * r.abs())).where(both, torch.zeros((), dtype=torch.float64,
                                                                               device=out.device))
    same_nonfinite = ~finite_o & ~finite_r & ((o == r) | (o.isnan() & r.isnan()))
    return ratio.where(both | same_nonfinite, torch.full((), math.inf, dtype=torch.float64, device=out.device))


def worst_element(out: torch.Tensor, ref: torch.Tensor, eager: torch.Tensor | None = None) -> WorstElement:
    """The element of `out` furthest outside tolerance against `ref` (same shape), with eager's value there."""
    ratio = tolerance_ratio(out, ref).flatten()
    flat = int(torch.argmax(ratio)) if ratio.numel() else 0  # argmax returns the first of equal maxima
    index, rest = [], flat
    for size in reversed(out.shape):
        index.append(rest % size)
        rest //= size
    index.reverse()
    at = tuple(index)
    if not ratio.numel():
        return WorstElement(at, math.nan, math.nan, None, 0.0)
    return WorstElement(at, float(out[at]), float(ref[at]), None if eager is None else float(eager[at]),
                        float(ratio[flat]))
