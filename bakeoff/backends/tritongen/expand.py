"""Expand composites into the primitives the code generator fuses, remembering where each node came from.

layer_norm, rms_norm and softmax become last-axis reductions and pointwise ops (so the fusion pass sees
one row-reduction pattern for all three); `var` becomes mean((x - mean(x))^2) with its correction;
sdpa stays whole (it becomes one flash-attention kernel), and so does attention written out with primitives
(q @ kT, scale, optional causal mask, softmax, @ v: `patterns.find_attention`), which is rewritten to an sdpa
here, so it also becomes one flash-attention kernel; its origin is the pattern's final matmul.
"""
from __future__ import annotations

from dataclasses import dataclass

from bakeoff.workloads.builder import GraphBuilder
from bakeoff.workloads.decompose import _decompose_rule
from bakeoff.workloads.ir import Graph, Node

from bakeoff.backends.tritongen.patterns import find_attention


@dataclass(frozen=True)
class Expanded:
    """The expanded graph and, for each of its node ids, the id of the source-graph node it came from."""

    graph: Graph
    origin: dict[int, int]


def _var(b: GraphBuilder, n: Node, x: int) -> int:
    xc = b.sub(x, b.mean(x))
    m = b.mean(b.mul(xc, xc))
    count = int(b.shape(x)[-1])
    correction = int(n.attr("correction") or 0)
    if correction == 0:
        return m
    return b.mul(m, b.const(count / max(count - correction, 1), n.dtype))


def expand(graph: Graph) -> Expanded:
    """`graph` (bound) with composites other than sdpa written as primitives, attention patterns as sdpa."""
    b = GraphBuilder(graph.name)
    new_id: dict[int, int] = {}
    origin: dict[int, int] = {}
    attention = find_attention(graph)
    for n in graph.nodes:
        args = [new_id[i] for i in n.inputs]
        first = len(b._nodes)
        attrs = dict(n.attrs)
        if n.id in attention:   # the pattern's inner nodes were emitted too; finish() drops them, unread
            a = attention[n.id]
            k = new_id[a.k]
            if a.k_t:
                rank = len(b.shape(k))
                k = b.transpose(k, perm=tuple(range(rank - 2)) + (rank - 1, rank - 2))
            out = b.emit("sdpa", [new_id[a.q], k, new_id[a.v]], causal=a.causal, scale=a.scale)
        elif n.op == "input":
            out = b.input(attrs["name"], n.shape, n.dtype, attrs["init"])
        elif n.op == "const":
            out = b.const(attrs["value"], n.dtype)
        elif n.op == "var":
            out = _var(b, n, args[0])
        elif n.op in ("layer_norm", "rms_norm", "softmax"):
            out = _decompose_rule(b, n, args)
        else:
            out = b.emit(n.op, args, **attrs)
        for i in range(first, len(b._nodes)):
            origin[i] = n.id
        new_id[n.id] = out
    g = b.finish([new_id[i] for i in graph.outputs])
    return Expanded(g, {n.id: origin[n.id] for n in g.nodes})
