"""The workload IR: a small immutable graph of typed nodes.

A node has an op, input node ids, attributes, a shape and a dtype. Shapes hold *dims*: an int, or a
symbolic product of names such as ``"H*Dh"`` that a shape preset binds later (`bind`). The dtype of a
node is a concrete dtype name or ``"T"``, the case's compute dtype, filled in by `bind`.

Graphs are built with `GraphBuilder` (see `workloads.builder`) and never mutated afterwards; passes
return new graphs.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

Dim = int | str
Shape = tuple[Dim, ...]

DTYPES = ("float32", "float16", "bfloat16", "float64")
COMPUTE_DTYPE = "T"
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}

_FACTOR = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*|\d+)$")


class IRError(ValueError):
    """A graph that is not well formed (bad shapes, unknown op, unbound dim)."""


def norm_dim(d: Dim) -> Dim:
    """Canonical form of a dim: an int, or a product of names (and one integer coefficient) sorted."""
    if isinstance(d, bool):
        raise IRError(f"bad dim {d!r}")
    if isinstance(d, int):
        if d < 0:
            raise IRError(f"negative dim {d}")
        return d
    if not isinstance(d, str) or not d.strip():
        raise IRError(f"bad dim {d!r}")
    coeff, names = 1, []
    for part in d.replace(" ", "").split("*"):
        if not _FACTOR.match(part):
            raise IRError(f"bad dim {d!r}: dims are names or products like 'H*Dh'")
        if part.isdigit():
            coeff *= int(part)
        else:
            names.append(part)
    if not names:
        return coeff
    names.sort()
    return "*".join(([str(coeff)] if coeff != 1 else []) + names)


def dim_product(dims: Iterable[Dim]) -> Dim:
    """Symbolic product of dims, in canonical form."""
    coeff, names = 1, []
    for d in dims:
        d = norm_dim(d)
        if isinstance(d, int):
            coeff *= d
            continue
        for part in d.split("*"):
            if part.isdigit():
                coeff *= int(part)
            else:
                names.append(part)
    if coeff == 0:
        return 0
    return norm_dim("*".join([str(coeff)] + names)) if names else coeff


def bind_dim(d: Dim, dims: Mapping[str, int]) -> int:
    """The integer value of `d` under the binding `dims`; raises IRError naming a missing dim."""
    d = norm_dim(d)
    if isinstance(d, int):
        return d
    value = 1
    for part in d.split("*"):
        if part.isdigit():
            value *= int(part)
        elif part in dims:
            value *= int(dims[part])
        else:
            raise IRError(f"dim {part!r} is not bound (bound: {sorted(dims)})")
    return value


def dim_names(shape: Shape) -> set[str]:
    """The symbolic names a shape uses."""
    out: set[str] = set()
    for d in shape:
        if isinstance(d, str):
            out.update(p for p in d.split("*") if not p.isdigit())
    return out


def _freeze(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


@dataclass(frozen=True)
class Node:
    """One operation. `inputs` are ids of earlier nodes; `attrs` is a sorted tuple of (key, value)."""

    id: int
    op: str
    inputs: tuple[int, ...]
    attrs: tuple[tuple[str, Any], ...]
    shape: Shape
    dtype: str

    def attr(self, key: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    @property
    def numel(self) -> int:
        """Element count; only for bound (integer) shapes."""
        return math.prod(int(d) for d in self.shape)


@dataclass(frozen=True)
class Graph:
    """Nodes in topological order; `outputs` are node ids. Input nodes have op 'input' and attr 'name'."""

    nodes: tuple[Node, ...]
    outputs: tuple[int, ...]
    name: str = "graph"
    _index: dict = field(default_factory=dict, compare=False, repr=False, hash=False)

    def __post_init__(self) -> None:
        self._index.update({n.id: n for n in self.nodes})

    def node(self, node_id: int) -> Node:
        return self._index[node_id]

    @property
    def inputs(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.op == "input")

    @property
    def output_nodes(self) -> tuple[Node, ...]:
        return tuple(self.node(i) for i in self.outputs)

    def users(self) -> dict[int, list[int]]:
        """Map node id -> ids of the nodes that read it."""
        out: dict[int, list[int]] = {n.id: [] for n in self.nodes}
        for n in self.nodes:
            for i in n.inputs:
                out[i].append(n.id)
        return out

    def is_bound(self) -> bool:
        return all(isinstance(d, int) for n in self.nodes for d in n.shape) and all(
            n.dtype != COMPUTE_DTYPE for n in self.nodes
        )

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "outputs": list(self.outputs),
            "nodes": [
                {"id": n.id, "op": n.op, "inputs": list(n.inputs), "attrs": [list(a) for a in n.attrs],
                 "shape": list(n.shape), "dtype": n.dtype}
                for n in self.nodes
            ],
        }

    @classmethod
    def from_json(cls, data: Mapping) -> "Graph":
        nodes = tuple(
            Node(id=n["id"], op=n["op"], inputs=tuple(n["inputs"]),
                 attrs=tuple((k, _freeze(v)) for k, v in n["attrs"]), shape=tuple(n["shape"]), dtype=n["dtype"])
            for n in data["nodes"]
        )
        return cls(nodes=nodes, outputs=tuple(data["outputs"]), name=data.get("name", "graph"))

    def digest(self) -> str:
        """A stable hash of the graph's structure, shapes and dtypes (hex, 16 chars)."""
        text = json.dumps(self.to_json(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def pretty(self) -> str:
        """One line per node, for artifacts and debugging."""
        lines = []
        for n in self.nodes:
            args = ", ".join(f"%{i}" for i in n.inputs)
            attrs = ", ".join(f"{k}={v}" for k, v in n.attrs)
            shape = "x".join(str(d) for d in n.shape) or "scalar"
            lines.append(f"%{n.id} = {n.op}({args}{'; ' + attrs if attrs else ''}) : {n.dtype}[{shape}]")
        lines.append("return " + ", ".join(f"%{i}" for i in self.outputs))
        return "\n".join(lines)


def bind(graph: Graph, dims: Mapping[str, Any], dtype: str,
         bind_one: Callable[[Any, Mapping[str, Any]], Any] | None = None) -> Graph:
    """Replace symbolic dims with integers and the compute dtype 'T' with `dtype`. `bind_one(dim, dims)` binds
    one dim of a shape (default `bind_dim`; tritongen's symbolic binding passes its own)."""
    if dtype not in DTYPES:
        raise IRError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")
    one = bind_one or bind_dim
    nodes = []
    for n in graph.nodes:
        shape = tuple(one(d, dims) for d in n.shape)
        attrs = n.attrs
        if n.op in ("reshape", "broadcast"):
            attrs = tuple((k, tuple(one(d, dims) for d in v) if k == "shape" else v) for k, v in attrs)
        nodes.append(Node(n.id, n.op, n.inputs, attrs, shape, dtype if n.dtype == COMPUTE_DTYPE else n.dtype))
    return Graph(tuple(nodes), graph.outputs, graph.name)
