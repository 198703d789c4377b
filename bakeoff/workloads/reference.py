"""The float64 reference evaluator: the decomposed graph, evaluated in NumPy float64.

Independent of every backend's lowering (it shares no code with `lower_torch`), so that it can judge them.
Casts are exact (ignored) here: the reference is the ideal math, not a simulation of rounding.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy import special

from bakeoff.workloads.decompose import decompose, to_reference
from bakeoff.workloads.ir import Graph, Node

_SQRT_2_OVER_PI = np.sqrt(2.0 / np.pi)


def _gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        return 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x**3)))
    return 0.5 * x * (1.0 + special.erf(x / np.sqrt(2.0)))


def _causal_mask(x: np.ndarray) -> np.ndarray:
    rows, cols = x.shape[-2:]
    masked = np.triu(np.ones((rows, cols), dtype=bool), k=1)
    return np.where(masked, -np.inf, x)


# One rule per primitive op: (node, inputs) -> output, all in float64.
_RULES = {
    "neg": lambda n, a: -a[0], "exp": lambda n, a: np.exp(a[0]), "log": lambda n, a: np.log(a[0]),
    "sqrt": lambda n, a: np.sqrt(a[0]), "rsqrt": lambda n, a: 1.0 / np.sqrt(a[0]),
    "tanh": lambda n, a: np.tanh(a[0]), "erf": lambda n, a: special.erf(a[0]),
    "sigmoid": lambda n, a: special.expit(a[0]), "relu": lambda n, a: np.maximum(a[0], 0.0),
    "silu": lambda n, a: a[0] * special.expit(a[0]), "gelu": lambda n, a: _gelu(a[0], n.attr("approximate")),
    "pow": lambda n, a: np.power(a[0], n.attr("exponent")), "causal_mask": lambda n, a: _causal_mask(a[0]),
    "add": lambda n, a: a[0] + a[1], "sub": lambda n, a: a[0] - a[1], "mul": lambda n, a: a[0] * a[1],
    "div": lambda n, a: a[0] / a[1], "maximum": lambda n, a: np.maximum(a[0], a[1]),
    "matmul": lambda n, a: np.matmul(a[0], a[1]),
    "sum": lambda n, a: a[0].sum(-1, keepdims=True), "mean": lambda n, a: a[0].mean(-1, keepdims=True),
    "max": lambda n, a: a[0].max(-1, keepdims=True),
    "var": lambda n, a: a[0].var(-1, keepdims=True, ddof=n.attr("correction")),
    "reshape": lambda n, a: a[0].reshape(n.attr("shape")),
    "transpose": lambda n, a: a[0].transpose(n.attr("perm")),
    "broadcast": lambda n, a: np.broadcast_to(a[0], n.attr("shape")),
}


def _eval(n: Node, a: list[np.ndarray]) -> np.ndarray:
    if n.op not in _RULES:
        raise NotImplementedError(f"no reference rule for op {n.op!r}")
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return _RULES[n.op](n, a)


def evaluate_reference(graph: Graph, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Outputs of `graph` (bound) on `inputs` (any float dtype, upcast here), in float64."""
    ref = decompose(to_reference(graph))
    env: dict[int, np.ndarray] = {}
    for node, x in zip(ref.inputs, inputs):
        env[node.id] = np.asarray(x, dtype=np.float64)
    for n in ref.nodes:
        if n.op == "input":
            continue
        if n.op == "const":
            env[n.id] = np.float64(n.attr("value"))
        else:
            env[n.id] = np.asarray(_eval(n, [env[i] for i in n.inputs]), dtype=np.float64)
    return [env[i] for i in ref.outputs]
