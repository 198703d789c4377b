"""tritongen: every suite workload against the fp64 reference under Triton's interpreter, the fusion partition,
the looped row form, layout views and copies, and the warm path through the tune cache."""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported anywhere in this process

import pytest

from ci_required import importorskip

importorskip("triton", reason="triton is not installed (pip install 'bakeoff[triton]')")

import torch  # noqa: E402

from backend_check import REL_L2_TOL, WORKLOADS, rel_l2_vs_reference  # noqa: E402
from bakeoff.backends import get_backend  # noqa: E402
from bakeoff.backends.base import TensorSpec  # noqa: E402
from bakeoff.harness.worker.input_tensors import make_inputs  # noqa: E402
from bakeoff.workloads.builder import GraphBuilder  # noqa: E402
from bakeoff.workloads.ir import bind  # noqa: E402
from bakeoff.workloads.lower_torch import lower_torch  # noqa: E402
from bakeoff.workloads.suite import builtin_workloads  # noqa: E402
from sm90_offline import last_json, run_uninterpreted  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available(),
                                reason="needs TRITON_INTERPRET=1 on a machine without a GPU")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BAKEOFF_TRITONGEN_CACHE_DIR", str(tmp_path / "tg"))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("workload", WORKLOADS)
def test_matches_reference(workload, dtype):
    assert rel_l2_vs_reference("tritongen", workload, dtype) < REL_L2_TOL[dtype]


@pytest.mark.parametrize("workload", ["layernorm_gelu", "rmsnorm", "softmax", "softmax_large", "mlp_block"])
def test_looped_row_form_matches_reference(workload):
    err = rel_l2_vs_reference("tritongen", workload, "float32", options={"max_row_block": 64})
    assert err < REL_L2_TOL["float32"]


def test_looped_softmax_is_one_online_pass_plus_the_output_pass():
    from bakeoff.backends.tritongen.codegen import generate
    from bakeoff.backends.tritongen.source import CodegenTarget

    plan = _plan("softmax", "float32")
    text = generate(plan, plan.kernels[0], CodegenTarget(True, "float32", max_row_block=64)).text
    assert text.count("for c0 in range(") == 2 and "m_run" in text and "l_run" in text


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy on the padded rows past the end (never stored)
def test_online_softmax_survives_rows_that_start_with_minus_inf():
    b = GraphBuilder("neg_inf_rows")
    x = b.input("x", (13, 17))
    g = bind(b.finish([b.softmax(b.log(b.relu(x)))]), {}, "float32")  # log(0) = -inf for x <= 0
    xs = make_inputs(g, 5, "cpu")
    got = _compile(g, options={"max_row_block": 2})(*xs)[0]
    want = lower_torch(g)(*xs)[0]
    assert torch.isfinite(got).all() and torch.allclose(got, want, rtol=1e-5, atol=1e-6)


def _plan(workload: str, dtype: str = "float16"):
    from bakeoff.backends.tritongen.fusion import fuse

    w = builtin_workloads()[workload]
    return fuse(bind(w.graph, w.presets["smoke"], dtype))


@pytest.mark.parametrize("workload, kinds", [
    ("ew_sigmoid_relu", ["pointwise"]), ("ew_gelu_silu_gate", ["pointwise"]),
    ("layernorm_gelu", ["rowreduce"]), ("rmsnorm", ["rowreduce"]), ("softmax", ["rowreduce"]),
    ("softmax_large", ["rowreduce"]), ("gemm_bias_gelu", ["matmul"]), ("gemm_bias_residual", ["matmul"]),
    ("attention", ["attention"]), ("mlp_block", ["rowreduce", "matmul", "matmul"]),
    ("attn_block", ["rowreduce", "matmul", "matmul", "matmul", "attention", "matmul"]),
])
def test_partition(workload, kinds):
    plan = _plan(workload)
    assert [k.kind for k in plan.kernels] == kinds
    text = plan.text()
    assert all(k.name in text for k in plan.kernels)


def test_attention_block_head_layout_is_folded_into_strides():
    plan = _plan("attn_block")
    attn = next(k for k in plan.kernels if k.kind == "attention")
    # q/k/v are read straight from the projection outputs (B, S, H*Dh) through strides: no copy kernels
    assert all(v.strides == (768, 16, 32, 1) for _, v in attn.loads)
    # the output is written head-interleaved, so the out-projection reads it contiguously
    (_, out), = attn.stores
    assert out.strides == (768, 16, 32, 1)
    proj = plan.kernels[-1]
    assert any(v.buffer == out.buffer and v.strides == (768, 32, 1) for _, v in proj.loads)


def test_mlp_block_fuses_layernorm_and_epilogues():
    plan = _plan("mlp_block")
    ops = [[plan.graph.node(i).op for i in k.nodes] for k in plan.kernels]
    assert ops[1][-2:] == ["add", "gelu"] and ops[2][-2:] == ["add", "add"]
    assert len(plan.buffers) - len(plan.source.inputs) == 3  # LN output, hidden, result


def _compile(graph, dtype="float32", options=None):
    b = get_backend("tritongen")
    specs = TensorSpec.of_inputs(graph)
    return b.compile(graph, specs, "cpu", b.parse_options(options))


def _check_against_eager(graph, tol=1e-5):
    xs = make_inputs(graph, 3, "cpu")
    got = _compile(graph)(*xs)
    want = lower_torch(graph)(*xs)
    for g_, w_ in zip(got, want):
        assert g_.shape == w_.shape
        assert torch.allclose(g_, w_, rtol=tol, atol=tol)


def test_transpose_only_value_is_stored_transposed_so_the_reshape_is_a_view():
    b = GraphBuilder("t")
    y = b.reshape(b.transpose(b.exp(b.input("x", (5, 6, 7))), perm=(1, 0, 2)), shape=(30, 7))
    g = bind(b.finish([b.mul(y, b.const(2.0))]), {}, "float32")
    from bakeoff.backends.tritongen.fusion import fuse

    assert [k.kind for k in fuse(g).kernels] == ["pointwise", "pointwise"]
    _check_against_eager(g)


def test_reshape_of_a_transpose_gets_a_copy_kernel():
    b = GraphBuilder("t")
    x = b.input("x", (5, 6, 7))
    e = b.exp(x)
    y = b.reshape(b.transpose(e, perm=(1, 0, 2)), shape=(30, 7))
    # e is also an output, so it is stored in its own (contiguous) order and the reshape needs a copy
    g = bind(b.finish([b.mul(y, b.const(2.0)), e]), {}, "float32")
    from bakeoff.backends.tritongen.fusion import fuse

    assert [k.kind for k in fuse(g).kernels] == ["pointwise", "copy", "pointwise"]
    _check_against_eager(g)


def test_batched_matmul_broadcast_bias_and_transposed_operand():
    b = GraphBuilder("bmm")
    a, w = b.input("a", (3, 19, 24)), b.input("w", (3, 21, 24))
    bias = b.input("bias", (21,))
    y = b.relu(b.add(b.matmul(a, b.transpose(w, perm=(0, 2, 1))), bias))
    g = bind(b.finish([y]), {}, "float32")
    _check_against_eager(g, tol=1e-4)


def test_decomposed_attention_pattern_and_var():
    b = GraphBuilder("dec")
    q, k = b.input("q", (2, 9, 8)), b.input("k", (2, 11, 8))
    s = b.causal_mask(b.mul(b.matmul(q, b.transpose(k, perm=(0, 2, 1))), b.const(0.3)))
    p = b.softmax(s)
    v = b.var(b.input("x", (13, 17)), correction=1)
    g = bind(b.finish([p, v]), {}, "float32")
    _check_against_eager(g)


def test_warm_compile_hits_the_tune_cache():
    w = builtin_workloads()["gemm_bias_gelu"]
    g = bind(w.graph, w.presets["smoke"], "float16")
    cold = _compile(g)
    warm = _compile(g)
    assert cold.info.cache_hit is False and warm.info.cache_hit is True
    assert set(cold.info.stages_s) >= {"fuse", "codegen", "autotune", "compile"}
    arts = warm.artifacts()
    assert "k0_matmul" in arts["partition.txt"] and arts["kernel_count"] == 1
    assert "tl.dot" in arts["k0_matmul.py"]
    kern = arts["kernels"]["k0_matmul"]
    assert kern["config"]["BLOCK_M"] > 0 and kern["source_nodes"] == [3, 4, 5]
    # the interpreter compiles nothing: no IR texts, and None (not made-up numbers) for their facts
    assert "k0_matmul.ptx" not in arts and kern["ptx_bytes"] is None and kern["n_regs"] is None
    assert "interpreter" in arts["ir_note.txt"]


def test_availability_reasons(monkeypatch):
    from bakeoff.backends.tritongen import TritonGenBackend

    # The harness runs CPU cases under the interpreter: it sets this in the worker before triton is imported.
    assert TritonGenBackend.worker_env("cpu") == {"TRITON_INTERPRET": "1"}
    assert TritonGenBackend.worker_env("cuda") == {}
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    w = builtin_workloads()["softmax"]
    g = bind(w.graph, w.presets["smoke"], "float32")
    assert TritonGenBackend().supports(g, "cpu", "float32") is None
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        TritonGenBackend().compile(g, [], "cpu", TritonGenBackend.Options())


def test_gpu_artifacts_come_from_tritons_compiled_kernel():
    # Triton's CompiledKernel as the GPU path sees it (asm dict, n_regs after loading, metadata.shared)
    from types import SimpleNamespace

    from bakeoff.backends.tritongen.artifacts import collect
    from bakeoff.backends.tritongen.codegen import generate_all
    from bakeoff.backends.tritongen.source import CodegenTarget

    plan = _plan("rmsnorm")
    sources = generate_all(plan, CodegenTarget(True, "float16"))
    ck = SimpleNamespace(asm={"ttir": "tt", "ttgir": "ttg", "llir": "ll", "ptx": "ptx text", "cubin": b"\0"},
                         n_regs=40, n_spills=0, metadata=SimpleNamespace(shared=256))
    arts = collect(plan, sources, [{"BLOCK_M": 1}], [ck], [])
    assert arts["k0_rowreduce.ptx"] == "ptx text" and arts["k0_rowreduce.ttgir"] == "ttg"
    facts = arts["kernels"]["k0_rowreduce"]
    assert (facts["n_regs"], facts["shared_bytes"], facts["ptx_bytes"]) == (40, 256, 8)
    assert arts["ir_note.txt"] is None


def _written_out_attention(variant: str, dtype: str = "float32"):
    """Attention written with primitives (no sdpa node), in a few spellings of the same math."""
    from bakeoff.workloads.decompose import decompose

    if variant == "decomposed":   # exactly workloads.decompose's form of a causal sdpa
        w = builtin_workloads()["attention"]
        return decompose(bind(w.graph, w.presets["smoke"], dtype))
    b = GraphBuilder(variant)
    q, v = b.input("q", (2, 2, 40, 16)), b.input("v", (2, 2, 40, 24))
    if variant == "k_given_transposed":   # k as (B, H, Dh, S), no transpose op; scale as a division; no mask
        kt = b.input("kt", (2, 2, 16, 40))
        p = b.softmax(b.div(b.matmul(q, kt), b.const(4.0)))
    else:                                 # mask before the scale, the constant first
        k = b.input("k", (2, 2, 40, 16))
        p = b.softmax(b.mul(b.const(0.25), b.causal_mask(b.matmul(q, b.transpose(k, perm=(0, 1, 3, 2))))))
    return bind(b.finish([b.matmul(p, v)]), {}, dtype)


def _rel_l2_vs_fp64(graph, outputs, inputs) -> float:
    import numpy as np

    from bakeoff.workloads.reference import evaluate_reference

    refs = evaluate_reference(graph, [x.double().numpy() for x in inputs])
    return max(float(np.linalg.norm(o.double().numpy() - r) / np.linalg.norm(r)) for o, r in zip(outputs, refs))


@pytest.mark.parametrize("variant, dtype", [("decomposed", "float32"), ("decomposed", "float16"),
                                            ("k_given_transposed", "float32"), ("mask_then_scale", "float32")])
def test_written_out_attention_is_one_flash_attention_kernel(variant, dtype):
    from bakeoff.backends.tritongen.fusion import fuse

    g = _written_out_attention(variant, dtype)
    assert "sdpa" not in {n.op for n in g.nodes}
    plan = fuse(g)
    assert [k.kind for k in plan.kernels] == ["attention"], plan.text()
    compiled = _compile(g)
    assert compiled.artifacts()["kernel_count"] == 1
    xs = make_inputs(g, 1, "cpu")
    assert _rel_l2_vs_fp64(g, compiled(*xs), xs) < REL_L2_TOL[dtype]


def test_attention_pattern_whose_scores_are_read_elsewhere_is_fused_as_written():
    from bakeoff.backends.tritongen.fusion import fuse

    b = GraphBuilder("scores_out")
    q, k, v = (b.input(n, (2, 9, 8)) for n in "qkv")
    s = b.mul(b.matmul(q, b.transpose(k, perm=(0, 2, 1))), b.const(0.3))
    g = bind(b.finish([b.matmul(b.softmax(s), v), s]), {}, "float32")   # s is also returned
    kinds = [k.kind for k in fuse(g).kernels]
    assert "attention" not in kinds and len(kinds) == 3
    xs = make_inputs(g, 2, "cpu")
    assert _rel_l2_vs_fp64(g, _compile(g)(*xs), xs) < REL_L2_TOL["float32"]


def test_supports_never_raises_and_launches_are_event_timed(monkeypatch):
    import bakeoff.backends.tritongen.fusion as fusion
    from bakeoff.backends.tritongen import TritonGenBackend

    assert TritonGenBackend.timed_with_events and TritonGenBackend.graph_capturable
    w = builtin_workloads()["softmax"]
    g = bind(w.graph, w.presets["smoke"], "float32")

    def unsupported(graph):
        raise NotImplementedError("tritongen: no fusion rule for op 'frobnicate'")

    def bug(graph):
        raise KeyError("a fusion bug")

    monkeypatch.setattr(fusion, "fuse", unsupported)
    assert TritonGenBackend().supports(g, "cpu", "float32") == "tritongen: no fusion rule for op 'frobnicate'"
    monkeypatch.setattr(fusion, "fuse", bug)
    assert TritonGenBackend().supports(g, "cpu", "float32") is None   # compile() raises it: a compile_error


def _compile_with(graph, pick, dtype):
    """Compile for the interpreter with TMA twins generated, each kernel's fixed config rewritten by `pick`."""
    from bakeoff.backends.tritongen import tune
    from bakeoff.backends.tritongen.pipeline import compile_graph
    from bakeoff.backends.tritongen.source import CodegenTarget

    orig = tune.fixed
    tune.fixed = lambda src: pick(src, orig(src))
    try:
        return compile_graph(graph, "cpu", CodegenTarget(True, dtype, tma=True), False, "interpreter-test")
    finally:
        tune.fixed = orig


_TMA = lambda src, cfg: {**cfg, "TMA": 1} if src.variant == "tma" else cfg  # noqa: E731
_PTMA = lambda src, cfg: {**cfg, "TMA": 2, "NUM_SMS": 3} if src.variant == "tma" else cfg  # noqa: E731
_ROWS = lambda src, cfg: {**cfg, "ROWS": 1, "NUM_PROGRAMS": 3} if src.variant == "persistent" else cfg  # noqa: E731
_LOOP = lambda src, cfg: {**cfg, "LOOP": 1, "BLOCK_N": 64} if src.variant == "persistent" else cfg  # noqa: E731
_LOOP3 = lambda src, cfg: {**cfg, "LOOP": 1, "BLOCK_N": 128} if src.variant == "persistent" else cfg  # noqa: E731
_S3 = lambda src, cfg: {**cfg, "BLOCK_K": 16, "CHAIN": 2, "SPLIT": 1, "TMA": 1} if src.split else cfg  # noqa: E731
_S3A = lambda src, cfg: {**cfg, "SPLIT": 1} if src.split and src.kernel.kind == "attention" else cfg  # noqa: E731


@pytest.mark.parametrize("workload, dtype, pick, suffix", [
    ("attention", "float16", _TMA, "_tma"), ("attention", "float32", _TMA, "_tma"),
    ("attn_block", "float16", _TMA, "_tma"),          # head-interleaved q/k/v/o through per-head descriptors
    ("gemm_bias_residual", "float16", _TMA, "_tma"),  # residual read and output written through descriptors
    ("gemm_bias_gelu", "float32", _PTMA, "_ptma"), ("mlp_block", "float16", _PTMA, "_ptma"),
    ("layernorm_gelu", "float32", _ROWS, "_rows"), ("rmsnorm", "bfloat16", _ROWS, "_rows"),
    ("softmax", "float32", _ROWS, "_rows"), ("attn_block", "float32", _ROWS, "_rows"),
    ("rmsnorm", "float32", _LOOP, "_loop"), ("layernorm_gelu", "bfloat16", _LOOP, "_loop"),  # looped twins: the
    ("softmax_large", "float32", _LOOP, "_loop"), ("mlp_block", "float16", _LOOP, "_loop"),   # row in 64-col blocks
    ("rmsnorm", "float32", _LOOP3, "_loop"), ("layernorm_gelu", "float16", _LOOP3, "_loop"),  # 3 blocks: plain sums
    ("gemm_bias_residual", "float32", _S3, "_s3"),    # pre-split 3xTF32: planes through descriptors, CHAIN sums
    ("mlp_block", "float32", _S3, "_s3"),
    ("attention", "float32", _S3A, "_s3"),            # Q, K, V^T planes through per-head descriptors, P split
    ("attn_block", "float32", _S3A, "_s3"),
])
def test_gpu_kernel_twins_match_reference_under_the_interpreter(workload, dtype, pick, suffix):
    w = builtin_workloads()[workload]
    g = bind(w.graph, w.presets["smoke"], dtype)
    compiled = _compile_with(g, pick, dtype)
    launched = [s.fn.fn.__name__ if hasattr(s.fn, "fn") else str(s.fn) for s in compiled.steps]
    assert any(name.endswith(suffix) for name in launched), launched
    for seed in (1, 2):
        xs = make_inputs(g, seed, "cpu")
        assert _rel_l2_vs_fp64(g, compiled(*xs), xs) < REL_L2_TOL[dtype]


@pytest.mark.parametrize("pick", [lambda src, cfg: cfg, lambda src, cfg: {**cfg, "LOOP": 1, "BLOCK_N": 64,
                                                                          "COMPENSATE": True}])
def test_softmax_of_large_logits_with_minus_infinity_matches_float64(pick):
    """Softmax's exp(x - max) is one FFMA and an exp2 (x * log2(e) - max * log2(e)): around logits of 3e4 its
    error stays at eager's (the rounding of max * log2(e) is common to the row and cancels), -inf entries give 0,
    a row of -inf gives NaN as eager's does; persistent form and looped twin (its online max and sum)."""
    b = GraphBuilder("softmax_shifted")
    g = bind(b.finish([b.softmax(b.input("x", (6, 200)))]), {}, "float32")
    x = 3e4 + 4.0 * torch.randn(6, 200, generator=torch.Generator().manual_seed(5))
    x[1, ::3] = -float("inf")
    x[2] = -float("inf")
    got = _compile_with(g, pick, "float32")(x)[0]
    want, eager = torch.softmax(x.double(), -1), torch.softmax(x, -1)
    assert torch.equal(torch.isnan(got), torch.isnan(want)) and torch.isnan(got[2]).all()
    assert (got[1, ::3] == 0).all()
    ok = ~torch.isnan(want)
    err, ref = (got.double() - want)[ok].norm() / want[ok].norm(), (eager.double() - want)[ok].norm() / want[ok].norm()
    assert err <= 2 * ref + 1e-7, (err, ref)


def test_row_loop_walks_every_row_block_when_rows_do_not_divide_the_grid():
    b = GraphBuilder("ragged_rows")
    g = bind(b.finish([b.softmax(b.input("x", (23, 40)))]), {}, "float32")
    compiled = _compile_with(g, lambda src, cfg: {**cfg, "BLOCK_M": 2, "ROWS": 1, "NUM_PROGRAMS": 5}, "float32")
    xs = make_inputs(g, 4, "cpu")
    assert torch.allclose(compiled(*xs)[0], lower_torch(g)(*xs)[0], rtol=1e-5, atol=1e-6)


_WHOLE_CASES = [((64, 256), {"BLOCK_M": 1, "BLOCK_N": 128, "LOOP": 1, "COMPENSATE": False}, True),
                ((61, 250), {"BLOCK_M": 1, "BLOCK_N": 128, "LOOP": 1, "COMPENSATE": False}, False),
                ((64, 256), {"BLOCK_M": 2, "BLOCK_N": 256}, True),
                ((61, 256), {"BLOCK_M": 2, "BLOCK_N": 256}, False)]


_WHOLE_PTX = """
import json, re, sys, tempfile, pathlib
from bakeoff.backends.tritongen import TritonGenBackend, target_from_options
from bakeoff.backends.tritongen.codegen import generate_all
from bakeoff.backends.tritongen.fusion import fuse
from bakeoff.backends.tritongen.offline import compile_offline
from bakeoff.backends.tritongen.tune import load_kernels
from bakeoff.workloads.builder import GraphBuilder
from bakeoff.workloads.ir import bind
shape, cfg = json.loads(sys.argv[1])
b = GraphBuilder("whole_blocks")
plan = fuse(bind(b.finish([b.softmax(b.input("x", tuple(shape)))]), {}, "float32"))
src = generate_all(plan, target_from_options(TritonGenBackend.parse_options({}), False, "float32"))[0]
ck = compile_offline(load_kernels([src], pathlib.Path(tempfile.mkdtemp()))[0], src,
                     {"num_warps": 4, "num_stages": 1, **cfg}, plan)
print(json.dumps([bool(p) for p in re.findall(r"^\\s*(@!?%p\\d+\\s+)?(?:ld|st)\\.global", ck.asm["ptx"], re.M)]))
"""


@pytest.mark.parametrize("shape,cfg,whole", _WHOLE_CASES)
def test_row_masks_fold_away_only_where_every_block_is_whole(shape, cfg, whole, tmp_path):
    """Where the blocks divide the rows and columns, the kernel's masks are a constant True that Triton folds: the
    sm_90 PTX (compiled here, no device) has no predicated global load or store; where they do not, every load and
    store stays masked; the interpreter's results match eager in both."""
    import json

    b = GraphBuilder("whole_blocks")
    g = bind(b.finish([b.softmax(b.input("x", shape))]), {}, "float32")
    compiled = _compile_with(g, lambda src, c: {**c, **cfg}, "float32")
    xs = make_inputs(g, 3, "cpu")
    assert torch.allclose(compiled(*xs)[0], lower_torch(g)(*xs)[0], rtol=1e-5, atol=1e-6)
    predicated = last_json(run_uninterpreted(["-c", _WHOLE_PTX, json.dumps([shape, cfg])], tmp_path))
    assert predicated and all(p != whole for p in predicated), predicated


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's inf * 0 inside the interpreter (NaN, as torch)
def test_exact_gelu_matches_erf_gelu_over_its_range_and_at_infinities():
    b = GraphBuilder("gelu")
    x = b.input("x", (4011,))
    g = bind(b.finish([b.gelu(x)]), {}, "float32")
    xs = torch.cat([torch.linspace(-12, 12, 4000), torch.tensor([0.0, -0.0, 1e-30, -1e-30, 30.0, -30.0, float("inf"),
                                                               -float("inf"), float("nan"), 1e4, -1e4])])
    got = _compile(g)(xs)[0].double()
    want = torch.nn.functional.gelu(xs.double())
    finite = torch.isfinite(want)
    assert torch.equal(torch.isnan(got), torch.isnan(want)) and got[~finite & ~torch.isnan(want)].eq(
        want[~finite & ~torch.isnan(want)]).all()
    assert ((got - want).abs()[finite] <= 1e-7 * (1 + xs.double().abs()[finite])).all()


def test_fp32_dot_option_names_the_precision_in_source_and_notes():
    from bakeoff.backends.tritongen import TritonGenOptions, target_from_options
    from bakeoff.backends.tritongen.codegen import generate_all
    from bakeoff.backends.tritongen.pipeline import _notes

    plan = _plan("attn_block", "float32")
    for option, want in ((None, {"matmul": "ieee", "attention": "tf32x3"}), ("tf32x3", {"matmul": "tf32x3"}),
                         ("tf32", {"attention": "tf32"})):
        opts = TritonGenOptions() if option is None else TritonGenOptions(fp32_dot=option)
        target = target_from_options(opts, False, "float32")
        for src in generate_all(plan, target):
            if src.kernel.kind in want:
                assert f'input_precision="{want[src.kernel.kind]}"' in src.text
        note = next(n for n in _notes(plan, target, "GPU", []) if n.startswith("float32 dots"))
        assert all(f"{kind} input_precision={p}" in note for kind, p in want.items())
    # 16-bit inputs and the interpreter name no precision
    interpreted = target_from_options(TritonGenOptions(), True, "float32")
    assert "input_precision" not in generate_all(plan, interpreted)[1].text
    with pytest.raises(ValueError, match="fp32_dot"):
        TritonGenOptions(fp32_dot="fp64")
    with pytest.raises(ValueError, match="search"):
        TritonGenOptions(search="exhaustive")


@pytest.mark.parametrize("workload, dtype", [("softmax", "bfloat16"), ("gemm_bias_gelu", "bfloat16"),
                                             ("gemm_bias_gelu", "float32"), ("attention", "float16"),
                                             ("attention", "float32"), ("ew_sigmoid_relu", "float32")])
def test_pruned_search_is_the_head_of_the_wide_one_and_every_twin_is_searched_wide(workload, dtype):
    from bakeoff.backends.tritongen import TritonGenOptions, target_from_options
    from bakeoff.backends.tritongen.codegen import generate_all
    from bakeoff.backends.tritongen.configs import PRUNED, candidates, kernel_fn, pruned_count
    from bakeoff.backends.tritongen.fusion import fuse

    w = builtin_workloads()[workload]
    plan = fuse(bind(w.graph, w.presets["gpu"], dtype))
    for src in generate_all(plan, target_from_options(TritonGenOptions(), False, dtype)):
        wide, pruned = candidates(src, dtype, sms=132), candidates(src, dtype, sms=132, wide=False)
        n = pruned_count(src, wide)
        assert pruned == wide[:n] and 1 <= len(pruned) <= n <= PRUNED[src.kernel.kind] < len(wide) + 1
        assert len({str(c) for c in wide}) == len(wide)
        fns = {kernel_fn(type("M", (), {src.fn + x: src.fn + x for x in ("", "_tma", "_ptma", "_rows", "_loop", "_s3")}),
                         src, c) for c in wide}
        assert all(f"def {f}(" in src.text for f in fns)


def test_offline_report_compiles_for_sm90_without_a_gpu(tmp_path):
    """The offline tool: Triton compiles the GPU sources for sm_90 here (no device); its report names registers,
    shared memory and SASS instruction counts per candidate."""

    out = run_uninterpreted(["-m", "bakeoff.backends.tritongen.offline", "ew_sigmoid_relu", "--preset", "smoke",
                             "--dtype", "float16"], tmp_path)
    line = out.splitlines()[0]
    assert line.startswith("k0_pointwise") and "regs=" in line and "instr/elem" in line and "FAILED" not in line


def _trap_errors(name: str, preset: str, dtype: str = "float32") -> tuple[float, float]:
    """(tritongen's, eager's) relative L2 error against float64 on the numerics trap `name` at `preset` sizes."""
    from bakeoff.workloads.traps import numerics_workloads

    w = numerics_workloads()[name]
    g = bind(w.graph, w.presets[preset], dtype)
    xs = make_inputs(g, 0, "cpu")
    ref = lower_torch(bind(w.graph, w.presets[preset], "float64"))(*[x.double() for x in xs])[0]
    got = _compile(g)(*xs)[0]
    eager = lower_torch(g)(*xs)[0]
    rel = lambda out: float((out.double() - ref).norm() / ref.norm())  # noqa: E731
    return rel(got), rel(eager)


def test_long_row_sum_absorbs_no_small_terms():
    """[1.0, 1e-8 x 65535] rows take the looped form (65536 > max_row_block): a plain running sum per lane kept
    1.0 in lane 0 and dropped the 1e-8 terms added to it (1e-5 relative, over 100x eager's error); the
    compensated lanes keep them."""
    ours, eager = _trap_errors("sum_absorption_large", "smoke")
    assert ours <= max(2 * eager, 1e-7), (ours, eager)


def test_the_row_search_puts_the_looped_twin_first_in_float32_and_second_in_16_bit():
    """The pruned search: in float32 the looped twin at 8 and at 16 warps (the H200's winners for softmax and
    RMSNorm), then the persistent 1-row kernel (the H100's for softmax); in 16-bit the persistent 1-row kernel and
    then the looped twin."""
    from bakeoff.backends.tritongen.codegen import generate
    from bakeoff.backends.tritongen.configs import candidates
    from bakeoff.backends.tritongen.fusion import fuse
    from bakeoff.backends.tritongen.source import CodegenTarget

    searched = {}
    for name, dtype in (("rmsnorm", "float32"), ("softmax", "float32"), ("rmsnorm", "bfloat16")):
        w = builtin_workloads()[name]
        plan = fuse(bind(w.graph, w.presets["gpu"], dtype))
        src = generate(plan, plan.kernels[0], CodegenTarget(False, dtype))
        searched[name, dtype] = [(c.get("LOOP", 0), c["BLOCK_N"], c["num_warps"])
                                 for c in candidates(src, dtype, sms=132, wide=False)]
    assert searched["rmsnorm", "float32"] == [(1, 2048, 8), (1, 2048, 16), (0, 4096, 4)]
    assert searched["softmax", "float32"] == searched["rmsnorm", "float32"]
    assert searched["rmsnorm", "bfloat16"] == [(0, 4096, 4), (1, 2048, 8)]


def test_two_rows_on_four_warps_are_searched_wide_in_16_bit_rows_only():
    """2 rows / 4 warps (per-column inputs loaded and unpacked once for both rows) is in the wide search of 16-bit
    row kernels, after the pruned head, and never a row-loop twin (64 elements a thread); float32 rows leave it
    out."""
    from bakeoff.backends.tritongen.codegen import generate
    from bakeoff.backends.tritongen.configs import candidates
    from bakeoff.backends.tritongen.fusion import fuse
    from bakeoff.backends.tritongen.source import CodegenTarget

    w = builtin_workloads()["layernorm_gelu"]
    for dtype, want in (("bfloat16", True), ("float16", True), ("float32", False)):
        plan = fuse(bind(w.graph, w.presets["gpu"], dtype))
        src = generate(plan, plan.kernels[0], CodegenTarget(False, dtype))
        wide, pruned = candidates(src, dtype, sms=132), candidates(src, dtype, sms=132, wide=False)
        two_on_four = [c for c in wide if c["BLOCK_M"] == 2 and c["num_warps"] == 4]
        assert len(two_on_four) == want and not any(c in pruned for c in two_on_four), dtype
        assert all("ROWS" not in c for c in two_on_four)


def test_a_lane_compensates_its_running_sums_only_over_many_column_blocks():
    """The looped twin of a 4096-column row sums two or four blocks a lane: plain adds (COMPENSATE False); the
    looped form of a 65536-column row sums 64 blocks of 1024: compensated, as the absorption trap needs."""
    from bakeoff.backends.tritongen.codegen import generate
    from bakeoff.backends.tritongen.configs import candidates, constexprs
    from bakeoff.backends.tritongen.fusion import fuse
    from bakeoff.backends.tritongen.source import CodegenTarget

    w = builtin_workloads()["rmsnorm"]
    plan = fuse(bind(w.graph, w.presets["gpu"], "float32"))
    src = generate(plan, plan.kernels[0], CodegenTarget(False, "float32"))
    loops = [c for c in candidates(src, "float32", sms=132) if c.get("LOOP")]
    assert loops and all(constexprs(src, c)["COMPENSATE"] is False for c in loops)
    assert all("COMPENSATE" not in constexprs(src, c) for c in candidates(src, "float32", sms=132) if not c.get("LOOP"))
    b = GraphBuilder("long_rows")
    g = bind(b.finish([b.rms_norm(b.input("x", (3, 65536)), b.input("w", (65536,)))]), {}, "float32")
    long = fuse(g)
    src = generate(long, long.kernels[0], CodegenTarget(False, "float32"))
    assert src.variant == "looped" and "if COMPENSATE:" in src.text
    assert all(constexprs(src, c)["COMPENSATE"] is True for c in candidates(src, "float32", sms=132))


def test_long_softmax_denominator_is_compensated():
    from bakeoff.backends.tritongen.codegen import generate
    from bakeoff.backends.tritongen.fusion import fuse
    from bakeoff.backends.tritongen.source import CodegenTarget

    b = GraphBuilder("softmax_long")
    g = bind(b.finish([b.softmax(b.input("x", (3, 65536)))]), {}, "float32")
    plan = fuse(g)
    assert "l_comp" in generate(plan, plan.kernels[0], CodegenTarget(True, "float32")).text
    xs = make_inputs(g, 3, "cpu")
    ref = torch.softmax(xs[0].double(), -1)
    got = _compile(g)(*xs)[0].double()
    assert float((got - ref).norm() / ref.norm()) < 1e-6


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's inf - inf inside the interpreter (where() drops it)
def test_split_planes_hold_tf32_parts_that_sum_to_the_operand():
    """The pre-split twin's split launches: hi is x rounded to nearest TF32 (low 13 bits clear), lo the rest
    rounded again, so hi + lo is x to about 2^-22; B is written transposed (K contiguous); infinities keep lo 0."""
    from bakeoff.backends.tritongen.codegen import generate_all
    from bakeoff.backends.tritongen.configs import launches
    from bakeoff.backends.tritongen.fusion import fuse
    from bakeoff.backends.tritongen.tune import cache_dir, load_kernels

    b = GraphBuilder("mm")
    x, w = b.input("x", (37, 70)), b.input("w", (70, 45))
    g = bind(b.finish([b.matmul(x, w)]), {}, "float32")
    plan = fuse(g)
    from bakeoff.backends.tritongen.source import CodegenTarget

    src = generate_all(plan, CodegenTarget(True, "float32", tma=True))[0]
    assert src.scratch()[0][1] == (37, 72) and "_s3" in src.text
    module = load_kernels([src], cache_dir())[0]
    xs = make_inputs(g, 2, "cpu")
    xs[0][0, :3] = torch.tensor([float("inf"), -float("inf"), 1.0 + 2.0 ** -20])
    tensors = {"in_x": xs[0], "in_w": xs[1]}
    tensors.update({name: torch.full(shape, float("nan")) for name, shape in src.scratch()})
    cfg = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 4, "num_warps": 4, "num_stages": 1,
           "CHAIN": 1, "SPLIT": 1, "TMA": 1}
    for fn, grid, params, kwargs in launches(src, cfg)[:2]:
        getattr(module, fn)[grid](*[tensors[p] for p in params], **kwargs)
    for operand, hi, lo in ((xs[0], "k0_matmul_ahi", "k0_matmul_alo"), (xs[1].T, "k0_matmul_bhi", "k0_matmul_blo")):
        h, l = tensors[hi][:, :70], tensors[lo][:, :70]
        assert (h.view(torch.int32) & 0x1FFF).eq(0).all() and (l.view(torch.int32) & 0x1FFF).eq(0).all()
        finite = torch.isfinite(operand)
        assert torch.equal(h[~finite], operand[~finite]) and l[~finite].eq(0).all()
        exact = operand.double()[finite]
        assert ((h.double()[finite] + l.double()[finite] - exact).abs() <= 2.0 ** -21 * exact.abs()).all()
    assert tensors["k0_matmul_ahi"][0, 2] == 1.0 and tensors["k0_matmul_alo"][0, 2] == 2.0 ** -20


def test_split_k_partials_are_summed_in_float32_and_the_epilogue_runs_on_them():
    """Few output tiles and a long K: split-K configs come first (K over SLICE_K is always split), the partial
    kernel writes SPLIT_K float32 tiles and the epilogue kernel (its own smaller tiles, UNROLL partial tiles
    loaded as one block, the last block masked) adds them and runs bias + GELU; forced under the interpreter at
    smoke sizes it matches float64."""
    from bakeoff.backends.tritongen import TritonGenOptions, target_from_options
    from bakeoff.backends.tritongen.codegen import generate_all
    from bakeoff.backends.tritongen.codegen_splitk import SLICE_K
    from bakeoff.backends.tritongen.configs import candidates, launches
    from bakeoff.backends.tritongen.fusion import fuse

    b = GraphBuilder("mm_long_k")
    x, w, bias = b.input("x", (40, SLICE_K + 96)), b.input("w", (SLICE_K + 96, 24)), b.input("b", (24,))
    g = bind(b.finish([b.gelu(b.add(b.matmul(x, w), bias))]), {}, "float32")
    gpu = generate_all(fuse(g), target_from_options(TritonGenOptions(), False, "bfloat16"))[0]
    first = candidates(gpu, "bfloat16", sms=132)[0]
    assert first["SPLIT_K"] >= 2 and [f for f, *_ in launches(gpu, first)] == ["k0_matmul_skp", "k0_matmul_ske"]
    from bakeoff.backends.tritongen.codegen_splitk import EPI_M, EPI_N, UNROLL

    split = UNROLL + 3  # a full block of UNROLL partial tiles, then a block of 3 (the rest masked)
    _, epi_grid, _, epi_kw = launches(gpu, {**first, "SPLIT_K": split})[1]
    assert epi_grid == (-(-40 // EPI_M) * -(-24 // EPI_N),) and (epi_kw["BLOCK_M"], epi_kw["BLOCK_N"]) == (EPI_M, EPI_N)
    compiled = _compile_with(g, lambda src, cfg: {**cfg, "SPLIT_K": split} if src.kernel.kind == "matmul" else cfg,
                             "float32")
    launched = [s.fn.fn.__name__ if hasattr(s.fn, "fn") else str(s.fn) for s in compiled.steps]
    assert launched == ["k0_matmul_skp", "k0_matmul_ske"], launched
    xs = make_inputs(g, 3, "cpu")
    assert _rel_l2_vs_fp64(g, compiled(*xs), xs) < 1e-6


def test_split_k_candidates_for_a_long_k_are_two_4_warp_tiles_in_slices_of_2048():
    """256 x 65536 x 256 on 132 multiprocessors: the split-K candidates come first, 128 x 128 and 64 x 128 on 4
    warps (float32: 128 x 128 on 8), each split into 32 slices of 2048 (MIN_SLICE_K); a short K (4096) over few
    tiles splits in two."""
    from bakeoff.backends.tritongen import TritonGenOptions, target_from_options
    from bakeoff.backends.tritongen.codegen import generate_all
    from bakeoff.backends.tritongen.codegen_splitk import MIN_SLICE_K, split_count
    from bakeoff.backends.tritongen.configs import candidates
    from bakeoff.backends.tritongen.fusion import fuse

    b = GraphBuilder("mm_long_k")
    g = bind(b.finish([b.matmul(b.input("x", (256, 65536)), b.input("w", (65536, 256)))]), {}, "bfloat16")
    src = generate_all(fuse(g), target_from_options(TritonGenOptions(), False, "bfloat16"))[0]
    first = [(c["BLOCK_M"], c["BLOCK_N"], c["num_warps"], c.get("SPLIT_K"))
             for c in candidates(src, "bfloat16", sms=132)[:2]]
    assert first == [(128, 128, 4, 32), (64, 128, 4, 32)] and 65536 // 32 == MIN_SLICE_K
    b32 = GraphBuilder("mm_long_k")
    g32 = bind(b32.finish([b32.matmul(b32.input("x", (256, 65536)), b32.input("w", (65536, 256)))]), {}, "float32")
    src32 = generate_all(fuse(g32), target_from_options(TritonGenOptions(), False, "float32"))[0]
    split_k = [(c["BLOCK_M"], c["BLOCK_N"], c["num_warps"], c["SPLIT_K"])
               for c in candidates(src32, "float32", sms=132) if c.get("SPLIT_K")]
    assert split_k == [(128, 128, 8, 32), (64, 128, 4, 32)]  # float32's SIMT dot spills 128 x 128 on 4 warps
    assert split_count(4096, tiles=16, sms=132) == 2 and split_count(65536, tiles=200, sms=132) == 4


def test_gluon_attention_twin_is_generated_for_hopper_16bit_causal_contiguous_heads_and_searched_first():
    """The Gluon kernel (gluon_attention.py) is a twin only where it computes the case: Hopper (arch 90),
    16-bit, causal, sq = sk a multiple of 128, head dim 128, [heads, seq, 128] buffers; its config comes first
    and its one launch passes q, k, v, o to gluon_attention.Launch."""
    from bakeoff.backends.tritongen import TritonGenOptions, target_from_options
    from bakeoff.backends.tritongen.codegen import generate_all
    from bakeoff.backends.tritongen.configs import candidates, launches
    from bakeoff.backends.tritongen.fusion import fuse
    from bakeoff.backends.tritongen.gluon_support import gluon_attention_reason
    from bakeoff.backends.tritongen.views import contiguous

    w = builtin_workloads()["attention"]
    for dtype, arch, want in (("bfloat16", 90, True), ("float16", 90, True), ("float32", 90, False),
                              ("bfloat16", 80, False), ("bfloat16", None, False)):
        plan = fuse(bind(w.graph, w.presets["gpu"], dtype))
        src = generate_all(plan, target_from_options(TritonGenOptions(), False, dtype, arch))[0]
        assert bool(src.gluon) == want and ("_GluonLaunch(4096, 256," in src.text) == want, (dtype, arch)
        if want:
            first = candidates(src, dtype, sms=132)[0]
            assert first.get("GLUON") and launches(src, first) == [("k0_attention_gl", (32, 256), src.gluon, {})]
    import bakeoff.backends.tritongen.codegen_attention as codegen_attention

    missing = codegen_attention.gluon_missing
    try:  # a Triton without Gluon's Hopper API: no twin, the template's kernel runs
        codegen_attention.gluon_missing = lambda: "no Gluon here"
        plan = fuse(bind(w.graph, w.presets["gpu"], "bfloat16"))
        assert generate_all(plan, target_from_options(TritonGenOptions(), False, "bfloat16", 90))[0].gluon is None
    finally:
        codegen_attention.gluon_missing = missing
    ok = [contiguous(n, (2, 3, 256, 128)) for n in "qkvo"]
    assert gluon_attention_reason(256, 256, 128, 128, True, "float16", ok) is None
    assert gluon_attention_reason(256, 256, 128, 128, False, "float16", ok) == "not causal"
    assert gluon_attention_reason(200, 200, 128, 128, True, "float16", ok).startswith("needs sq = sk")
    mixed = ok[:1] + [ok[1].__class__("k", (2, 3, 256, 128), (3 * 256 * 128, 128, 3 * 128, 1), 0)] + ok[2:]
    assert "strides differ" in gluon_attention_reason(256, 256, 128, 128, True, "float16", mixed)


def test_gluon_attention_reads_heads_in_place_from_contiguous_and_projection_layouts():
    """tma_rows finds each head of q/k/v/o in one 2-D view of its buffer: [heads, seq, 128] buffers (rows of 128)
    and a projection's [batch, seq, heads * 128] read as heads (attn_block: rows of heads * 128, head h at column
    h * 128); a head whose 128 columns would cross a row, or more leading dims than merge, is not covered."""
    from bakeoff.backends.tritongen import TritonGenOptions, target_from_options
    from bakeoff.backends.tritongen.codegen import generate_all
    from bakeoff.backends.tritongen.fusion import fuse
    from bakeoff.backends.tritongen.gluon_support import tma_rows
    from bakeoff.backends.tritongen.views import View, contiguous

    assert tma_rows([contiguous(n, (2, 3, 256, 128)) for n in "qkvo"]) == (6, 0, 256 * 128, 128)
    proj = [View(n, (2, 3, 256, 128), (256 * 384, 128, 384, 1), 0) for n in "qkvo"]
    assert tma_rows(proj, [2 * 256 * 384] * 4) == (3, 256 * 384, 128, 384)
    b, h, s, ss = 2, 3, 256, 3 * 128 + 64  # padded rows: head 2 ends at column 384 <= 448, covered
    assert tma_rows([View(n, (b, h, s, 128), (s * ss, 128, ss, 1), 0) for n in "qkvo"]) == (h, s * ss, 128, ss)
    crossing = [View(n, (2, 3, 256, 128), (256 * 320, 96, 320, 1), 0) for n in "qkvo"]  # head 2: columns 192..319
    assert tma_rows(crossing) == (3, 256 * 320, 96, 320)
    crossing = [View(n, (2, 4, 256, 128), (256 * 320, 96, 320, 1), 0) for n in "qkvo"]  # head 3: 288..415 > 320
    assert "cross a row" in tma_rows(crossing)
    five = [View(n, (2, 2, 3, 256, 128), (7 * 3 * 256 * 128, 3 * 256 * 128 + 64, 256 * 128, 128, 1), 0) for n in "qkvo"]
    assert "two leading dims" in tma_rows(five)
    w = builtin_workloads()["attn_block"]
    for dtype in ("bfloat16", "float16"):
        plan = fuse(bind(w.graph, w.presets["gpu"], dtype))
        src = [s for s in generate_all(plan, target_from_options(TritonGenOptions(), False, dtype, 90)) if s.kernel.kind == "attention"]
        assert src[0].gluon and "_GluonLaunch(2048, 256, 0.12751743082459868, (32, 8388608, 128, 4096))" in src[0].text


def test_gluon_attention_compiles_for_sm90_with_the_softmax_under_the_mma(tmp_path):
    """No interpreter runs Gluon: the CPU's check compiles it for sm_90 and looks at the PTX: the consumers keep
    one wgmma group in flight (wait_group 1) while the softmax runs, setmaxnreg splits the registers between the
    partitions, and it fits in shared memory."""

    code = ("import json; from bakeoff.backends.tritongen.gluon_attention import compile_offline; "
            "ck = compile_offline('bfloat16', seq=1024); "
            "compile_offline('float16', seq=256, rows=(3, 256 * 384, 128, 384)); "  # heads read from projections
            "print(json.dumps({'ptx': ck.asm['ptx'], 'shared': ck.metadata.shared}))")
    got = last_json(run_uninterpreted(["-c", code], tmp_path))
    assert "wgmma.wait_group.sync.aligned 1" in got["ptx"] and "setmaxnreg" in got["ptx"]
    assert "cp.async.bulk.tensor" in got["ptx"] and got["shared"] <= 232448


def test_kernels_equal_up_to_names_run_one_compiled_function_on_their_own_buffers():
    """attn_block's Q, K and V projections generate one matmul three times (other buffer and node names): they
    share the first one's jit functions (imported, searched and compiled once), each launched on its own buffers
    and, pre-split, its own operand planes; the out-projection (a residual epilogue) keeps its own; the artifacts
    keep every kernel's own source; the block still matches float64."""
    from bakeoff.backends.tritongen import TritonGenOptions, target_from_options
    from bakeoff.backends.tritongen.codegen import generate_all
    from bakeoff.backends.tritongen.fusion import fuse
    from bakeoff.backends.tritongen.shared import shared_kernels

    w = builtin_workloads()["attn_block"]
    g = bind(w.graph, w.presets["smoke"], "float32")
    gpu = generate_all(fuse(bind(w.graph, w.presets["gpu"], "float32")), target_from_options(TritonGenOptions(), False, "float32", 90))
    shared = shared_kernels(gpu)
    assert [s.fn for s in shared] == ["k0_rowreduce", "k1_matmul", "k1_matmul", "k1_matmul", "k4_attention",
                                      "k5_matmul"]
    assert shared[2].params == gpu[2].params and shared[2].scratch() == gpu[2].scratch()
    assert shared[2].split["launches"][1][2] == ("in_wk", "k2_matmul_bhi", "k2_matmul_blo")
    compiled = _compile(g)
    fns = [s.fn for s in compiled.steps]
    assert fns[1] is fns[2] is fns[3] and fns[4] is not fns[1]
    assert [s.params[1] for s in compiled.steps[1:4]] == ["in_wq", "in_wk", "in_wv"]
    assert "def k2_matmul(" in compiled.artifacts()["k2_matmul.py"]
    xs = make_inputs(g, 3, "cpu")
    assert _rel_l2_vs_fp64(g, compiled(*xs), xs) < 1e-5


def test_config_search_judges_each_candidate_by_its_fastest_of_interleaved_rounds(monkeypatch):
    """Beside other cases' device work one timing round can catch another process's kernels: candidates are
    timed in SEARCH_ROUNDS interleaved rounds and the fastest round decides (A: 3, 1, 3 ms beats B: 2, 2, 2 ms,
    which one round would have picked); each round's time is in the notes; a candidate failing is skipped."""
    import triton.testing

    from bakeoff.backends.tritongen import tune

    assert tune.SEARCH_ROUNDS == 3
    # round by round: A, B, C, D (C fails after its first; D, 2x the fastest in the first round, stays)
    times = iter([3.0, 2.0, 2.5, 3.9, 1.0, 2.0, 1.5, 3.0, 2.0, 1.8])
    calls = []

    def fake_bench(fn, **_):
        fn()
        return next(times)

    def fake_launch(module, src, cfg, tensors):
        calls.append(cfg["name"])
        if cfg["name"] == "C" and calls.count("C") > 1:
            raise RuntimeError("out of resources")

    monkeypatch.setattr(triton.testing, "do_bench", fake_bench)
    monkeypatch.setattr(tune, "launch", fake_launch)
    monkeypatch.setattr(tune, "precompile_all", lambda *a: [])
    monkeypatch.setattr(tune, "config_scratch", lambda src, cfg: ())

    class Src:
        fn = "k0_attention"

    notes: list[str] = []
    best = tune._search_kernel(Src(), None, [{"name": n} for n in "ABCD"], {}, "cpu", notes)
    assert best == {"name": "A"}
    assert calls == ["A", "B", "C", "D", "A", "B", "C", "D", "A", "B", "D"], calls
    assert "tune k0_attention name=D: 1.5000 ms (rounds 3.9000/1.5000/1.8000)" in notes
    assert "tune k0_attention name=A: 1.0000 ms (rounds 3.0000/1.0000/3.0000)" in notes
    assert any("name': 'C'} failed: RuntimeError: out of resources" in n for n in notes)


def test_a_single_candidate_is_compiled_and_not_timed_unless_its_compile_failed(monkeypatch):
    """Nothing to choose between: the pruned pointwise search compiles its one config and times nothing; a
    candidate whose compile failed is launched in the timed part, where its failure is said (as before)."""
    import triton.testing

    from bakeoff.backends.tritongen import tune
    from bakeoff.backends.tritongen.configs import PRUNED

    assert PRUNED["pointwise"] == 1
    compiled, launched = [], []
    monkeypatch.setattr(triton.testing, "do_bench", lambda fn, **_: (fn(), 1.0)[1])
    monkeypatch.setattr(tune, "config_scratch", lambda src, cfg: ())

    def launch(module, src, cfg, tensors):
        launched.append(cfg["name"])
        raise RuntimeError("out of resources")

    monkeypatch.setattr(tune, "launch", launch)
    monkeypatch.setattr(tune, "loads", lambda module, src, cfg, tensors: None)

    class Src:
        fn = "k0_pointwise"

    monkeypatch.setattr(tune, "precompile_all", lambda module, src, cfgs, *a: compiled.extend(cfgs) or [])
    notes: list[str] = []
    assert tune._search_kernel(Src(), None, [{"name": "A"}], {}, "cpu", notes) == {"name": "A"}
    assert compiled == [{"name": "A"}] and launched == [] and "k0_pointwise: one candidate, compiled and not timed" in notes
    monkeypatch.setattr(tune, "precompile_all", lambda *a: ["RuntimeError: ptxas failed"])
    with pytest.raises(RuntimeError, match="no config of k0_pointwise compiled"):
        tune._search_kernel(Src(), None, [{"name": "A"}], {}, "cpu", [])
    assert launched == ["A"]


def test_candidates_compile_side_by_side_in_triton_async_mode(monkeypatch):
    """precompile_all compiles every candidate inside Triton's AsyncCompileMode, several threads at once; a
    candidate whose compile fails is said in words, the others are not held back by it."""
    import threading
    import time

    from tritongen_fakes import async_fn

    from bakeoff.backends.tritongen import tune

    running, peak, threads = [0], [0], set()
    lock = threading.Lock()

    def compile_fn(name):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
            threads.add(threading.get_ident())
        time.sleep(0.2)
        with lock:
            running[0] -= 1
        if name == "bad":
            raise RuntimeError("out of resource: shared memory")
        return name

    class Module:
        k0_matmul = async_fn(compile_fn)

    class Src:
        fn, params = "k0_matmul", ()

    cfgs = [{"NAME": n} for n in ("a", "b", "bad", "c")]
    monkeypatch.setattr(tune, "launches", lambda src, cfg: [("k0_matmul", (1,), (), {"NAME": cfg["NAME"]})])
    errors = tune.precompile_all(Module(), Src(), cfgs, {})
    assert errors == ["RuntimeError: out of resource: shared memory"]
    assert peak[0] == min(tune.COMPILE_THREADS, 4) and len(threads) > 1


def test_a_stage_leaves_out_the_waits_to_enter_device_work(monkeypatch):
    """tritongen's stage seconds are its own: the time its search waited to rejoin the device's gate
    (base.device_waited_s, installed by the worker) is not the autotune stage's."""
    from contextlib import nullcontext
    from types import SimpleNamespace

    from bakeoff.backends import base
    from bakeoff.backends.tritongen import pipeline

    clock, waited = [0.0], [0.0]
    monkeypatch.setattr(pipeline, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    monkeypatch.setattr(base, "_device_waited_s", lambda: waited[0])

    def search():
        clock[0] += 4.0  # 4 s in the stage, 2.5 of them waiting for the gate
        waited[0] += 2.5

    t = pipeline.Stages()
    t("autotune", search)
    assert t.stages_s == {"autotune": 1.5}
    base.set_device_work(nullcontext)  # the default again: no gate, no waits
    assert base.device_waited_s() == 0.0


_SHIFT_PTX = """
import json, pathlib, re, tempfile
from bakeoff.backends.tritongen import TritonGenBackend, target_from_options
from bakeoff.backends.tritongen.codegen import generate_all
from bakeoff.backends.tritongen.fusion import fuse
from bakeoff.backends.tritongen.offline import compile_offline
from bakeoff.backends.tritongen.tune import load_kernels
from bakeoff.workloads.ir import bind
from bakeoff.workloads.suite import builtin_workloads
w = builtin_workloads()["softmax_large"]
plan = fuse(bind(w.graph, w.presets["gpu"], "float32"))
src = generate_all(plan, target_from_options(TritonGenBackend.parse_options({}), False, "float32", 90))[0]
ck = compile_offline(load_kernels([src], pathlib.Path(tempfile.mkdtemp()))[0], src,
                     {"BLOCK_M": 1, "BLOCK_N": 2048, "num_warps": 8, "num_stages": 1, "LOOP": 1}, plan)
ptx = ck.asm["ptx"]
L = "0f3FB8AA3B"  # log2(e) as a float32 literal
addends = re.findall(r"fma\\.rn\\.f32\\s+%r\\d+, %r\\d+, " + L + r", (%r\\d+);", ptx)
print(json.dumps({"mul_rn": len(re.findall(r"mul\\.rn\\.f32", ptx)),
                  "plain": len(re.findall(r"mul\\.f32\\s+%r\\d+, %r\\d+, " + L, ptx)),
                  "fmas": len(addends), "lone": sorted(a for a in set(addends) if addends.count(a) == 1)}))
"""


def test_the_online_softmax_subtracts_only_rounded_shifts_in_sm90_ptx(tmp_path):
    """Every exponent of the looped softmax (its blocks' and the rescale's) subtracts a rounded max * log2(e):
    written as a product the compiler could contract one of them into an FMA (unrounded), and on the H200
    softmax_large fp32 came out at 6233x eager's error. sm_90 PTX compiled here (no device)."""

    got = last_json(run_uninterpreted(["-c", _SHIFT_PTX], tmp_path))
    # the shifts are mul.rn products, none a plain (contractible) one; each exponent FMA subtracts a shift that a
    # whole block of elements shares (a rescale contracted into an FMA has an addend of its own)
    assert got["mul_rn"] >= 1 and got["plain"] == 0 and got["fmas"] >= 16 and got["lone"] == [], got
