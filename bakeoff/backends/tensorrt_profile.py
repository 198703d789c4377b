"""TensorRT serving a shape sweep: one engine with one optimization profile (min/opt/max) over the swept dim.

Followed: the IOptimizationProfile page of NVIDIA's TensorRT Python API (infer/Core/OptimizationProfile.html:
`builder.create_optimization_profile()`, `profile.set_shape(name, min, opt, max)`,
`config.add_optimization_profile(profile)`; "the builder selects the kernels that result in the lowest runtime
for the optimum input tensor dimensions, and are valid for all input tensor sizes in the valid range between
minimum and maximum dimensions") and the IExecutionContext page (`context.set_input_shape(name, shape)` before
each run at a new shape, `context.get_tensor_shape(name)` for the outputs, `set_tensor_address`,
`execute_async_v3`).

The model is ONNX Runtime's dynamic export (`onnx_export.dynamic_model`: the graph exported at two values, the swept
axes turned into `dim_param`s where the two exports differ only in sizes), which the parser reads as -1 axes.
Profile: min = the sweep's smallest value, max = its largest, opt = the median of its distinct values
(`statistics.median_low`, so the shape TensorRT tunes for is one the sweep serves and sits in the middle of it;
the TensorRT docs leave opt to the user, as the shape to optimise for). Every input with a swept axis gets
its shapes at those three values. Compiles are the engines this server built (one); TensorRT keeps no count of
its own that a sweep could read.
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Sequence

from bakeoff.backends.compiled import Compiled, TensorSpec
from bakeoff.backends.onnx_export import dynamic_model
from bakeoff.backends.sweep_server import SweepServer, SweepSpec
from bakeoff.backends.tensorrt_engine import Profile, TrtCompiled, TrtOptions
from bakeoff.workloads.ir import Graph
from bakeoff.workloads.lower_onnx import input_names


class ExportBakesDim(Exception):
    """The ONNX export holds the swept dim in a constant: no dynamic engine (the reason)."""


def profile_values(values: Sequence[int]) -> tuple[int, int, int]:
    """(min, opt, max) of the swept dim: opt is the low median of the distinct values."""
    distinct = sorted(set(values))
    return distinct[0], statistics.median_low(distinct), distinct[-1]


def profile_shapes(spec: SweepSpec) -> Profile:
    """Input name -> (min, opt, max) shapes, for every graph input with a swept axis."""
    at = [spec.bound_at(v) for v in profile_values(spec.values)]
    names = input_names(spec.graph)
    return {name: tuple(tuple(int(d) for d in g.inputs[i].shape) for g in at)
            for i, (name, axes) in enumerate(zip(names, spec.swept_axes())) if axes}


class TrtSweepServer(SweepServer):
    """One engine built with one optimization profile over the sweep; each point binds its shapes on the
    engine's one execution context."""

    def __init__(self, backend: Any, spec: SweepSpec, device: str, opts: TrtOptions) -> None:
        lo, opt, hi = profile_values(spec.values)
        super().__init__(how=(f"one engine, one optimization profile over {spec.dim}: min {lo}, opt {opt} (the "
                              f"median of the sweep's values), max {hi}"),
                         counter="engines this adapter built (build_serialized_network calls)")
        reasons: list[str] = []

        def make_model(attention: str) -> Any:
            model, reason = dynamic_model(spec, opts, attention)
            if model is None:
                raise ExportBakesDim(reason)
            return model

        self.spec = spec
        t0 = time.perf_counter()
        # native attention whose export bakes the dim in: the decomposed export, as ONNX Runtime's sweep does
        attentions = [opts.attention] + (["decomposed"] if opts.attention != "decomposed" else [])
        for attention in attentions:
            try:
                routed = opts.model_copy(update={"attention": attention})
                self.compiled = backend.build(spec.bound_at(hi), device, routed, make_model, profile_shapes(spec))
                break
            except ExportBakesDim as exc:
                reasons.append(str(exc))
        else:
            raise ExportBakesDim("; ".join(reasons))
        self.build_s = time.perf_counter() - t0
        self._engines = 1
        self.notes = list(self.compiled.info.notes)

    def at(self, value: int, graph: Graph, specs: Sequence[TensorSpec]) -> Compiled:
        c = self.compiled
        return TrtCompiled(c.engine, c.context, graph, c.device, c.info, c._artifacts, c._keep, dynamic=True)

    def compiles(self) -> int:
        return self._engines
