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
- ONNX-TensorRT docs/operators.md (TensorRT 10.15: opsets 9 to 24; LayerNormalization, RMSNormalization, Gelu
  supported in FP32/FP16/BF16; reduce axes must be initializers, which lower_onnx writes).

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

import os
import time
from typing import Any, Literal, Mapping, Sequence

from pydantic import Field

from bakeoff.workloads.ir import Graph

from bakeoff.backends.base import Backend, Compiled, CompileInfo, TensorSpec, dist_version
from bakeoff.backends.onnxrt import OnnxExportOptions

CACHE_ENV = "BAKEOFF_TRT_CACHE_DIR"


class TrtOptions(OnnxExportOptions):
    builder_optimization_level: int = Field(3, ge=0, le=5, description="TensorRT's builder optimization level")
    typing: Literal["strong", "weak"] = Field("strong", description="strong: the ONNX dtypes are kept; weak "
                                                                    "(TensorRT 10 only): FP16/BF16 builder flags")
    tf32: bool = Field(False, description="allow TF32 for float32 matmuls (off: float32 stays float32)")
    workspace_mb: int | None = Field(None, ge=1, le=2**24, description="builder workspace limit in MiB; None: "
                                                                       "TensorRT's default")


def _logger() -> Any:
    """A trt.ILogger that keeps warnings and errors, so a failed parse or build can say why."""
    import tensorrt as trt

    class Collecting(trt.ILogger):
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self.messages: list[str] = []

        def log(self, severity: Any, msg: str) -> None:
            if severity in (trt.ILogger.INTERNAL_ERROR, trt.ILogger.ERROR, trt.ILogger.WARNING):
                self.messages.append(f"{severity.name}: {msg}")

    return Collecting()


def _torch_dtype(trt_dtype: Any) -> Any:
    import tensorrt as trt
    import torch

    table = {trt.DataType.FLOAT: torch.float32, trt.DataType.HALF: torch.float16, trt.DataType.BF16: torch.bfloat16}
    if trt_dtype not in table:
        raise TypeError(f"tensorrt: engine I/O type {trt_dtype} has no torch dtype here")
    return table[trt_dtype]


class _TimingCache:
    """The timing cache file for this TensorRT version and GPU, in $BAKEOFF_TRT_CACHE_DIR (None: no file)."""

    def __init__(self, trt_version: str, device_index: int) -> None:
        import torch

        folder = os.environ.get(CACHE_ENV)
        major, minor = torch.cuda.get_device_capability(device_index)
        # Entries are only valid for one TensorRT version and device (builder-performance page).
        self.path = (os.path.join(folder, f"timing-trt{trt_version}-sm{major}{minor}.cache") if folder else None)
        self.loaded = b""
        if self.path and os.path.exists(self.path):
            with open(self.path, "rb") as f:
                self.loaded = f.read()

    def attach(self, config: Any) -> tuple[Any, bool]:
        """Create the cache from the file's bytes (empty = new cache) and attach it to the builder config.

        Returns the attached cache and whether the file's cache was accepted. A file TensorRT cannot read
        (truncated, corrupt: create_timing_cache raises or returns None) or rejects (written by another
        TensorRT build or device) is replaced by an empty cache, so a bad file never fails the build.
        """
        if self.loaded:
            try:
                cache = config.create_timing_cache(self.loaded)
                if cache is not None and config.set_timing_cache(cache, ignore_mismatch=False):
                    return cache, True
            except Exception:   # TensorRT raises on a corrupt serialized cache
                pass
        cache = config.create_timing_cache(b"")
        if cache is None or not config.set_timing_cache(cache, ignore_mismatch=False):
            raise RuntimeError("tensorrt: could not create an empty timing cache")
        return cache, not self.loaded   # no file: nothing was rejected

    def save(self, cache: Any) -> int:
        """Write the cache (with the entries this build added) back atomically; returns its size in bytes."""
        blob = bytes(memoryview(cache.serialize()))
        if self.path:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            tmp = f"{self.path}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                f.write(blob)
            os.replace(tmp, self.path)
        return len(blob)


def add_profile(trt: Any, builder: Any, network: Any, config: Any,
                profile: Mapping[str, tuple[tuple[int, ...], ...]]) -> list[str]:
    """One optimization profile (builder.create_optimization_profile, profile.set_shape(name, min, opt, max) for
    every network input with a -1 axis, config.add_optimization_profile), following the IOptimizationProfile
    page. Returns notes; raises where the network's dynamic inputs and `profile` disagree."""
    opt_profile = builder.create_optimization_profile()
    dynamic = []
    for i in range(network.num_inputs):
        tensor = network.get_input(i)
        if -1 not in tuple(tensor.shape):
            continue
        if tensor.name not in profile:
            raise RuntimeError(f"tensorrt: input {tensor.name!r} has dynamic axes {tuple(tensor.shape)} but no "
                               "shapes in the profile")
        lo, opt, hi = profile[tensor.name]
        opt_profile.set_shape(tensor.name, lo, opt, hi)
        dynamic.append(f"{tensor.name}: min {list(lo)} opt {list(opt)} max {list(hi)}")
    if not dynamic:
        raise RuntimeError("tensorrt: the parsed network has no dynamic input axes: nothing for a profile to cover")
    if config.add_optimization_profile(opt_profile) < 0:
        raise RuntimeError("tensorrt: add_optimization_profile refused the profile (" + "; ".join(dynamic) + ")")
    return ["optimization profile 0: " + "; ".join(dynamic)]


class TrtCompiled(Compiled):
    """A deserialized engine and one execution context; I/O addresses are torch tensors' data_ptr."""

    def __init__(self, engine: Any, context: Any, graph: Graph, device: str, info: CompileInfo,
                 artifacts: dict[str, Any], keep: list[Any], dynamic: bool = False) -> None:
        import tensorrt as trt

        from bakeoff.workloads.lower_onnx import input_names, output_names

        self.engine, self.context, self.graph, self.device, self.info = engine, context, graph, device, info
        self._artifacts, self._keep = artifacts, keep   # keep: runtime and logger outlive the engine
        io = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        self.engine_inputs = {n for n in io if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT}
        self.inputs, self.outputs = input_names(graph), output_names(graph)
        missing = [n for n in self.outputs if n not in io]
        if missing:
            raise RuntimeError(f"tensorrt: engine lacks outputs {missing}; it has {io}")
        self._bound: Any = None   # the prepared tuple whose addresses the context holds
        # dynamic: the engine's inputs have -1 axes (one optimization profile); prepare sets those inputs' shapes on
        # the context (set_input_shape) and reads the output shapes back from it (context.get_tensor_shape).
        self.dynamic = dynamic

    def prepare(self, inputs: Sequence[Any]) -> Any:
        """Check inputs, allocate outputs on the device and bind every address to the context. Not timed."""
        import torch

        from bakeoff.workloads.lower_torch import TORCH_DTYPES

        ins = []
        want_index = torch.device(self.device).index
        for name, node, x in zip(self.inputs, self.graph.inputs, inputs):
            if x.device.type != "cuda" or x.dtype != TORCH_DTYPES[node.dtype] or (
                    want_index is not None and x.device.index != want_index):
                raise ValueError(f"input {name!r}: expected {self.device} {node.dtype}, got {x.device} {x.dtype}")
            if name in self.engine_inputs:
                shape = tuple(self.engine.get_tensor_shape(name))
                if -1 in shape:   # a dynamic axis (an optimization profile's): the context takes this shape
                    if not self.context.set_input_shape(name, tuple(x.shape)):
                        raise ValueError(f"input {name!r}: shape {list(x.shape)} is outside the engine's "
                                         f"optimization profile {self.engine.get_tensor_profile_shape(name, 0)}")
                elif tuple(x.shape) != shape:
                    # Static shapes: the engine reads exactly this many elements from the bound address.
                    raise ValueError(f"input {name!r}: engine expects shape {list(shape)}, got {list(x.shape)}")
            ins.append(x.contiguous())
        outs = []
        for name, node in zip(self.outputs, self.graph.output_nodes):
            dtype = _torch_dtype(self.engine.get_tensor_dtype(name))
            # A dynamic engine's output shapes follow from the input shapes just set on the context.
            shape = tuple((self.context if self.dynamic else self.engine).get_tensor_shape(name))
            if shape != tuple(node.shape) or dtype != TORCH_DTYPES[node.dtype]:
                raise RuntimeError(f"tensorrt: output {name!r} is {dtype}{list(shape)}, "
                                   f"graph says {node.dtype}{list(node.shape)}")
            # NaN until the engine writes it (allocated here, outside the timed region; the harness prepares
            # afresh before each checked run), so an output never written cannot pass the check.
            outs.append(torch.full(shape, float("nan"), dtype=dtype, device=self.device))
        prepared = (ins, outs)
        self._bind(prepared)
        return prepared

    def _bind(self, prepared: Any) -> None:
        ins, outs = prepared
        for name, x in zip(self.inputs, ins):
            # An input the network does not read is not an engine I/O tensor: nothing to bind.
            if name in self.engine_inputs and not self.context.set_tensor_address(name, x.data_ptr()):
                raise RuntimeError(f"tensorrt: set_tensor_address({name!r}) failed")
        for name, y in zip(self.outputs, outs):
            if not self.context.set_tensor_address(name, y.data_ptr()):
                raise RuntimeError(f"tensorrt: set_tensor_address({name!r}) failed")
        self._bound = prepared

    def run(self, prepared: Any) -> Any:
        import torch

        if self._bound is not prepared:   # another prepared set was bound since: rebind (host calls only)
            self._bind(prepared)
        stream = torch.cuda.current_stream(torch.device(self.device)).cuda_stream
        if not self.context.execute_async_v3(stream):
            raise RuntimeError("tensorrt: execute_async_v3 returned false")
        return prepared[1]

    def to_torch(self, raw: Any) -> list[Any]:
        # Clones are queued on the same stream, after the engine's kernels; the next run reuses the buffers.
        return [y.clone() for y in raw]

    def sync(self) -> None:
        import torch

        torch.cuda.current_stream(torch.device(self.device)).synchronize()

    def artifacts(self) -> dict[str, Any] | None:
        return dict(self._artifacts)


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
    def compile_times_on_device(cls, options: Any) -> str | None:
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

    def compile(self, graph: Graph, specs: Sequence[TensorSpec], device: str,
                options: Mapping[str, Any]) -> Compiled:
        opts = self.parse_options(options)   # before TensorRT is imported
        from bakeoff.workloads.lower_onnx import lower_onnx

        return self.build(graph, device, opts, lambda attention: lower_onnx(graph, opts.opset, attention))

    def serve_sweep(self, spec: Any, device: str, options: Mapping[str, Any]) -> Any:
        """One engine with one optimization profile over the sweep (`TrtSweepServer`) where the ONNX export
        keeps the swept dim out of its constants; else one engine per shape, with the export's reason."""
        from bakeoff.backends.sweep import PerShapeServer
        from bakeoff.backends.tensorrt_profile import ExportBakesDim, TrtSweepServer

        try:
            return TrtSweepServer(self, spec, device, self.parse_options(options))
        except ExportBakesDim as exc:
            return PerShapeServer(self, device, options, str(exc))

    def build(self, graph: Graph, device: str, opts: TrtOptions, make_model: Any,
              profile: Mapping[str, tuple[tuple[int, ...], ...]] | None = None) -> "TrtCompiled":
        """Parse `make_model(attention)` (the ONNX export with that attention route; "decomposed" where the parser
        rejects native Attention) and build one engine for `graph`'s dtypes and device. `profile`: input name ->
        (min, opt, max) shapes of the one optimization profile of a dynamic-shape engine (the model's swept axes
        are `dim_param`s); None for a static engine."""
        import tensorrt as trt
        import torch

        from bakeoff.workloads.lower_onnx import lowering_paths, model_summary

        major = int(trt.__version__.split(".")[0])
        typing = opts.typing
        if typing == "weak" and major >= 11:
            raise ValueError("tensorrt: typing='weak' needs TensorRT 10; TensorRT 11 removed BuilderFlag.FP16/BF16")
        dtypes = {n.dtype for n in graph.nodes if n.op != "const"}
        dev = torch.device(device)
        index = dev.index if dev.index is not None else torch.cuda.current_device()

        opset, attention = opts.opset, opts.attention
        paths = lowering_paths(graph, opset, attention)
        t0 = time.perf_counter()
        model = make_model(attention)
        model_bytes = model.SerializeToString()
        t1 = time.perf_counter()

        with torch.cuda.device(index):   # TensorRT builds for, and runs on, the current CUDA device
            logger = _logger()
            builder = trt.Builder(logger)
            # Explicit batch is the default from 10.0 on (its flag is deprecated and ignored). STRONGLY_TYPED
            # is opt-in on 10.x and accepted but ignored on 11.x, where every network is strongly typed.
            strong = getattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
            flags = 1 << int(strong) if typing == "strong" and strong is not None else 0
            network = builder.create_network(flags)
            parser = trt.OnnxParser(network, logger)
            ok = parser.parse(model_bytes)
            if not ok and paths.get("sdpa", "").startswith("native"):
                # An older parser has no Attention importer: the decomposed export, with the reason kept.
                errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
                paths["sdpa"] = (f"decomposed (MatMul, Mul, Where, Softmax, MatMul): TensorRT {trt.__version__}'s "
                                 f"ONNX parser rejected the Attention export: {'; '.join(errors)[:300]}")
                model = make_model("decomposed")
                model_bytes = model.SerializeToString()
                network = builder.create_network(flags)
                parser = trt.OnnxParser(network, logger)
                ok = parser.parse(model_bytes)
            if not ok:
                errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
                raise RuntimeError("tensorrt: ONNX parse failed: " + "; ".join(errors + logger.messages)[:2000])
            t2 = time.perf_counter()

            config = builder.create_builder_config()
            config.builder_optimization_level = opts.builder_optimization_level
            if opts.workspace_mb is not None:
                config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, opts.workspace_mb << 20)
            if not opts.tf32 and hasattr(trt.BuilderFlag, "TF32"):
                config.clear_flag(trt.BuilderFlag.TF32)   # on by default in TensorRT
            if typing == "weak":
                if "float16" in dtypes:
                    config.set_flag(trt.BuilderFlag.FP16)
                if "bfloat16" in dtypes:
                    config.set_flag(trt.BuilderFlag.BF16)
            if profile is not None:
                profile_notes = add_profile(trt, builder, network, config, profile)
            timing = _TimingCache(trt.__version__, index)
            cache, accepted = timing.attach(config)

            plan = builder.build_serialized_network(network, config)
            if plan is None:
                raise RuntimeError("tensorrt: build_serialized_network returned None: "
                                   + "; ".join(logger.messages)[-2000:])
            t3 = time.perf_counter()
            cache_bytes = timing.save(cache)
            t4 = time.perf_counter()

            runtime = trt.Runtime(logger)
            engine = runtime.deserialize_cuda_engine(plan)
            if engine is None:
                raise RuntimeError("tensorrt: deserialize_cuda_engine failed: " + "; ".join(logger.messages)[-2000:])
            context = engine.create_execution_context()
            t5 = time.perf_counter()

        # A warm build finds every timing query in the loaded cache, so the cache it writes back is unchanged.
        loaded = len(timing.loaded)
        cache_hit = bool(loaded and accepted and cache_bytes == loaded) if timing.path else None
        notes = [f"{op}: {words}" for op, words in paths.items()]
        notes += [f"opset={model.opset_import[0].version}", f"typing={typing}",
                 f"builder_optimization_level={config.builder_optimization_level}",
                 f"tf32={opts.tf32}",
                 (f"timing cache {timing.path}: {loaded} B loaded{'' if accepted else ' (rejected)'}, "
                  f"{cache_bytes} B written" if timing.path else f"no timing cache file (${CACHE_ENV} unset)")]
        # The builder's time (build_serialized_network) is TensorRT's compile time, the headline; export, parse,
        # cache save and deserialize are recorded apart.
        info = CompileInfo(stages_s={"export": t1 - t0, "parse": t2 - t1, "build": t3 - t2,
                                     "cache_save": t4 - t3, "deserialize": t5 - t4},
                           cache_hit=cache_hit, notes=notes, compiler_stages=("build",), lowering=paths)
        artifacts = model_summary(model)
        artifacts["model.onnx"] = model_bytes   # the harness writes bytes artifacts to its artifacts folder
        from bakeoff.workloads.onnx_text import node_list

        artifacts["nodes.txt"] = node_list(model)
        artifacts.update({"engine_bytes": int(plan.nbytes), "num_layers": int(engine.num_layers),
                          "timing_cache_loaded_bytes": loaded, "timing_cache_bytes": cache_bytes,
                          "timing_cache_hit": cache_hit})
        if opts.artifacts_dir:
            folder = opts.artifacts_dir
            os.makedirs(folder, exist_ok=True)
            stem = os.path.join(folder, f"{graph.name}-{graph.digest()}")
            with open(stem + ".onnx", "wb") as f:
                f.write(model_bytes)
            with open(stem + ".engine", "wb") as f:
                f.write(memoryview(plan))
            artifacts.update({"model_path": stem + ".onnx", "engine_path": stem + ".engine"})
        if profile is not None:
            notes += profile_notes
            artifacts["profile"] = {name: [list(s) for s in shapes] for name, shapes in profile.items()}
        return TrtCompiled(engine, context, graph, device, info, artifacts, [runtime, logger, builder],
                           dynamic=profile is not None)
