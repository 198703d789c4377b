"""The built-in workload suite, with shape presets `smoke`, `cpu` and `gpu`.

`smoke` runs in seconds on two CPU cores (odd sizes on purpose, to exercise ragged edges); `gpu` fills an H200.
Weights are drawn with std 1/sqrt(fan_in) so activations stay near unit scale in every dtype. The numerics
suite, whose inputs open numerical traps on purpose, is in traps.py; `every_workload()` is both.
"""
from __future__ import annotations

from typing import Callable, Mapping

from bakeoff.workloads.builder import GraphBuilder
from bakeoff.workloads.ir import Graph
from bakeoff.workloads.traps import numerics_workloads
from bakeoff.workloads.workload import Workload

__all__ = ["Workload", "builtin_workloads", "numerics_workloads", "every_workload"]


def _w(_fan_in: str) -> tuple:
    """Init of a (fan_in, fan_out) weight: normal with std 1/sqrt(fan_in) (see harness.inputs)."""
    return ("fan_in",)


def _ew_sigmoid_relu() -> Graph:
    b = GraphBuilder("ew_sigmoid_relu")
    x, y = b.input("x", ("M", "N")), b.input("y", ("M", "N"))
    out = b.mul(b.sigmoid(b.relu(b.add(b.mul(x, b.const(1.5)), y))), x)
    return b.finish([out])


def _ew_gelu_silu_gate() -> Graph:
    b = GraphBuilder("ew_gelu_silu_gate")
    x, g = b.input("x", ("M", "N")), b.input("g", ("M", "N"))
    out = b.add(b.mul(b.gelu(x, approximate="tanh"), b.silu(g)), b.mul(x, b.const(0.5)))
    return b.finish([out])


def _layernorm_gelu() -> Graph:
    b = GraphBuilder("layernorm_gelu")
    x = b.input("x", ("M", "N"))
    w, bias = b.input("w", ("N",), init=("uniform", 0.5, 1.5)), b.input("b", ("N",), init=("normal", 0.1))
    return b.finish([b.gelu(b.layer_norm(x, w, bias))])


def _rmsnorm() -> Graph:
    b = GraphBuilder("rmsnorm")
    x, w = b.input("x", ("M", "N")), b.input("w", ("N",), init=("uniform", 0.5, 1.5))
    return b.finish([b.rms_norm(x, w)])


def _softmax(name: str, std: float) -> Callable[[], Graph]:
    def build() -> Graph:
        b = GraphBuilder(name)
        return b.finish([b.softmax(b.input("x", ("M", "N"), init=("normal", std)))])
    return build


def _gemm_bias_gelu() -> Graph:
    b = GraphBuilder("gemm_bias_gelu")
    x, w = b.input("x", ("M", "K")), b.input("w", ("K", "N"), init=_w("K"))
    bias = b.input("b", ("N",), init=("normal", 0.1))
    return b.finish([b.gelu(b.add(b.matmul(x, w), bias))])


def _gemm_bias_residual() -> Graph:
    b = GraphBuilder("gemm_bias_residual")
    x, w = b.input("x", ("M", "K")), b.input("w", ("K", "N"), init=_w("K"))
    bias, r = b.input("b", ("N",), init=("normal", 0.1)), b.input("r", ("M", "N"))
    return b.finish([b.add(b.add(b.matmul(x, w), bias), r)])


def _attention() -> Graph:
    b = GraphBuilder("attention")
    q, k, v = (b.input(n, ("B", "H", "S", "Dh")) for n in "qkv")
    return b.finish([b.sdpa(q, k, v, causal=True)])


def _heads(b: GraphBuilder, t: int) -> int:
    """(B, S, H*Dh) -> (B, H, S, Dh)."""
    return b.transpose(b.reshape(t, shape=("B", "S", "H", "Dh")), perm=(0, 2, 1, 3))


def _attn_block() -> Graph:
    b = GraphBuilder("attn_block")
    d = "H*Dh"
    x = b.input("x", ("B", "S", d))
    g, beta = b.input("ln_w", (d,), init=("uniform", 0.5, 1.5)), b.input("ln_b", (d,), init=("normal", 0.1))
    h = b.layer_norm(x, g, beta)
    qkv = []
    for name in "qkv":
        w = b.input(f"w{name}", (d, d), init=_w(d))
        bias = b.input(f"b{name}", (d,), init=("normal", 0.1))
        qkv.append(_heads(b, b.add(b.matmul(h, w), bias)))
    a = b.sdpa(*qkv, causal=True)
    a = b.reshape(b.transpose(a, perm=(0, 2, 1, 3)), shape=("B", "S", d))
    wo, bo = b.input("wo", (d, d), init=_w(d)), b.input("bo", (d,), init=("normal", 0.1))
    return b.finish([b.add(b.add(b.matmul(a, wo), bo), x)])


def _mlp_block() -> Graph:
    b = GraphBuilder("mlp_block")
    x = b.input("x", ("B", "S", "D"))
    g, beta = b.input("ln_w", ("D",), init=("uniform", 0.5, 1.5)), b.input("ln_b", ("D",), init=("normal", 0.1))
    w1, b1 = b.input("w1", ("D", "F"), init=_w("D")), b.input("b1", ("F",), init=("normal", 0.1))
    w2, b2 = b.input("w2", ("F", "D"), init=_w("F")), b.input("b2", ("D",), init=("normal", 0.1))
    h = b.gelu(b.add(b.matmul(b.layer_norm(x, g, beta), w1), b1))
    return b.finish([b.add(b.add(b.matmul(h, w2), b2), x)])


_ROWS = {"smoke": {"M": 37, "N": 300}, "cpu": {"M": 1024, "N": 1024}, "gpu": {"M": 16384, "N": 4096}}
_EW = {"smoke": {"M": 61, "N": 257}, "cpu": {"M": 1024, "N": 1024}, "gpu": {"M": 8192, "N": 8192}}
_GEMM = {"smoke": {"M": 48, "K": 80, "N": 72}, "cpu": {"M": 512, "K": 512, "N": 512},
         "gpu": {"M": 8192, "K": 8192, "N": 8192}}
_ATTN = {"smoke": {"B": 1, "H": 2, "S": 40, "Dh": 16}, "cpu": {"B": 2, "H": 8, "S": 512, "Dh": 64},
         "gpu": {"B": 8, "H": 32, "S": 4096, "Dh": 128}}
_ATTN_BLOCK = {"smoke": {"B": 2, "S": 24, "H": 2, "Dh": 16}, "cpu": {"B": 2, "S": 256, "H": 8, "Dh": 64},
               "gpu": {"B": 8, "S": 2048, "H": 32, "Dh": 128}}
_MLP = {"smoke": {"B": 2, "S": 24, "D": 32, "F": 96}, "cpu": {"B": 2, "S": 256, "D": 512, "F": 2048},
        "gpu": {"B": 8, "S": 2048, "D": 4096, "F": 16384}}

_SUITE: list[tuple[str, str, str, Callable[[], Graph], Mapping]] = [
    ("ew_sigmoid_relu", "elementwise", "sigmoid(relu(x*1.5+y))*x", _ew_sigmoid_relu, _EW),
    ("ew_gelu_silu_gate", "elementwise", "gelu_tanh(x)*silu(g) + 0.5*x", _ew_gelu_silu_gate, _EW),
    ("layernorm_gelu", "reduction", "gelu(layer_norm(x, w, b)) over the last axis", _layernorm_gelu, _ROWS),
    ("rmsnorm", "reduction", "rms_norm(x, w) over the last axis", _rmsnorm, _ROWS),
    ("softmax", "reduction", "softmax over the last axis, inputs ~ N(0, 1)", _softmax("softmax", 1.0), _ROWS),
    ("softmax_large", "reduction", "softmax of inputs ~ N(0, 1000): overflows a naive exp",
     _softmax("softmax_large", 1000.0), _ROWS),
    ("gemm_bias_gelu", "gemm", "gelu(x @ w + b)", _gemm_bias_gelu, _GEMM),
    ("gemm_bias_residual", "gemm", "x @ w + b + r", _gemm_bias_residual, _GEMM),
    ("attention", "attention", "causal scaled dot-product attention", _attention, _ATTN),
    ("attn_block", "transformer", "pre-LN causal attention block: LN, QKV, attention, out-proj + residual",
     _attn_block, _ATTN_BLOCK),
    ("mlp_block", "transformer", "pre-LN MLP block: LN, up-proj + GELU, down-proj + residual", _mlp_block, _MLP),
]


def builtin_workloads() -> dict[str, Workload]:
    """The default (performance) suite's workloads by name, in suite order."""
    return {name: Workload(name, cat, desc, build(), presets) for name, cat, desc, build, presets in _SUITE}


def every_workload() -> dict[str, Workload]:
    """Every built-in workload a config may name: the default suite, then the numerics suite (traps.py)."""
    return {**builtin_workloads(), **numerics_workloads()}
