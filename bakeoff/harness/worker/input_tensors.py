"""Input tensors for a bound graph, made as each input node's `init` says (workloads/inits.py).

Random kinds are drawn from one generator seeded with the case's seed on the device, in graph order, in
float32, then rounded to the input's dtype (the float64 reference sees the rounded values). Explicit values
and files are the same for every seed and draw nothing from the generator.

A training step (`grad`, workloads/grad.py) also takes one cotangent per output: standard normal, drawn from
the same generator after the inputs (so the inputs are those of the forward case), in float32, then rounded
to the output's dtype. The same for every backend of a case and every run of a seed.
"""
from __future__ import annotations

import math
from typing import Mapping

import torch

from bakeoff.workloads.inits import outlier_count, parse_init
from bakeoff.workloads.ir import Graph, Node
from bakeoff.workloads.lower_torch import TORCH_DTYPES

from bakeoff.workloads.tensor_files import load_tensor


def _normal(shape, gen, device, mean: float, std: float) -> torch.Tensor:
    return torch.randn(shape, generator=gen, device=device, dtype=torch.float32) * std + mean


def _mix(shape: tuple[int, ...], gen, device, p: dict) -> torch.Tensor:
    """Normal (mean, std) with outliers from normal (mean, outlier_std) at ceil(outlier_share * n) places:
    elements, columns (indices of the last axis) or rows (of the second-to-last axis), chosen at random."""
    t = _normal(shape, gen, device, p["mean"], p["std"])
    layout = p.get("outliers", "elements")
    if layout == "elements":
        flat = t.view(-1)
        count = outlier_count(p["outlier_share"], flat.numel())
        where = torch.randperm(flat.numel(), generator=gen, device=device)[:count]
        flat[where] = _normal((where.numel(),), gen, device, p["mean"], p["outlier_std"])
        return t
    axis = -1 if layout == "columns" else -2
    size = shape[axis]
    chosen = torch.randperm(size, generator=gen, device=device)[:outlier_count(p["outlier_share"], size)]
    mask = torch.zeros(size, dtype=torch.bool, device=device)
    mask[chosen] = True
    mask = mask.view(-1, 1) if axis == -2 else mask
    outliers = _normal(shape, gen, device, p["mean"], p["outlier_std"])
    return torch.where(mask, outliers, t)


def _lognormal(shape, gen, device, p: dict) -> torch.Tensor:
    """Magnitudes 10**N(log10_mean, log10_std), drawn in float64 (so magnitudes below float32's range are
    still drawn as numbers, then round as the dtype rounds them), signs as `sign` says."""
    exponent = torch.randn(shape, generator=gen, device=device, dtype=torch.float64) * p["log10_std"] + p["log10_mean"]
    t = torch.pow(10.0, exponent)
    sign = p.get("sign", "random")
    if sign == "random":
        t = torch.where(torch.rand(shape, generator=gen, device=device) < 0.5, -t, t)
    elif sign == "negative":
        t = -t
    return t


def _values(shape: tuple[int, ...], device, p: dict) -> torch.Tensor:
    """The whole tensor when the list has numel values; else one row along the last axis (padded with
    `pad`, else the list repeated), the same in every row."""
    vals = torch.tensor([float(v) for v in p["values"]], dtype=torch.float64)
    numel, row = math.prod(shape), (shape[-1] if shape else 1)
    if vals.numel() == numel:
        return vals.reshape(shape).to(device)
    if vals.numel() > row:
        raise ValueError(f"{vals.numel()} values fit neither a row ({row}) nor the whole tensor ({numel})")
    if p.get("pad") is not None:
        line = torch.full((row,), float(p["pad"]), dtype=torch.float64)
        line[:vals.numel()] = vals
    else:
        line = vals.repeat(math.ceil(row / vals.numel()))[:row]
    return line.expand(shape).contiguous().to(device)


def _draw(node: Node, gen: torch.Generator, device: str, files: Mapping[str, str]) -> torch.Tensor:
    name = node.attr("name")
    kind, p = parse_init(node.attr("init"))
    shape = tuple(int(d) for d in node.shape)
    dtype = TORCH_DTYPES[node.dtype]
    if kind == "normal":
        t = _normal(shape, gen, device, float(p.get("mean", 0.0)), float(p["std"]))
    elif kind == "uniform":
        lo, hi = float(p["low"]), float(p["high"])
        t = torch.rand(shape, generator=gen, device=device, dtype=torch.float32) * (hi - lo) + lo
    elif kind == "fan_in":
        t = torch.randn(shape, generator=gen, device=device, dtype=torch.float32) / math.sqrt(shape[-2])
    elif kind == "mix":
        t = _mix(shape, gen, device, p)
    elif kind == "lognormal":
        t = _lognormal(shape, gen, device, p)
    elif kind == "values":
        t = _values(shape, device, p)
    else:  # file
        if p["sha256"] not in files:
            raise ValueError(f"input {name!r}: the case names no path for the file with sha256 {p['sha256']}")
        t = load_tensor(files[p["sha256"]], p.get("key"), p["sha256"])
        if tuple(t.shape) != shape:
            raise ValueError(f"input {name!r}: {files[p['sha256']]} holds shape {list(t.shape)}, the graph "
                             f"needs {list(shape)}")
        if t.dtype != dtype and not p.get("cast"):
            raise ValueError(f"input {name!r}: {files[p['sha256']]} holds {t.dtype}, the case runs {dtype} "
                             "(`cast: true` rounds it)")
        t = t.to(device)
    return t.to(dtype)


def make_inputs(graph: Graph, seed: int, device: str, files: Mapping[str, str] | None = None,
                grad: bool = False) -> list[torch.Tensor]:
    """One tensor per graph input, in graph order, on `device`; random kinds from a generator seeded with
    `seed`. `files` maps the SHA-256 of each input file (as its init names it) to its path. With `grad`, then
    one cotangent per output (see the module docstring)."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    inputs = [_draw(n, gen, device, files or {}) for n in graph.inputs]
    if grad:
        inputs += [_normal(tuple(int(d) for d in n.shape), gen, device, 0.0, 1.0).to(TORCH_DTYPES[n.dtype])
                   for n in graph.output_nodes]
    return inputs
