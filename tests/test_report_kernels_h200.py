"""Kernel attribution on the kernel names CUPTI recorded on an H200 (tests/data/h200_kernel_times.json: the
records' `kernel_times` as a GPU run wrote them, and tritongen's artifacts summary with registers, shared memory
and IR sizes from Triton 3.6's compiled kernels). The artifact texts are cut to the lines the names tie to, in
the formats the backends write on CUDA (Inductor's output code, XLA's optimized HLO, IREE's dispatches)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bakeoff.results.report.kernels import kernel_table

RECORDED = {c["case_id"]: c for c in json.loads((Path(__file__).parent / "data" / "h200_kernel_times.json")
                                                .read_text())["cases"]}
ATTN_BLOCK = "attn_block/B=8,S=2048,H=32,Dh=128/bfloat16/"
GEMM = "gemm_bias_gelu/M=8192,K=8192,N=8192/bfloat16/"

INDUCTOR_ATTN_BLOCK = '''# AOT ID: ['0_inference']
from torch._inductor.select_algorithm import extern_kernels
aten = torch.ops.aten


# kernel path: /tmp/torchinductor_root/hk/chk.py
# Topologically Sorted Source Nodes: [layer_norm], Original ATen: [aten.native_layer_norm]
triton_red_fused_native_layer_norm_0 = async_compile.triton('triton_red_fused_native_layer_norm_0', \'\'\'
@triton.jit
def triton_red_fused_native_layer_norm_0(in_ptr0, out_ptr2, xnumel, r0_numel):
    pass
\'\'\', device_str='cuda')


# kernel path: /tmp/torchinductor_root/ab/cab.py
# Topologically Sorted Source Nodes: [scaled_dot_product_attention], Original ATen: [aten._scaled_dot_product_cudnn_attention, aten._unsafe_view, aten.add, aten.permute, aten.view]
triton_poi_fused__scaled_dot_product_cudnn_attention__unsafe_view_add_permute_view_1 = async_compile.triton('triton_poi_fused__scaled_dot_product_cudnn_attention__unsafe_view_add_permute_view_1', \'\'\'
@triton.jit
def triton_poi_fused__scaled_dot_product_cudnn_attention__unsafe_view_add_permute_view_1(in_out_ptr0, xnumel):
    pass
\'\'\', device_str='cuda')


# kernel path: /tmp/torchinductor_root/cd/ccd.py
# Topologically Sorted Source Nodes: [add], Original ATen: [aten._unsafe_view, aten.add]
triton_poi_fused__unsafe_view_add_2 = async_compile.triton('triton_poi_fused__unsafe_view_add_2', \'\'\'
@triton.jit
def triton_poi_fused__unsafe_view_add_2(in_out_ptr0, xnumel):
    pass
\'\'\', device_str='cuda')


async_compile.wait(globals())

def call(args):
    arg0_1, arg1_1, arg2_1, arg3_1 = args
    buf3 = empty_strided_cuda((16384, 4096), (4096, 1), torch.bfloat16)
    triton_red_fused_native_layer_norm_0.run(arg0_1, buf3, 16384, 4096, stream=stream0)
    buf4 = empty_strided_cuda((16384, 4096), (4096, 1), torch.bfloat16)
    extern_kernels.mm(buf3, reinterpret_tensor(arg1_1, (4096, 4096), (1, 4096), 0), out=buf4)
    triton_poi_fused__scaled_dot_product_cudnn_attention__unsafe_view_add_permute_view_1.run(buf4, 67108864, stream=stream0)
    buf7 = torch.ops.aten._scaled_dot_product_cudnn_attention.default(reinterpret_tensor(buf4, (8, 32, 2048, 128), (268435456, 128, 131072, 1), 0), reinterpret_tensor(buf5, (8, 32, 2048, 128), (268435456, 128, 131072, 1), 0), reinterpret_tensor(buf6, (8, 32, 2048, 128), (268435456, 128, 131072, 1), 0), None, False, True, scale=0.08838834764831845)
    buf8 = buf7[0]
    triton_poi_fused__unsafe_view_add_2.run(buf9, arg0_1, 67108864, stream=stream0)
    return (buf9, )
'''

XLA_ATTN_BLOCK = '''HloModule jit_fn, entry_computation_layout={(bf16[8,2048,4096]{2,1,0})->bf16[8,2048,4096]{2,1,0}}

%gemm_fusion_dot.2_computation (parameter_0: bf16[16384,4096], parameter_1: bf16[4096,4096]) -> bf16[16384,4096] {
  %parameter_0 = bf16[16384,4096]{1,0} parameter(0)
  %parameter_1 = bf16[4096,4096]{1,0} parameter(1)
  ROOT %dot.1 = bf16[16384,4096]{1,0} dot(bf16[16384,4096]{1,0} %parameter_0, bf16[4096,4096]{1,0} %parameter_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%fused_computation.9 (param_0.9: bf16[16384,4096], param_1.9: bf16[16384,4096]) -> bf16[16384,4096] {
  %param_0.9 = bf16[16384,4096]{1,0} parameter(0)
  %param_1.9 = bf16[16384,4096]{1,0} parameter(1)
  ROOT %add.9 = bf16[16384,4096]{1,0} add(bf16[16384,4096]{1,0} %param_0.9, bf16[16384,4096]{1,0} %param_1.9)
}

ENTRY %main.40 (Arg_0.1: bf16[8,2048,4096], Arg_1.2: bf16[4096,4096]) -> bf16[8,2048,4096] {
  %Arg_0.1 = bf16[8,2048,4096]{2,1,0} parameter(0)
  %Arg_1.2 = bf16[4096,4096]{1,0} parameter(1)
  %gemm_fusion_dot.2 = bf16[16384,4096]{1,0} fusion(bf16[16384,4096]{1,0} %bitcast.1, bf16[4096,4096]{1,0} %Arg_1.2), kind=kCustom, calls=%gemm_fusion_dot.2_computation, metadata={op_name="jit(fn)/dot_general"}, backend_config={"operation_queue_id":"0","fusion_backend_config":{"kind":"__triton_gemm","triton_gemm_config":{"block_m":"128"}}}
  %custom-call.4 = (bf16[8,32,2048,128]{3,1,2,0}, u8[0]{0}) custom-call(bf16[8,32,2048,128]{3,1,2,0} %bitcast.5, bf16[8,32,2048,128]{3,1,2,0} %bitcast.6, bf16[8,32,2048,128]{3,1,2,0} %bitcast.7), custom_call_target="__cudnn$fmhaSoftmax", metadata={op_name="jit(fn)/dot_product_attention"}
  %custom-call.5 = (bf16[16384,4096]{1,0}, s8[33554432]{0}) custom-call(bf16[16384,4096]{1,0} %bitcast.8, bf16[4096,4096]{1,0} %Arg_1.2), custom_call_target="__cublas$lt$matmul", metadata={op_name="jit(fn)/dot_general"}
  %gemm_fusion_dot.3 = bf16[16384,4096]{1,0} fusion(bf16[16384,4096]{1,0} %bitcast.9, bf16[4096,4096]{1,0} %Arg_1.2), kind=kCustom, calls=%gemm_fusion_dot.2_computation, backend_config={"fusion_backend_config":{"kind":"__triton_gemm"}}
  ROOT %fusion.9 = bf16[16384,4096]{1,0} fusion(bf16[16384,4096]{1,0} %gemm_fusion_dot.3, bf16[16384,4096]{1,0} %bitcast.1), kind=kLoop, calls=%fused_computation.9
}
'''

IREE_ATTN_BLOCK = "\n".join(
    f"// ---- module_main_dispatch_{i}.mlir\nhal.executable public @main_dispatch_{i} {{\n"
    f"  hal.executable.variant public @cuda_nvptx_fb target(<\"cuda\", \"cuda-nvptx-fb\">) {{\n"
    f"    hal.executable.export public @{name} ordinal(0) layout(#pipeline_layout) {{\n    }}\n"
    f"    builtin.module {{\n      func.func @{name}() {{\n        %5 = {op} ins(%2 : tensor<8xf32>)\n"
    f"        return\n      }}\n    }}\n  }}\n}}\n"
    for i, name, op in ((0, "main_dispatch_0_reduction_16384x4096_f32", "linalg.generic"),
                        (1, "main_dispatch_1_reduction_16384x4096_f32", "linalg.generic"),
                        (2, "main_dispatch_2_matmul_16384x4096x4096_bf16xbf16xf32", "linalg.matmul"),
                        (3, "main_dispatch_3_elementwise_transpose_8x2048x32x128_bf16", "linalg.generic"),
                        (7, "main_dispatch_7_elementwise_transpose_8x2048x4096_bf16", "linalg.generic"),
                        (8, "main_dispatch_8_batch_matmul_256x2048x2048x128_bf16xbf16xf32", "linalg.batch_matmul"),
                        (9, "main_dispatch_9_softmax_8x32x2048x2048xf32_generic", "linalg.softmax"),
                        (10, "main_dispatch_10_batch_matmul_256x2048x128x2048_bf16xbf16xf32", "linalg.batch_matmul"),
                        (11, "main_dispatch_11_elementwise_transpose_8x32x2048x128_f32xbf16", "linalg.generic"),
                        (12, "main_dispatch_12_matmul_16384x4096x4096_bf16xbf16xf32", "linalg.matmul")))


def _rows(case_id: str, texts: dict[str, str]) -> dict[str, object]:
    case = RECORDED[case_id]
    rows = kernel_table(case, texts)
    profiled = [r for r in rows if r.launches is not None]
    assert [r.name for r in profiled] == [k["name"] for k in case["kernel_times"]]  # every kernel CUPTI saw
    assert sum(r.share for r in profiled) == pytest.approx(1.0, abs=1e-3)  # shares of the call's kernel time
    return {r.name: r for r in rows}


def test_inductor_on_the_h200_cublas_and_cudnn_kernels_go_to_the_calls_that_launch_them():
    by = _rows(ATTN_BLOCK + "inductor", {"output_code.py": INDUCTOR_ATTN_BLOCK})
    gemm = by["nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT"]  # cuBLAS's Hopper GEMM: Inductor's extern mm
    assert gemm.matched == "library" and gemm.origin.startswith("cuBLAS / CUTLASS via Inductor")
    assert INDUCTOR_ATTN_BLOCK.splitlines()[gemm.line - 1].strip().startswith("extern_kernels.mm(")
    sdpa = by["cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0"]
    assert sdpa.matched == "library" and sdpa.origin == "cuDNN via Inductor → ATen fallback"  # not the mm
    assert sdpa.fused == "aten._scaled_dot_product_cudnn_attention.default"
    ln = by["triton_red_fused_native_layer_norm_0"]
    assert ln.matched == "name" and ln.fused == "aten.native_layer_norm (nodes layer_norm)"
    assert by["triton_poi_fused__unsafe_view_add_2"].line == INDUCTOR_ATTN_BLOCK.splitlines().index(
        "triton_poi_fused__unsafe_view_add_2 = async_compile.triton('triton_poi_fused__unsafe_view_add_2', '''") + 1


def test_xla_on_the_h200_triton_gemm_fusions_cublas_and_cudnn_custom_calls():
    by = _rows(ATTN_BLOCK + "xla", {"hlo_optimized": XLA_ATTN_BLOCK})
    fused = by["gemm_fusion_dot_2"]  # XLA's Triton GEMM: a fusion by name, not cuBLAS
    assert fused.matched == "name" and fused.origin == "XLA fusion (kCustom, __triton_gemm)"
    assert fused.fused == "dot [jit(fn)/dot_general]" and "%gemm_fusion_dot.2 = " in XLA_ATTN_BLOCK.splitlines()[fused.line - 1]
    assert by["gemm_fusion_dot_3"].matched == "name" and by["fusion_9"].fused == "add"
    gemm = by["nvjet_sm90_tss_128x160_64x5_2x1_v_bz_NNT"]
    assert gemm.matched == "library" and "custom call __cublas$lt$matmul" in gemm.origin
    sdpa = by["cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0"]
    assert sdpa.matched == "library" and "__cudnn$fmhaSoftmax" in sdpa.origin  # the attention call, not the GEMM


def test_iree_on_the_h200_every_dispatch_by_its_name():
    by = _rows(ATTN_BLOCK + "iree", {"dispatches.mlir": IREE_ATTN_BLOCK})
    for name, row in by.items():
        assert row.matched == "name" and row.origin == "IREE dispatch", name
        assert f"@{name} " in IREE_ATTN_BLOCK.splitlines()[row.line - 1]  # dispatch_1 is not dispatch_12
    assert by["main_dispatch_9_softmax_8x32x2048x2048xf32_generic"].fused == "linalg.softmax"


def test_eager_on_the_h200_names_the_library_of_each_kernel():
    by = _rows(ATTN_BLOCK + "eager", {})
    libraries = {name[:40]: row.origin for name, row in by.items()}
    assert libraries == {"nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coo": "cuBLAS / CUTLASS",
                         "void at::native::vectorized_elementwise_": "ATen",
                         "void at::native::elementwise_kernel<128,": "ATen",
                         "cudnn_generated_fort_native_sdpa_sm90_fl": "cuDNN",
                         "void at::native::(anonymous namespace)::": "ATen"}


@pytest.mark.parametrize("case_id", [c for c in RECORDED if c.endswith("/tritongen")])
def test_tritongen_on_the_h200_registers_shared_memory_and_ir_sizes_of_the_compiled_kernel(case_id):
    case = RECORDED[case_id]
    (name,) = case["artifacts"]["kernels"]
    source = f"import triton\n\n@triton.jit\ndef {name}(x_ptr):\n    pass\n"
    (row,) = kernel_table(case, {f"{name}.py": source})
    facts = case["artifacts"]["kernels"][name]
    assert row.matched == "name" and row.share == pytest.approx(1.0) and row.line == 4
    assert row.facts.startswith(f"regs {facts['n_regs']} · spills 0 · smem ")
    assert "TTIR" in row.facts and "PTX" in row.facts and "interpreter" not in row.facts
