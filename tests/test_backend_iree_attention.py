"""IREE's fused attention route (backends/iree_attention.py): the IR iree-compile gets for CUDA, numerics on
the CPU against fp64, the route the record names, and the option's errors."""
import pytest

from backend_check import REL_L2_TOL, rel_l2_vs_reference, smoke_graph
from bakeoff.backends import get_backend
from bakeoff.backends import iree_attention

IREE = get_backend("iree")
REASON = IREE.available()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")
CUDA_FLAGS = ["--iree-hal-target-device=cuda", "--iree-cuda-target=sm_89", "--iree-opt-level=O3",
              "--iree-dispatch-creation-enable-aggressive-fusion=true"]


def _cuda_dispatches(workload: str, option: str, tmp_path) -> dict[str, str]:
    """The configured dispatch sources iree-compile writes for `workload` in bf16 compiled for sm_89, at its `gpu`
    sizes: the codegen configuration depends on the shapes, and compiling takes about a second at any size."""
    import iree.compiler as ireec

    from bakeoff.workloads.ir import bind
    from bakeoff.workloads.lower_jax import lowering_paths, stablehlo_text
    from bakeoff.workloads.suite import builtin_workloads

    w = builtin_workloads()[workload]
    graph = bind(w.graph, w.presets["gpu"], "bfloat16")
    source, paths = iree_attention.route(stablehlo_text(graph, "cuda"), graph, option, False,
                                         lowering_paths(graph))
    ireec.compile_str(source, input_type="stablehlo",
                      extra_args=CUDA_FLAGS + [f"--iree-hal-dump-executable-configurations-to={tmp_path}"])
    return {p.name: p.read_text() for p in sorted(tmp_path.glob("*.mlir"))}


def test_fused_attention_is_one_cuda_dispatch_with_tensor_cores(tmp_path):
    dispatches = _cuda_dispatches("attention", "fused", tmp_path)
    assert len(dispatches) == 1, list(dispatches)
    (text,) = dispatches.values()
    assert "iree_linalg_ext.online_attention" in text  # the attention op, tiled over K/V with a running softmax
    assert "pipeline = #iree_gpu.pipeline<VectorDistribute>" in text
    assert "mma_kind = #iree_gpu.mma_layout<NV_MMA_SYNC_F32_16x8x16_BF16>" in text  # QK^T and PV on tensor cores


def test_decomposed_attention_keeps_the_scores_between_dispatches(tmp_path):
    dispatches = _cuda_dispatches("attention", "decomposed", tmp_path)
    assert len(dispatches) >= 3, list(dispatches)  # QK^T, softmax, PV at least
    assert not any("attention" in t for t in dispatches.values())
    assert any("_softmax_" in t for t in dispatches.values())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("workload", ["attention", "attn_block"])
def test_fused_attention_matches_reference_on_cpu(workload, dtype):
    assert rel_l2_vs_reference("iree", workload, dtype, options={"attention": "fused"}) < REL_L2_TOL[dtype]


@pytest.mark.parametrize(("option", "dtype", "fused"), [("auto", "bfloat16", False), ("auto", "float32", False),
                                                        ("fused", "float32", True), ("decomposed", "bfloat16", False)])
def test_route_is_recorded(option, dtype, fused):
    c = IREE.compile(smoke_graph("attention", dtype), [], "cpu", IREE.parse_options({"attention": option}))
    words = c.info.lowering["sdpa"]
    assert words.startswith("fused: iree_linalg_ext.attention" if fused else "decomposed"), words
    assert f"sdpa: {words}" in c.info.notes
    assert ("iree_linalg_ext.attention" in c.artifacts()["stablehlo"]) == fused


def test_training_step_keeps_attention_decomposed():
    c = IREE.compile_grad(smoke_graph("attention", "bfloat16"), [], "cpu", IREE.parse_options({"attention": "fused"}))
    assert c.info.lowering["sdpa"].startswith("decomposed"), c.info.lowering
    assert "jax.vjp" in c.info.lowering["sdpa"]


def test_a_function_without_a_matching_sdpa_node_is_left_alone():
    from bakeoff.workloads.lower_jax import stablehlo_text

    source = stablehlo_text(smoke_graph("attention", "float32"), "cpu")
    other = smoke_graph("attn_block", "float32")  # its sdpa has other shapes
    out, count, left = iree_attention.fuse_attention(source, other)
    assert (out, count) == (source, 0)
    assert left and "no single sdpa node" in left[0]


def test_bad_attention_option_is_named():
    with pytest.raises(ValueError) as err:
        IREE.parse_options({"attention": "flash"})
    assert "attention" in str(err.value) and "fused" in str(err.value)
    with pytest.raises(ValueError, match="auto, fused, decomposed"):
        iree_attention.wanted("flash", "bfloat16")
