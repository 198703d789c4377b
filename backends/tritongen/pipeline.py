"""The tritongen pipeline: graph -> fusion plan -> Triton source -> compiled, tuned kernels -> launcher."""
from __future__ import annotations

import time
from typing import Any, Callable

from backends.base import CompileInfo

from . import artifacts, tune
from .codegen import Target, generate_all
from .fusion import fuse
from .launcher import TritonGenCompiled, build_steps


class _Stages:
    """Times named stages (seconds) into `stages_s`."""

    def __init__(self) -> None:
        self.stages_s: dict[str, float] = {}

    def __call__(self, name: str, fn: Callable, *args: Any) -> Any:
        t0 = time.perf_counter()
        out = fn(*args)
        self.stages_s[name] = self.stages_s.get(name, 0.0) + time.perf_counter() - t0
        return out


def compile_graph(graph, device: str, target: Target, search: bool, device_name: str) -> TritonGenCompiled:
    """Compile a bound graph for `device`; `search` runs the GPU config search (else fixed configs)."""
    t, dtype, folder = _Stages(), target.dtype, tune.cache_dir()
    plan = t("fuse", fuse, graph)                                       # 1. kernels and memory views
    sources = t("codegen", generate_all, plan, target)                  # 2. Triton source per kernel
    modules = t("compile", tune.load_kernels, sources, folder)              # 3a. write + import (triton.jit)
    configs, hit, notes = t("autotune", tune.choose_configs, plan, sources, modules, dtype, device,
                            device_name, search)                        # 3b. configs: search or cache
    compiled = None if target.interpret else t("compile", tune.compile_winners, plan, sources, modules,
                                                configs)               # 3c. compile the winners (GPU)
    steps = build_steps(sources, modules, configs)                          # 4. the launcher
    info = CompileInfo(stages_s=t.stages_s, cache_hit=hit,
                       notes=[f"{len(plan.kernels)} kernels", "interpreter" if target.interpret else device_name]
                       + (["bf16 dot operands upcast to fp32 (Triton interpreter)"]
                          if target.interpret and dtype == "bfloat16" else []) + notes)
    arts = artifacts.collect(plan, sources, configs, compiled, notes)
    return TritonGenCompiled(plan, steps, device, info, arts)
