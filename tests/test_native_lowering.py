"""Each backend at its best: attention lowered to the framework's native op (jax.nn.dot_product_attention,
the ONNX Attention op), the decomposed form as an option, the route recorded, and each native route passing
the harness's own verdict against fp64 on the CPU. IREE keeps the decomposed form and says why."""
from __future__ import annotations

import pytest

from backend_check import smoke_graph
from bakeoff.backends import get_backend
from bakeoff.backends.options import NoOptions
from bakeoff.harness.measure.checks import check_outputs, reference_outputs
from bakeoff.harness.worker.input_tensors import make_inputs


def _verdict(backend: str, workload: str, dtype: str, options: dict):
    """The harness's verdict (vs fp64 and eager) for `backend` on a smoke workload, and the compile info."""
    b = get_backend(backend)
    if b.available():
        pytest.skip(b.available())
    graph = smoke_graph(workload, dtype)
    opts = b.parse_options(options)
    reason = b.supports(graph, "cpu", dtype, opts)
    if reason:
        pytest.skip(reason)
    inputs = make_inputs(graph, 0, "cpu")
    eager = get_backend("eager").compile(graph, [], "cpu", NoOptions())(*inputs)
    compiled = b.compile(graph, [], "cpu", opts)
    check = check_outputs(graph, 0, compiled(*inputs), eager, reference_outputs(graph, inputs, "cpu"))
    return check, compiled.info


@pytest.mark.parametrize("workload", ["attention", "attn_block"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_xla_native_attention_passes_and_names_its_route(workload, dtype):
    check, info = _verdict("xla", workload, dtype, {})  # native is the default
    assert check.verdict.status == "ok", check.verdict.reason
    assert info.lowering["sdpa"].startswith("native: jax.nn.dot_product_attention(implementation=None)")
    assert any(n.startswith("sdpa: native") for n in info.notes)
    check, info = _verdict("xla", workload, dtype, {"attention": "decomposed"})
    assert check.verdict.status == "ok" and info.lowering["sdpa"].startswith("decomposed")


def test_xla_float16_attention_on_the_cpu_is_decomposed_with_the_reason():
    check, info = _verdict("xla", "attention", "float16", {})
    assert check.verdict.status == "ok" and "CPU backend rejects" in info.lowering["sdpa"]


@pytest.mark.parametrize("workload", ["attention", "attn_block"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_onnxruntime_native_attention_passes_and_names_its_route(workload, dtype):
    check, info = _verdict("onnxruntime", workload, dtype, {"attention": "native"})  # contrib is the default
    assert check.verdict.status == "ok", check.verdict.reason
    assert info.lowering["sdpa"].startswith("native: ONNX Attention (opset 23")
    check, info = _verdict("onnxruntime", workload, dtype, {"attention": "decomposed"})
    assert check.verdict.status == "ok" and info.lowering["sdpa"].startswith("decomposed")


def test_onnx_exports_attention_as_one_op_or_written_out():
    pytest.importorskip("onnx")
    from bakeoff.workloads.lower_onnx import lower_onnx

    graph = smoke_graph("attention")
    assert [n.op_type for n in lower_onnx(graph).graph.node] == ["Attention"]
    decomposed = {n.op_type for n in lower_onnx(graph, attention="decomposed").graph.node}
    assert "Attention" not in decomposed and {"MatMul", "Softmax", "Where"} <= decomposed
    assert "Attention" not in {n.op_type for n in lower_onnx(graph, 22).graph.node}  # before opset 23
    block = {n.op_type for n in lower_onnx(smoke_graph("attn_block")).graph.node}
    assert {"Attention", "LayerNormalization"} <= block and "Softmax" not in block


def test_onnxruntime_without_an_attention_kernel_falls_back_and_says_why(monkeypatch):
    pytest.importorskip("onnxruntime")
    import onnx
    import onnxruntime as ort

    real = ort.InferenceSession

    def no_attention(model, *args, **kwargs):
        if any(n.op_type == "Attention" for n in onnx.load_from_string(model).graph.node):
            raise RuntimeError("[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for "
                               "Attention(23) node with name 'a'")
        return real(model, *args, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", no_attention)
    check, info = _verdict("onnxruntime", "attention", "float32", {"attention": "native"})
    assert check.verdict.status == "ok"
    assert info.lowering["sdpa"].startswith("decomposed") and "Attention(23)" in info.lowering["sdpa"]
    assert "session_failed_native" in info.stages_s and "session" in info.stages_s


def test_iree_keeps_attention_decomposed_and_refuses_native():
    b = get_backend("iree")
    if b.available():
        pytest.skip(b.available())
    with pytest.raises(ValueError, match="StableHLO"):
        b.parse_options({"attention": "native"})
    check, info = _verdict("iree", "attention", "float32", {})
    assert check.verdict.status == "ok" and info.lowering["sdpa"].startswith("decomposed")
    assert "attention=auto" in info.lowering["sdpa"]  # auto keeps it decomposed (measured faster on the H200)


@pytest.mark.parametrize("backend", ["xla", "onnxruntime", "tensorrt"])
def test_a_bad_attention_value_is_refused(backend):
    """Refused by the backend's typed options (before any compiler is imported: TensorRT need not be here)."""
    with pytest.raises(ValueError, match="attention: Input should be .*'native'.* or 'decomposed'"):
        get_backend(backend).parse_options({"attention": "fused"})


def test_iree_refuses_native_attention_with_the_reason():
    with pytest.raises(ValueError, match="StableHLO"):
        get_backend("iree").parse_options({"attention": "native"})


@pytest.mark.gpu
def test_xla_native_attention_on_a_gpu_is_cudnn_flash_attention():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    b = get_backend("xla")
    graph = smoke_graph("attention", "bfloat16")
    compiled = b.compile(graph, [], "cuda", b.Options())
    assert "__cudnn$fmha" in compiled.artifacts()["hlo_optimized"], compiled.info.notes
    assert "implementation='cudnn'" in compiled.info.lowering["sdpa"]
    inputs = make_inputs(graph, 0, "cuda")
    eager = get_backend("eager").compile(graph, [], "cuda", NoOptions())(*inputs)
    check = check_outputs(graph, 0, compiled(*inputs), eager, reference_outputs(graph, inputs, "cuda"))
    assert check.verdict.status == "ok", check.verdict.reason
