"""Numeric error of an output against a reference, and the ok/mismatch verdict.

Everything is computed with torch in float64 on the reference's device, so large outputs on a GPU are
compared there without a copy to the host.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

# torch.testing.assert_close defaults (rtol, atol) per dtype.
ASSERT_CLOSE_TOL = {torch.float32: (1.3e-6, 1e-5), torch.float16: (1e-3, 1e-5),
                    torch.bfloat16: (1.6e-2, 1e-5), torch.float64: (1e-7, 1e-7)}
# A backend also passes when RMSE(backend, fp64) <= m * RMSE(eager, fp64) (PyTorch's dynamo `same()`).
RMSE_MULTIPLIER = {torch.float32: 2.0, torch.float16: 3.0, torch.bfloat16: 3.0, torch.float64: 2.0}
_INT_VIEW = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16,
             torch.float64: torch.int64}


def _ordered(x: torch.Tensor) -> torch.Tensor:
    """Map floats to integers that are consecutive across representable values (for ULP distance)."""
    bits = x.contiguous().view(_INT_VIEW[x.dtype]).to(torch.int64)
    sign_bit = 1 << (torch.finfo(x.dtype).bits - 1)
    return torch.where(bits < 0, -(bits + sign_bit), bits)


def ulp_distance(out: torch.Tensor, ref64: torch.Tensor) -> torch.Tensor:
    """ULPs between `out` and the reference rounded to `out`'s dtype, per element (int64)."""
    ref = ref64.to(out.dtype)
    return (_ordered(out) - _ordered(ref)).abs()


@dataclass(frozen=True)
class ErrorStats:
    """Error of one output against a reference. NaN where undefined (e.g. cosine of a zero vector)."""

    max_abs: float
    max_rel: float
    rel_l2: float
    rmse: float
    cosine: float
    ulp_max: float
    ulp_p99: float
    nonfinite: int  # elements non-finite in the output where the reference is finite
    within_tol: bool  # assert_close's default tolerances for the output dtype, against this reference

    def as_dict(self, suffix: str, prefix: str = "err") -> dict[str, float | int | bool]:
        """Fields named like the record's columns: e.g. err_rel_l2_vs_fp64, eager_err_rmse_vs_fp64."""
        return {f"{prefix}_{k}_{suffix}": v for k, v in self.__dict__.items()}


def _quantile_int(x: torch.Tensor, q: float) -> float:
    flat = x.flatten()
    k = max(1, min(flat.numel(), int(round(q * flat.numel()))))
    return float(flat.kthvalue(k).values) if flat.numel() else 0.0


def error_stats(out: torch.Tensor, ref: torch.Tensor) -> ErrorStats:
    """Compare `out` (any float dtype) with `ref` (any float dtype; upcast to float64)."""
    if out.shape != ref.shape:
        raise ValueError(f"output shape {tuple(out.shape)} differs from the reference's {tuple(ref.shape)}")
    ref64 = ref.to(device=out.device, dtype=torch.float64)
    o64 = out.to(torch.float64)
    ref_finite = torch.isfinite(ref64)
    nonfinite = int((~torch.isfinite(o64) & ref_finite).sum())
    diff = (o64 - ref64).where(ref_finite, torch.zeros((), dtype=torch.float64, device=out.device))
    absdiff = diff.abs()
    ref_norm = ref64.where(ref_finite, torch.zeros((), dtype=torch.float64, device=out.device)).norm()
    denom = ref64.abs().clamp_min(torch.finfo(out.dtype).tiny)
    o_flat, r_flat = o64.flatten(), ref64.flatten()
    cosine = float(torch.nn.functional.cosine_similarity(o_flat, r_flat, dim=0, eps=0.0)) if ref_norm > 0 else float("nan")
    ulp = ulp_distance(out, ref64)
    rtol, atol = ASSERT_CLOSE_TOL.get(out.dtype, (0.0, 0.0))
    within = bool(((o64 - ref64).abs() <= atol + rtol * ref64.abs()).where(ref_finite, o64 == ref64).all())
    return ErrorStats(
        max_abs=float(absdiff.max()) if nonfinite == 0 else float("inf"),
        max_rel=float((absdiff / denom).max()) if nonfinite == 0 else float("inf"),
        rel_l2=float(diff.norm() / ref_norm) if ref_norm > 0 else float(diff.norm()),
        rmse=float(diff.pow(2).mean().sqrt()),
        cosine=cosine,
        ulp_max=float(ulp.max()),
        ulp_p99=_quantile_int(ulp, 0.99),
        nonfinite=nonfinite,
        within_tol=within and nonfinite == 0,
    )


@dataclass(frozen=True)
class Verdict:
    status: str  # "ok" or "mismatch"
    reason: str | None
    err_ratio_vs_eager: float | None


def verdict(backend_vs_ref: ErrorStats, eager_vs_ref: ErrorStats | None, dtype: torch.dtype) -> Verdict:
    """ok when within assert_close's tolerances against fp64, or RMSE <= m x eager's RMSE; else mismatch."""
    ratio = None
    if eager_vs_ref is not None and eager_vs_ref.rmse > 0:
        ratio = backend_vs_ref.rmse / eager_vs_ref.rmse
    elif eager_vs_ref is not None and backend_vs_ref.rmse == 0:
        ratio = 1.0
    if backend_vs_ref.nonfinite:
        return Verdict("mismatch", f"{backend_vs_ref.nonfinite} non-finite output element(s) where the "
                                   f"fp64 reference is finite", ratio)
    if backend_vs_ref.within_tol:
        return Verdict("ok", None, ratio)
    m = RMSE_MULTIPLIER[dtype]
    if ratio is not None and ratio <= m:
        return Verdict("ok", None, ratio)
    shown = f"{ratio:.3g}" if ratio is not None else "n/a"
    return Verdict("mismatch", f"error vs fp64 beyond tolerance: RMSE {backend_vs_ref.rmse:.3g} is {shown}x "
                               f"eager's (limit {m:g}x); rel L2 {backend_vs_ref.rel_l2:.3g}", ratio)
