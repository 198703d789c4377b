"""The verdict lets no wrong answer pass: each class of wrong output that used to be `ok` is a `mismatch`
through check_outputs (reference, eager and backend outputs as the worker has them), and correct outputs
(eager's, or rounding-level differences) still pass. The same classes through the real CLI, with the
fault-injection backend, are in test_verdict_cli.py."""
from __future__ import annotations

import numpy as np
import torch

from bakeoff.harness.measure.checks import check_outputs, reference_outputs
from bakeoff.harness.measure.numerics import error_stats, verdict
from bakeoff.workloads.builder import GraphBuilder
from bakeoff.workloads.ir import bind


def _graph(build, dims: dict, dtype: str):
    """A bound graph from `build(GraphBuilder) -> output node` (for check_outputs' output count)."""
    b = GraphBuilder()
    return bind(b.finish([build(b)]), dims, dtype)


def _check(graph, backend: torch.Tensor, eager: torch.Tensor, ref: torch.Tensor):
    return check_outputs(graph, 0, [backend], [eager], [ref]).verdict


def _x(n: int, seed: int = 0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(n))


def test_zero_where_the_reference_is_minus_inf_fails():
    x = _x(4096)
    ref = torch.log(torch.relu(x))  # -inf wherever x <= 0: log(relu(x)) in float64
    eager = torch.log(torch.relu(x.float()))
    assert _verdict(eager, eager, ref).status == "ok"  # eager's own -inf match
    wrong = eager.nan_to_num(0.0, 0.0, 0.0)
    v = _verdict(wrong, eager, ref)
    assert v.status == "mismatch" and "-inf" in v.reason and "where the fp64 reference is -inf" in v.reason


def test_causal_mask_written_as_zero_fails():
    s = 64
    ref = _x(s * s).reshape(s, s).masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
    eager = ref.to(torch.bfloat16)
    assert _verdict(eager, eager, ref).status == "ok"
    v = _verdict(eager.nan_to_num(0.0, 0.0, 0.0), eager, ref)
    assert v.status == "mismatch" and "+inf, -inf or NaN" in v.reason


def test_nan_and_infinity_of_the_wrong_kind_fail():
    x = _x(4096)
    ref = torch.log(x)  # NaN where x < 0
    eager = torch.log(x.float())
    assert _verdict(eager, eager, ref).status == "ok"
    assert _verdict(eager.nan_to_num(0.0), eager, ref).status == "mismatch"  # 0 where NaN is due
    ref_inf = torch.tensor([1.0, float("inf"), float("-inf"), 2.0], dtype=torch.float64)
    good = ref_inf.float()
    flipped = good.clone()
    flipped[1] = float("-inf")  # the wrong sign
    assert _verdict(good, good, ref_inf).status == "ok"
    assert _verdict(flipped, good, ref_inf).status == "mismatch"


def test_a_value_beyond_the_dtype_range_must_be_infinite():
    # 1e5 rounds to +inf in float16: the correctly rounded output is +inf, and 65504 (the largest finite) is wrong.
    ref = torch.tensor([1.0, 1e5, -2.0], dtype=torch.float64)
    rounded = ref.to(torch.float16)
    assert _verdict(rounded, rounded, ref).status == "ok"
    clamped = torch.tensor([1.0, 65504.0, -2.0], dtype=torch.float16)
    assert _verdict(clamped, rounded, ref).status == "mismatch"


def test_eager_overflowing_where_the_reference_is_finite_admits_no_ratio():
    x = _x(4096)
    ref = x  # x * 1e6 * 1e-6: finite in float64
    eager = (x.half() * 1000.0 * 1000.0) * 1e-6  # overflows float16: +-inf almost everywhere
    assert torch.isinf(eager).sum() > 3000
    zeros = torch.zeros_like(eager)
    v = _verdict(zeros, eager, ref)
    assert v.status == "mismatch" and "no yardstick" in v.reason and v.err_ratio_vs_eager is None
    # A backend that avoids the overflow is judged by the dtype's tolerance alone, and passes when within it.
    assert _verdict(x.half(), eager, ref).status == "ok"
    noisy = (x * (1 + 5e-3 * _x(4096, 1))).half()  # 5e-3 relative: beyond float16's rtol 1e-3
    v = _verdict(noisy, eager, ref)
    assert v.status == "mismatch" and "tolerance" in v.reason


def test_one_gross_element_in_a_large_bf16_output_fails():
    n = 4096 * 4096
    ref = torch.sigmoid(torch.from_numpy(np.random.default_rng(0).standard_normal(n, dtype=np.float32))).double()
    ref = ref.reshape(4096, 4096)  # every value below 1
    # eager with a rounding-level error of its own (an extra bf16 rounding of an intermediate).
    eager = (ref * (1 + 2**-9)).to(torch.bfloat16)
    eager_stats = error_stats(eager, ref)
    backend = ref.to(torch.bfloat16)
    backend[1234, 2345] = 5.0
    v = verdict(error_stats(backend, ref), eager_stats, torch.bfloat16)
    assert v.status == "mismatch" and "worst element" in v.reason, v
    assert f"element {1234 * 4096 + 2345} is 5" in v.reason
    assert v.err_ratio_vs_eager < 3  # the RMSE rule alone would have passed it
    backend[1234, 2345] = ref[1234, 2345].to(torch.bfloat16)
    assert verdict(error_stats(backend, ref), eager_stats, torch.bfloat16).status == "ok"


def test_noise_within_m_times_eager_still_passes_the_worst_element_rule():
    ref = _x(1 << 16)
    noise = _x(1 << 16, 1)
    eager = (ref + 1e-3 * noise).to(torch.float16)
    backend = (ref + 2.5e-3 * noise).to(torch.float16)  # 2.5x eager's error everywhere: within m = 3
    v = _verdict(backend, eager, ref)
    assert v.status == "ok" and 2 < v.err_ratio_vs_eager < 3


def test_correct_outputs_of_a_workload_pass_through_check_outputs():
    graph = _graph(lambda b: b.sigmoid(b.input("x", ("M", "N"))), {"M": 64, "N": 64}, "bfloat16")
    x = torch.randn(64, 64).to(torch.bfloat16)
    ref = reference_outputs(graph, [x], "cpu")[0]
    eager = torch.sigmoid(x)
    assert _check(graph, eager.clone(), eager, ref).status == "ok"
    spiked = eager.clone()
    spiked[3, 5] = 5.0
    assert _check(graph, spiked, eager, ref).status == "mismatch"


def _verdict(backend: torch.Tensor, eager: torch.Tensor, ref: torch.Tensor):
    return verdict(error_stats(backend, ref), error_stats(eager, ref), eager.dtype)
