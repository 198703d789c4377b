"""Lower a bound graph to a PyTorch callable, using native ops where PyTorch has them.

The result is a `torch.fx.GraphModule`: straight-line generated Python, one call per node. That keeps
eager's per-call host overhead to the ops themselves, and gives torch.compile a function whose only
guards are on its tensor inputs (an interpreter loop over IR nodes would make dynamo guard on the IR).
Everything an op needs (shapes, dtypes) is read from the IR, never from the traced values.
"""
from __future__ import annotations

from typing import Callable

import torch.fx

import torch
import torch.nn.functional as F

from bakeoff.workloads.decompose import sdpa_scale
from bakeoff.workloads.ir import Graph, Node

TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
                "float64": torch.float64}


def _causal_mask(x: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    keep = x.new_ones((rows, cols), dtype=torch.bool).tril()
    return x.masked_fill(~keep, float("-inf"))


_UNARY: dict[str, Callable] = {
    "neg": torch.neg, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
    "tanh": torch.tanh, "erf": torch.erf, "sigmoid": torch.sigmoid, "relu": torch.relu, "silu": F.silu,
}
_BINARY: dict[str, Callable] = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
                                "maximum": torch.maximum, "matmul": torch.matmul}


def _eval(n: Node, a: list, graph: Graph) -> torch.Tensor:
    op = n.op
    if op in _UNARY:
        return _UNARY[op](a[0])
    if op in _BINARY:
        return _BINARY[op](a[0], a[1])
    if op == "causal_mask":
        return _causal_mask(a[0], int(n.shape[-2]), int(n.shape[-1]))
    if op == "gelu":
        return F.gelu(a[0], approximate=n.attr("approximate"))
    if op == "pow":
        return torch.pow(a[0], n.attr("exponent"))
    if op == "cast":
        return a[0].to(TORCH_DTYPES[n.attr("dtype")])
    if op == "sum":
        return a[0].sum(-1, keepdim=True)
    if op == "mean":
        return a[0].mean(-1, keepdim=True)
    if op == "max":
        return a[0].amax(-1, keepdim=True)
    if op == "var":
        return a[0].var(-1, keepdim=True, correction=n.attr("correction"))
    if op == "reshape":
        return a[0].reshape(n.attr("shape"))
    if op == "transpose":
        return a[0].permute(n.attr("perm"))
    if op == "broadcast":
        return a[0].expand(n.attr("shape"))
    if op == "layer_norm":
        w, b = (a + [None, None])[1:3]
        return F.layer_norm(a[0], (int(n.shape[-1]),), w, b, n.attr("eps"))
    if op == "rms_norm":
        w = a[1] if len(a) > 1 else None
        return F.rms_norm(a[0], (int(n.shape[-1]),), w, n.attr("eps"))
    if op == "softmax":
        return torch.softmax(a[0], -1)
    if op == "sdpa":
        q, k = graph.node(n.inputs[0]), graph.node(n.inputs[1])
        return _sdpa(a[0], a[1], a[2], bool(n.attr("causal")), sdpa_scale(n, q.shape[-1]),
                     _sdpa_chunks(q, k), int(q.shape[0]) if q.shape else 1)
    raise NotImplementedError(f"no PyTorch lowering for op {op!r}")


# float64 attention has no fused kernel: its score matrix is materialized, so split large ones by batch.
_MAX_SCORE_BYTES = 2**32  # module attribute so tests can lower it


def _sdpa_chunks(q: Node, k: Node) -> int:
    """How many pieces along the first dim a float64 attention is computed in (1 for other dtypes)."""
    if q.dtype != "float64" or len(q.shape) < 3 or int(q.shape[0]) < 2:
        return 1
    score_bytes = 8 * int(k.shape[-2]) * int(torch.Size([int(d) for d in q.shape[:-1]]).numel())
    return max(1, min(int(q.shape[0]), -(-score_bytes // _MAX_SCORE_BYTES)))


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float, chunks: int,
          batch: int) -> torch.Tensor:
    if chunks > 1:  # slices with sizes from the IR: the values may be fx proxies, which cannot be iterated
        step = -(-batch // chunks)
        parts = [slice(i, min(i + step, batch)) for i in range(0, batch, step)]
        return torch.cat([F.scaled_dot_product_attention(q[p], k[p], v[p], is_causal=causal, scale=scale)
                          for p in parts])
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)


def lower_torch(graph: Graph) -> torch.fx.GraphModule:
    """A GraphModule taking the graph's inputs (in graph order) and returning its outputs as a tuple.

    Constants become Python floats, which PyTorch folds into the op in the tensor's dtype.
    """
    if not graph.is_bound():
        raise ValueError("lower_torch needs a bound graph (workloads.ir.bind)")
    fx_graph = torch.fx.Graph()
    tracer = torch.fx.proxy.GraphAppendingTracer(fx_graph)
    env: dict[int, object] = {}
    for n in graph.inputs:
        env[n.id] = torch.fx.Proxy(fx_graph.placeholder(n.attr("name")), tracer)
    for n in graph.nodes:
        if n.op == "input":
            continue
        env[n.id] = n.attr("value") if n.op == "const" else _eval(n, [env[i] for i in n.inputs], graph)
    fx_graph.output(tuple(env[i].node if isinstance(env[i], torch.fx.Proxy) else env[i] for i in graph.outputs))
    module = torch.fx.GraphModule(torch.nn.Module(), fx_graph, class_name=f"bakeoff_{graph.name}")
    return module
