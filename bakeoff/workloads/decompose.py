"""Passes over graphs: composites into primitive ops, and the float64 reference form."""
from __future__ import annotations

import math
from typing import Callable

from bakeoff.workloads.builder import GraphBuilder
from bakeoff.workloads.ir import Dim, Graph, IRError, Node

Rewrite = Callable[[GraphBuilder, Node, list[int]], "int | None"]


def rewrite(graph: Graph, rule: Rewrite) -> Graph:
    """Copy `graph` node by node; `rule` may emit a replacement (returning its id) or None to copy as is."""
    b = GraphBuilder(graph.name)
    new_id: dict[int, int] = {}
    for n in graph.nodes:
        args = [new_id[i] for i in n.inputs]
        out = rule(b, n, args)
        if out is None:
            out = _copy(b, n, args)
        new_id[n.id] = out
    return b.finish([new_id[i] for i in graph.outputs])


def _copy(b: GraphBuilder, n: Node, args: list[int]) -> int:
    attrs = dict(n.attrs)
    if n.op == "input":
        return b.input(attrs["name"], n.shape, n.dtype, attrs["init"])
    if n.op == "const":
        return b.const(attrs["value"], n.dtype)
    return b.emit(n.op, args, **attrs)


def _decompose_rule(b: GraphBuilder, n: Node, a: list[int]) -> int | None:
    if n.op == "layer_norm":
        x = a[0]
        xc = b.sub(x, b.mean(x))
        y = b.mul(xc, b.rsqrt(b.add(b.mean(b.mul(xc, xc)), b.const(n.attr("eps"), n.dtype))))
        if len(a) > 1:
            y = b.mul(y, a[1])
        if len(a) > 2:
            y = b.add(y, a[2])
        return y
    if n.op == "rms_norm":
        x = a[0]
        y = b.mul(x, b.rsqrt(b.add(b.mean(b.mul(x, x)), b.const(n.attr("eps"), n.dtype))))
        return b.mul(y, a[1]) if len(a) > 1 else y
    if n.op == "softmax":
        return _softmax(b, a[0])
    if n.op == "sdpa":
        q, k, v = a
        rank = len(b.shape(k))
        perm = list(range(rank - 2)) + [rank - 1, rank - 2]
        s = b.mul(b.matmul(q, b.transpose(k, perm=perm)), b.const(sdpa_scale(n, b.shape(q)[-1]), n.dtype))
        if n.attr("causal"):
            s = b.causal_mask(s)
        return b.matmul(_softmax(b, s), v)
    return None


def sdpa_scale(n: Node, head_dim: Dim) -> float:
    """The softmax scale of an sdpa node: its attribute, else 1/sqrt(q's head dim, which must be bound)."""
    if n.attr("scale") is not None:
        return float(n.attr("scale"))
    if not isinstance(head_dim, int):
        raise IRError(f"sdpa's default scale needs a bound head dim, got {head_dim!r}")
    return 1.0 / math.sqrt(head_dim)


def _softmax(b: GraphBuilder, x: int) -> int:
    e = b.exp(b.sub(x, b.max(x)))
    return b.div(e, b.sum(e))


def decompose(graph: Graph) -> Graph:
    """The same function written with primitive ops only (no layer_norm, rms_norm, softmax, sdpa).

    sdpa's default scale 1/sqrt(head_dim) needs the head dim bound: decompose bound graphs.
    """
    return rewrite(graph, _decompose_rule)


def to_reference(graph: Graph) -> Graph:
    """The graph as exact math in float64: every dtype becomes float64 and casts vanish."""

    def rule(b: GraphBuilder, n: Node, a: list[int]) -> int | None:
        attrs = dict(n.attrs)
        if n.op == "input":
            return b.input(attrs["name"], n.shape, "float64", attrs["init"])
        if n.op == "cast":
            return a[0]
        return None

    ref = rewrite(graph, rule)
    return Graph(tuple(_as_f64(n) for n in ref.nodes), ref.outputs, ref.name)


def _as_f64(n: Node) -> Node:
    return Node(n.id, n.op, n.inputs, n.attrs, n.shape, "float64")
