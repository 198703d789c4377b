"""The values that cross stages: buffers, kernels (fusion groups) and the whole plan of one graph."""
from __future__ import annotations

from dataclasses import dataclass

from bakeoff.workloads.ir import Graph

from bakeoff.backends.tritongen.views import View

KINDS = ("pointwise", "rowreduce", "matmul", "attention", "copy")


@dataclass(frozen=True)
class Buffer:
    """A block of device memory: a graph input (role 'input', `index` = its position) or one a kernel writes."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    role: str
    index: int | None = None


@dataclass(frozen=True)
class Kernel:
    """One fusion group, launched as one Triton kernel.

    nodes: ids (expanded graph) computed inside, in topological order; `anchor` the matmul/sdpa node.
    loads: values read from memory (node id, view aligned to the node's shape); stores: values written.
    domain: the iteration shape (pointwise: output; rowreduce: the full rows; matmul/attention: output).
    """

    name: str
    kind: str
    nodes: tuple[int, ...]
    loads: tuple[tuple[int, View], ...]
    stores: tuple[tuple[int, View], ...]
    domain: tuple[int, ...]
    anchor: int | None
    origin: tuple[int, ...]

    def buffers(self) -> tuple[str, ...]:
        """Buffer names this kernel takes as pointer arguments, in argument order."""
        seen: dict[str, None] = {}
        for _, v in self.loads + self.stores:
            seen.setdefault(v.buffer, None)
        return tuple(seen)


@dataclass(frozen=True)
class Plan:
    """The fused program: buffers, kernels in launch order, and the views the graph returns."""

    graph: Graph
    source: Graph
    origin: dict[int, int]
    buffers: tuple[Buffer, ...]
    kernels: tuple[Kernel, ...]
    outputs: tuple[View, ...]

    def buffer(self, name: str) -> Buffer:
        return next(b for b in self.buffers if b.name == name)

    def text(self) -> str:
        """The partition as text: one block per kernel, with source-graph and expanded node ids."""
        lines = [f"graph {self.source.name} ({self.source.digest()}): {len(self.kernels)} kernel(s)"]
        for k in self.kernels:
            ops = ", ".join(f"%{i}={self.graph.node(i).op}" for i in k.nodes)
            lines.append(f"{k.name} [{k.kind}] domain={list(k.domain)} source nodes={list(k.origin)}")
            lines.append(f"  computes: {ops}")
            for nid, v in k.loads:
                lines.append(f"  load  %{nid} <- {v.buffer}{list(v.shape)} strides={list(v.strides)} +{v.offset}")
            for nid, v in k.stores:
                lines.append(f"  store %{nid} -> {v.buffer}{list(v.shape)} strides={list(v.strides)} +{v.offset}")
        computed = {i for k in self.kernels for i in k.nodes}
        folded = [f"%{n.id}={n.op}" for n in self.graph.nodes
                  if n.op in ("reshape", "transpose", "broadcast") and n.id not in computed]
        if folded:
            lines.append(f"layout ops folded into strided views (no kernel): {', '.join(folded)}")
        outs = ", ".join(f"{v.buffer}{list(v.shape)}" for v in self.outputs)
        lines.append(f"returns {outs}")
        return "\n".join(lines)
