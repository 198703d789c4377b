"""TensorRT's engine: the build (the ONNX export parsed, the builder configured, the engine built with the
timing cache, deserialized) and the executable it gives (`TrtCompiled`). The backend, its options and the
pages of NVIDIA's API followed are in backends/tensorrt.py; the shape sweep's profile in tensorrt_profile.py."""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Literal, Mapping, Sequence

from pydantic import Field

from bakeoff.backends.base import Compiled, CompileInfo
from bakeoff.backends.onnx_export import OnnxExportOptions
from bakeoff.workloads.ir import Graph
from bakeoff.workloads.lower_onnx import input_names, lowering_paths, model_summary, output_names
from bakeoff.workloads.onnx_text import node_list

CACHE_ENV = "BAKEOFF_TRT_CACHE_DIR"
Profile = Mapping[str, tuple[tuple[int, ...], ...]]  # input name -> (min, opt, max) shapes


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

        from bakeoff.workloads.lower_torch import TORCH_DTYPES  # imports torch: not at the module's import

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




def build_engine(graph: Graph, device: str, opts: TrtOptions, make_model: Callable[[str], Any],
                 profile: Profile | None = None) -> TrtCompiled:
    """Parse `make_model(attention)` (the ONNX export with that attention route; "decomposed" where the parser
    rejects native Attention) and build one engine for `graph`'s dtypes and device. `profile`: input name ->
    (min, opt, max) shapes of the one optimization profile of a dynamic-shape engine (the model's swept axes
    are `dim_param`s); None for a static engine."""
    import tensorrt as trt
    import torch

    if opts.typing == "weak" and int(trt.__version__.split(".")[0]) >= 11:
        raise ValueError("tensorrt: typing='weak' needs TensorRT 10; TensorRT 11 removed BuilderFlag.FP16/BF16")
    dev = torch.device(device)
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    paths = lowering_paths(graph, opts.opset, opts.attention)
    t = [time.perf_counter()]
    model = make_model(opts.attention)
    model_bytes = model.SerializeToString()
    t.append(time.perf_counter())
    with torch.cuda.device(index):   # TensorRT builds for, and runs on, the current CUDA device
        logger = _logger()
        builder = trt.Builder(logger)
        network, model, model_bytes = _parse(trt, builder, logger, opts.typing, model, model_bytes, make_model, paths)
        t.append(time.perf_counter())
        config = _builder_config(trt, builder, opts, {n.dtype for n in graph.nodes if n.op != "const"})
        profile_notes = add_profile(trt, builder, network, config, profile) if profile is not None else []
        timing = _TimingCache(trt.__version__, index)
        cache, accepted = timing.attach(config)
        plan = builder.build_serialized_network(network, config)
        if plan is None:
            raise RuntimeError("tensorrt: build_serialized_network returned None: "
                               + "; ".join(logger.messages)[-2000:])
        t.append(time.perf_counter())
        cache_bytes = timing.save(cache)
        t.append(time.perf_counter())
        runtime = trt.Runtime(logger)
        engine = runtime.deserialize_cuda_engine(plan)
        if engine is None:
            raise RuntimeError("tensorrt: deserialize_cuda_engine failed: " + "; ".join(logger.messages)[-2000:])
        context = engine.create_execution_context()
        t.append(time.perf_counter())
    info = _compile_info(opts, config, model, paths, timing, accepted, cache_bytes, t)
    artifacts = _artifacts(graph, opts, model, model_bytes, plan, engine, info.cache_hit, len(timing.loaded), cache_bytes)
    if profile is not None:
        info.notes += profile_notes
        artifacts["profile"] = {name: [list(s) for s in shapes] for name, shapes in profile.items()}
    return TrtCompiled(engine, context, graph, device, info, artifacts, [runtime, logger, builder],
                       dynamic=profile is not None)


def _parse(trt: Any, builder: Any, logger: Any, typing: str, model: Any, model_bytes: bytes,
           make_model: Callable[[str], Any], paths: dict[str, str]) -> tuple[Any, Any, bytes]:
    """The network parsed from `model` (the decomposed export where the parser rejects native Attention, with
    the reason written into `paths`), and the model it came from with its bytes."""
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
    return network, model, model_bytes


def _builder_config(trt: Any, builder: Any, opts: TrtOptions, dtypes: set[str]) -> Any:
    """The builder config: optimization level, workspace, TF32 off unless asked, the precision flags of weak
    typing."""
    config = builder.create_builder_config()
    config.builder_optimization_level = opts.builder_optimization_level
    if opts.workspace_mb is not None:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, opts.workspace_mb << 20)
    if not opts.tf32 and hasattr(trt.BuilderFlag, "TF32"):
        config.clear_flag(trt.BuilderFlag.TF32)   # on by default in TensorRT
    if opts.typing == "weak":
        if "float16" in dtypes:
            config.set_flag(trt.BuilderFlag.FP16)
        if "bfloat16" in dtypes:
            config.set_flag(trt.BuilderFlag.BF16)
    return config


def _compile_info(opts: TrtOptions, config: Any, model: Any, paths: dict[str, str], timing: _TimingCache,
                  accepted: bool, cache_bytes: int, t: list[float]) -> CompileInfo:
    """The build's stages (export, parse, build, cache_save, deserialize: times `t`), cache hit and notes."""
    # A warm build finds every timing query in the loaded cache, so the cache it writes back is unchanged.
    loaded = len(timing.loaded)
    cache_hit = bool(loaded and accepted and cache_bytes == loaded) if timing.path else None
    notes = [f"{op}: {words}" for op, words in paths.items()]
    notes += [f"opset={model.opset_import[0].version}", f"typing={opts.typing}",
              f"builder_optimization_level={config.builder_optimization_level}",
              f"tf32={opts.tf32}",
              (f"timing cache {timing.path}: {loaded} B loaded{'' if accepted else ' (rejected)'}, "
               f"{cache_bytes} B written" if timing.path else f"no timing cache file (${CACHE_ENV} unset)")]
    # The builder's time (build_serialized_network) is TensorRT's compile time, the headline; export, parse,
    # cache save and deserialize are recorded apart.
    stages = dict(zip(("export", "parse", "build", "cache_save", "deserialize"),
                      (b - a for a, b in zip(t, t[1:]))))
    return CompileInfo(stages_s=stages, cache_hit=cache_hit, notes=notes, compiler_stages=("build",),
                       lowering=paths)


def _artifacts(graph: Graph, opts: TrtOptions, model: Any, model_bytes: bytes, plan: Any, engine: Any,
               cache_hit: bool | None, loaded: int, cache_bytes: int) -> dict[str, Any]:
    """The model's summary, the ONNX model, its node list and the engine's sizes; with `artifacts_dir`, the
    model and the engine written there."""
    artifacts = model_summary(model)
    artifacts["model.onnx"] = model_bytes   # the harness writes bytes artifacts to its artifacts folder
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
    return artifacts
