"""ONNX Runtime on CPU against the fp64 reference: every suite workload, every op, the export and the options."""
import sys

import numpy as np
import pytest

from ci_required import importorskip
from backend_check import REL_L2_TOL, WORKLOADS, rel_l2_vs_reference
from bakeoff.backends import get_backend
from bakeoff.backends.onnxrt import OnnxRuntimeBackend
from bakeoff.harness.worker.input_tensors import make_inputs
from bakeoff.workloads.builder import GraphBuilder
from bakeoff.workloads.ir import Graph, bind
from bakeoff.workloads.reference import evaluate_reference
from bakeoff.workloads.suite import builtin_workloads

onnx = importorskip("onnx", reason="onnx is not installed (pip install 'bakeoff[onnx]')")
ort = importorskip("onnxruntime", reason="onnxruntime is not installed (pip install 'bakeoff[onnx]')")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("workload", WORKLOADS)
def test_matches_reference(workload, dtype):
    # Skips (with ONNX Runtime's own words) where the CPU provider has no kernel for the dtype.
    assert rel_l2_vs_reference("onnxruntime", workload, dtype) < REL_L2_TOL[dtype]


def test_bfloat16_skip_names_the_missing_kernel():
    w = builtin_workloads()["gemm_bias_gelu"]
    reason = OnnxRuntimeBackend().supports(bind(w.graph, w.presets["smoke"], "bfloat16"), "cpu", "bfloat16")
    if reason is not None:   # CPU builds of ONNX Runtime to date have no bfloat16 MatMul/Add/Gelu
        assert reason.startswith(f"onnxruntime {ort.__version__} CPU provider has no bfloat16 kernel for ")
        assert "NOT_IMPLEMENTED" in reason


def test_cuda_needs_the_cuda_provider():
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has the CUDA provider")
    w = builtin_workloads()["softmax"]
    g = bind(w.graph, w.presets["smoke"], "float32")
    assert OnnxRuntimeBackend().supports(g, "cuda", "float32") == \
        "onnxruntime has no CUDA provider (pip install onnxruntime-gpu)"


def _every_op(dtype: str) -> Graph:
    """One graph using every op in workloads/ops.py, several outputs, one of them an input and one repeated."""
    b = GraphBuilder("every_op")
    x = b.input("x", ("M", "N"), init=("uniform", 0.5, 1.5))   # positive: log, sqrt, rsqrt, pow, div
    y = b.input("y", ("M", "N"))
    w = b.input("w", ("N",), init=("uniform", 0.5, 1.5))
    v = b.input("v", ("N",), init=("normal", 0.1))
    k2 = b.input("k2", ("N", "K"))
    q = b.input("q", ("B", "S", "D"))
    k = b.input("k", ("B", "T", "D"))
    vv = b.input("vv", ("B", "T", "D"))
    outs = [b.exp(b.neg(x)), b.log(x), b.sqrt(x), b.rsqrt(x), b.tanh(y), b.erf(y), b.sigmoid(y), b.relu(y),
            b.gelu(y), b.gelu(y, approximate="tanh"), b.silu(y), b.pow(x, exponent=3.0),
            b.cast(b.cast(y, dtype="float64"), dtype=dtype),
            b.softmax(b.causal_mask(y)),
            b.add(y, b.const(2.0)), b.sub(x, y), b.mul(x, y), b.div(y, x), b.maximum(x, y),
            b.sum(y), b.mean(y), b.max(y), b.var(y), b.var(y, correction=1),
            b.transpose(b.reshape(y, shape=("N", "M")), perm=(1, 0)), b.mul(b.broadcast(v, shape=("M", "N")), y),
            b.layer_norm(y), b.layer_norm(y, w), b.layer_norm(y, w, v), b.rms_norm(y), b.rms_norm(y, w),
            b.softmax(y), b.matmul(y, k2),
            b.sdpa(q, k, vv, scale=0.3), b.sdpa(q, k, vv, causal=True)]
    return b.finish(outs + [x, outs[0]])


def _worst_rel_l2(graph: Graph, options: dict) -> float:
    inputs = make_inputs(graph, 0, "cpu")
    backend = get_backend("onnxruntime")
    compiled = backend.compile(graph, [], "cpu", backend.parse_options(options))
    outputs = compiled(*inputs)
    refs = evaluate_reference(graph, [t.double().numpy() for t in inputs])
    assert len(outputs) == len(refs)
    worst = 0.0
    for out, ref in zip(outputs, refs):
        got = out.double().numpy()
        assert got.shape == ref.shape and np.isfinite(got).all()
        worst = max(worst, float(np.linalg.norm(got - ref) / np.linalg.norm(ref)))
    return worst


@pytest.mark.parametrize("opset", [23, 18])   # 18: Gelu and RMSNormalization decomposed
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_every_op_matches_reference(dtype, opset):
    dims = {"M": 6, "N": 10, "K": 7, "B": 2, "S": 5, "T": 5, "D": 8}
    graph = bind(_every_op(dtype), dims, dtype)
    assert _worst_rel_l2(graph, {"opset": opset}) < REL_L2_TOL[dtype]


def test_export_is_valid_and_uses_native_ops(tmp_path):
    from bakeoff.workloads.lower_onnx import lower_onnx

    def ops(name: str, opset: int = 23) -> set:
        w = builtin_workloads()[name]
        model = lower_onnx(bind(w.graph, w.presets["smoke"], "float32"), opset)
        onnx.checker.check_model(model, full_check=True)
        assert model.ir_version <= 13, "onnxruntime 1.30 loads IR versions up to 13"
        return {n.op_type for n in model.graph.node}

    assert {"LayerNormalization", "Gelu"} <= ops("layernorm_gelu")
    assert "RMSNormalization" in ops("rmsnorm") and "RMSNormalization" not in ops("rmsnorm", 22)
    attention = ops("attention")
    assert attention == {"Attention"}  # the opset-23 op; the decomposed form is tests/test_native_lowering.py's


def test_artifacts_and_model_file(tmp_path):
    w = builtin_workloads()["layernorm_gelu"]
    g = bind(w.graph, w.presets["smoke"], "float32")
    backend = get_backend("onnxruntime")
    compiled = backend.compile(g, [], "cpu", backend.parse_options({"artifacts_dir": str(tmp_path)}))
    assert set(compiled.info.stages_s) == {"export", "optimize", "session"}
    art = compiled.artifacts()
    assert art["opset"] == 23 and art["nodes"] == 2 and art["op_types"] == {"Gelu": 1, "LayerNormalization": 1}
    assert art["onnx_bytes"] > 0 and "optimized_op_types" in art
    assert onnx.load_from_string(art["model.onnx"]).graph.name == "layernorm_gelu"
    model = onnx.load(art["model_path"])
    assert [n.op_type for n in model.graph.node] == ["LayerNormalization", "Gelu"]


def test_options():
    w = builtin_workloads()["softmax"]
    g = bind(w.graph, w.presets["smoke"], "float32")
    backend = get_backend("onnxruntime")
    with pytest.raises(ValueError, match="bogus"):
        backend.parse_options({"bogus": 1})
    with pytest.raises(ValueError, match="graph_optimization_level"):
        backend.parse_options({"graph_optimization_level": "max"})
    xs = make_inputs(g, 0, "cpu")
    for level in ("disable", "basic", "extended", "all"):
        opts = backend.parse_options({"graph_optimization_level": level, "intra_op_num_threads": 1})
        compiled = backend.compile(g, [], "cpu", opts)
        assert f"graph_optimization_level={level}" in compiled.info.notes
        assert np.allclose(compiled(*xs)[0].sum(-1).numpy(), 1.0, atol=1e-5)


def test_reason_when_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)   # makes `import onnxruntime` raise ImportError
    assert OnnxRuntimeBackend.available() == "onnxruntime not installed (pip install 'bakeoff[onnx]')"
    # The version is read from package metadata, without importing: it names what is installed even when
    # the import is broken (and `available()` says why it cannot run).
    import importlib.metadata

    assert OnnxRuntimeBackend.version() == importlib.metadata.version("onnxruntime")


def test_version_is_the_imported_packages_and_a_double_install_is_a_warning(monkeypatch, tmp_path):
    """onnxruntime and onnxruntime-gpu install the same package: the version is read from the files Python
    imports, and doctor warns when both distributions are installed."""
    import types

    from bakeoff.backends import onnxrt_install

    init = tmp_path / "onnxruntime" / "__init__.py"
    init.parent.mkdir()
    init.write_text('"""ONNX Runtime."""\n__version__ = "1.31.1"\n')
    monkeypatch.setattr(onnxrt_install.importlib.util, "find_spec",
                        lambda name: types.SimpleNamespace(origin=str(init)))
    monkeypatch.setattr(onnxrt_install, "dist_version", {"onnxruntime": "1.30.0", "onnxruntime-gpu": "1.31.1"}.get)
    assert OnnxRuntimeBackend.version() == "1.31.1"
    warning = OnnxRuntimeBackend.install_warning()
    assert "onnxruntime 1.30.0 and onnxruntime-gpu 1.31.1" in warning and "imports 1.31.1" in warning
    monkeypatch.setattr(onnxrt_install, "dist_version", {"onnxruntime-gpu": "1.31.1"}.get)
    assert OnnxRuntimeBackend.install_warning() is None


def test_cuda_provider_runs_float32_as_float32_unless_tf32_is_asked(monkeypatch):
    """The CUDA provider's use_tf32 defaults to on upstream: bakeoff passes it off unless the option asks."""
    import torch

    from bakeoff.backends import onnxrt

    monkeypatch.setattr(onnxrt, "_device_id", lambda device: ("cuda", 0))
    monkeypatch.setattr(torch.cuda, "current_stream", lambda index: type("S", (), {"cuda_stream": 0})())
    opts = OnnxRuntimeBackend.parse_options({})
    assert opts.use_tf32 is False
    assert onnxrt._providers("cuda:0", opts)[0][1]["use_tf32"] == "0"
    assert onnxrt._providers("cuda:0", OnnxRuntimeBackend.parse_options({"use_tf32": True}))[0][1]["use_tf32"] == "1"


def test_supports_never_raises_at_planning_time(monkeypatch):
    import bakeoff.backends.onnxrt as onnxrt
    import bakeoff.backends.onnxrt_session as onnxrt_session

    w = builtin_workloads()["softmax"]
    g = bind(w.graph, w.presets["smoke"], "float32")
    backend = OnnxRuntimeBackend()

    def no_rule(graph, *args, **kwargs):
        raise NotImplementedError("no ONNX lowering for op 'frobnicate'")

    monkeypatch.setattr(onnxrt, "_PROBES", {})
    monkeypatch.setattr(onnxrt_session, "lower_onnx", no_rule)  # the name the adapter calls
    assert backend.supports(g, "cpu", "float32") == "onnxruntime: no ONNX lowering for op 'frobnicate'"

    def bug(graph, *args, **kwargs):
        raise KeyError("a lowering bug")

    monkeypatch.setattr(onnxrt, "_PROBES", {})
    monkeypatch.setattr(onnxrt_session, "lower_onnx", bug)  # the name the adapter calls
    assert backend.supports(g, "cpu", "float32") is None   # compile() raises it again: a per-case compile_error
    with pytest.raises(KeyError):
        backend.compile(g, [], "cpu", backend.Options())


def test_the_planning_probe_uses_the_case_options(monkeypatch):
    """supports() exports at the case's opset, as compile() will."""
    import bakeoff.workloads.lower_onnx as lower
    from bakeoff.backends import onnxrt, onnxrt_session

    w = builtin_workloads()["layernorm_gelu"]
    g = bind(w.graph, w.presets["smoke"], "float32")
    opsets = []
    real = lower.lower_onnx

    def spy(graph, opset=lower.DEFAULT_OPSET, attention="native"):
        opsets.append(opset)
        return real(graph, opset, attention)

    monkeypatch.setattr(onnxrt, "_PROBES", {})
    monkeypatch.setattr(onnxrt_session, "lower_onnx", spy)  # the name the adapter calls
    backend = OnnxRuntimeBackend()
    assert backend.supports(g, "cpu", "float32", backend.parse_options({"opset": 18})) is None and opsets == [18]
    assert backend.supports(g, "cpu", "float32") is None and opsets == [18, lower.DEFAULT_OPSET]  # None: defaults


def test_outputs_start_as_nan_and_inputs_must_be_on_the_session_device():
    import torch

    w = builtin_workloads()["softmax"]
    g = bind(w.graph, w.presets["smoke"], "float32")
    backend = get_backend("onnxruntime")
    compiled = backend.compile(g, [], "cpu", backend.Options())
    xs = make_inputs(g, 0, "cpu")
    binding, _, outs = prepared = compiled.prepare(xs)
    assert all(torch.isnan(y).all() for y in outs)   # never written: cannot pass the check
    out = compiled.to_torch(compiled.run(prepared))[0]
    assert torch.isfinite(out).all()
    with pytest.raises(ValueError, match="is on meta"):
        compiled.prepare([x.to("meta") for x in xs])


def test_headline_compile_time_is_session_creation():
    from types import SimpleNamespace

    from bakeoff.harness.worker.compile_step import compile_and_first_run

    w = builtin_workloads()["layernorm_gelu"]
    g = bind(w.graph, w.presets["smoke"], "float32")
    case = SimpleNamespace(device="cpu", options=OnnxRuntimeBackend.Options())
    compiled, _, _, seconds, total = compile_and_first_run(get_backend("onnxruntime"), g, [], case, make_inputs(g, 0, "cpu"))
    stages = compiled.info.stages_s
    assert compiled.info.compiler_stages == ("session",) and seconds == stages["session"]
    assert set(stages) == {"export", "optimize", "session", "first_run"}
    assert total >= stages["export"] + stages["session"] + stages["first_run"]


@pytest.mark.gpu
@pytest.mark.parametrize("workload, dtype", [("gemm_bias_gelu", "float16"), ("attention", "bfloat16"),
                                             ("layernorm_gelu", "float32")])
def test_cuda_binding_runs_without_copies_into_the_bound_outputs(workload, dtype):
    """On the GPU a timed call is the session's run over the IOBinding prepare() made: CUPTI sees the provider's
    kernels and no host-device copy, the outputs are the tensors bound (written in place, no longer NaN), and
    they match eager. Skips without a CUDA device or ONNX Runtime's CUDA provider (onnxruntime-gpu)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from bakeoff.workloads.lower_torch import lower_torch

    if not torch.cuda.is_available() or "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip("needs a CUDA device and onnxruntime-gpu's CUDA provider")
    w = builtin_workloads()[workload]
    g = bind(w.graph, w.presets["smoke"], dtype)
    backend = get_backend("onnxruntime")
    compiled = backend.compile(g, [], "cuda", backend.Options())
    xs = make_inputs(g, 0, "cuda")
    prepared = compiled.prepare(xs)
    bound = [y.data_ptr() for y in prepared[2]]
    compiled.run(prepared)  # the session's first run (its allocations, algorithm choices) outside the profile
    compiled.sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        outs = compiled.run(prepared)
        compiled.sync()
    cuda = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    copies = [e.name for e in cuda if "memcpy" in e.name.lower() and ("htod" in e.name.lower()
                                                                      or "dtoh" in e.name.lower())]
    assert cuda and not copies, copies
    assert [y.data_ptr() for y in outs] == bound and all(torch.isfinite(y).all() for y in outs)
    want = lower_torch(g)(*xs)
    for got, ref in zip(compiled.to_torch(outs), want):
        rel = ((got.double() - ref.double()).norm() / ref.double().norm()).item()
        assert rel < REL_L2_TOL[dtype], (workload, dtype, rel)
