"""Lower a bound graph to a PyTorch callable, using native ops where PyTorch has them."""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from .decompose import sdpa_scale
from .ir import Graph, Node

TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
                "float64": torch.float64}


def _causal_mask(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape[-2], x.shape[-1]
    keep = torch.ones(rows, cols, dtype=torch.bool, device=x.device).tril()
    return x.masked_fill(~keep, float("-inf"))


_UNARY: dict[str, Callable] = {
    "neg": torch.neg, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
    "tanh": torch.tanh, "erf": torch.erf, "sigmoid": torch.sigmoid, "relu": torch.relu, "silu": F.silu,
    "causal_mask": _causal_mask,
}
_BINARY: dict[str, Callable] = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
                                "maximum": torch.maximum, "matmul": torch.matmul}


def _eval(n: Node, a: list, graph: Graph) -> torch.Tensor:
    op = n.op
    if op in _UNARY:
        return _UNARY[op](a[0])
    if op in _BINARY:
        return _BINARY[op](a[0], a[1])
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
        return F.layer_norm(a[0], (a[0].shape[-1],), w, b, n.attr("eps"))
    if op == "rms_norm":
        w = a[1] if len(a) > 1 else None
        return F.rms_norm(a[0], (a[0].shape[-1],), w, n.attr("eps"))
    if op == "softmax":
        return torch.softmax(a[0], -1)
    if op == "sdpa":
        return _sdpa(a[0], a[1], a[2], bool(n.attr("causal")), sdpa_scale(n, graph.node(n.inputs[0]).shape[-1]))
    raise NotImplementedError(f"no PyTorch lowering for op {op!r}")


# float64 attention has no fused kernel: its score matrix is materialized, so split large ones by batch.
_MAX_SCORE_BYTES = 2**32


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float) -> torch.Tensor:
    score_bytes = q.shape[:-1].numel() * k.shape[-2] * q.element_size()
    if q.dtype == torch.float64 and q.dim() > 2 and score_bytes > _MAX_SCORE_BYTES and q.shape[0] > 1:
        parts = max(1, min(q.shape[0], -(-score_bytes // _MAX_SCORE_BYTES)))
        return torch.cat([_sdpa(qc, kc, vc, causal, scale) for qc, kc, vc in
                          zip(q.chunk(parts), k.chunk(parts), v.chunk(parts))])
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)


def lower_torch(graph: Graph) -> Callable[..., tuple[torch.Tensor, ...]]:
    """A function of the graph's inputs (in graph order) returning its outputs as a tuple.

    Constants become Python floats, which PyTorch folds into the op in the tensor's dtype.
    """
    if not graph.is_bound():
        raise ValueError("lower_torch needs a bound graph (workloads.ir.bind)")
    input_ids = [n.id for n in graph.inputs]
    nodes = [n for n in graph.nodes if n.op != "input"]

    def run(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        env: dict[int, object] = dict(zip(input_ids, tensors))
        for n in nodes:
            if n.op == "const":
                env[n.id] = n.attr("value")
            else:
                env[n.id] = _eval(n, [env[i] for i in n.inputs], graph)
        return tuple(env[i] for i in graph.outputs)

    run.__name__ = f"bakeoff_{graph.name}"
    return run
