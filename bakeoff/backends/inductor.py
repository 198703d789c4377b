"""PyTorch Inductor: torch.compile of the same PyTorch lowering eager runs (Triton on GPU, C++ on CPU).

Options (YAML `backends: {inductor: {...}}`): mode (default, reduce-overhead, max-autotune, ...),
dynamic (bool), fullgraph (bool, default true), options (dict passed to torch.compile's `options`).
"""
from __future__ import annotations

from typing import Any, Sequence

from bakeoff.workloads.ir import Graph

from bakeoff.backends.base import Backend, Compiled, CompileInfo, TensorSpec, TorchCompiled


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

        from bakeoff.workloads.lower_torch import lower_torch

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
        compiled = InductorCompiled(fn, device, CompileInfo(notes=notes), {"graph": graph.pretty()})
        compiled.baseline = _process_totals()
        return compiled


def _process_totals() -> tuple[dict[str, float], dict[str, int]]:
    """torch's cumulative compile-time totals and Inductor's counters in this process so far: a compile's own
    figures are the differences from these (an earlier compile in the process, e.g. the worker's warm-up
    graph, must not count)."""
    from torch._dynamo.utils import counters

    try:
        from torch._dynamo.utils import calculate_time_spent

        spent = dict(calculate_time_spent())
    except Exception:  # private API: absent or changed in other torch versions
        spent = {}
    return spent, dict(counters["inductor"])


class InductorCompiled(TorchCompiled):
    """torch.compile compiles lazily, in the first call: its stages and cache verdict are read afterwards, as
    differences from the process's totals when compile() returned (`baseline`)."""

    baseline: tuple[dict[str, float], dict[str, int]] = ({}, {})

    @property
    def info(self) -> CompileInfo:
        spent_now, counts_now = _process_totals()
        spent0, counts0 = self.baseline
        spent = {k: v - spent0.get(k, 0.0) for k, v in spent_now.items()}
        stages: dict[str, float] = {}
        if spent:
            # dynamo = tracing and guards (frame compile minus backend); inductor = lowering, codegen, C++/Triton
            # compile; code_gen and async_compile.wait are parts of inductor, kept apart where present.
            if "entire_frame_compile" in spent:
                stages["dynamo"] = spent["entire_frame_compile"] - spent.get("backend_compile", 0.0)
            for key in ("backend_compile", "inductor_compile", "code_gen", "async_compile.wait"):
                if key in spent:
                    stages[key] = spent[key]
        hits = counts_now.get("fxgraph_cache_hit", 0) - counts0.get("fxgraph_cache_hit", 0)
        misses = counts_now.get("fxgraph_cache_miss", 0) - counts0.get("fxgraph_cache_miss", 0)
        hit = None if hits + misses == 0 else (hits > 0 and misses == 0)
        return CompileInfo(stages_s=stages, cache_hit=hit, notes=self._info.notes + [
            f"fxgraph_cache hits={hits} misses={misses}"])

    @info.setter
    def info(self, value: CompileInfo) -> None:
        self._info = value
