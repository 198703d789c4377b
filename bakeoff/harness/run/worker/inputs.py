"""Seeded input tensors for a bound graph, drawn as each input node's `init` says. Never zeros."""
from __future__ import annotations

import math

import torch

from bakeoff.workloads.ir import Graph, Node
from bakeoff.workloads.lower_torch import TORCH_DTYPES


def _draw(node: Node, gen: torch.Generator, device: str) -> torch.Tensor:
    kind, *args = node.attr("init")
    shape = tuple(int(d) for d in node.shape)
    if kind == "normal":
        std = float(args[0])
        t = torch.randn(shape, generator=gen, device=device, dtype=torch.float32) * std
    elif kind == "uniform":
        lo, hi = float(args[0]), float(args[1])
        t = torch.rand(shape, generator=gen, device=device, dtype=torch.float32) * (hi - lo) + lo
    elif kind == "fan_in":
        t = torch.randn(shape, generator=gen, device=device, dtype=torch.float32) / math.sqrt(shape[-2])
    else:
        raise ValueError(f"input {node.attr('name')!r}: unknown init {kind!r}")
    return t.to(TORCH_DTYPES[node.dtype])


def make_inputs(graph: Graph, seed: int, device: str) -> list[torch.Tensor]:
    """One tensor per graph input, in graph order, from a generator seeded with `seed` on `device`."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return [_draw(n, gen, device) for n in graph.inputs]
