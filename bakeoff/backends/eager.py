"""PyTorch eager: the graph's PyTorch lowering, run op by op. The baseline every backend is compared with."""
from __future__ import annotations

from typing import Any, Sequence

from bakeoff.backends.sweep_server import PerShapeServer
from bakeoff.backends.torch_step import torch_step
from bakeoff.workloads.ir import Graph

from bakeoff.backends.base import Backend, Compiled, CompileInfo, TensorSpec, TorchCompiled
from bakeoff.backends.options import NoOptions


class EagerBackend(Backend):
    name = "eager"
    graph_capturable = True
    timed_with_events = True
    grad = True
    grad_graph_capturable = True

    @classmethod
    def compile_times_on_device(cls, options: NoOptions) -> str | None:
        return None  # nothing is compiled: the graph runs op by op

    def serve_sweep(self, spec: Any, device: str, options: NoOptions) -> Any:
        """No compile: the PyTorch lowering is built per shape (Python, no compiler), and counted as none."""
        return PerShapeServer(self, device, options, "eager compiles nothing (its PyTorch lowering is built per "
                                                    "shape)", counts_compiles=False)

    @classmethod
    def version(cls) -> str | None:
        import torch

        return torch.__version__

    def compile(self, graph: Graph, specs: Sequence[TensorSpec], device: str,
                options: NoOptions) -> Compiled:
        from bakeoff.workloads.lower_torch import lower_torch

        fn = lower_torch(graph)
        return TorchCompiled(fn, device, CompileInfo(), {"graph": graph.pretty(), "torch_code": fn.code})

    def compile_grad(self, graph: Graph, specs: Sequence[TensorSpec], device: str,
                     options: NoOptions) -> Compiled:
        """The same module, then torch.autograd.grad of its outputs with the cotangents (the baseline step)."""
        from bakeoff.workloads.lower_torch import lower_torch

        fn = lower_torch(graph)
        return TorchCompiled(torch_step(fn, graph), device, CompileInfo(notes=["backward: torch.autograd.grad"]),
                             {"graph": graph.pretty(), "torch_code": fn.code})
