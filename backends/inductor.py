"""PyTorch Inductor: torch.compile of the same PyTorch lowering eager runs (Triton on GPU, C++ on CPU).

Options (YAML `backends: {inductor: {...}}`): mode (default, reduce-overhead, max-autotune, ...),
dynamic (bool), fullgraph (bool, default true), options (dict passed to torch.compile's `options`).
"""
from __future__ import annotations

from typing import Any, Sequence

from workloads.ir import Graph

from .base import Backend, Compiled, CompileInfo, TensorSpec, TorchCompiled


class InductorBackend(Backend):
    name = "inductor"
    cache_env = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
    graph_capturable = True
    timed_with_events = True

    @classmethod
    def version(cls) -> str | None:
        import torch

        return torch.__version__

    @classmethod
    def available(cls) -> str | None:
        import torch

        if not hasattr(torch, "compile"):
            return "torch.compile missing (torch >= 2.0 needed)"
        return None

    def compile(self, graph: Graph, specs: Sequence[TensorSpec], device: str,
                options: dict[str, Any]) -> Compiled:
        import torch

        from workloads.lower_torch import lower_torch

        known = {"mode", "dynamic", "fullgraph", "options"}
        unknown = set(options) - known
        if unknown:
            raise ValueError(f"inductor: unknown option(s) {sorted(unknown)}; known: {sorted(known)}")
        mode = options.get("mode")
        fn = torch.compile(lower_torch(graph), backend="inductor",
                           mode=None if mode in (None, "default") else mode,
                           dynamic=options.get("dynamic", False), fullgraph=options.get("fullgraph", True),
                           options=options.get("options"))
        notes = [f"mode={mode or 'default'}", f"dynamic={options.get('dynamic', False)}"]
        return TorchCompiled(fn, device, CompileInfo(notes=notes), {"graph": graph.pretty()})
