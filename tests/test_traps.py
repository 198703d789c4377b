"""The numerics suite's traps open at smoke size: a naive evaluation of each one's inputs (sequential sums, a
one-pass variance, an unshifted exp, a 16-bit accumulator, float16 products) really goes wrong, while the
float64 reference does not; and configs/numerics.yaml runs every trap in the dtypes it names."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import REPO
from bakeoff.harness.config.schema import load_config
from bakeoff.harness.plan.workloads import resolve_workloads
from bakeoff.harness.plan.cases import plan_cases
from bakeoff.harness.worker.input_tensors import make_inputs
from bakeoff.workloads.ir import bind
from bakeoff.workloads.reference import evaluate_reference
from bakeoff.workloads.suite import builtin_workloads, every_workload
from bakeoff.workloads.traps import numerics_workloads


def _inputs(name: str, dtype: str = "float32", seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(inputs as float64 arrays of the dtype's values, float64 reference outputs) at the smoke preset."""
    w = numerics_workloads()[name]
    graph = bind(w.graph, w.presets["smoke"], dtype)
    xs = [x.double().numpy() for x in make_inputs(graph, seed, "cpu")]
    return xs, evaluate_reference(graph, xs)


def test_every_trap_says_what_it_is_and_what_to_expect():
    traps = numerics_workloads()
    assert len(traps) == 9 and not set(traps) & set(builtin_workloads())
    assert set(every_workload()) == set(builtin_workloads()) | set(traps)
    for w in traps.values():
        assert w.category == "numerics" and len(w.trap) > 80 and len(w.expected) > 80, w.name
        assert set(w.presets) == {"smoke", "cpu", "gpu"} and w.graph.name == w.name


def test_absorption_opens():
    (x,), (ref,) = _inputs("sum_absorption")
    row = x[0].astype(np.float32)
    assert np.add.accumulate(row, dtype=np.float32)[-1] == np.float32(1.0)  # sequential: every 1e-8 absorbed
    assert np.add.accumulate(row[::-1], dtype=np.float32)[-1] == np.float32(1.0000001192092896)  # small first
    assert ref[0, 0] == pytest.approx(1.00000007, rel=1e-9)
    (x,), (ref,) = _inputs("sum_absorption_large")
    assert np.add.accumulate(x[0].astype(np.float32), dtype=np.float32)[-1] == np.float32(1.0)
    assert abs(ref[0, 0] - 1.0) > 100 * 2**-24  # so a sequential float32 sum fails float32's tolerance


def test_one_pass_variance_loses_every_digit():
    (x, _, _), _ = _inputs("layernorm_shifted")
    x32 = x.astype(np.float32)
    one_pass = (x32 * x32).mean(-1, dtype=np.float32) - np.square(x32.mean(-1, dtype=np.float32))
    two_pass = x.var(-1)
    assert np.abs(one_pass - two_pass).max() > 1.0  # an error larger than the variance itself (~1)
    assert abs(two_pass.mean() - 1.0) < 0.2


def test_softmax_logits_overflow_a_naive_exp():
    for dtype, limit in (("float32", 88.8), ("float16", 11.1)):
        (x,), (ref,) = _inputs("softmax_huge_logits", dtype)
        assert (x > limit).any(axis=-1).all()  # every row holds a logit whose exp overflows
        assert np.isfinite(ref).all()
        (x,), (ref,) = _inputs("softmax_equal_large", dtype)
        assert (x == x.flat[0]).all() and x.flat[0] > limit and np.allclose(ref, 1 / x.shape[-1], rtol=1e-15)


def test_a_16_bit_accumulator_fails_where_float32_does_not():
    for dtype, np_dtype in (("float16", np.float16), ("bfloat16", None)):
        (x,), (ref,) = _inputs("sum_long", dtype)
        if np_dtype is None:  # NumPy has no bfloat16: emulate a bfloat16 accumulator by rounding each step
            import torch

            acc = torch.zeros((), dtype=torch.bfloat16)
            for v in torch.from_numpy(x[0]).bfloat16():
                acc = acc + v
            low = float(acc)
        else:
            low = float(np.add.accumulate(x[0].astype(np_dtype), dtype=np_dtype)[-1])
        assert abs(low - ref[0, 0]) / ref[0, 0] > 0.3, (dtype, low, ref[0, 0])  # it stalls
        f32 = float(np.float32(np.add.accumulate(x[0].astype(np.float32), dtype=np.float32)[-1]))
        assert abs(f32 - ref[0, 0]) / ref[0, 0] < 1e-5


def test_float16_products_fall_into_subnormals_and_zero():
    (x, y, z), (prod, ex) = _inputs("underflow", "float16")
    p16 = (x.astype(np.float16) * y.astype(np.float16))
    tiny = np.finfo(np.float16).tiny  # 6.1e-5, the smallest normal
    assert ((np.abs(p16) < tiny) & (p16 != 0)).mean() > 0.3  # subnormal products
    assert ((p16 == 0) & (prod != 0)).any()  # and some underflow to zero where the exact product does not
    e16 = np.exp(z.astype(np.float16))
    assert (e16 < tiny).mean() > 0.5 and np.isfinite(ex).all() and (ex > 0).all()


def test_outlier_columns_in_the_gemm():
    (x, w, b), _ = _inputs("gemm_gelu_outliers")
    col_std = x.std(axis=0)
    assert (col_std > 30).sum() == 2  # ceil(0.02 x 80) outlier columns of std 100
    assert (col_std[col_std < 30] < 1.6).all()


def test_shipped_config_runs_every_trap_in_its_dtypes():
    cfg, where, _ = load_config(REPO / "configs" / "numerics.yaml")
    workloads = resolve_workloads(cfg, where, "smoke", "cpu")
    assert [w.name for w in workloads] == list(numerics_workloads())
    cases = plan_cases(cfg.model_copy(update={"backends": {"eager": {}}}), workloads, "cpu")
    pairs = {(c.workload, c.dtype) for c in cases}
    assert len(pairs) == len(cases) == 18
    assert ("sum_absorption", "float32") in pairs and ("sum_long", "float16") in pairs
    assert not any(c.workload == "sum_long" and c.dtype == "float32" for c in cases)
