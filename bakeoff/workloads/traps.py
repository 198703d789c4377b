"""The built-in `numerics` suite: each workload opens one classic numerical trap on purpose.

Inputs are chosen so the trap opens (explicit values, shifted or heavy-tailed distributions: see
workloads/inits.py); every workload says what the trap is and what a sound backend does with it, and the
report's robustness table grades each backend on it against float64 and against eager. Run it with
`bakeoff run configs/numerics.yaml`, which gives each trap the dtypes where it opens. Presets: `smoke` runs in
seconds on a CPU, `cpu` in a few minutes, `gpu` sizes the long reductions and GEMMs for a large GPU.
"""
from __future__ import annotations

from typing import Callable

from bakeoff.workloads.builder import GraphBuilder
from bakeoff.workloads.inits import make_init
from bakeoff.workloads.ir import Graph
from bakeoff.workloads.workload import Workload

_SMALL = 1e-8  # below half of float32's spacing at 1.0 (2**-24 = 5.96e-8): 1.0 + 1e-8 rounds back to 1.0


def _sum(name: str) -> Callable[[], Graph]:
    def build() -> Graph:
        b = GraphBuilder(name)
        return b.finish([b.sum(b.input("x", ("M", "N"), init=make_init("values", values=[1.0], pad=_SMALL)))])
    return build


def _layernorm_shifted() -> Graph:
    b = GraphBuilder("layernorm_shifted")
    x = b.input("x", ("M", "N"), init=make_init("normal", mean=1e4, std=1.0))
    w, bias = b.input("w", ("N",), init=("uniform", 0.5, 1.5)), b.input("b", ("N",), init=("normal", 0.1))
    return b.finish([b.layer_norm(x, w, bias)])


def _softmax(name: str, init: tuple) -> Callable[[], Graph]:
    def build() -> Graph:
        b = GraphBuilder(name)
        return b.finish([b.softmax(b.input("x", ("M", "N"), init=init))])
    return build


def _sum_long() -> Graph:
    b = GraphBuilder("sum_long")
    return b.finish([b.sum(b.input("x", ("M", "K"), init=make_init("uniform", low=0.0, high=1.0)))])


def _matmul_long_k() -> Graph:
    b = GraphBuilder("matmul_long_k")
    x = b.input("x", ("M", "K"), init=make_init("uniform", low=0.0, high=1.0))
    w = b.input("w", ("K", "N"), init=make_init("uniform", low=0.0, high=1.0))
    return b.finish([b.matmul(x, w)])


def _underflow() -> Graph:
    b = GraphBuilder("underflow")
    tiny = make_init("lognormal", log10_mean=-3.0, log10_std=0.5, sign="random")
    x, y = b.input("x", ("M", "N"), init=tiny), b.input("y", ("M", "N"), init=tiny)
    z = b.input("z", ("M", "N"), init=make_init("uniform", low=-17.0, high=-9.0))
    scale = b.const(2.0 ** 14)  # exact in every dtype: brings the tiny results back to where errors show
    return b.finish([b.mul(b.mul(x, y), scale), b.mul(b.exp(z), scale)])


def _gemm_outliers() -> Graph:
    b = GraphBuilder("gemm_gelu_outliers")
    x = b.input("x", ("M", "K"), init=make_init("mix", mean=0.0, std=1.0, outlier_share=0.02, outlier_std=100.0,
                                                 outliers="columns"))
    w, bias = b.input("w", ("K", "N"), init=("fan_in",)), b.input("b", ("N",), init=("normal", 0.1))
    return b.finish([b.gelu(b.add(b.matmul(x, w), bias))])


_ROW8 = {"smoke": {"M": 3, "N": 8}, "cpu": {"M": 64, "N": 8}, "gpu": {"M": 4096, "N": 8}}
_ROW_LONG = {"smoke": {"M": 3, "N": 65536}, "cpu": {"M": 16, "N": 2**20}, "gpu": {"M": 64, "N": 2**22}}
_ROWS = {"smoke": {"M": 37, "N": 300}, "cpu": {"M": 1024, "N": 1024}, "gpu": {"M": 16384, "N": 4096}}
# K at least 8192 (sums) or 16384 (GEMM: products average 1/4), so running sums pass 2048, where float16's
# spacing is 2 and every term below 1 rounds away.
_LONG_K = {"smoke": {"M": 4, "K": 8192}, "cpu": {"M": 64, "K": 16384}, "gpu": {"M": 1024, "K": 65536}}
_GEMM_LONG_K = {"smoke": {"M": 8, "K": 16384, "N": 8}, "cpu": {"M": 64, "K": 16384, "N": 64},
                "gpu": {"M": 256, "K": 65536, "N": 256}}
_EW = {"smoke": {"M": 61, "N": 257}, "cpu": {"M": 1024, "N": 1024}, "gpu": {"M": 8192, "N": 8192}}
_GEMM = {"smoke": {"M": 48, "K": 80, "N": 72}, "cpu": {"M": 512, "K": 512, "N": 512},
         "gpu": {"M": 8192, "K": 8192, "N": 8192}}

# (name, one-line description, graph, presets, trap, expected behaviour)
_TRAPS: list[tuple[str, str, Callable[[], Graph], dict, str, str]] = [
    ("sum_absorption", "row sums of [1.0, 1e-8 x 7] (float32)", _sum("sum_absorption"), _ROW8,
     "Absorption: each 1e-8 is below half of float32's spacing at 1.0, so adding it to 1.0 gives 1.0 back. "
     "The float64 sum is 1.00000007.",
     "A sequential or pairwise float32 sum gives exactly 1.0 (error 7e-8: within float32's tolerance, so the "
     "order shows in the worst element and the error ratio, not the verdict); adding the small terms first, or "
     "accumulating in float64, gives 1.0000001 (error 5e-8). Both neighbours of 1.00000007 are correctly "
     "rounded results of some order; anything else is wrong."),
    ("sum_absorption_large", "row sums of [1.0, 1e-8 x (N-1)] at large N (float32)",
     _sum("sum_absorption_large"), _ROW_LONG,
     "Absorption at scale: the float64 sum is 1 + (N-1) x 1e-8 (1.00065535 at N = 65536), but a running "
     "float32 sum that starts at 1.0 stays at 1.0 however many terms follow.",
     "Pairwise, blocked or multi-accumulator sums (what torch, XLA and Triton reductions do) add the 1e-8 terms "
     "to each other first and keep the answer to a few float32 ulps; a single sequential float32 accumulator "
     "returns 1.0, a relative error of (N-1) x 1e-8: failed."),
    ("layernorm_shifted", "layer_norm over rows with mean 1e4 and std 1 (float32)", _layernorm_shifted, _ROWS,
     "Catastrophic cancellation: the one-pass variance E[x^2] - E[x]^2 subtracts two numbers near 1e8, where "
     "float32's spacing is 8, to get a variance of 1: every digit is lost, and the result can go negative "
     "(NaN from rsqrt).",
     "A two-pass (mean first, then the mean of squared deviations) or Welford variance keeps it; the output "
     "error is then set by rounding the mean of values near 1e4 (float32 spacing 1e-3), so even eager may sit "
     "outside assert_close's float32 tolerance and the error as a multiple of eager's is the measure. A one-pass "
     "variance gives errors of order 1 or NaN: failed."),
    ("softmax_huge_logits", "softmax of logits ~ N(0, 3000): order 1e3-1e4",
     _softmax("softmax_huge_logits", make_init("normal", mean=0.0, std=3000.0)), _ROWS,
     "Overflow: exp of a logit above 88.7 (float32) or 11.1 (float16) is inf, and inf / inf is NaN.",
     "Subtracting the row maximum before exp (every production softmax does) keeps every exponent <= 0: "
     "outputs are finite, the row maximum's near 1. A naive exp overflows: NaN, failed."),
    ("softmax_equal_large", "softmax of rows whose logits are all 1e4", _softmax(
        "softmax_equal_large", make_init("values", values=[1e4], pad=None)), _ROWS,
     "Overflow with ties: every logit equals 1e4, so exp overflows in every element and the naive form is inf / "
     "inf = NaN everywhere; the exact answer is 1/N in every element.",
     "With the maximum subtracted every exponent is exp(0) = 1 and the output is 1/N, correctly rounded; an "
     "online softmax that rescales by exp(m_old - m_new) must also handle m_old = m_new. NaN or anything but 1/N: "
     "failed."),
    ("sum_long", "row sums over K = 8192-65536 of uniform [0, 1) (float16, bfloat16)", _sum_long, _LONG_K,
     "Low-precision accumulation: a running sum in a 16-bit accumulator stalls once its spacing is twice the terms "
     "it adds: past 2048 in float16 (spacing 2), past 256 in bfloat16, every term below 1 rounds away; the true "
     "sums are near K/2.",
     "Accumulating in float32 and rounding once gives the sum to half a 16-bit ulp (relative 5e-4 in float16, "
     "4e-3 in bfloat16), as eager does; a 16-bit accumulator is off by tens of percents: failed."),
    ("matmul_long_k", "x @ w over K = 16384-65536, entries uniform [0, 1) (float16, bfloat16)", _matmul_long_k,
     _GEMM_LONG_K,
     "Low-precision accumulation in a GEMM: every product is positive, so dot products grow to K/4 and a 16-bit "
     "accumulator loses the fraction of each term (no cancellation hides it).",
     "Tensor-core and CPU GEMMs accumulate in float32 (eager's error: one rounding of the result); split-K or a "
     "16-bit accumulator shows up as an error several times eager's."),
    ("underflow", "(x*y) * 2^14 and exp(z) * 2^14 with x*y, exp(z) in [1e-8, 1e-4] (float16)", _underflow, _EW,
     "Underflow and subnormals: products of magnitudes near 1e-3, and exp of z in [-17, -9], fall below "
     "float16's smallest normal (6.1e-5) into its subnormals (fewer bits) or below 6e-8 to zero; the exact "
     "scale 2^14 then brings them back to where errors show. bfloat16 (float32's range) is the control.",
     "Eager rounds each intermediate to float16, so subnormal results keep fewer bits and the tiniest become "
     "0 (error ratio 1 by definition); a backend that fuses the chain in float32 keeps them (ratio < 1); one that "
     "flushes float16 subnormals to zero loses every value below 6.1e-5: failed."),
    ("gemm_gelu_outliers", "gelu(x @ w + b) with 2% outlier columns (std 100) in x", _gemm_outliers, _GEMM,
     "A mixed-scale GEMM epilogue: outlier feature columns (as in LLM activations) make x @ w mix terms 100x "
     "apart; rounding x @ w to a 16-bit dtype before the bias and GELU costs the small terms' digits.",
     "Eager rounds x @ w to the dtype, adds b, rounds, applies GELU; a backend that keeps the accumulator and "
     "the epilogue in float32 matches it or does better (ratio <= 1). A 16-bit accumulator, or an epilogue in "
     "lower precision than the dtype, is worse than eager."),
]


def numerics_workloads() -> dict[str, Workload]:
    """The numerics suite's workloads by name, in suite order (category 'numerics')."""
    return {name: Workload(name, "numerics", desc, build(), presets, trap, expected)
            for name, desc, build, presets, trap, expected in _TRAPS}
