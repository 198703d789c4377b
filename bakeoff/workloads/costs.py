"""Analytic cost model of a bound graph: FLOPs and the minimum bytes moved.

Minimum bytes: every graph input read once and every output written once, nothing else. A kernel that
moves only these bytes is as fused as it can be; achieved GB/s = bytes / latency grades fusion against it.

FLOPs: matmul 2·M·N·K per batch; elementwise 1 per output element; reductions 1 per input element;
layout ops 0; composites by their decomposition (layer_norm 7, rms_norm 4, softmax 5 per element) and
sdpa as its two matmuls plus softmax, halved when causal (the masked half is not needed).

A training step (`grad: true`, workloads/grad.py) adds the backward pass, node by node (`node_backward_flops`):
matmul 2x its forward (the two matmuls g·Bᵀ and Aᵀ·g); sdpa 2x its matmuls (dV, dP, dQ, dK) plus 3 per score
for the softmax backward, halved when causal; elementwise unary ops 2 per element (the local derivative and
its product with the cotangent); add/sub 0, mul 2, div 4, maximum 2 per output element, plus 1 per output
element for each operand broadcast (summing its gradient back); reductions per input element: sum 0, mean
1, max 2, var 3; layer_norm 10, rms_norm 7, softmax 4 per element; layout ops 0 (broadcast: 1 per output
element, the sum back). Its minimum bytes: the inputs and the cotangents read once, the outputs and the
gradients written once (`step_min_bytes`), the least any implementation of the step moves; one that saves
activations between a forward and a backward kernel moves more, which is what achieved GB/s grades.
"""
from __future__ import annotations

import math

from bakeoff.workloads.grad import grad_inputs
from bakeoff.workloads.ir import ITEMSIZE, Graph, Node
from bakeoff.workloads.ops import kind

_PER_ELEMENT = {"layer_norm": 7, "rms_norm": 4, "softmax": 5}
_BACKWARD_PER_ELEMENT = {"layer_norm": 10, "rms_norm": 7, "softmax": 4}
_BACKWARD_BINARY = {"add": 0, "sub": 0, "mul": 2, "div": 4, "maximum": 2}
_BACKWARD_REDUCE = {"sum": 0, "mean": 1, "max": 2, "var": 3}


def node_flops(n: Node, graph: Graph) -> int:
    """FLOPs of one node of a bound graph."""
    k = kind(n.op)
    if k in ("source", "layout") or n.op in ("cast", "causal_mask"):
        return 0
    if k in ("unary", "binary"):
        return n.numel
    if k == "reduce":
        return graph.node(n.inputs[0]).numel
    if n.op == "matmul":
        inner = int(graph.node(n.inputs[0]).shape[-1])
        return 2 * n.numel * inner
    if n.op in _PER_ELEMENT:
        return _PER_ELEMENT[n.op] * n.numel
    if n.op == "sdpa":
        q, k_ = graph.node(n.inputs[0]), graph.node(n.inputs[1])
        scores = math.prod(int(d) for d in q.shape[:-1]) * int(k_.shape[-2])
        flops = 2 * scores * int(q.shape[-1]) + 2 * scores * int(n.shape[-1]) + 5 * scores
        return flops // 2 if n.attr("causal") else flops
    raise ValueError(f"no cost rule for {n.op!r}")


def _sdpa_scores(n: Node, graph: Graph) -> int:
    q, k_ = graph.node(n.inputs[0]), graph.node(n.inputs[1])
    return math.prod(int(d) for d in q.shape[:-1]) * int(k_.shape[-2])


def node_backward_flops(n: Node, graph: Graph) -> int:
    """FLOPs of one node's backward (its inputs' cotangents from its output's) in a bound graph."""
    k = kind(n.op)
    if k == "source" or n.op in ("cast", "causal_mask", "reshape", "transpose"):
        return 0
    if n.op == "broadcast":
        return n.numel
    if k == "unary":
        return 2 * n.numel
    if k == "binary":
        stretched = sum(1 for i in n.inputs if graph.node(i).op != "const"
                        and graph.node(i).numel < n.numel)
        return (_BACKWARD_BINARY[n.op] + stretched) * n.numel
    if k == "reduce":
        return _BACKWARD_REDUCE[n.op] * graph.node(n.inputs[0]).numel
    if n.op == "matmul":
        return 2 * node_flops(n, graph)
    if n.op in _BACKWARD_PER_ELEMENT:
        return _BACKWARD_PER_ELEMENT[n.op] * n.numel
    if n.op == "sdpa":
        q, scores = graph.node(n.inputs[0]), _sdpa_scores(n, graph)
        flops = 2 * (2 * scores * int(q.shape[-1]) + 2 * scores * int(n.shape[-1])) + 3 * scores
        return flops // 2 if n.attr("causal") else flops
    raise ValueError(f"no backward cost rule for {n.op!r}")


def flops(graph: Graph, grad: bool = False) -> int:
    """Total FLOPs of a bound graph; with `grad`, of its training step (forward plus backward)."""
    forward = sum(node_flops(n, graph) for n in graph.nodes)
    return forward + (backward_flops(graph) if grad else 0)


def backward_flops(graph: Graph) -> int:
    """FLOPs of a bound graph's backward pass (see the module docstring)."""
    return sum(node_backward_flops(n, graph) for n in graph.nodes)


def step_min_bytes(graph: Graph, grad: bool) -> int:
    """min_bytes, and for a training step also the cotangents read and the gradients written once."""
    total = min_bytes(graph)
    if grad:
        total += sum(n.numel * ITEMSIZE[n.dtype] for n in graph.output_nodes)
        total += sum(n.numel * ITEMSIZE[n.dtype] for n in grad_inputs(graph))
    return total


def min_bytes(graph: Graph) -> int:
    """Bytes of the graph's inputs read once plus its outputs written once."""
    total = sum(n.numel * ITEMSIZE[n.dtype] for n in graph.inputs)
    return total + sum(n.numel * ITEMSIZE[n.dtype] for n in graph.output_nodes)


def bound_kind(graph: Graph, ridge_flop_per_byte: float = 100.0, grad: bool = False) -> str:
    """'compute' when arithmetic intensity exceeds the ridge point, else 'memory' (of the training step with
    `grad`)."""
    intensity = flops(graph, grad) / max(step_min_bytes(graph, grad), 1)
    return "compute" if intensity > ridge_flop_per_byte else "memory"
