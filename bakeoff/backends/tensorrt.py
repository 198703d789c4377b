"""TensorRT: the graph exported to ONNX (`workloads.lower_onnx`), parsed and built into an engine, run on
torch's current CUDA stream with the torch tensors' memory bound in place.

Written against NVIDIA's documented TensorRT 10/11 Python API; the pages followed:
- Python API reference, tensorrt.Builder / INetworkDefinition / OnnxParser / IBuilderConfig / ITimingCache /
  Runtime / ICudaEngine / IExecutionContext / ILogger:
  https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/python-api/ (infer/Core/*.html,
  parsers/Onnx/pyOnnx.html). The custom logger follows the ILogger page ("explicitly instantiate the base class").
- Migrating Python code from 8.x to 10.x (name-based I/O: num_io_tensors, get_tensor_name, get_tensor_mode,
  set_tensor_address, execute_async_v3; build_serialized_network):
  https://docs.nvidia.com/deeplearning/tensorrt/11.4.1/api/migration/tensorrt-8x-to-10x-python-api-patterns.html
- Migrating from 10.x to 11.x (strongly typed networks required; BuilderFlag.FP16/BF16 removed; the
  STRONGLY_TYPED creation flag is accepted and ignored on 11.x):
  https://docs.nvidia.com/deeplearning/tensorrt/latest/api/migration/tensorrt-10x-to-11x-python-api-reference.html
- Optimizing builder performance, Timing Cache (create_timing_cache from a buffer, empty buffer = new cache,
  set_timing_cache before the build, serialize after it to keep new entries):
  https://docs.nvidia.com/deeplearning/tensorrt/10.16.1/performance/builder-performance.html
- ONNX-TensorRT's operator list (TensorRT 10.15: opsets 9 to 24; LayerNormalization, RMSNormalization, Gelu
  supported in FP32/FP16/BF16; reduce axes must be initializers, which lower_onnx writes):
  https://github.com/onnx/onnx-tensorrt/blob/main/docs/operators.md

Precision: the exported ONNX already carries the case dtype on every tensor, so the default is a strongly
typed network (TensorRT keeps those types; required by 11.x, opt-in on 10.x). `typing: weak` (10.x only) uses
the old builder flags FP16/BF16 instead. TF32 is off unless asked, so float32 stays float32 as in eager.

Options: `TrtOptions` below (`bakeoff list backends --options`): opset, builder_optimization_level, typing,
tf32, workspace_mb, artifacts_dir (the ONNX model and the engine are written there), attention ("native",
default: the opset-23 ONNX Attention op, which the parser imports from TensorRT 10.14 on; or "decomposed").
Where the parser rejects the Attention export (an older TensorRT), the decomposed export is parsed instead
and `info.lowering` says why.
Cold and warm builds differ through the timing cache file kept in $BAKEOFF_TRT_CACHE_DIR.
"""
from __future__ import annotations

from typing import Any, Sequence

from bakeoff.backends.base import Backend, Compiled, TensorSpec, dist_version
from bakeoff.backends.sweep_server import PerShapeServer, SweepServer, SweepSpec
from bakeoff.backends.tensorrt_engine import CACHE_ENV, Profile, TrtCompiled, TrtOptions, build_engine
from bakeoff.backends.tensorrt_profile import ExportBakesDim, TrtSweepServer
from bakeoff.workloads.ir import Graph
from bakeoff.workloads.lower_onnx import lower_onnx

__all__ = ["CACHE_ENV", "TensorRTBackend", "TrtCompiled", "TrtOptions"]


class TensorRTBackend(Backend):
    name = "tensorrt"
    grad_reason = "is inference only: TensorRT builds engines for the forward pass and has no backward or autodiff"
    devices = frozenset({"cuda"})
    cache_env = (CACHE_ENV,)
    timed_with_events = True   # execute_async_v3 is enqueued on torch's current stream
    Options = TrtOptions
    warmup_in_case_reason = ("the builder's timing cache is the case's cache folder, and moving the warm-up "
                             "ahead of the case is not verified with TensorRT (not installable here)")

    @classmethod
    def compile_times_on_device(cls, options: TrtOptions) -> str | None:
        return "TensorRT's builder times tactics on the device while it builds the engine"

    @classmethod
    def available(cls) -> str | None:
        try:
            import tensorrt  # noqa: F401
        except ImportError:
            return "tensorrt not installed (pip install tensorrt-cu13)"
        try:
            import onnx  # noqa: F401
        except ImportError:
            return "onnx not installed (pip install 'bakeoff[onnx]')"
        return None

    @classmethod
    def version(cls) -> str | None:
        return dist_version("tensorrt")

    def compile(self, graph: Graph, specs: Sequence[TensorSpec], device: str, options: TrtOptions) -> Compiled:
        return self.build(graph, device, options, lambda attention: lower_onnx(graph, options.opset, attention))

    def serve_sweep(self, spec: SweepSpec, device: str, options: TrtOptions) -> SweepServer:
        """One engine with one optimization profile over the sweep (`TrtSweepServer`) where the ONNX export
        keeps the swept dim out of its constants; else one engine per shape, with the export's reason."""
        try:
            return TrtSweepServer(self, spec, device, options)
        except ExportBakesDim as exc:
            return PerShapeServer(self, device, options, str(exc))

    def build(self, graph: Graph, device: str, opts: TrtOptions, make_model: Any,
              profile: Profile | None = None) -> TrtCompiled:
        """One engine for `graph` from `make_model(attention)`'s ONNX export (tensorrt_engine.build_engine)."""
        return build_engine(graph, device, opts, make_model, profile)
