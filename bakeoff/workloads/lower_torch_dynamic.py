"""A PyTorch lowering of a graph with one dim left symbolic: the GraphModule reads that dim from its inputs'
sizes at run time, so one module (one torch.compile frame) serves every value of a shape sweep.

Every other dim is bound to an integer, as in `lower_torch`. The ops whose lowering needs a size (reshape,
broadcast, the causal mask, layer_norm/rms_norm's normalized shape) get it as an fx expression of the input's
`size()`; every other op lowers as in `lower_torch`. Refused (`LowerError`): an attention whose head dim is
swept (its scale must be a number when the graph is built) and a swept dim that no input has as an axis.
"""
from __future__ import annotations

import operator
from typing import Any, Mapping

import torch
import torch.fx
import torch.nn.functional as F

from bakeoff.workloads.decompose import sdpa_scale
from bakeoff.workloads.ir import Graph, Node, bind, bind_dim, norm_dim
from bakeoff.workloads.lower_torch import _eval


class LowerError(ValueError):
    """The graph cannot be lowered with this dim symbolic (the reason)."""


def _size_of(graph: Graph, dim: str, fx_inputs: list[Any], other: Mapping[str, int]) -> Any:
    """An fx value for `dim`: the first input axis that is `dim` or a product holding it (divided by the
    other factors)."""
    for n, x in zip(graph.inputs, fx_inputs):
        for axis, d in enumerate(n.shape):
            if not isinstance(d, str):
                continue
            parts = norm_dim(d).split("*") if isinstance(norm_dim(d), str) else []
            if dim in parts:
                rest = [p for p in parts if p != dim]
                size = x.size(axis)
                factor = bind_dim("*".join(rest), other) if rest else 1
                return size if factor == 1 else size // factor
    raise LowerError(f"no input has an axis of size {dim}: its value cannot be read at run time")


def _dim(d: Any, dim: str, value: Any, other: Mapping[str, int]) -> Any:
    """The symbolic dim `d` as an int, or an fx expression where it holds the swept dim."""
    d = norm_dim(d)
    if isinstance(d, int):
        return d
    out: Any = 1
    for part in d.split("*"):
        factor = value if part == dim else (int(part) if part.isdigit() else int(other[part]))
        out = factor if isinstance(out, int) and out == 1 else out * factor
    return out


def _holds(d: Any, dim: str) -> bool:
    return isinstance(d, str) and dim in norm_dim(d).split("*")


def lower_torch_dynamic(graph: Graph, dim: str, other: Mapping[str, int], dtype: str) -> torch.fx.GraphModule:
    """`graph` (unbound) as a GraphModule with `dim` read from its inputs and every dim in `other` bound,
    computing in `dtype`. Raises LowerError with the reason when it cannot."""
    probe = {**other, dim: 2}   # a binding only to read dtypes and the non-swept shapes from

    bound = bind(graph, probe, dtype)
    fx_graph = torch.fx.Graph()
    tracer = torch.fx.proxy.GraphAppendingTracer(fx_graph)
    env: dict[int, Any] = {}
    inputs = [torch.fx.Proxy(fx_graph.placeholder(n.attr("name")), tracer) for n in graph.inputs]
    for n, p in zip(graph.inputs, inputs):
        env[n.id] = p
    value = _size_of(graph, dim, inputs, other)
    for n, b in zip(graph.nodes, bound.nodes):
        if n.op == "input":
            continue
        if n.op == "const":
            env[n.id] = n.attr("value")
            continue
        a = [env[i] for i in n.inputs]
        env[n.id] = _eval_dynamic(n, b, a, graph, bound, dim, value, other)
    fx_graph.output(tuple(env[i].node if isinstance(env[i], torch.fx.Proxy) else env[i] for i in graph.outputs))
    return torch.fx.GraphModule(torch.nn.Module(), fx_graph, class_name=f"bakeoff_{graph.name}_dyn_{dim}")


def _eval_dynamic(n: Node, b: Node, a: list, graph: Graph, bound: Graph, dim: str, value: Any,
                  other: Mapping[str, int]) -> Any:
    """Node `n` (unbound; `b` the same node in the probe binding) on fx values `a`."""
    size = lambda d: _dim(d, dim, value, other)  # noqa: E731
    if n.op == "reshape":
        return a[0].reshape(tuple(size(d) for d in n.attr("shape")))
    if n.op == "broadcast":
        return a[0].expand(tuple(size(d) for d in n.attr("shape")))
    if n.op == "causal_mask":
        rows, cols = size(n.shape[-2]), size(n.shape[-1])
        keep = a[0].new_ones((rows, cols), dtype=torch.bool).tril()
        return a[0].masked_fill(operator.invert(keep), float("-inf"))
    if n.op == "layer_norm":
        w, bias = (a + [None, None])[1:3]
        return F.layer_norm(a[0], (size(n.shape[-1]),), w, bias, n.attr("eps"))
    if n.op == "rms_norm":
        return F.rms_norm(a[0], (size(n.shape[-1]),), a[1] if len(a) > 1 else None, n.attr("eps"))
    if n.op == "sdpa":
        q = graph.node(n.inputs[0])
        if _holds(q.shape[-1], dim) and n.attr("scale") is None:
            raise LowerError(f"attention's head dim is the swept dim {dim}: its scale 1/sqrt({dim}) must be a "
                             "number when the graph is built")
        scale = sdpa_scale(b, bound.node(n.inputs[0]).shape[-1])
        return F.scaled_dot_product_attention(a[0], a[1], a[2], is_causal=bool(n.attr("causal")), scale=scale)
    return _eval(b, a, bound)
