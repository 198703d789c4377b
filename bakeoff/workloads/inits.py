"""How an input is filled: the `init` attribute of a graph's input nodes, its one encoding and its reading.

An init is a frozen tuple `(kind, ((param, value), ...))`, params sorted by name, so it hashes, survives
the graph's JSON and enters `Graph.digest()`: two graphs whose inputs are filled differently are two
different graphs. Kinds:

- ``normal`` (mean, std); ``uniform`` (low, high); ``fan_in``: normal with std 1/sqrt(shape[-2]);
- ``mix``: normal (mean, std) with a share of outliers drawn from normal (mean, outlier_std), as single
  elements, whole columns (last axis) or whole rows (second-to-last axis);
- ``lognormal``: magnitudes 10**N(log10_mean, log10_std), signs random, positive or negative;
- ``values``: an explicit row (padded with `pad`, else repeated, to the last axis; the same in every row),
  or the whole tensor in row-major order;
- ``file``: a tensor in a .npy or .safetensors file, named by the SHA-256 of the file (the case maps it to
  a path), the tensor's `key` in a .safetensors file, and `cast` (round another dtype to the case's).

Random kinds vary with the seed; ``values`` and ``file`` are the same for every seed. The older positional
forms the suite still writes, ``("normal", std)``, ``("uniform", low, high)`` and ``("fan_in",)``, are read
as the same kinds.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from bakeoff.workloads.ir import Graph, Node

Init = tuple
RANDOM_KINDS = ("normal", "uniform", "fan_in", "mix", "lognormal")
FIXED_KINDS = ("values", "file")
KINDS = RANDOM_KINDS + FIXED_KINDS


def _freeze(value: Any) -> Any:
    return tuple(_freeze(v) for v in value) if isinstance(value, list | tuple) else value


def make_init(kind: str, **params: Any) -> Init:
    """The canonical init of `kind` with `params` (lists become tuples; params sorted by name)."""
    if kind not in KINDS:
        raise ValueError(f"unknown init kind {kind!r}; known: {', '.join(KINDS)}")
    return (kind, tuple(sorted((k, _freeze(v)) for k, v in params.items())))


def parse_init(init: Init) -> tuple[str, dict[str, Any]]:
    """(kind, params) of an init in either form; raises ValueError for one it cannot read."""
    if not isinstance(init, tuple | list) or not init or not isinstance(init[0], str):
        raise ValueError(f"bad init {init!r}")
    kind, rest = init[0], tuple(init[1:])
    if kind not in KINDS:
        raise ValueError(f"unknown init kind {kind!r}; known: {', '.join(KINDS)}")
    if len(rest) == 1 and isinstance(rest[0], tuple | list) and all(
            isinstance(p, tuple | list) and len(p) == 2 and isinstance(p[0], str) for p in rest[0]):
        return kind, {k: v for k, v in rest[0]}
    if kind == "normal" and len(rest) == 1:
        return kind, {"mean": 0.0, "std": float(rest[0])}
    if kind == "uniform" and len(rest) == 2:
        return kind, {"low": float(rest[0]), "high": float(rest[1])}
    if kind == "fan_in" and not rest:
        return kind, {}
    raise ValueError(f"bad {kind} init {init!r}")


def _g(x: Any) -> str:
    return format(x, ".6g") if isinstance(x, float) else str(x)


def describe(init: Init, path: str | None = None) -> str:
    """One line for people, e.g. 'normal(mean=1e+04, std=1)' or 'file x.npy sha256:1a2b3c4d5e6f'."""
    kind, p = parse_init(init)
    if kind == "values":
        vals = p["values"]
        shown = ", ".join(_g(float(v)) for v in vals[:4]) + (", ..." if len(vals) > 4 else "")
        rest = f"padded with {_g(float(p['pad']))}" if p.get("pad") is not None else "repeated"
        return f"values [{shown}] ({len(vals)} given, {rest})"
    if kind == "file":
        key = f"[{p['key']}]" if p.get("key") else ""
        return f"file {path or '?'}{key} sha256:{p['sha256'][:12]}" + (" cast" if p.get("cast") else "")
    return f"{kind}(" + ", ".join(f"{k}={_g(v)}" for k, v in sorted(p.items())) + ")"


def with_inits(graph: Graph, inits: Mapping[str, Init]) -> Graph:
    """`graph` with the init of each named input replaced; raises KeyError naming an unknown input."""
    names = {n.attr("name") for n in graph.inputs}
    unknown = sorted(set(inits) - names)
    if unknown:
        raise KeyError(unknown[0])
    nodes = []
    for n in graph.nodes:
        if n.op == "input" and n.attr("name") in inits:
            attrs = tuple((k, inits[n.attr("name")] if k == "init" else v) for k, v in n.attrs)
            n = Node(n.id, n.op, n.inputs, attrs, n.shape, n.dtype)
        nodes.append(n)
    return Graph(tuple(nodes), graph.outputs, graph.name)


def outlier_count(share: float, n: int) -> int:
    """How many of `n` elements (or columns, rows) a `mix` init makes outliers: ceil(share * n), so any
    positive share makes at least one."""
    return min(n, math.ceil(share * n - 1e-9)) if share > 0 else 0


def describe_inputs(graph: Graph, files: Mapping[str, str] | None = None) -> dict[str, str]:
    """Input name -> how it is filled, in words (`files` maps a file init's SHA-256 to its path)."""
    out = {}
    for n in graph.inputs:
        init = n.attr("init")
        sha = parse_init(init)[1].get("sha256")
        out[n.attr("name")] = describe(init, (files or {}).get(sha) if sha else None)
    return out
