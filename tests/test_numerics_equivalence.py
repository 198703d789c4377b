"""The cheap statistic functions (issue 10) give the same figures as the ones they replaced, to the bit.

tests/legacy_numerics.py keeps the former functions verbatim; every field of `ErrorStats` and
`WorstElement` is compared bitwise (NaN equal to NaN, 0.0 apart from -0.0) on random outputs and on
adversarial ones: NaN, +-inf, denormals, signed zeros, values beyond float16's range, exact outputs,
all-zero references, non-contiguous tensors, ULP distances past the histogram's bins.
"""
from __future__ import annotations

import math
import struct

import pytest
import torch

import legacy_numerics as legacy
from bakeoff.harness.measure import numerics
from bakeoff.harness.measure.checks import check_outputs
from bakeoff.harness.measure.numerics import error_stats
from bakeoff.harness.measure.worst_element import worst_element
from bakeoff.workloads.builder import GraphBuilder

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]


def _bits(x):
    """A value as comparable bits: floats by their IEEE-754 pattern (NaN == NaN, -0.0 != 0.0)."""
    if isinstance(x, float):
        return ("f", struct.pack("<d", x)) if not math.isnan(x) else ("f", "nan")
    if isinstance(x, tuple):
        return tuple(_bits(v) for v in x)
    return x


def assert_same(new, old):
    assert type(new) is type(old)
    for name, value in old.__dict__.items():
        assert _bits(getattr(new, name)) == _bits(value), (name, getattr(new, name), value)


def _pair(seed: int, shape, dtype, noise: float = 1e-3, scale: float = 1.0):
    g = torch.Generator().manual_seed(seed)
    ref = torch.randn(shape, dtype=torch.float64, generator=g) * scale
    out = (ref * (1 + noise * torch.randn(shape, dtype=torch.float64, generator=g))).to(dtype)
    return out, ref


def _adversarial(dtype, seed: int):
    """Outputs and references full of the values that take the general path (or sit at its border)."""
    out, ref = _pair(seed, (37, 29), dtype)
    big = 1e6 if dtype != torch.bfloat16 else 1e39  # beyond float16's range (bf16: beyond float32's)
    tiny = torch.finfo(dtype).tiny
    cases = {"random": (out, ref)}
    o, r = out.clone(), ref.clone()
    r[0, :4] = torch.tensor([math.nan, math.inf, -math.inf, big], dtype=torch.float64)
    o[0, :4] = torch.tensor([math.nan, math.inf, -math.inf, math.inf]).to(dtype)
    cases["nonfinite matching"] = (o, r)
    o2 = o.clone()
    o2[0, 0], o2[0, 1], o2[3, 3] = 1.0, -math.inf, math.nan
    cases["nonfinite wrong"] = (o2, r)
    o3 = out.clone()
    o3[5, 5] = math.inf
    cases["inf where finite due"] = (o3, ref)
    sub = ref.clone()
    sub[:, :10] = tiny * torch.rand(37, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)) / 3
    sub[2, :3] = torch.tensor([0.0, -0.0, -tiny / 7], dtype=torch.float64)
    cases["denormals and signed zeros"] = (sub.to(dtype), sub)
    cases["exact"] = (ref.to(dtype), ref.to(dtype).double())
    cases["zero reference"] = (out, torch.zeros_like(ref))
    cases["negated"] = ((-ref).to(dtype), ref)
    cases["non-contiguous"] = (out.t(), ref.t())
    cases["transposed reference only"] = (out.t().contiguous(), ref.t())
    cases["large values"] = _pair(seed, (64, 16), dtype, noise=1e-2, scale=3e4 if dtype == torch.float16 else 1e30)
    return cases


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_error_stats_same_bits_as_before(dtype, seed):
    for name, (out, ref) in _adversarial(dtype, seed).items():
        assert_same(error_stats(out, ref), legacy.error_stats(out, ref))
        out64, ref64 = out.to(torch.float64), ref.to(torch.float64)  # with the caller's float64 copies
        assert_same(error_stats(out, ref, out64=out64, ref64=ref64), legacy.error_stats(out, ref))
        eager = ref.to(dtype)  # against an output of the same dtype (the vs-eager comparison)
        assert_same(error_stats(out, eager), legacy.error_stats(out, eager)), name


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_worst_element_same_as_before(dtype):
    for name, (out, ref) in _adversarial(dtype, 3).items():
        eager = ref.to(dtype)
        assert_same(worst_element(out, ref, eager), legacy.worst_element(out, ref, eager)), name
        assert_same(worst_element(out, ref, eager, out64=out.double(), ref64=ref.double()),
                    legacy.worst_element(out, ref, eager))


def test_large_outputs_same_bits():
    """Sizes past the percentile's histogram and the reductions' blocking (2^18 elements, several dtypes)."""
    for dtype, noise in ((torch.float32, 1e-4), (torch.bfloat16, 3e-2), (torch.float16, 1e-1)):
        out, ref = _pair(7, (512, 512), dtype, noise=noise)
        assert_same(error_stats(out, ref), legacy.error_stats(out, ref))


@pytest.mark.parametrize("n", [1, 7, 1000, 4097, 70_000, 300_000])
def test_quantile_is_kthvalue(n):
    g = torch.Generator().manual_seed(n)
    small = torch.randint(0, 50, (n,), generator=g)
    bins = numerics._QUANTILE_BINS
    heavy = torch.where(torch.rand(n, generator=g) < 0.05, torch.randint(bins, 1 << 40, (n,), generator=g), small)
    tail = torch.randint(bins // 2, 2 * bins, (n,), generator=g)  # the 99th percentile past the bins
    wrapped = heavy.clone()
    wrapped[0] = -(1 << 62)  # an int64 difference that overflowed
    for x in (small, heavy, tail, wrapped, torch.zeros(n, dtype=torch.int64)):
        for q in (0.0, 0.5, 0.99, 1.0):
            assert numerics._quantile_int(x, q) == legacy._quantile_int(x, q), (q, x[:5])


def test_check_outputs_same_as_before():
    """The whole check of a seed (vs fp64, vs eager, eager vs fp64, worst element) equals the former functions
    put together as check_outputs did, on a passing, a failing and a non-finite output, with two outputs."""
    b = GraphBuilder("t")
    x = b.input("x", (40, 30))
    graph = b.finish([b.tanh(x), b.exp(x)])
    for dtype in (torch.float32, torch.bfloat16):
        refs = [_pair(s, (40, 30), dtype)[1] for s in (11, 12)]
        eager = [r.to(dtype) for r in refs]
        bad = eager[1].clone()
        bad[3, 4] += 0.5
        nan = eager[0].clone()
        nan[0, 0] = math.nan
        for outs in ([eager[0].clone(), eager[1].clone()], [_pair(11, (40, 30), dtype, 3e-2)[0], bad], [nan, bad]):
            got = check_outputs(graph, 5, outs, eager, refs)
            judged = []
            for i, (o, e, r) in enumerate(zip(outs, eager, refs)):
                e_ref = legacy.error_stats(e, r)
                v_ref = legacy.error_stats(o, r)
                judged.append((v_ref.rel_l2, i, v_ref, legacy.error_stats(o, e), e_ref))
            # the worst output: a failing one first (verdict), then the larger rel L2 (compared with the new one)
            i = next(k for k in range(2) if got.vs_ref is not None and _bits(got.vs_ref.rel_l2) == _bits(judged[k][0]))
            assert_same(got.vs_ref, judged[i][2])
            assert_same(got.vs_eager, judged[i][3])
            assert_same(got.eager_vs_ref, judged[i][4])
            w = legacy.worst_element(outs[i], refs[i], eager[i]).as_dict(i, 5)
            assert _bits(tuple(str(v) for v in got.worst_element.values())) == _bits(tuple(str(v) for v in w.values()))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_same_bits_on_a_gpu():
    """On the device where the outputs live (the GPU path: histogram percentile, sorts instead of kthvalue)."""
    for dtype in DTYPES:
        for name, (out, ref) in _adversarial(dtype, 4).items():
            o, r = out.cuda(), ref.cuda()
            assert_same(error_stats(o, r), legacy.error_stats(o, r)), name
            assert_same(worst_element(o, r, r.to(dtype)), legacy.worst_element(o, r, r.to(dtype))), name
    out, ref = _pair(9, (1024, 1024), torch.bfloat16, noise=3e-2)
    assert_same(error_stats(out.cuda(), ref.cuda()), legacy.error_stats(out.cuda(), ref.cuda()))
