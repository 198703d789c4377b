"""tritongen serving a shape sweep: kernels that take the swept dim as a runtime integer argument.

At each value the graph is bound with the swept dim a `SymDim` (symdim.py), fused and generated as usual, so
every size that holds the dim is written into the source as an expression of the jit functions' runtime
argument `dim_<name>` (masks, strides, loop bounds), and the grid and buffer sizes are computed on the host at
that value. A value whose generated sources (texts, sizes, variants) equal a set already loaded reuses its
modules, jit functions and configs: one generated source serves every such value. A value that generates other
text (a block size taken from the swept length, a mean's divisor, int64 offsets past 2**31 elements) gets a
set of its own, so a size-dependent decision is never served at a size it does not fit.

Compiles, from Triton's own records: on a GPU, the compiled kernels held in the JITFunction caches
(`device_caches`) of every jit function of the loaded modules, since this server first loaded them: Triton still
specializes on an integer argument's value (1, divisible by 16) and on each config the search tried, and those
compiles are what it counts. Under the interpreter Triton compiles nothing: the count is then the generated
source sets (codegen + import), and each point's `triton_compiles_so_far` is None (the GPU-only figure).
"""
from __future__ import annotations

import hashlib
import re
import time
from dataclasses import replace
from typing import Any, Sequence

from bakeoff.backends.base import CompileInfo, TensorSpec
from bakeoff.backends.sweep import SweepServer
from bakeoff.workloads.ir import Graph

from bakeoff.backends.tritongen import artifacts
from bakeoff.backends.tritongen.codegen import generate_all
from bakeoff.backends.tritongen.configs import scratch
from bakeoff.backends.tritongen.fusion import fuse
from bakeoff.backends.tritongen.launcher import TritonGenCompiled, build_steps
from bakeoff.backends.tritongen.pipeline import Stages, tuned_kernels
from bakeoff.backends.tritongen.shared import shared_kernels
from bakeoff.backends.tritongen.source import KernelSource, wide
from bakeoff.backends.tritongen.symdim import arg_name, bind_symbolic


def with_runtime_dim(src: KernelSource, arg: str, value: int) -> KernelSource:
    """`src` with `arg` added to each of its jit functions' parameters (before the first constexpr) where the
    text reads it, and `runtime` = {arg: value}; unchanged where the kernel does not read the dim."""
    if not re.search(rf"\b{re.escape(arg)}\b", src.text):
        return src
    head = re.compile(rf"^(def {re.escape(src.fn)}\w*\([^)]*?)(\w+: tl\.constexpr)", re.M)
    text, n = head.subn(rf"\1{arg}, \2", src.text)
    if not n:
        raise RuntimeError(f"tritongen: {src.fn} reads {arg} but no jit function signature took it")
    return replace(src, text=text, runtime={arg: int(value)})


def _key(sources: Sequence[KernelSource]) -> str:
    h = hashlib.sha256()
    for s in sources:
        h.update(f"{s.fn}|{s.variant}|{sorted((k, str(v)) for k, v in s.sizes.items())}|".encode() + s.text.encode())
    return h.hexdigest()[:20]


def triton_cache_entries(module: Any) -> int | None:
    """Compiled kernels in the JITFunction caches of `module`'s jit functions; None under the interpreter."""
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:
        return None
    total, any_jit = 0, False
    for obj in vars(module).values():
        if isinstance(obj, JITFunction):
            any_jit = True
            for entry in getattr(obj, "device_caches", {}).values():
                cache = entry[0] if isinstance(entry, tuple) and entry and isinstance(entry[0], dict) else None
                total += len(cache) if cache is not None else 0
    return total if any_jit else None


class TritonGenSweepServer(SweepServer):
    """Generated sources per distinct text, kernels launched with the swept dim as a runtime argument."""

    def __init__(self, spec: Any, device: str, target: Any, search: bool, device_name: str) -> None:
        arg = arg_name(spec.dim)
        interpret = target.interpret
        super().__init__(
            how=(f"one generated source for every value of {spec.dim} that generates the same text: the kernels "
                 f"take {arg} as a runtime integer argument (a value whose text differs gets its own source)"),
            counter=("generated kernel source sets (codegen + import): Triton's interpreter compiles nothing, "
                     "Triton's compile count is GPU-only" if interpret else
                     "Triton's compiled kernels in the jit functions' caches (JITFunction.device_caches), config "
                     f"search candidates and specializations of {arg} included"))
        self.spec, self.device, self.target, self.search, self.device_name = spec, device, target, search, device_name
        self.arg, self.interpret = arg, interpret
        self._sets: dict[str, tuple] = {}
        self._modules: dict[str, Any] = {}
        self._baseline: dict[str, int] = {}
        self.notes = [f"{spec.dim} a runtime argument ({arg}) of the generated kernels",
                      "Triton interpreter" if interpret else device_name]

    def at(self, value: int, graph: Graph, specs: Sequence[TensorSpec]) -> TritonGenCompiled:
        stages: dict[str, float] = {}
        t0 = time.perf_counter()
        plan = fuse(bind_symbolic(self.spec.graph, self.spec.dims_at(value), self.spec.dtype, self.spec.dim))
        t1 = time.perf_counter()
        sources = [with_runtime_dim(s, self.arg, value) for s in generate_all(plan, self.target)]
        stages.update(fuse=t1 - t0, codegen=time.perf_counter() - t1)
        if any(s.runtime for s in sources) and any(wide(plan, k) for k in plan.kernels):
            # int64 offsets: the runtime int32 argument's products could overflow; this value's sizes as literals
            plan = fuse(graph)
            sources = list(generate_all(plan, self.target))
        key = _key(sources)
        runnable = shared_kernels(sources)
        fresh = key not in self._sets
        if fresh:
            t = Stages()
            modules, configs, hit, log, compiled = tuned_kernels(t, plan, runnable, self.device, self.target,
                                                                 self.search, self.device_name, self._count_from)
            stages.update(t.stages_s)
            self._sets[key] = (modules, configs, artifacts.collect(plan, sources, configs, compiled, log), hit)
        modules, configs, arts, hit = self._sets[key]
        steps = build_steps(runnable, modules, configs)
        notes = self.notes + ([] if fresh else [f"source set {key} reused (generated at an earlier value)"])
        info = CompileInfo(stages_s=stages, cache_hit=hit if fresh else None, notes=notes)
        return TritonGenCompiled(plan, steps, self.device, info, arts, scratch(sources, configs))

    def _count_from(self, modules: list) -> None:
        """Note the compiled kernels already cached in newly loaded modules, before the config search compiles."""
        for m in modules:
            if m.__name__ not in self._modules:
                self._modules[m.__name__] = m
                self._baseline[m.__name__] = triton_cache_entries(m) or 0

    def triton_compiles(self) -> int | None:
        """Kernels Triton compiled for this sweep's modules (None under the interpreter)."""
        counts = [(name, triton_cache_entries(m)) for name, m in self._modules.items()]
        if any(c is None for _, c in counts) or self.interpret:
            return None
        return sum(c - self._baseline[name] for name, c in counts)

    def compiles(self) -> int:
        triton = self.triton_compiles()
        return len(self._sets) if triton is None else triton

    def point_facts(self) -> dict[str, Any]:
        return {"kernel_sources_so_far": len(self._sets), "triton_compiles_so_far": self.triton_compiles()}
