"""The statistic functions as they were before issue 10 made them cheap (commit 5a299ec), kept verbatim as the
oracle the new ones are compared with (tests/test_numerics_equivalence.py). Not used by bakeoff itself."""
from __future__ import annotations

import math

import torch

from bakeoff.harness.measure.numerics import ASSERT_CLOSE_TOL, ErrorStats, _INT_VIEW
from bakeoff.harness.measure.worst_element import WorstElement


def _ordered(x: torch.Tensor) -> torch.Tensor:
    """Map floats to integers that are consecutive across representable values (for ULP distance)."""
    bits = x.contiguous().view(_INT_VIEW[x.dtype]).to(torch.int64)
    sign_bit = 1 << (torch.finfo(x.dtype).bits - 1)
    return torch.where(bits < 0, -(bits + sign_bit), bits)


def ulp_distance(out: torch.Tensor, ref64: torch.Tensor) -> torch.Tensor:
    """ULPs between `out` and the reference rounded to `out`'s dtype, per element (int64)."""
    ref = ref64.to(out.dtype)
    return (_ordered(out) - _ordered(ref)).abs()



def _quantile_int(x: torch.Tensor, q: float) -> float:
    flat = x.flatten()
    k = max(1, min(flat.numel(), int(round(q * flat.numel()))))
    return float(flat.kthvalue(k).values) if flat.numel() else 0.0


def _same_kind(o64: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    """Per element: the output is NaN where NaN is expected, the same infinity where one is expected."""
    return torch.where(expected.isnan(), o64.isnan(), o64 == expected)


def error_stats(out: torch.Tensor, ref: torch.Tensor) -> ErrorStats:
    """Compare `out` (any float dtype) with `ref` (any float dtype; upcast to float64)."""
    if out.shape != ref.shape:
        raise ValueError(f"output shape {tuple(out.shape)} differs from the reference's {tuple(ref.shape)}")
    if out.numel() == 0:
        return ErrorStats(0.0, 0.0, 0.0, 0.0, float("nan"), 0.0, 0.0, 0, True)
    ref64 = ref.to(device=out.device, dtype=torch.float64)
    o64 = out.to(torch.float64)
    expected = ref64.to(out.dtype).to(torch.float64) if out.dtype != torch.float64 else ref64
    finite = torch.isfinite(expected)  # where a number is due (rounded to the dtype, not only in float64)
    zero = torch.zeros((), dtype=torch.float64, device=out.device)
    bad_finite = ~torch.isfinite(o64) & finite
    wrong_kind = ~finite & ~_same_kind(o64, expected)
    nonfinite, nonfinite_mismatch = int(bad_finite.sum()), int(wrong_kind.sum())
    n_finite = max(int(finite.sum()), 1)
    ref_f = ref64.where(finite, zero)  # errors are measured where a number is due, zero elsewhere
    absdiff = (o64 - ref64).where(finite, zero).abs()
    ref_norm = float(ref_f.norm())
    tiny = torch.finfo(out.dtype).tiny
    scaled = absdiff / (ref_f.abs() + ref_norm / math.sqrt(n_finite)).clamp_min(tiny)
    cosine = (float(torch.nn.functional.cosine_similarity(o64.where(finite, zero).flatten(), ref_f.flatten(), dim=0,
                                                          eps=0.0)) if ref_norm > 0 and nonfinite == 0 else float("nan"))
    ulp = ulp_distance(out, ref64).where(finite, torch.zeros((), dtype=torch.int64, device=out.device))
    rtol, atol = ASSERT_CLOSE_TOL.get(out.dtype, (0.0, 0.0))
    within = bool((absdiff <= atol + rtol * ref_f.abs()).all()) and nonfinite == 0 and nonfinite_mismatch == 0
    if nonfinite or nonfinite_mismatch:
        worst = int((bad_finite | wrong_kind).flatten().nonzero()[0, 0])
    else:
        worst = int(scaled.flatten().argmax())
    diff_norm = float(absdiff.norm())
    return ErrorStats(
        max_abs=float(absdiff.max()) if nonfinite == 0 else math.inf,
        max_rel=float((absdiff / ref_f.abs().clamp_min(tiny)).max()) if nonfinite == 0 else math.inf,
        rel_l2=diff_norm / ref_norm if ref_norm > 0 else diff_norm,
        rmse=diff_norm / math.sqrt(n_finite),
        cosine=cosine,
        ulp_max=float(ulp.max()),
        ulp_p99=_quantile_int(ulp, 0.99),
        nonfinite=nonfinite,
        within_tol=within,
        nonfinite_mismatch=nonfinite_mismatch,
        max_scaled=float(scaled.max()) if nonfinite == 0 else math.inf,
        worst_index=worst,
        worst_out=float(o64.flatten()[worst]),
        worst_ref=float(ref64.flatten()[worst]),
    )



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
