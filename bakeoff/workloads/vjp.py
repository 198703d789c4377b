"""Reverse-mode rules (VJPs) for the float64 reference: the gradients of a training step, in NumPy.

Independent of every backend (no torch or JAX autodiff): the graph is decomposed to primitive ops
(`decompose`, `to_reference`), evaluated forward in float64 keeping every value (`reference.py`'s rules),
then walked backwards with one rule per primitive op below. Composites (layer_norm, rms_norm, softmax, sdpa)
are differentiated through their decomposition, which is exact math, so their gradients are too.

Conventions where the derivative is not unique, chosen as PyTorch's and JAX's (so a correct backend agrees):
relu'(0) = 0; maximum sends a tied gradient half to each side; max over an axis shares it evenly among the
tied elements; a causal mask passes no gradient to masked elements.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from scipy import special

from bakeoff.workloads.decompose import decompose, to_reference
from bakeoff.workloads.grad import grad_inputs
from bakeoff.workloads.ir import Graph, Node
from bakeoff.workloads.reference import _SQRT_2_OVER_PI, _eval

Arrays = list[np.ndarray]


def unbroadcast(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum `g` over the axes NumPy broadcasting added or stretched to reach g's shape from `shape`."""
    g = np.asarray(g)
    extra = g.ndim - len(shape)
    if extra > 0:
        g = g.sum(axis=tuple(range(extra)))
    stretched = tuple(i for i, d in enumerate(shape) if d == 1 and g.shape[i] != 1)
    if stretched:
        g = g.sum(axis=stretched, keepdims=True)
    return g.reshape(shape)


def _gelu_grad(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        inner = _SQRT_2_OVER_PI * (x + 0.044715 * x**3)
        t = np.tanh(inner)
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * x * x)
    return 0.5 * (1.0 + special.erf(x / np.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / np.sqrt(2.0 * np.pi)


def _causal_keep(shape: tuple[int, ...]) -> np.ndarray:
    rows, cols = shape[-2:]
    return ~np.triu(np.ones((rows, cols), dtype=bool), k=1)


def _maximum(a: np.ndarray, b: np.ndarray, g: np.ndarray) -> Arrays:
    tie = 0.5 * g * (a == b)
    return [unbroadcast(g * (a > b) + tie, a.shape), unbroadcast(g * (b > a) + tie, b.shape)]


def _max(a: np.ndarray, y: np.ndarray, g: np.ndarray) -> Arrays:
    hit = a == y
    return [g * hit / hit.sum(-1, keepdims=True)]


def _matmul(a: np.ndarray, b: np.ndarray, g: np.ndarray) -> Arrays:
    ga = np.matmul(g, np.swapaxes(b, -1, -2))
    gb = np.matmul(np.swapaxes(a, -1, -2), g)
    return [unbroadcast(ga, a.shape), unbroadcast(gb, b.shape)]


def _var(n: Node, a: np.ndarray, g: np.ndarray) -> Arrays:
    count = a.shape[-1] - n.attr("correction")
    return [g * 2.0 * (a - a.mean(-1, keepdims=True)) / count]


def _transpose(n: Node, g: np.ndarray) -> Arrays:
    return [g.transpose(np.argsort(n.attr("perm")))]


# One rule per primitive op: (node, inputs, output, output's cotangent) -> each input's cotangent.
VjpRule = Callable[[Node, Arrays, np.ndarray, np.ndarray], Arrays]
VJP_RULES: dict[str, VjpRule] = {
    "neg": lambda n, a, y, g: [-g],
    "exp": lambda n, a, y, g: [g * y],
    "log": lambda n, a, y, g: [g / a[0]],
    "sqrt": lambda n, a, y, g: [g * 0.5 / y],
    "rsqrt": lambda n, a, y, g: [g * -0.5 * y**3],
    "tanh": lambda n, a, y, g: [g * (1.0 - y * y)],
    "erf": lambda n, a, y, g: [g * 2.0 / np.sqrt(np.pi) * np.exp(-a[0] * a[0])],
    "sigmoid": lambda n, a, y, g: [g * y * (1.0 - y)],
    "relu": lambda n, a, y, g: [g * (a[0] > 0)],
    "gelu": lambda n, a, y, g: [g * _gelu_grad(a[0], n.attr("approximate"))],
    "silu": lambda n, a, y, g: [g * special.expit(a[0]) * (1.0 + a[0] * (1.0 - special.expit(a[0])))],
    "pow": lambda n, a, y, g: [g * n.attr("exponent") * np.power(a[0], n.attr("exponent") - 1.0)],
    "causal_mask": lambda n, a, y, g: [np.where(_causal_keep(y.shape), g, 0.0)],
    "add": lambda n, a, y, g: [unbroadcast(g, a[0].shape), unbroadcast(g, a[1].shape)],
    "sub": lambda n, a, y, g: [unbroadcast(g, a[0].shape), unbroadcast(-g, a[1].shape)],
    "mul": lambda n, a, y, g: [unbroadcast(g * a[1], a[0].shape), unbroadcast(g * a[0], a[1].shape)],
    "div": lambda n, a, y, g: [unbroadcast(g / a[1], a[0].shape), unbroadcast(-g * y / a[1], a[1].shape)],
    "maximum": lambda n, a, y, g: _maximum(a[0], a[1], g),
    "matmul": lambda n, a, y, g: _matmul(a[0], a[1], g),
    "sum": lambda n, a, y, g: [np.broadcast_to(g, a[0].shape)],
    "mean": lambda n, a, y, g: [np.broadcast_to(g / a[0].shape[-1], a[0].shape)],
    "max": lambda n, a, y, g: _max(a[0], y, g),
    "var": lambda n, a, y, g: _var(n, a[0], g),
    "reshape": lambda n, a, y, g: [g.reshape(a[0].shape)],
    "transpose": lambda n, a, y, g: _transpose(n, g),
    "broadcast": lambda n, a, y, g: [unbroadcast(g, a[0].shape)],
}


def _vjp(n: Node, a: Arrays, y: np.ndarray, g: np.ndarray) -> Arrays:
    if n.op not in VJP_RULES:
        raise NotImplementedError(f"no reverse-mode rule for op {n.op!r}")
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return VJP_RULES[n.op](n, a, y, g)


def evaluate_step(graph: Graph, inputs: Sequence[np.ndarray], cotangents: Sequence[np.ndarray]
                  ) -> tuple[Arrays, Arrays]:
    """The training step of `graph` (bound) in float64: its outputs, and the gradient of
    loss = sum_i sum(output_i * cotangent_i) with respect to each of `grad_inputs(graph)`, in that order.

    `inputs` are the graph's inputs in graph order and `cotangents` one per output (its shape); any float
    dtype, upcast here. An input the outputs do not depend on gets a zero gradient."""
    ref = decompose(to_reference(graph))
    if len(cotangents) != len(ref.outputs):
        raise ValueError(f"{len(cotangents)} cotangents for {len(ref.outputs)} outputs")
    env: dict[int, np.ndarray] = {}
    for node, x in zip(ref.inputs, inputs):
        env[node.id] = np.asarray(x, dtype=np.float64)
    for n in ref.nodes:
        if n.op == "const":
            env[n.id] = np.float64(n.attr("value"))
        elif n.op != "input":
            env[n.id] = np.asarray(_eval(n, [env[i] for i in n.inputs]), dtype=np.float64)
    grads: dict[int, np.ndarray] = {}
    for out, ct in zip(ref.outputs, cotangents):  # an output listed twice gets both cotangents
        ct = np.asarray(ct, dtype=np.float64)
        grads[out] = grads[out] + ct if out in grads else ct
    for n in reversed(ref.nodes):
        if n.id not in grads or n.op in ("input", "const"):
            continue
        g = np.broadcast_to(grads.pop(n.id), env[n.id].shape)
        for i, gi in zip(n.inputs, _vjp(n, [env[i] for i in n.inputs], env[n.id], g)):
            if ref.node(i).op == "const":
                continue
            grads[i] = grads[i] + gi if i in grads else np.asarray(gi, dtype=np.float64)
    wanted = {n.attr("name") for n in grad_inputs(graph)}
    outputs = [env[i] for i in ref.outputs]
    return outputs, [np.array(grads.get(n.id, np.zeros(env[n.id].shape)), dtype=np.float64)
                     for n in ref.inputs if n.attr("name") in wanted]
