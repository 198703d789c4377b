"""Build graphs op by op. `GraphBuilder` checks arity, attributes and shapes as nodes are added."""
from __future__ import annotations

from typing import Any

from bakeoff.workloads import ops
from bakeoff.workloads.op_attrs import check_attrs
from bakeoff.workloads.ir import COMPUTE_DTYPE, DTYPES, Graph, IRError, Node, Shape, _freeze, norm_dim


class GraphBuilder:
    """Appends nodes in topological order; `finish(outputs)` returns the immutable Graph."""

    def __init__(self, name: str = "graph") -> None:
        self.name = name
        self._nodes: list[Node] = []
        self._input_names: set[str] = set()

    def _node(self, nid: int) -> Node:
        return self._nodes[nid]

    def emit(self, op: str, inputs: list[int] | tuple[int, ...] = (), **attrs: Any) -> int:
        """Append `op` on `inputs` with `attrs`; returns the new node's id."""
        known = ops.ATTRS.get(op, {})
        unknown = set(attrs) - set(known)
        if unknown:
            raise IRError(f"{op} takes no attribute {sorted(unknown)[0]!r}"
                          + (f" (known: {', '.join(known)})" if known else ""))
        full = {k: attrs.get(k, v) for k, v in known.items()}
        missing = [k for k, v in full.items() if v is None and k not in ("scale",)]
        if missing:
            raise IRError(f"{op} needs attribute {missing[0]!r}")
        check_attrs(op, full)
        arity = ops.ARITY.get(op)
        if arity is not None:
            lo, hi = arity if isinstance(arity, tuple) else (arity, arity)
            if not lo <= len(inputs) <= hi:
                raise IRError(f"{op} takes {lo if lo == hi else f'{lo} to {hi}'} inputs, got {len(inputs)}")
        in_nodes = [self._node(i) for i in inputs]
        shape = ops.infer_shape(op, [n.shape for n in in_nodes], full)
        dtype = self._dtype(op, in_nodes, full)
        nid = len(self._nodes)
        attrs_t = tuple(sorted((k, _freeze(v)) for k, v in full.items() if v is not None))
        self._nodes.append(Node(nid, op, tuple(inputs), attrs_t, shape, dtype))
        return nid

    @staticmethod
    def _dtype(op: str, in_nodes: list[Node], attrs: dict) -> str:
        if op == "cast":
            if attrs["dtype"] not in DTYPES + (COMPUTE_DTYPE,):
                raise IRError(f"unknown dtype {attrs['dtype']!r}; known: {', '.join(DTYPES)}")
            return attrs["dtype"]
        if not in_nodes:
            return COMPUTE_DTYPE
        dts = {n.dtype for n in in_nodes if n.op != "const"} or {in_nodes[0].dtype}
        if len(dts) > 1:
            raise IRError(f"{op} mixes dtypes {sorted(dts)}; insert a cast")
        return dts.pop()

    def input(self, name: str, shape: Shape, dtype: str = COMPUTE_DTYPE, init: tuple = ("normal", 1.0)) -> int:
        """A graph input. `init` says how the harness draws it: ('normal', std), ('uniform', lo, hi)."""
        if not name.isidentifier():
            raise IRError(f"input name {name!r} is not an identifier")
        if name in self._input_names:
            raise IRError(f"input {name!r} declared twice")
        self._input_names.add(name)
        shape = tuple(norm_dim(d) for d in shape)
        if any(d == 0 for d in shape):
            raise IRError(f"input {name!r} has a zero dim: {list(shape)}")
        nid = len(self._nodes)
        self._nodes.append(Node(nid, "input", (), (("init", _freeze(init)), ("name", name)), shape, dtype))
        return nid

    def const(self, value: float, dtype: str = COMPUTE_DTYPE) -> int:
        """A scalar constant (shape ()), in the compute dtype unless `dtype` says otherwise."""
        nid = len(self._nodes)
        self._nodes.append(Node(nid, "const", (), (("value", float(value)),), (), dtype))
        return nid

    def shape(self, nid: int) -> Shape:
        return self._node(nid).shape

    def finish(self, outputs: list[int] | tuple[int, ...]) -> Graph:
        """Freeze the graph, dropping nodes the outputs do not need (inputs are always kept)."""
        live = set(outputs)
        for n in reversed(self._nodes):
            if n.id in live:
                live.update(n.inputs)
        nodes = tuple(n for n in self._nodes if n.id in live or n.op == "input")
        return Graph(nodes, tuple(outputs), self.name)

    # Short-hands used by the suite and the expression parser.
    def __getattr__(self, op: str):
        if op in ops.ALL_OPS and op not in ("input", "const"):
            return lambda *inputs, **attrs: self.emit(op, list(inputs), **attrs)
        raise AttributeError(op)
