"""Numeric error of an output against a reference, and the ok/mismatch verdict.

Everything is computed with torch in float64 on the reference's device, so large outputs on a GPU are
compared there without a copy to the host.

What an element is expected to be is the reference rounded to the output's dtype: where that is +inf, -inf
or NaN (log(0), a causal mask, 0/0, a value beyond float16's range) the output must be the same kind; where
it is finite the output must be finite and is measured. The verdict (`verdict`) never lets a wrong answer
through a rule that compares with eager unless eager itself is a usable yardstick, and never lets one gross
element hide in an average.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# torch.testing.assert_close defaults (rtol, atol) per dtype.
ASSERT_CLOSE_TOL = {torch.float32: (1.3e-6, 1e-5), torch.float16: (1e-3, 1e-5),
                    torch.bfloat16: (1.6e-2, 1e-5), torch.float64: (1e-7, 1e-7)}
# A backend also passes when RMSE(backend, fp64) <= m * RMSE(eager, fp64) (PyTorch's dynamo `same()`)...
RMSE_MULTIPLIER = {torch.float32: 2.0, torch.float16: 3.0, torch.bfloat16: 3.0, torch.float64: 2.0}
# ... and its worst element is no worse than WORST_FACTOR x eager's worst element, or within
# WORST_FLOOR_U unit roundoffs of the output's scale (see `ErrorStats.max_scaled`). The factor is twice the
# RMSE multiplier: the largest of n errors grows like sigma * sqrt(2 ln n), so an error distribution m times
# eager's puts its worst element near m times eager's worst, and a summation order with heavier tails needs
# about as much again (on the built-in suite at smoke sizes on the CPU, Inductor's worst element is within
# 1.4x eager's in float32, float16 and bfloat16: benchmarks/verdict_margins.py prints these margins). One
# element wrong by more than rounding is hundreds of times eager's worst.
WORST_FACTOR = {dt: 2 * m for dt, m in RMSE_MULTIPLIER.items()}
WORST_FLOOR_U = 8.0
_INT_VIEW = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16,
             torch.float64: torch.int64}


def unit_roundoff(dtype: torch.dtype) -> float:
    """Half the machine epsilon of `dtype`: the largest relative error of rounding to it."""
    return torch.finfo(dtype).eps / 2


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
    """Error of one output against a reference. NaN where undefined (e.g. cosine of a zero vector).

    Measured over the elements whose expected value (the reference rounded to the output dtype) is finite;
    the others are counted in `nonfinite_mismatch` when the output is not of the same kind there."""

    max_abs: float
    max_rel: float
    rel_l2: float
    rmse: float
    cosine: float
    ulp_max: float
    ulp_p99: float
    nonfinite: int  # elements non-finite in the output where the reference is finite
    within_tol: bool  # assert_close's default tolerances for the output dtype, against this reference
    # Elements where the reference is +inf, -inf or NaN and the output is not the same (0 where -inf is due).
    nonfinite_mismatch: int = 0
    # The worst element's error relative to the output's scale: max |out - ref| / (|ref| + RMS(ref)). A
    # correctly rounded output has at most the dtype's unit roundoff; near zero it is an error relative to
    # the output's RMS (an absolute error at the output's scale), on large elements a relative error.
    max_scaled: float = 0.0
    # The element to look at (flat index): the first non-finite or wrong-kind element if any, else the one
    # with the largest scaled error; its output and reference values. -1 and NaN for an empty output.
    worst_index: int = -1
    worst_out: float = float("nan")
    worst_ref: float = float("nan")

    def as_dict(self, suffix: str, prefix: str = "err") -> dict[str, float | int | bool]:
        """Fields named like the record's columns: e.g. err_rel_l2_vs_fp64, eager_err_rmse_vs_fp64."""
        return {f"{prefix}_{k}_{suffix}": v for k, v in self.__dict__.items()}

    @property
    def usable_as_yardstick(self) -> bool:
        """Whether these are the errors of a usable eager: finite where the reference is finite, the same
        kind where it is not, and a finite RMSE. Only then may another output be judged relative to it."""
        return self.nonfinite == 0 and self.nonfinite_mismatch == 0 and math.isfinite(self.rmse)


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


@dataclass(frozen=True)
class Verdict:
    status: str  # "ok" or "mismatch"
    reason: str | None
    err_ratio_vs_eager: float | None


def _where(s: ErrorStats) -> str:
    return f"element {s.worst_index} is {s.worst_out:.6g} where the fp64 reference is {s.worst_ref:.6g}"


def rmse_ratio(backend_vs_ref: ErrorStats, eager_vs_ref: ErrorStats | None) -> float | None:
    """RMSE(backend, fp64) / RMSE(eager, fp64); None when eager is not a usable yardstick (missing,
    non-finite where the reference is finite, or not matching its infinities and NaNs)."""
    if eager_vs_ref is None or not eager_vs_ref.usable_as_yardstick:
        return None
    if eager_vs_ref.rmse > 0:
        return backend_vs_ref.rmse / eager_vs_ref.rmse
    return 1.0 if backend_vs_ref.rmse == 0 else math.inf


def verdict(backend_vs_ref: ErrorStats, eager_vs_ref: ErrorStats | None, dtype: torch.dtype) -> Verdict:
    """ok or mismatch, by these rules in order:

    1. non-finite where the reference (rounded to the dtype) is finite: mismatch;
    2. not +inf / -inf / NaN where the reference is: mismatch;
    3. every element within assert_close's tolerances for the dtype: ok;
    4. else, only against a usable eager (finite, matching the reference's infinities and NaNs): ok when
       RMSE <= m x eager's RMSE *and* the worst element's scaled error <= WORST_FACTOR x eager's worst (or
       WORST_FLOOR_U unit roundoffs); with no usable eager, the tolerance of rule 3 is the only rule: mismatch.
    """
    b, e = backend_vs_ref, eager_vs_ref
    ratio = rmse_ratio(b, e)
    if b.nonfinite:
        return Verdict("mismatch", f"{b.nonfinite} non-finite output element(s) where the fp64 reference is "
                                   f"finite ({_where(b)})", ratio)
    if b.nonfinite_mismatch:
        return Verdict("mismatch", f"{b.nonfinite_mismatch} element(s) where the fp64 reference is +inf, -inf "
                                   f"or NaN hold something else ({_where(b)})", ratio)
    if b.within_tol:
        return Verdict("ok", None, ratio)
    rtol, atol = ASSERT_CLOSE_TOL.get(dtype, (0.0, 0.0))
    if ratio is None:
        why = "no eager output" if e is None else (
            f"eager is no yardstick: {e.nonfinite} non-finite element(s) where the reference is finite, "
            f"{e.nonfinite_mismatch} not matching its inf/NaN")
        return Verdict("mismatch", f"error vs fp64 beyond the {dtype} tolerance (rtol {rtol:g}, atol {atol:g}) and "
                                   f"{why}: max abs error {b.max_abs:.3g}, rel L2 {b.rel_l2:.3g} ({_where(b)})", None)
    m = RMSE_MULTIPLIER[dtype]
    if ratio > m:
        return Verdict("mismatch", f"error vs fp64 beyond tolerance: RMSE {b.rmse:.3g} is {ratio:.3g}x "
                                   f"eager's (limit {m:g}x); rel L2 {b.rel_l2:.3g}", ratio)
    assert e is not None
    floor = WORST_FLOOR_U * unit_roundoff(dtype)
    limit = max(WORST_FACTOR[dtype] * e.max_scaled, floor)
    if b.max_scaled > limit:
        times = f"{b.max_scaled / e.max_scaled:.3g}x eager's worst" if e.max_scaled > 0 else "eager's is exact"
        return Verdict("mismatch", f"worst element beyond tolerance: {_where(b)}, an error of {b.max_scaled:.3g} of "
                                   f"the output's scale ({times}; limit {WORST_FACTOR[dtype]:g}x eager's worst or "
                                   f"{WORST_FLOOR_U:g} unit roundoffs) though RMSE is {ratio:.3g}x eager's", ratio)
    return Verdict("ok", None, ratio)
