"""The float64 reference's reverse-mode rules (workloads/vjp.py) against central finite differences.

Each op is differentiated in a tiny graph, loss = sum(output * cotangent), in float64; every gradient
element is compared with (loss(x + h e) - loss(x - h e)) / 2h. Broadcasting, reductions, batched matmul
transposes and the composites (through their decomposition) are covered, and the built-in blocks as wholes.
"""
from __future__ import annotations

import numpy as np
import pytest

from bakeoff.workloads.builder import GraphBuilder
from bakeoff.workloads.grad import grad_inputs, step_output_names
from bakeoff.workloads.ir import Graph, bind
from bakeoff.workloads.reference import evaluate_reference
from bakeoff.workloads.suite import builtin_workloads
from bakeoff.workloads.vjp import VJP_RULES, evaluate_step, unbroadcast

H = 1e-6


def _loss(graph: Graph, xs: list[np.ndarray], cts: list[np.ndarray]) -> float:
    return float(sum((o * c).sum() for o, c in zip(evaluate_reference(graph, xs), cts)))


def _numeric_grads(graph: Graph, xs: list[np.ndarray], cts: list[np.ndarray]) -> list[np.ndarray]:
    out = []
    for k, x in enumerate(xs):
        g = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            plus, minus = [a.copy() for a in xs], [a.copy() for a in xs]
            plus[k][idx] += H
            minus[k][idx] -= H
            g[idx] = (_loss(graph, plus, cts) - _loss(graph, minus, cts)) / (2 * H)
        out.append(g)
    return out


def _check(graph: Graph, rng: np.random.Generator, positive: bool = False, rtol: float = 1e-6) -> None:
    graph = bind(graph, {}, "float64")
    xs = [rng.uniform(0.5, 2.0, n.shape) if positive else rng.standard_normal(tuple(n.shape))
          for n in graph.inputs]
    cts = [rng.standard_normal(tuple(n.shape)) for n in graph.output_nodes]
    outs, grads = evaluate_step(graph, xs, cts)
    for o, r in zip(outs, evaluate_reference(graph, xs)):
        np.testing.assert_array_equal(o, r)
    assert len(grads) == len(grad_inputs(graph))
    for name, g, num in zip(step_output_names(graph, True)[len(outs):], grads, _numeric_grads(graph, xs, cts)):
        assert g.shape == num.shape, name
        scale = max(np.abs(num).max(), 1.0)
        np.testing.assert_allclose(g, num, rtol=rtol, atol=rtol * scale, err_msg=name)


def _unary(op: str, **attrs) -> Graph:
    b = GraphBuilder(op)
    return b.finish([b.emit(op, [b.input("x", (3, 5))], **attrs)])


@pytest.mark.parametrize("op,attrs,positive", [
    ("neg", {}, False), ("exp", {}, False), ("log", {}, True), ("sqrt", {}, True), ("rsqrt", {}, True),
    ("tanh", {}, False), ("erf", {}, False), ("sigmoid", {}, False), ("relu", {}, False),
    ("gelu", {"approximate": "none"}, False), ("gelu", {"approximate": "tanh"}, False), ("silu", {}, False),
    ("pow", {"exponent": 3.0}, False), ("pow", {"exponent": 0.5}, True), ("sum", {}, False),
    ("mean", {}, False), ("max", {}, False), ("var", {"correction": 0}, False), ("var", {"correction": 1}, False),
    ("softmax", {}, False), ("transpose", {"perm": (1, 0)}, False), ("reshape", {"shape": (5, 3)}, False),
])
def test_unary_rules_match_finite_differences(op, attrs, positive):
    _check(_unary(op, **attrs), np.random.default_rng(0), positive)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "maximum"])
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 3, 4), (3, 1))])
def test_binary_rules_broadcast(op, shapes):
    b = GraphBuilder(op)
    x, y = b.input("x", shapes[0]), b.input("y", shapes[1])
    _check(b.finish([b.emit(op, [x, y])]), np.random.default_rng(1), positive=op == "div")


def test_binary_with_a_constant_has_no_constant_gradient():
    b = GraphBuilder("scale")
    x = b.input("x", (2, 3))
    _check(b.finish([b.mul(b.add(x, b.const(0.5)), b.const(1.5))]), np.random.default_rng(2))


@pytest.mark.parametrize("a,bshape", [((4, 3), (3, 5)), ((2, 4, 3), (3, 5)), ((2, 1, 4, 3), (3, 3, 2)),
                                      ((3, 4, 3), (3, 3, 2))])
def test_matmul_transposes_and_batch_broadcast(a, bshape):
    b = GraphBuilder("mm")
    _check(b.finish([b.matmul(b.input("a", a), b.input("b", bshape))]), np.random.default_rng(3))


def test_broadcast_op_sums_back():
    b = GraphBuilder("bc")
    _check(b.finish([b.broadcast(b.input("x", (3, 1)), shape=(2, 3, 4))]), np.random.default_rng(4))


def test_causal_mask_passes_nothing_to_masked_elements():
    b = GraphBuilder("cm")
    x = b.input("x", (2, 4, 4))
    # exp(-inf) = 0 keeps the loss finite, as in attention; the masked half gets exactly zero gradient.
    graph = bind(b.finish([b.exp(b.causal_mask(x))]), {}, "float64")
    _check(graph, np.random.default_rng(5))
    xs = [np.random.default_rng(5).standard_normal((2, 4, 4))]
    _, (g,) = evaluate_step(graph, xs, [np.ones((2, 4, 4))])
    assert (g[:, np.triu_indices(4, 1)[0], np.triu_indices(4, 1)[1]] == 0).all()


@pytest.mark.parametrize("with_affine", [0, 1, 2])
def test_layer_norm(with_affine):
    b = GraphBuilder("ln")
    args = [b.input("x", (3, 6)), b.input("w", (6,)), b.input("b", (6,))][:1 + with_affine]
    _check(b.finish([b.layer_norm(*args)]), np.random.default_rng(6))


def test_rms_norm():
    b = GraphBuilder("rms")
    _check(b.finish([b.rms_norm(b.input("x", (3, 6)), b.input("w", (6,)))]), np.random.default_rng(7))


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa(causal):
    b = GraphBuilder("sdpa")
    q, k, v = (b.input(n, (1, 2, 5, 3)) for n in "qkv")
    _check(b.finish([b.sdpa(q, k, v, causal=causal)]), np.random.default_rng(8))


def test_two_outputs_and_an_input_used_twice():
    b = GraphBuilder("two")
    x, w = b.input("x", (3, 4)), b.input("w", (4,))
    h = b.mul(x, w)
    _check(b.finish([b.tanh(h), b.sum(b.mul(h, x))]), np.random.default_rng(9))


@pytest.mark.parametrize("name", ["layernorm_gelu", "gemm_bias_gelu", "mlp_block", "attn_block"])
def test_builtin_blocks(name):
    w = builtin_workloads()[name]
    dims = {"layernorm_gelu": {"M": 3, "N": 5}, "gemm_bias_gelu": {"M": 3, "K": 4, "N": 2},
            "mlp_block": {"B": 1, "S": 2, "D": 3, "F": 4}, "attn_block": {"B": 1, "S": 3, "H": 2, "Dh": 2}}[name]
    _check(bind(w.graph, dims, "float64"), np.random.default_rng(10), rtol=1e-5)


def test_every_primitive_op_has_a_rule():
    from bakeoff.workloads import ops

    primitives = set(ops.UNARY + ops.BINARY + ops.REDUCE + ops.LAYOUT) | {"matmul"}
    assert primitives - {"cast"} <= set(VJP_RULES)  # casts vanish in the reference


def test_unbroadcast_shapes():
    g = np.ones((2, 3, 4))
    assert unbroadcast(g, (4,)).tolist() == [6.0] * 4
    assert unbroadcast(g, (3, 1)).shape == (3, 1) and unbroadcast(g, (3, 1))[0, 0] == 8.0
