"""ONNX Runtime's fused attention (com.microsoft MultiHeadAttention / GroupQueryAttention) and the
onnxruntime.transformers pass, on the CPU provider: numerics against eager and fp64, which form ran, the
fallback chain and its record."""
import numpy as np
import pytest

from ci_required import importorskip
from backend_check import REL_L2_TOL, smoke_graph
from bakeoff.backends import get_backend
from bakeoff.backends.onnx_contrib import GQA, MHA, ContribRefused, contrib_attention
from bakeoff.backends.sweep_server import PerShapeServer, SweepSpec
from bakeoff.harness.worker.input_tensors import make_inputs
from bakeoff.workloads.builder import GraphBuilder
from bakeoff.workloads.ir import bind
from bakeoff.workloads.lower_onnx import input_names, lower_onnx
from bakeoff.workloads.reference import evaluate_reference
from bakeoff.workloads.suite import builtin_workloads

onnx = importorskip("onnx", reason="onnx is not installed (pip install 'bakeoff[onnx]')")
ort = importorskip("onnxruntime", reason="onnxruntime is not installed (pip install 'bakeoff[onnx]')")


def _errors(graph, options):
    """(rel L2 vs fp64, rel L2 vs eager) of the worst output, and the compiled case."""
    xs = make_inputs(graph, 0, "cpu")
    backend = get_backend("onnxruntime")
    compiled = backend.compile(graph, [], "cpu", backend.parse_options(options))
    got = [y.double().numpy() for y in compiled(*xs)]
    eager = [y.double().numpy() for y in get_backend("eager").compile(graph, [], "cpu", {})(*xs)]
    refs = evaluate_reference(graph, [x.double().numpy() for x in xs])
    rel = lambda a, b: float(np.linalg.norm(a - b) / np.linalg.norm(b))   # noqa: E731
    return (max(rel(g, r) for g, r in zip(got, refs)), max(rel(g, e) for g, e in zip(got, eager)), compiled)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("workload", ["attention", "attn_block"])
def test_contrib_attention_matches_eager_and_runs_the_fused_op(workload, dtype):
    graph = smoke_graph(workload, dtype)
    vs_fp64, vs_eager, compiled = _errors(graph, {})   # the defaults: attention=contrib, optimize=transformers
    assert vs_fp64 < REL_L2_TOL[dtype] and vs_eager < REL_L2_TOL[dtype], (vs_fp64, vs_eager)
    assert compiled.info.lowering["sdpa"].startswith(f"contrib: com.microsoft.{MHA}")
    art = compiled.artifacts()
    assert art["op_types"].get(MHA) == 1 and "Attention" not in art["op_types"]
    # ONNX Runtime kept the contrib op: its optimized graph still computes attention with it
    assert art["optimized_op_types"].get(f"com.microsoft.{MHA}") == 1
    assert "attention=contrib" in compiled.info.notes
    assert any(n.startswith("optimize=transformers") for n in compiled.info.notes)
    assert compiled.info.compiler_stages == ("session",) and {"export", "optimize"} <= set(compiled.info.stages_s)


@pytest.mark.parametrize("op", [MHA, GQA])
def test_the_rewrite_copies_no_operand_heads_fold_into_the_batch_or_transposes_cancel(op):
    """Operands given as (batch, heads, seq, dim) are read as (batch * heads, seq, dim) with one head (reshapes
    only, no Transpose); a block's projections, transposed into that layout by the export, are transposed back
    (all heads in one row) so that the transpose pairs cancel."""
    plain = contrib_attention(lower_onnx(smoke_graph("attention", "float16"), 23, "native"), op)
    assert "Transpose" not in [n.op_type for n in plain.graph.node]
    contrib, = [n for n in plain.graph.node if n.op_type == op]
    assert [a.i for a in contrib.attribute if a.name == "num_heads"] == [1]
    block = contrib_attention(lower_onnx(smoke_graph("attn_block", "float16"), 23, "native"), op)
    contrib, = [n for n in block.graph.node if n.op_type == op]
    assert [a.i for a in contrib.attribute if a.name == "num_heads"] == [builtin_workloads()["attn_block"]
                                                                          .presets["smoke"]["H"]]


@pytest.mark.parametrize("workload", ["attention", "attn_block"])
def test_the_session_runs_the_fused_op_without_a_transpose(workload):
    """What ONNX Runtime runs after its own optimizer: the contrib op and no Transpose around it."""
    _, _, compiled = _errors(smoke_graph(workload, "float32"), {})
    optimized = compiled.artifacts()["optimized_op_types"]
    assert optimized.get(f"com.microsoft.{MHA}") == 1 and "Transpose" not in optimized, optimized


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("workload", ["attention", "attn_block"])
def test_group_query_attention_form_matches_fp64(workload, dtype):
    """The form the CUDA provider runs bfloat16 with, checked where ONNX Runtime's CPU provider has it."""
    graph = smoke_graph(workload, dtype)
    model = contrib_attention(lower_onnx(graph, 23, "native"), GQA)
    assert [n.op_type for n in model.graph.node].count(GQA) == 1
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    xs = make_inputs(graph, 0, "cpu")
    got = session.run(None, {n: x.numpy() for n, x in zip(input_names(graph), xs)})[0].astype(np.float64)
    ref = evaluate_reference(graph, [x.double().numpy() for x in xs])[0]
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < REL_L2_TOL[dtype]


def test_a_provider_without_the_op_falls_to_the_next_form_and_the_record_says_why(monkeypatch):
    """As the CUDA provider does for bfloat16 MultiHeadAttention: the session is refused, GroupQueryAttention
    runs, and the lowering names the refusal."""
    from bakeoff.backends import onnxrt

    real = onnxrt._session_maker

    def no_mha(device, opts):
        make = real(device, opts)

        def session(model_bytes):
            if MHA.encode() in model_bytes:
                raise RuntimeError("[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : no MultiHeadAttention(1) kernel")
            return make(model_bytes)
        return session

    monkeypatch.setattr(onnxrt, "_session_maker", no_mha)
    vs_fp64, _, compiled = _errors(smoke_graph("attn_block"), {"optimize": "none"})
    assert vs_fp64 < REL_L2_TOL["float32"]
    sdpa = compiled.info.lowering["sdpa"]
    assert sdpa.startswith(f"contrib: com.microsoft.{GQA}")
    assert f"tried before it: com.microsoft.{MHA}: onnxruntime {ort.__version__} CPU provider could not run it: " \
           "no MultiHeadAttention(1) kernel" in sdpa
    assert f"session_failed_{MHA}" in compiled.info.stages_s and "optimize" not in compiled.info.stages_s


def test_native_and_decomposed_stay_options():
    graph = smoke_graph("attention")
    for attention, op in (("native", "Attention"), ("decomposed", "Softmax")):
        vs_fp64, _, compiled = _errors(graph, {"attention": attention})
        assert vs_fp64 < REL_L2_TOL["float32"]
        assert compiled.info.lowering["sdpa"].startswith(attention)
        assert op in compiled.artifacts()["op_types"] and MHA not in compiled.artifacts()["op_types"]
    with pytest.raises(ValueError, match="attention"):
        get_backend("onnxruntime").parse_options({"attention": "flash"})


def test_cross_length_causal_attention_is_refused_by_the_rewrite_and_runs_native():
    """A causal mask over different query and key lengths: torch aligns it top-left, MultiHeadAttention's
    unidirectional mask is not defined there, so the rewrite refuses and names why."""
    b = GraphBuilder("cross")
    q, k, v = b.input("q", ("B", "H", "S", "D")), b.input("k", ("B", "H", "T", "D")), b.input("v", ("B", "H", "T", "D"))
    graph = bind(b.finish([b.sdpa(q, k, v, causal=True)]), {"B": 1, "H": 2, "S": 5, "T": 9, "D": 8}, "float32")
    with pytest.raises(ContribRefused, match="query length 5 and key length 9 differ"):
        contrib_attention(lower_onnx(graph, 23, "native"), MHA)
    vs_fp64, _, compiled = _errors(graph, {})
    assert vs_fp64 < REL_L2_TOL["float32"]
    sdpa = compiled.info.lowering["sdpa"]
    assert sdpa.startswith("native") and f"com.microsoft.{MHA}: {MHA}: query length 5" in sdpa


def test_without_an_attention_op_in_the_opset_only_the_decomposed_form_is_tried():
    _, _, compiled = _errors(smoke_graph("attention"), {"opset": 18})
    assert compiled.info.lowering["sdpa"].startswith("decomposed") and "tried" not in compiled.info.lowering["sdpa"]
    assert not any(k.startswith("session_failed") for k in compiled.info.stages_s)


def test_transformers_pass_is_recorded_and_can_be_turned_off():
    graph = smoke_graph("mlp_block")
    _, vs_eager, compiled = _errors(graph, {"optimize": "transformers"})
    assert vs_eager < REL_L2_TOL["float32"]
    words = [n for n in compiled.info.notes if n.startswith("optimize=transformers")]
    assert len(words) == 1 and ("fused" in words[0] or "no fusion matched" in words[0])
    _, _, plain = _errors(graph, {"optimize": "none"})
    assert not any(n.startswith("optimize=") for n in plain.info.notes) and "optimize" not in plain.info.stages_s


def test_transformers_fusions_apply_to_constant_biases():
    """The pass itself fuses where its patterns match (a bias that is an initializer): BiasGelu."""
    from bakeoff.backends.onnxrt_session import transformers_optimize

    from onnx import TensorProto, helper

    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["hb"]),
             helper.make_node("Gelu", ["hb"], ["y"], domain="com.microsoft")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
                              initializer=[helper.make_tensor("w", TensorProto.FLOAT, [8, 8], [0.1] * 64),
                                           helper.make_tensor("b", TensorProto.FLOAT, [8], [0.2] * 8)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    optimized, words = transformers_optimize(model, "cpu")
    assert "com.microsoft.BiasGelu x1" in words
    assert [n.op_type for n in optimized.graph.node] == ["MatMul", "BiasGelu"]


def test_a_sweep_over_the_sequence_serves_every_length_from_one_contrib_session():
    w = builtin_workloads()["attention"]
    spec = SweepSpec(w.graph, dict(w.presets["smoke"]), "S", (16, 40, 24), "float32")
    ort_backend = get_backend("onnxruntime")
    server = ort_backend.serve_sweep(spec, "cpu", ort_backend.parse_options({}))
    assert not isinstance(server, PerShapeServer)
    assert f"attention=com.microsoft.{MHA}" in server.notes
    for value in spec.values:
        graph = spec.bound_at(value)
        xs = make_inputs(graph, 0, "cpu")
        want = get_backend("eager").compile(graph, [], "cpu", {})(*xs)[0]
        got = server.at(value, graph, [])(*xs)[0]
        assert got.shape == want.shape and float((got - want).abs().max()) < 1e-5
    assert server.compiles() == 1


def test_group_query_attention_with_a_dynamic_sequence_reads_its_lengths_from_the_shape():
    from bakeoff.backends.onnx_export import dynamic_model
    from bakeoff.backends.onnxrt import OrtOptions

    w = builtin_workloads()["attention"]
    spec = SweepSpec(w.graph, dict(w.presets["smoke"]), "S", (16, 40), "float32")
    model, reason = dynamic_model(spec, OrtOptions(), "native")
    assert reason is None
    session = ort.InferenceSession(contrib_attention(model, GQA).SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    for value in spec.values:
        graph = spec.bound_at(value)
        xs = make_inputs(graph, 0, "cpu")
        got = session.run(None, {n: x.numpy() for n, x in zip(input_names(graph), xs)})[0].astype(np.float64)
        ref = evaluate_reference(graph, [x.double().numpy() for x in xs])[0]
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < REL_L2_TOL["float32"]


def test_group_query_attention_refuses_bidirectional_attention():
    b = GraphBuilder("bidir")
    q, k, v = (b.input(n, ("B", "H", "S", "D")) for n in "qkv")
    graph = bind(b.finish([b.sdpa(q, k, v)]), {"B": 1, "H": 2, "S": 5, "D": 8}, "float32")
    with pytest.raises(ContribRefused, match="causal"):
        contrib_attention(lower_onnx(graph, 23, "native"), GQA)
    assert contrib_attention(lower_onnx(graph, 23, "native"), MHA) is not None
