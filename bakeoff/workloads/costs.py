"""Analytic cost model of a bound graph: FLOPs and the minimum bytes moved.

Minimum bytes: every graph input read once and every output written once, nothing else. A kernel that
moves only these bytes is as fused as it can be; achieved GB/s = bytes / latency grades fusion against it.

FLOPs: matmul 2·M·N·K per batch; elementwise 1 per output element; reductions 1 per input element;
layout ops 0; composites by their decomposition (layer_norm 7, rms_norm 4, softmax 5 per element) and
sdpa as its two matmuls plus softmax, halved when causal (the masked half is not needed).
"""
from __future__ import annotations

import math

from bakeoff.workloads.ir import ITEMSIZE, Graph, Node
from bakeoff.workloads.ops import kind

_PER_ELEMENT = {"layer_norm": 7, "rms_norm": 4, "softmax": 5}


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


def flops(graph: Graph) -> int:
    """Total FLOPs of a bound graph."""
    return sum(node_flops(n, graph) for n in graph.nodes)


def min_bytes(graph: Graph) -> int:
    """Bytes of the graph's inputs read once plus its outputs written once."""
    total = sum(n.numel * ITEMSIZE[n.dtype] for n in graph.inputs)
    return total + sum(n.numel * ITEMSIZE[n.dtype] for n in graph.output_nodes)


def bound_kind(graph: Graph, ridge_flop_per_byte: float = 100.0) -> str:
    """'compute' when arithmetic intensity exceeds the ridge point, else 'memory'."""
    return "compute" if flops(graph) / max(min_bytes(graph), 1) > ridge_flop_per_byte else "memory"
