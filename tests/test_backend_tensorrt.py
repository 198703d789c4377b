"""TensorRT: the reason given where it is absent, option checks, and the ONNX it would parse.

The build-and-run test needs TensorRT and a CUDA device; without them it skips with the backend's own reason.
"""
import math
import sys

import pytest

from backend_check import REL_L2_TOL, WORKLOADS, rel_l2_vs_reference
from bakeoff.backends import backend_class
from bakeoff.backends.tensorrt import TensorRTBackend
from bakeoff.workloads.ir import bind
from bakeoff.workloads.suite import builtin_workloads

# ONNX ops the TensorRT 10.15 parser supports (onnx-tensorrt docs/operators.md) that lower_onnx may emit.
# Attention: the parser imports it from TensorRT 10.14 on (older parsers get the decomposed export instead).
TRT_PARSER_OPS = {"Add", "Attention", "Cast", "Div", "Erf", "Exp", "Expand", "Gelu", "GreaterOrEqual", "Identity",
                  "LayerNormalization", "Log", "MatMul", "Max", "Mul", "Neg", "Pow", "RMSNormalization", "Range",
                  "Reciprocal", "ReduceMax", "ReduceMean", "ReduceSum", "Relu", "Reshape", "Sigmoid", "Softmax",
                  "Sqrt", "Sub", "Tanh", "Transpose", "Unsqueeze", "Where"}


def test_registered():
    assert backend_class("tensorrt") is TensorRTBackend
    assert TensorRTBackend.devices == frozenset({"cuda"})
    assert TensorRTBackend.cache_env == ("BAKEOFF_TRT_CACHE_DIR",)


def test_reason_when_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt", None)   # makes `import tensorrt` raise ImportError
    assert TensorRTBackend.available() == "tensorrt not installed (pip install tensorrt-cu13)"
    assert TensorRTBackend.version() is None


def test_no_cpu():
    w = builtin_workloads()["softmax"]
    g = bind(w.graph, w.presets["smoke"], "float32")
    assert TensorRTBackend().supports(g, "cpu", "float32") == "tensorrt does not run on cpu"


def test_options_are_checked_before_tensorrt_is_needed():
    w = builtin_workloads()["softmax"]
    g = bind(w.graph, w.presets["smoke"], "float32")
    with pytest.raises(ValueError, match="bogus"):
        TensorRTBackend.parse_options({"bogus": True})
    with pytest.raises(ValueError, match="typing"):
        TensorRTBackend.parse_options({"typing": "loose"})
    with pytest.raises(ValueError, match="builder_optimization_level"):
        TensorRTBackend.parse_options({"builder_optimization_level": 9})
    opts = TensorRTBackend.parse_options({"typing": "weak", "builder_optimization_level": 5, "tf32": True,
                                          "opset": 23})
    assert (opts.typing, opts.builder_optimization_level, opts.tf32, opts.opset) == ("weak", 5, True, 23)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("workload", WORKLOADS)
def test_export_tensorrt_would_parse(workload, dtype):
    onnx = pytest.importorskip("onnx")
    from bakeoff.workloads.lower_onnx import DEFAULT_OPSET, lower_onnx

    w = builtin_workloads()[workload]
    model = lower_onnx(bind(w.graph, w.presets["smoke"], dtype), DEFAULT_OPSET)
    onnx.checker.check_model(model, full_check=True)
    assert 9 <= model.opset_import[0].version <= 24   # the parser's documented opset range (TensorRT 10.15)
    assert {n.op_type for n in model.graph.node} <= TRT_PARSER_OPS
    inits = {t.name for t in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type.startswith("Reduce"):   # the parser wants reduce axes as initializers
            assert n.input[1] in inits


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("workload", WORKLOADS)
def test_matches_reference_on_gpu(workload, dtype):
    reason = TensorRTBackend.available()
    if reason:
        pytest.skip(reason)
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    assert rel_l2_vs_reference("tensorrt", workload, dtype, device="cuda") < REL_L2_TOL[dtype]


# --- compile/prepare/run against a stub `tensorrt` module (TensorRT 10 Python API), on the CPU --------------

class _Calls(list):
    def names(self) -> list[str]:
        return [c[0] for c in self]


def _stub_trt(calls: _Calls, version: str = "10.15.1"):
    """A `tensorrt` module with the TensorRT 10 API surface the backend uses; every call is appended to `calls`."""
    from types import ModuleType, SimpleNamespace

    onnx = pytest.importorskip("onnx")
    trt = ModuleType("tensorrt")
    trt.__version__ = version

    class Enum(SimpleNamespace):
        pass

    class _Member:
        def __init__(self, name, value):
            self.name, self.value = name, value

        def __int__(self):
            return self.value

        def __repr__(self):
            return self.name

    class ILogger:
        INTERNAL_ERROR, ERROR, WARNING, INFO, VERBOSE = (_Member(n, i) for i, n in enumerate(
            ("INTERNAL_ERROR", "ERROR", "WARNING", "INFO", "VERBOSE")))

        def __init__(self):
            calls.append(("ILogger.__init__",))

    trt.ILogger = ILogger
    trt.NetworkDefinitionCreationFlag = Enum(EXPLICIT_BATCH=_Member("EXPLICIT_BATCH", 0),
                                             STRONGLY_TYPED=_Member("STRONGLY_TYPED", 1))
    trt.BuilderFlag = Enum(**{n: _Member(n, i) for i, n in enumerate(("FP16", "BF16", "TF32"))})
    trt.MemoryPoolType = Enum(WORKSPACE=_Member("WORKSPACE", 0))
    trt.DataType = Enum(FLOAT=_Member("FLOAT", 0), HALF=_Member("HALF", 1), BF16=_Member("BF16", 7))
    trt.TensorIOMode = Enum(INPUT=_Member("INPUT", 1), OUTPUT=_Member("OUTPUT", 2))
    elem = {onnx.TensorProto.FLOAT: trt.DataType.FLOAT, onnx.TensorProto.FLOAT16: trt.DataType.HALF,
            onnx.TensorProto.BFLOAT16: trt.DataType.BF16}

    class Network:
        def __init__(self, flags):
            self.flags, self.io, self.model = flags, [], None

        @property
        def num_inputs(self):
            return sum(1 for _, mode, *_ in self.io if mode is trt.TensorIOMode.INPUT)

        def get_input(self, i):
            name, _, _, shape = [t for t in self.io if t[1] is trt.TensorIOMode.INPUT][i]
            return SimpleNamespace(name=name, shape=shape)

    class OnnxParser:
        num_errors = 0

        def __init__(self, network, logger):
            self.network = network
            calls.append(("OnnxParser", network.flags))

        def parse(self, model_bytes):
            model = onnx.load_from_string(model_bytes)   # a real ONNX model must arrive
            def io(vi, mode):
                t = vi.type.tensor_type
                # a dim_param (a dynamic axis) is -1, as TensorRT's parser reports it
                return (vi.name, mode, elem[t.elem_type],
                        tuple(-1 if d.dim_param else d.dim_value for d in t.shape.dim))
            self.network.io = ([io(v, trt.TensorIOMode.INPUT) for v in model.graph.input]
                               + [io(v, trt.TensorIOMode.OUTPUT) for v in model.graph.output])
            self.network.model = model
            calls.append(("parse", len(model_bytes)))
            return True

    class TimingCache:
        def __init__(self, blob):
            self.blob = blob

        def serialize(self):
            calls.append(("cache.serialize",))
            return memoryview(b"CACHE:" + b"x" * 10)

    class Config:
        def __init__(self):
            self.builder_optimization_level = 3
            self.flags = {trt.BuilderFlag.TF32}   # TensorRT enables TF32 by default
            self.profiles = []

        def set_flag(self, f):
            calls.append(("set_flag", f.name))
            self.flags.add(f)

        def clear_flag(self, f):
            calls.append(("clear_flag", f.name))
            self.flags.discard(f)

        def set_memory_pool_limit(self, pool, size):
            calls.append(("set_memory_pool_limit", pool.name, size))

        def create_timing_cache(self, blob):
            blob = bytes(blob)
            calls.append(("create_timing_cache", blob))
            if blob and not blob.startswith(b"CACHE:"):
                raise RuntimeError("Error Code 1: Serialization (corrupt timing cache)")
            return TimingCache(blob)

        def add_optimization_profile(self, profile):
            calls.append(("add_optimization_profile", dict(profile.shapes)))
            self.profiles.append(profile)
            return len(self.profiles) - 1

        def set_timing_cache(self, cache, ignore_mismatch):
            calls.append(("set_timing_cache", cache.blob, ignore_mismatch))
            return True

    class Plan(bytes):
        @property
        def nbytes(self):
            return len(self)

    class Builder:
        def __init__(self, logger):
            calls.append(("Builder",))

        def create_network(self, flags):
            calls.append(("create_network", flags))
            return Network(flags)

        def create_builder_config(self):
            return Config()

        def create_optimization_profile(self):
            calls.append(("create_optimization_profile",))
            return Profile()

        def build_serialized_network(self, network, config):
            calls.append(("build_serialized_network", config.builder_optimization_level,
                          sorted(f.name for f in config.flags)))
            dynamic = [n for n, mode, _, shape in network.io if mode is trt.TensorIOMode.INPUT and -1 in shape]
            covered = {n for p in config.profiles for n in p.shapes}
            if dynamic and not set(dynamic) <= covered:   # TensorRT refuses a dynamic network without a profile
                return None
            plan = Plan(b"engine")
            plan.io, plan.profiles, plan.model = network.io, [p.shapes for p in config.profiles], network.model
            return plan

    class Profile:
        def __init__(self):
            self.shapes = {}

        def set_shape(self, name, lo, opt, hi):
            calls.append(("set_shape", name, tuple(lo), tuple(opt), tuple(hi)))
            assert all(a <= b <= c for a, b, c in zip(lo, opt, hi)), (lo, opt, hi)
            self.shapes[name] = (tuple(lo), tuple(opt), tuple(hi))

    class Context:
        def __init__(self, engine):
            self.engine, self.shapes = engine, {}

        def set_input_shape(self, name, shape):
            calls.append(("set_input_shape", name, tuple(shape)))
            lo, _, hi = self.engine.get_tensor_profile_shape(name, 0)
            ok = len(shape) == len(lo) and all(a <= d <= b for a, d, b in zip(lo, shape, hi))
            if ok:
                self.shapes[name] = tuple(shape)
            return ok

        def get_tensor_shape(self, name):
            """An output's shape at the shapes set, by ONNX shape inference on the parsed model."""
            model = onnx.ModelProto()
            model.CopyFrom(self.engine.model)
            for vi in model.graph.input:
                for axis, d in enumerate(vi.type.tensor_type.shape.dim):
                    if d.dim_param:
                        d.dim_value = self.shapes[vi.name][axis]   # unset input shape: KeyError, as it should
            del model.graph.value_info[:]
            for vi in model.graph.output:
                vi.type.tensor_type.ClearField("shape")
            inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
            (out,) = [vi for vi in inferred.graph.output if vi.name == name]
            return tuple(d.dim_value for d in out.type.tensor_type.shape.dim)

        def set_tensor_address(self, name, ptr):
            calls.append(("set_tensor_address", name, ptr))
            return True

        def execute_async_v3(self, stream):
            calls.append(("execute_async_v3", stream))
            return True

    class Engine:
        num_layers = 3

        def __init__(self, io, profiles=(), model=None):
            self.io = {n: (m, d, s) for n, m, d, s in io}
            self.profiles, self.model = list(profiles), model
            self.names = [n for n, *_ in io]
            self.num_io_tensors = len(io)

        def get_tensor_name(self, i):
            return self.names[i]

        def get_tensor_mode(self, name):
            return self.io[name][0]

        def get_tensor_dtype(self, name):
            return self.io[name][1]

        def get_tensor_shape(self, name):
            return self.io[name][2]

        def get_tensor_profile_shape(self, name, index):
            return self.profiles[index][name]

        def create_execution_context(self):
            calls.append(("create_execution_context",))
            return Context(self)

    class Runtime:
        def __init__(self, logger):
            pass

        def deserialize_cuda_engine(self, plan):
            calls.append(("deserialize_cuda_engine", bytes(plan)))
            return Engine(plan.io, plan.profiles, plan.model)

    trt.Builder, trt.OnnxParser, trt.Runtime = Builder, OnnxParser, Runtime
    return trt


class _FakeCudaTensor:
    """What prepare() reads of a CUDA input tensor: device, dtype, shape, contiguous(), data_ptr()."""

    def __init__(self, t, ptr):
        import torch

        self.t, self.ptr, self.device = t, ptr, torch.device("cuda", 0)
        self.dtype, self.shape = t.dtype, t.shape

    def contiguous(self):
        return self

    def data_ptr(self):
        return self.ptr


@pytest.fixture
def stub_trt(monkeypatch, tmp_path):
    """A stub `tensorrt`, and torch.cuda calls answered on the CPU (stream handle 1234, device 0, sm_90)."""
    import contextlib
    from types import SimpleNamespace

    import torch

    calls = _Calls()
    monkeypatch.setitem(sys.modules, "tensorrt", _stub_trt(calls))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: (9, 0))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device", lambda index: contextlib.nullcontext())
    stream = SimpleNamespace(cuda_stream=1234, synchronize=lambda: calls.append(("stream.synchronize",)))
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: stream)
    real_full = torch.full

    def full_on_cpu(shape, value, dtype=None, device=None):   # outputs "on the GPU" live on the CPU here
        calls.append(("torch.full", tuple(shape), math.isnan(value), str(device)))
        return real_full(shape, value, dtype=dtype)

    monkeypatch.setattr(torch, "full", full_on_cpu)
    monkeypatch.setenv("BAKEOFF_TRT_CACHE_DIR", str(tmp_path / "trt"))
    return calls


def _inputs(graph, start=4096):
    from bakeoff.harness.worker.input_tensors import make_inputs

    return [_FakeCudaTensor(x, start + 256 * i) for i, x in enumerate(make_inputs(graph, 0, "cpu"))]


def test_build_and_run_through_the_tensorrt_10_api(stub_trt):
    calls = stub_trt
    w = builtin_workloads()["gemm_bias_residual"]
    g = bind(w.graph, w.presets["smoke"], "float16")
    opts = TensorRTBackend.parse_options({"builder_optimization_level": 4, "workspace_mb": 64})
    compiled = TensorRTBackend().compile(g, [], "cuda", opts)
    names = calls.names()
    # strongly typed network (TensorRT 10: explicit batch is implied, its flag deprecated), parsed from ONNX
    assert ("create_network", 1 << 1) in calls and ("OnnxParser", 1 << 1) in calls and "parse" in names
    # strongly typed: the ONNX types rule, no precision flags; TF32 cleared (float32 stays float32)
    assert ("set_flag", "FP16") not in calls and ("set_flag", "BF16") not in calls
    assert ("clear_flag", "TF32") in calls
    assert ("set_memory_pool_limit", "WORKSPACE", 64 << 20) in calls
    # timing cache: a new (empty) one created and attached before the build, serialized after it
    assert ("create_timing_cache", b"") in calls and ("set_timing_cache", b"", False) in calls
    assert "rejected" not in " ".join(compiled.info.notes) and compiled.info.cache_hit is False
    build = names.index("build_serialized_network")
    assert names.index("set_timing_cache") < build < names.index("cache.serialize")
    assert calls[build][1:] == (4, [])   # builder_optimization_level, flags left set (none)
    assert names.index("deserialize_cuda_engine") < names.index("create_execution_context")
    assert compiled.info.compiler_stages == ("build",) and "build" in compiled.info.stages_s
    assert compiled.artifacts()["engine_bytes"] == len(b"engine")

    del calls[:]
    xs = _inputs(g)
    prepared = compiled.prepare(xs)
    # every engine I/O tensor bound to its torch memory; outputs allocated NaN-filled on the case device
    bound = {c[1]: c[2] for c in calls if c[0] == "set_tensor_address"}
    assert bound == {"x": 4096, "w": 4096 + 256, "b": 4096 + 512, "r": 4096 + 768,
                     "out.0": prepared[1][0].data_ptr()}
    assert ("torch.full", (48, 72), True, "cuda") in calls
    assert all(bool(y.isnan().all()) for y in prepared[1])
    compiled.run(prepared)
    assert calls[-1] == ("execute_async_v3", 1234)   # torch's current stream handle
    compiled.sync()
    assert calls[-1] == ("stream.synchronize",)


def test_weak_typing_sets_precision_flags_and_tf32_on_request(stub_trt):
    calls = stub_trt
    w = builtin_workloads()["softmax"]
    for dtype, flag in (("float16", "FP16"), ("bfloat16", "BF16")):
        del calls[:]
        TensorRTBackend().compile(bind(w.graph, w.presets["smoke"], dtype), [], "cuda",
                                  TensorRTBackend.parse_options({"typing": "weak"}))
        assert ("create_network", 0) in calls and ("set_flag", flag) in calls
        assert ("clear_flag", "TF32") in calls
    del calls[:]
    TensorRTBackend().compile(bind(w.graph, w.presets["smoke"], "float32"), [], "cuda",
                              TensorRTBackend.parse_options({"tf32": True}))
    assert ("clear_flag", "TF32") not in calls
    assert calls[calls.names().index("build_serialized_network")][2] == ["TF32"]


def test_corrupt_timing_cache_falls_back_to_an_empty_one(stub_trt, tmp_path):
    calls = stub_trt
    w = builtin_workloads()["softmax"]
    g = bind(w.graph, w.presets["smoke"], "float32")
    (tmp_path / "trt").mkdir()
    path = tmp_path / "trt" / "timing-trt10.15.1-sm90.cache"
    path.write_bytes(b"\x00garbage")
    compiled = TensorRTBackend().compile(g, [], "cuda", TensorRTBackend.Options())
    assert ("create_timing_cache", b"\x00garbage") in calls and ("create_timing_cache", b"") in calls
    assert compiled.info.cache_hit is False and "(rejected)" in " ".join(compiled.info.notes)
    assert path.read_bytes().startswith(b"CACHE:")   # rewritten with a good cache
    del calls[:]
    warm = TensorRTBackend().compile(g, [], "cuda", TensorRTBackend.Options())
    assert warm.info.cache_hit is True and ("create_timing_cache", b"") not in calls


def test_prepare_checks_input_shapes_against_the_engine(stub_trt):
    import torch

    w = builtin_workloads()["softmax"]
    g = bind(w.graph, w.presets["smoke"], "float32")
    compiled = TensorRTBackend().compile(g, [], "cuda", TensorRTBackend.Options())
    with pytest.raises(ValueError, match=r"engine expects shape \[37, 300\], got \[37, 299\]"):
        compiled.prepare([_FakeCudaTensor(torch.zeros(37, 299), 4096)])
    with pytest.raises(ValueError, match="expected cuda float32"):
        compiled.prepare([torch.zeros(37, 300)])


# --- a shape sweep: one engine, one optimization profile (min/opt/max from the sweep's values) ---------------

def _sweep(workload, dim, values, dtype="float16"):
    from bakeoff.backends.sweep_server import SweepSpec

    w = builtin_workloads()[workload]
    return SweepSpec(w.graph, dict(w.presets["smoke"]), dim, tuple(values), dtype)


def test_sweep_builds_one_engine_with_one_profile_from_the_sweep_values(stub_trt):
    calls = stub_trt
    spec = _sweep("layernorm_gelu", "M", [24, 16, 40, 20, 24])   # served in this order; distinct 16, 20, 24, 40
    server = TensorRTBackend().serve_sweep(spec, "cuda", TensorRTBackend.Options())
    names = calls.names()
    # the documented order: profile created, one set_shape per dynamic input, added to the config, then the build
    assert names.count("build_serialized_network") == 1 and server.compiles() == 1
    assert (names.index("create_optimization_profile") < names.index("set_shape")
            < names.index("add_optimization_profile") < names.index("build_serialized_network"))
    # min = smallest, opt = low median of the distinct values (20), max = largest; N (300) stays static
    assert [c for c in calls if c[0] == "set_shape"] == [("set_shape", "x", (16, 300), (20, 300), (40, 300))]
    assert "min 16, opt 20" in server.how and "max 40" in server.how
    assert "engines" in server.counter
    for value in spec.values:
        graph = spec.bound_at(value)
        del calls[:]
        compiled = server.at(value, graph, [])
        prepared = compiled.prepare(_inputs(graph))
        compiled.run(prepared)
        names = calls.names()
        # the input's shape is set on the context first, the outputs are allocated at the shape it gives back
        assert calls[0] == ("set_input_shape", "x", (value, 300)), calls[:3]
        assert ("torch.full", (value, 300), True, "cuda") in calls
        assert names.index("set_input_shape") < names.index("set_tensor_address") < names.index("execute_async_v3")
        assert "build_serialized_network" not in names
    assert server.compiles() == 1
    outside = spec.bound_at(41)   # beyond max: TensorRT refuses the shape, the point fails loudly
    with pytest.raises(ValueError, match=r"outside the engine's optimization profile"):
        server.at(41, outside, []).prepare(_inputs(outside))


def test_sweep_profile_covers_every_swept_input_and_falls_back_where_the_export_bakes_the_dim(stub_trt):
    calls = stub_trt
    server = TensorRTBackend().serve_sweep(_sweep("attention", "S", [16, 64, 32]), "cuda", TensorRTBackend.Options())
    shapes = {c[1]: c[2:] for c in calls if c[0] == "set_shape"}
    assert shapes == {n: ((1, 2, 16, 16), (1, 2, 32, 16), (1, 2, 64, 16)) for n in "qkv"}
    assert server.compiles() == 1 and any("optimization profile 0" in n for n in server.notes)
    # the decomposed export writes S into its causal mask's size: one engine per shape, with that reason
    del calls[:]
    per_shape = TensorRTBackend().serve_sweep(_sweep("attention", "S", [16, 32]), "cuda",
                                              TensorRTBackend.parse_options({"attention": "decomposed"}))
    assert "one compile per shape" in per_shape.how and "holds S in a constant" in per_shape.how
    assert "create_optimization_profile" not in calls.names() and per_shape.compiles() == 0
    spec = _sweep("attention", "S", [16, 32])
    for value in (16, 32, 16):
        per_shape.at(value, spec.bound_at(value), [])
    assert per_shape.compiles() == 2 and calls.names().count("build_serialized_network") == 2


def test_a_cpu_run_says_tensorrt_does_not_run_on_the_cpu_before_that_it_is_not_installed(monkeypatch):
    """Installing TensorRT would not make a CPU case run: the device is the reason given."""
    from bakeoff.harness.config.schema import parse_config
    from bakeoff.harness.plan.cases import plan_cases
    from bakeoff.harness.plan.workloads import resolve_workloads

    monkeypatch.setitem(sys.modules, "tensorrt", None)
    cfg, where = parse_config("name: t\ndevice: cpu\npreset: smoke\ndtypes: [float32]\nworkloads: [softmax]\n"
                              "backends:\n  eager: {}\n  tensorrt: {}\n", "<t>")
    cases = plan_cases(cfg, resolve_workloads(cfg, where, "smoke", "cpu"), "cpu")
    assert {c.label: c.skip_reason for c in cases} == {"eager": None, "tensorrt": "tensorrt does not run on cpu"}
    assert plan_cases(cfg, resolve_workloads(cfg, where, "smoke", "cuda"), "cuda")[1].skip_reason == \
        "tensorrt not installed (pip install tensorrt-cu13)"
