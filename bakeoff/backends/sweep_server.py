"""Serving one graph at a sequence of shapes (a shape sweep), the way each backend would really do it.

A sweep case (harness/config/sweep.py) asks the backend for a `SweepServer` once
(`Backend.serve_sweep(spec, device, options)`), then, for each value of the swept dim in order, for the
executable at that value (`server.at(value, graph, specs)`, with the graph bound at the value). The server decides
whether that means a new compile: Inductor with `dynamic: true` compiles once with the dim symbolic, XLA
retraces per shape or per padded bucket, ONNX Runtime keeps one session over dynamic axes, and a backend
with no dynamic path compiles per shape (`PerShapeServer`, with the reason). `server.compiles()` counts the
compiles so far from the backend's own records (Dynamo's counters, the jitted function's cache size, the
sessions or engines built), never from timing; `server.counter` says which.

`Backend.sweep_refusal(spec, options)` runs at planning time: a reason makes the case `skipped`.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence

from bakeoff.backends.compiled import Compiled, TensorSpec
from bakeoff.backends.options import BackendOptions
from bakeoff.workloads.ir import Graph, bind, dim_names


class CompilesGraphs(Protocol):
    """What PerShapeServer needs of its backend (backends/base.py Backend, which builds it by default)."""

    def compile(self, graph: Graph, specs: Sequence[TensorSpec], device: str, options: BackendOptions) -> Compiled: ...


@dataclass(frozen=True)
class SweepSpec:
    """The unbound graph (inits applied), the other dims, the swept dim and its values, the case's dtype."""

    graph: Graph
    base: Mapping[str, int]
    dim: str
    values: tuple[int, ...]
    dtype: str

    def dims_at(self, value: int) -> dict[str, int]:
        return {**self.base, self.dim: value}

    def bound_at(self, value: int) -> Graph:
        return bind(self.graph, self.dims_at(value), self.dtype)

    def swept_axes(self) -> list[tuple[int, ...]]:
        """For each graph input, in order, the axes whose size involves the swept dim (`S`, or `S*H`)."""
        return [tuple(i for i, d in enumerate(n.shape) if isinstance(d, str) and self.dim in dim_names((d,)))
                for n in self.graph.inputs]

    def distinct(self) -> int:
        return len(set(self.values))


@dataclass
class SweepServer(ABC):
    """What a backend hands the worker for a sweep. `how` says in words how it serves the shapes (the record's
    `sweep_serving`), `counter` where `compiles()` comes from (`sweep_compile_counter`), `notes` anything else
    the record must carry."""

    how: str = ""
    counter: str = ""
    notes: list[str] = field(default_factory=list)

    @abstractmethod
    def at(self, value: int, graph: Graph, specs: Sequence[TensorSpec]) -> Compiled:
        """The executable for the swept dim at `value` (`graph` is the graph bound there). It may compile now, or lazily inside its first
        run (the worker times both as the point's first result)."""

    @abstractmethod
    def compiles(self) -> int:
        """Compiles so far in this sweep, from the backend's own counters or caches."""

    def point_facts(self) -> dict[str, Any]:
        """Backend-specific counts the worker adds to each point after its first result (e.g. tritongen's
        `kernel_sources_so_far`, `triton_compiles_so_far`); none by default."""
        return {}


class PerShapeServer(SweepServer):
    """One `backend.compile()` per new shape, kept by shape, so a value seen before reuses its executable: a
    backend without dynamic shapes serves a sweep this way. `reason` says why it has no dynamic path; a
    compile is a `compile()` call that built an executable (the backend has no other counter to read)."""

    def __init__(self, backend: CompilesGraphs, device: str, options: BackendOptions, reason: str,
                 counts_compiles: bool = True) -> None:
        super().__init__(how=f"one compile per shape: {reason}",
                         counter="compile() calls, one per new shape" if counts_compiles else
                         "none: nothing is compiled")
        self.backend, self.device, self.options = backend, device, options
        self.counts_compiles = counts_compiles
        self._built: dict[str, Compiled] = {}

    def at(self, value: int, graph: Graph, specs: Sequence[TensorSpec]) -> Compiled:
        key = graph.digest()
        if key not in self._built:
            self._built[key] = self.backend.compile(graph, specs, self.device, self.options)
        return self._built[key]

    def compiles(self) -> int:
        return len(self._built) if self.counts_compiles else 0
