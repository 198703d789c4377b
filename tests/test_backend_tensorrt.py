"""TensorRT: the reason given where it is absent, option checks, and the ONNX it would parse.

The build-and-run test needs TensorRT and a CUDA device; without them it skips with the backend's own reason.
"""
import sys

import pytest

from backend_check import REL_L2_TOL, WORKLOADS, rel_l2_vs_reference
from backends import backend_class
from backends.tensorrt import TensorRTBackend, check_options
from workloads.ir import bind
from workloads.suite import builtin_workloads

# ONNX ops the TensorRT 10.15 parser supports (onnx-tensorrt docs/operators.md) that lower_onnx may emit.
TRT_PARSER_OPS = {"Add", "Cast", "Div", "Erf", "Exp", "Expand", "Gelu", "GreaterOrEqual", "Identity",
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
        TensorRTBackend().compile(g, [], "cuda", {"bogus": True})
    with pytest.raises(ValueError, match="typing"):
        check_options({"typing": "loose"})
    with pytest.raises(ValueError, match="builder_optimization_level"):
        check_options({"builder_optimization_level": 9})
    check_options({"typing": "weak", "builder_optimization_level": 5, "tf32": True, "opset": 23})


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("workload", WORKLOADS)
def test_export_tensorrt_would_parse(workload, dtype):
    onnx = pytest.importorskip("onnx")
    from workloads.lower_onnx import DEFAULT_OPSET, lower_onnx

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
