"""Pointwise ops as Triton expressions (fp32 in, fp32 out), shared by every template.

`_erf`, `_exp` and `_rcp` are helpers every generated module defines (codegen.header). Every template computes in float32 (loads are upcast, stores cast to the buffer dtype); a `cast` node rounds
through its target dtype so the fused kernel keeps the graph's rounding points.
"""
from __future__ import annotations

import math
from typing import Callable

from bakeoff.workloads.ir import Node

TL_DTYPES = {"float32": "tl.float32", "float16": "tl.float16", "bfloat16": "tl.bfloat16", "float64": "tl.float64"}

_GELU_TANH_K = 0.7978845608028654  # sqrt(2/pi)


def literal(x: float) -> str:
    """A float literal Triton parses (inf/nan spelled through float())."""
    if math.isnan(x):
        return 'float("nan")'
    if math.isinf(x):
        return 'float("inf")' if x > 0 else '-float("inf")'
    return repr(float(x))


def tanh(a: str) -> str:
    """tanh from exp, which every Triton version and the interpreter have (saturates to +-1, no NaN)."""
    return f"(2.0 * _rcp(1.0 + _exp(-2.0 * {a})) - 1.0)"


def _pow(a: str, p: float) -> str:
    if p == int(p) and 0 < abs(p) <= 4:
        prod = " * ".join([f"({a})"] * int(abs(p)))
        return f"({prod})" if p > 0 else f"(1.0 / ({prod}))"
    if p == 0.5:
        return f"tl.sqrt({a})"
    if p == -0.5:
        return f"tl.rsqrt({a})"
    if p == 0:
        return f"({a} * 0.0 + 1.0)"
    return f"_exp({literal(p)} * tl.log({a}))"


def _gelu(a: str, approximate: str) -> str:
    if approximate == "tanh":
        inner = f"{_GELU_TANH_K!r} * ({a} + 0.044715 * {a} * {a} * {a})"
        return f"(0.5 * {a} * (1.0 + {tanh(inner)}))"
    return f"_gelu_erf({a})"


def _cast(a: str, dtype: str) -> str:
    if dtype in ("float32", "float64"):
        return a
    return f"{a}.to({TL_DTYPES[dtype]}).to(tl.float32)"


_UNARY: dict[str, Callable[[str], str]] = {
    "neg": lambda a: f"(-{a})", "exp": lambda a: f"_exp({a})", "log": lambda a: f"tl.log({a})",
    "sqrt": lambda a: f"tl.sqrt({a})", "rsqrt": lambda a: f"tl.rsqrt({a})", "tanh": tanh,
    "erf": lambda a: f"_erf({a})", "sigmoid": lambda a: f"_rcp(1.0 + _exp(-{a}))",
    "relu": lambda a: f"tl.maximum({a}, 0.0)", "silu": lambda a: f"({a} * _rcp(1.0 + _exp(-{a})))",
}
_BINARY = {"add": "({} + {})", "sub": "({} - {})", "mul": "({} * {})", "div": "({} / {})",
           "maximum": "tl.maximum({}, {})"}


def pointwise_expr(n: Node, args: list[str], row: str | None = None, col: str | None = None) -> str:
    """The Triton expression of pointwise node `n` on argument expressions `args`.

    row, col: expressions of the index along the last two dims of `n`'s shape (needed by causal_mask only).
    """
    if n.op in _UNARY:
        return _UNARY[n.op](args[0])
    if n.op in _BINARY:
        return _BINARY[n.op].format(*args)
    if n.op == "gelu":
        return _gelu(args[0], n.attr("approximate"))
    if n.op == "pow":
        return _pow(args[0], float(n.attr("exponent")))
    if n.op == "cast":
        return _cast(args[0], n.attr("dtype"))
    if n.op == "causal_mask":
        if row is None or col is None:
            raise NotImplementedError("tritongen: causal_mask needs row/column indices here")
        return f'tl.where({col} > {row}, -float("inf"), {args[0]})'
    if n.op == "reshape":  # the identity of a copy kernel
        return args[0]
    raise NotImplementedError(f"tritongen: no pointwise expression for {n.op!r}")
