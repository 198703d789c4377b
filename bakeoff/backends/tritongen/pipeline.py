"""The tritongen pipeline: graph -> fusion plan -> Triton source -> compiled, tuned kernels -> launcher.

Each stage's output prints: `plan.text()`, `source.text`, the configs (dicts), Triton's compiled kernels' `asm`.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from bakeoff.backends.base import CompileInfo, device_waited_s
from bakeoff.workloads.ir import Graph

from bakeoff.backends.tritongen import artifacts, tune
from bakeoff.backends.tritongen.codegen import generate_all
from bakeoff.backends.tritongen.configs import scratch
from bakeoff.backends.tritongen.source import CodegenTarget
from bakeoff.backends.tritongen.fusion import fuse
from bakeoff.backends.tritongen.shared import shared_kernels
from bakeoff.backends.tritongen.launcher import TritonGenCompiled, build_steps


class Stages:
    """Runs and times named stages; `stages_s` holds seconds per name (repeated names add up), less the time
    spent waiting to enter `device_work` (the harness's gate, while other cases time)."""

    def __init__(self) -> None:
        self.stages_s: dict[str, float] = {}

    def __call__(self, name: str, fn: Callable, *args: Any) -> Any:
        w0, t0 = device_waited_s(), time.perf_counter()
        out = fn(*args)
        own = (time.perf_counter() - t0) - (device_waited_s() - w0)
        self.stages_s[name] = self.stages_s.get(name, 0.0) + own
        return out


def compile_graph(graph: Graph, device: str, target: CodegenTarget, search: bool, device_name: str) -> TritonGenCompiled:
    """Compile a bound graph for `device`; `search` runs the GPU config search (else the fixed configs)."""
    t = Stages()
    plan = t("fuse", fuse, graph)                                                     # 1. kernels, views
    sources = t("codegen", generate_all, plan, target)                                # 2. source per kernel
    runnable = shared_kernels(sources)  # kernels equal up to names call the first one's functions (shared.py)
    modules, configs, hit, log, compiled = tuned_kernels(t, plan, runnable, device, target, search, device_name)
    steps = build_steps(runnable, modules, configs)                                   # 4. the launcher
    info = CompileInfo(stages_s=t.stages_s, cache_hit=hit, notes=_notes(plan, target, device_name, log, configs))
    return TritonGenCompiled(plan, steps, device, info, artifacts.collect(plan, sources, configs, compiled, log),
                             scratch(sources, configs))


def tuned_kernels(t: "Stages", plan: Any, sources: list, device: str, target: CodegenTarget, search: bool,
                  device_name: str, loaded: Callable[[list], None] | None = None) -> tuple:
    """Stage 3, timed by `t`: write and import the sources (3a), search or read the configs (3b), compile the
    winners on a GPU (3c). `loaded(modules)` is called between 3a and 3b. Returns (modules, configs, cache hit,
    tuning log, compiled winners or None). `sources` as they run (shared.shared_kernels): a kernel equal to an
    earlier one up to names is imported, searched and compiled once."""
    modules = t("compile", tune.load_kernels, sources, tune.cache_dir())              # 3a. write + import
    if loaded is not None:
        loaded(modules)
    configs, hit, log = t("autotune", tune.choose_configs, plan, sources, modules, target.dtype, device,
                          device_name, search, target.search == "wide")               # 3b. search or cache
    compiled = t("compile", tune.compile_winners, plan, sources, modules, configs, device) \
        if not target.interpret else None                                             # 3c. winners (GPU)
    return modules, configs, hit, log, compiled


_PRECISION = {"tf32x3": "3xTF32 split, float32 accuracy", "ieee": "SIMT float32",
              "tf32": "plain TF32: 10-bit mantissa products, below float32 accuracy"}


def _dot_notes(plan, target: CodegenTarget, configs) -> str | None:
    """How float32 products ran, per kernel kind, from the chosen configs: a matmul whose config picked the
    pre-split twin ran 3xTF32 on split operand planes, the others at the kind's input_precision."""
    kinds = sorted({k.kind for k in plan.kernels} & {"matmul", "attention"})
    if target.dtype != "float32" or not kinds:
        return None
    if target.interpret:
        return "float32 dots: full float32 (interpreter)"
    parts = []
    for kind in kinds:
        cfgs = [c for k, c in zip(plan.kernels, configs or [{}] * len(plan.kernels)) if k.kind == kind]
        split = sum(1 for c in cfgs if c.get("SPLIT"))
        if split:
            parts.append(f"{kind} 3xTF32 on operands pre-split into TF32 hi/lo planes (float32 accuracy) in {split} "
                         f"of {len(cfgs)} kernels")
        if split < len(cfgs):
            p = target.fp32_precision(kind)
            parts.append(f"{kind} input_precision={p} ({_PRECISION[p]})")
    return "float32 dots: " + "; ".join(parts)


def _notes(plan, target: CodegenTarget, device_name: str, log: list[str], configs=None) -> list[str]:
    """Short facts for the record; per-candidate tuning times stay in the artifacts."""
    notes = [f"{len(plan.kernels)} kernels", "Triton interpreter" if target.interpret else device_name]
    if target.interpret and target.dtype == "bfloat16":
        notes.append("bf16 dot operands upcast to fp32 (Triton's interpreter multiplies bf16 as raw bits)")
    dots = _dot_notes(plan, target, configs)
    if dots:
        notes.append(dots)
    gluon = sum(1 for c in configs or [] if c.get("GLUON"))
    if gluon:
        notes.append(f"attention: the warp-specialised Gluon kernel (gluon_attention.py) in {gluon} kernel(s)")
    if not target.interpret:
        notes.append(f"config search: {target.search}")
    timed = [line for line in log if line.startswith("tune ")]
    if timed:
        notes.append(f"autotune timed {len(timed)} configs")
    return notes + [line for line in log if not line.startswith("tune ")]
