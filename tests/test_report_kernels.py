"""Kernel attribution: each kernel name CUPTI reports is tied to the library that made it and, where the name
allows, to the generated kernel, the ops it fuses and its source line. The texts below follow the formats the
backends write (Inductor's output code on CUDA, XLA's optimized HLO, IREE's dispatch sources, tritongen's
kernel table, the ONNX node list), cut to a few kernels."""
from __future__ import annotations


import pytest

from bakeoff.harness.measure.kernel_times import kernel_times
from bakeoff.results.report.kernels import kernel_table, library

INDUCTOR_CODE = '''# AOT ID: ['0_inference']
import torch
from torch._inductor.async_compile import AsyncCompile
async_compile = AsyncCompile()


# kernel path: /tmp/torchinductor_root/ab/cab.py
# Topologically Sorted Source Nodes: [layer_norm, gelu], Original ATen: [aten.native_layer_norm, aten.gelu]
# Source node to ATen node mapping:
#   gelu => add_1, erf, mul_1
triton_per_fused_gelu_native_layer_norm_0 = async_compile.triton('triton_per_fused_gelu_native_layer_norm_0', \'\'\'
import triton

@triton.jit
def triton_per_fused_gelu_native_layer_norm_0(in_out_ptr0, in_ptr0, xnumel, r0_numel):
    pass
\'\'\', device_str='cuda')


# kernel path: /tmp/torchinductor_root/cd/ccd.py
triton_poi_fused_addmm_gelu_1 = async_compile.triton('triton_poi_fused_addmm_gelu_1', \'\'\'
@triton.jit
def triton_poi_fused_addmm_gelu_1(in_out_ptr0, in_ptr0, xnumel):
    pass
\'\'\', device_str='cuda')


async_compile.wait(globals())

def call(args):
    arg0_1, arg1_1, arg2_1 = args
    buf0 = empty_strided_cuda((48, 72), (72, 1), torch.float32)
    extern_kernels.mm(arg0_1, arg1_1, out=buf0)
    triton_poi_fused_addmm_gelu_1.run(buf0, arg2_1, 3456, stream=stream0)
    return (buf0, )
'''

XLA_HLO = '''HloModule jit_fn, entry_computation_layout={(f32[37,300]{1,0})->f32[37,300]{1,0}}

%region_0.1 (Arg_0.2: f32[], Arg_1.3: f32[]) -> f32[] {
  %Arg_0.2 = f32[] parameter(0)
  %Arg_1.3 = f32[] parameter(1)
  ROOT %add.4 = f32[] add(f32[] %Arg_0.2, f32[] %Arg_1.3)
}

%fused_reduce (param_0: f32[37,300]) -> f32[37] {
  %param_0 = f32[37,300]{1,0} parameter(0)
  %constant_1 = f32[] constant(0)
  ROOT %reduce.1 = f32[37]{0} reduce(f32[37,300]{1,0} %param_0, f32[] %constant_1), dimensions={1}, to_apply=%region_0.1
}

%fused_multiply (param_0.1: f32[37,300], param_1: f32[37]) -> f32[37,300] {
  %param_0.1 = f32[37,300]{1,0} parameter(0)
  %param_1 = f32[37]{0} parameter(1)
  %broadcast.2 = f32[37,300]{1,0} broadcast(f32[37]{0} %param_1), dimensions={0}
  %subtract.2 = f32[37,300]{1,0} subtract(f32[37,300]{1,0} %param_0.1, f32[37,300]{1,0} %broadcast.2)
  ROOT %multiply.3 = f32[37,300]{1,0} multiply(f32[37,300]{1,0} %subtract.2, f32[37,300]{1,0} %subtract.2)
}

ENTRY %main.10 (Arg_0.1: f32[37,300], Arg_1.1: f32[48,80], Arg_2.1: f32[80,72]) -> f32[37,300] {
  %Arg_0.1 = f32[37,300]{1,0} parameter(0)
  %Arg_1.1 = f32[48,80]{1,0} parameter(1)
  %Arg_2.1 = f32[80,72]{1,0} parameter(2)
  %input_reduce_fusion = f32[37]{0} fusion(f32[37,300]{1,0} %Arg_0.1), kind=kInput, calls=%fused_reduce, metadata={op_name="jit(fn)/reduce_sum"}
  %custom-call.1 = (f32[48,72]{1,0}, s8[4194304]{0}) custom-call(f32[48,80]{1,0} %Arg_1.1, f32[80,72]{1,0} %Arg_2.1), custom_call_target="__cublas$gemm", metadata={op_name="jit(fn)/dot_general"}
  ROOT %loop_multiply_fusion.1 = f32[37,300]{1,0} fusion(f32[37,300]{1,0} %Arg_0.1, f32[37]{0} %input_reduce_fusion), kind=kLoop, calls=%fused_multiply
}
'''

IREE_MLIR = '''// ---- module_main_dispatch_0.mlir
hal.executable public @main_dispatch_0 {
  hal.executable.variant public @cuda_nvptx_fb target(<"cuda", "cuda-nvptx-fb">) {
    hal.executable.export public @main_dispatch_0_reduction_37x300_f32 ordinal(0) layout(#pipeline_layout) count(%arg0: !hal.device loc(callsite("<stdin>":4:26 at "<stdin>":2:3))) -> (index, index, index) {
    }
    builtin.module {
      func.func @main_dispatch_0_reduction_37x300_f32() {
        %3 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "reduction"]} ins(%2 : tensor<37x300xf32>) outs(%1 : tensor<37xf32>) loc(callsite("<stdin>":5:10 at "<stdin>":2:3))
        return
      }
    }
  }
}

// ---- module_main_dispatch_1.mlir
hal.executable public @main_dispatch_1 {
  hal.executable.variant public @cuda_nvptx_fb target(<"cuda", "cuda-nvptx-fb">) {
    hal.executable.export public @main_dispatch_1_matmul_48x72x80_f32 ordinal(0) layout(#pipeline_layout) {
    }
    builtin.module {
      func.func @main_dispatch_1_matmul_48x72x80_f32() {
        %5 = linalg.fill ins(%cst : f32) outs(%4 : tensor<48x72xf32>) -> tensor<48x72xf32>
        %6 = linalg.matmul ins(%2, %3 : tensor<48x80xf32>, tensor<80x72xf32>) outs(%5 : tensor<48x72xf32>) loc(callsite("<stdin>":9:10 at "<stdin>":2:3))
        return
      }
    }
  }
}
'''

ONNX_NODES = '''graph bakeoff_layernorm_gelu: 2 nodes, opset 23, 2 initializers
inputs: x float[37,300]
#0 LayerNormalization 'n3' (x, w, b) -> (t3)  axis=-1 epsilon=1e-05
#1 Gelu 'n4' (t3) -> (out0)
outputs: out0 float[37,300]
'''

GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"


def _profile(*names_ms: tuple[str, float]) -> list[dict]:
    return kernel_times([(n, ms * 1e3) for n, ms in names_ms], calls=1)


def _by_name(rows):
    return {r.name: r for r in rows}


def test_kernel_times_per_name_with_shares():
    launched = [("a", 30.0), ("b", 5.0), ("a", 30.0), ("b", 5.0), ("c", 30.0), ("x" * 2000, 0.0)]
    rows = kernel_times(launched, calls=2)
    assert [r["name"] for r in rows[:3]] == ["a", "c", "b"]
    a = rows[0]
    assert a["launches"] == 1.0 and a["device_ms"] == pytest.approx(0.03) and a["share"] == pytest.approx(0.6)
    assert len(rows[-1]["name"]) == 1000 and rows[-1]["name"].endswith("…") and rows[-1]["share"] == 0.0
    assert kernel_times([("z", 0.0)], 1)[0]["share"] is None


def test_inductor_kernels_are_tied_to_their_fused_ops_and_source_lines():
    case = {"adapter": "inductor", "backend": "inductor",
            "kernel_times": _profile(("triton_per_fused_gelu_native_layer_norm_0", 0.05), (GEMM, 0.03),
                                     ("triton_poi_fused_addmm_gelu_1", 0.01),
                                     ("void at::native::vectorized_elementwise_kernel<4, FillFunctor<float>>", 0.001))}
    rows = kernel_table(case, {"output_code.py": INDUCTOR_CODE})
    by = _by_name(rows)
    ln = by["triton_per_fused_gelu_native_layer_norm_0"]
    assert ln.matched == "name" and ln.origin == "Inductor → Triton" and ln.artifact == "output_code.py"
    assert "aten.native_layer_norm, aten.gelu (nodes layer_norm, gelu)" == ln.fused
    assert INDUCTOR_CODE.splitlines()[ln.line - 1].startswith("triton_per_fused_gelu_native_layer_norm_0 = ")
    assert ln.share == pytest.approx(0.05 / 0.091)
    gemm = by[GEMM]  # a cuBLAS kernel: the extern mm call Inductor made
    assert gemm.matched == "library" and gemm.origin.startswith("cuBLAS / CUTLASS via Inductor")
    assert INDUCTOR_CODE.splitlines()[gemm.line - 1].strip().startswith("extern_kernels.mm(")
    assert by["triton_poi_fused_addmm_gelu_1"].fused == "addmm_gelu"  # no comment: the name's fused part
    fill = [r for r in rows if r.name.startswith("void at::native")][0]
    assert fill.origin == "ATen" and fill.artifact is None and fill.matched == ""
    assert [r.name for r in rows[:4]] == [k["name"] for k in case["kernel_times"]]  # profiled, longest first


def test_xla_fusions_and_custom_calls_by_their_kernel_names():
    case = {"adapter": "xla", "backend": "xla",
            "kernel_times": _profile(("loop_multiply_fusion_1", 0.02), ("input_reduce_fusion", 0.01), (GEMM, 0.04))}
    by = _by_name(kernel_table(case, {"hlo_optimized": XLA_HLO}))
    mul = by["loop_multiply_fusion_1"]  # XLA names the kernel after the fusion, '.' made '_'
    assert mul.matched == "name" and mul.origin == "XLA fusion (kLoop)" and mul.fused == "broadcast, subtract, multiply"
    assert "%loop_multiply_fusion.1 = " in XLA_HLO.splitlines()[mul.line - 1]
    red = by["input_reduce_fusion"]
    assert red.fused == "reduce [jit(fn)/reduce_sum]" and red.origin == "XLA fusion (kInput)"
    gemm = by[GEMM]
    assert gemm.matched == "library" and "custom call __cublas$gemm" in gemm.origin


def test_iree_dispatches_by_their_index():
    case = {"adapter": "iree", "backend": "iree",
            "kernel_times": _profile(("main$async_dispatch_1_matmul_48x72x80_f32", 0.03),
                                     ("main_dispatch_0_reduction_37x300_f32", 0.01))}
    by = _by_name(kernel_table(case, {"dispatches.mlir": IREE_MLIR}))
    mm = by["main$async_dispatch_1_matmul_48x72x80_f32"]
    assert mm.matched == "dispatch" and mm.fused == "linalg.fill, linalg.matmul (StableHLO lines 9)"
    assert "@main_dispatch_1_matmul_48x72x80_f32" in IREE_MLIR.splitlines()[mm.line - 1]
    red = by["main_dispatch_0_reduction_37x300_f32"]
    assert red.matched == "name" and red.fused == "linalg.generic (StableHLO lines 4, 5)"


def test_tritongen_kernels_carry_registers_shared_memory_and_ir_sizes():
    summary = {"kernels": {"k0_rowreduce": {"kind": "rowreduce", "variant": "persistent", "source_nodes": [3, 4],
                                            "config": {"BLOCK_M": 4, "num_warps": 4}, "n_regs": 40, "n_spills": 0,
                                            "shared_bytes": 16384, "ttir_bytes": 3000, "ttgir_bytes": 5000,
                                            "llir_bytes": 20000, "ptx_bytes": 45000}}}
    texts = {"k0_rowreduce.py": "import triton\n\n@triton.jit\ndef k0_rowreduce(x_ptr):\n    pass\n",
             "partition.txt": "graph g: 1 kernel(s)\nk0_rowreduce [rowreduce] domain=[37, 300]\n"
                              "  computes: %3=mean, %4=sub, %13=gelu\n",
             "graph": "%0 = input(; name=x) : float32[37x300]\n%3 = layer_norm(%0) : f\n%4 = gelu(%3) : f\n"}
    case = {"adapter": "tritongen", "backend": "tritongen", "artifacts": summary,
            "kernel_times": _profile(("k0_rowreduce", 0.02))}
    (row,) = kernel_table(case, texts)
    assert row.matched == "name" and row.artifact == "k0_rowreduce.py" and row.line == 4
    assert row.fused == "%3=mean, %4=sub, %13=gelu (graph nodes layer_norm %3, gelu %4)"
    assert row.facts.startswith("regs 40 · spills 0 · smem 16.0 kB · TTIR 2.9 kB · TTGIR 4.9 kB · LLIR 19.5 kB")
    assert "PTX 43.9 kB · BLOCK_M=4 num_warps=4 · persistent" in row.facts


def test_onnx_nodes_by_op_type_and_generated_kernels_listed_without_a_profile():
    case = {"adapter": "onnxruntime", "backend": "onnxruntime",
            "kernel_times": _profile(("void onnxruntime::contrib::cuda::LayerNormForwardCUDAKernel<float>", 0.02))}
    rows = kernel_table(case, {"optimized_nodes.txt": ONNX_NODES})
    assert rows[0].matched == "op type" and rows[0].fused.startswith("LayerNormalization (x, w, b) -> (t3)")
    assert rows[1].name == "n4" and rows[1].launches is None  # generated, not seen in the profile
    cpu = kernel_table({"adapter": "onnxruntime", "backend": "onnxruntime"}, {"nodes.txt": ONNX_NODES})
    assert [r.name for r in cpu] == ["n3", "n4"] and all(r.device_ms is None for r in cpu)


def test_library_from_a_kernel_name():
    assert library(GEMM) == "cuBLAS / CUTLASS"
    assert library("void at::native::reduce_kernel<512, 1>") == "ATen"
    assert library("__myl_bb0_1_AddMulTan") == "TensorRT"
    assert library("fmha_cutlassF_f16_aligned_64x64_rf_sm80") == "fused attention"
    assert library("k0_rowreduce") == ""


def test_device_time_pass_builds_the_kernel_list_per_call():
    """The CUPTI pass keeps kernels between each call's markers (not the markers, not what falls outside)
    and passes their names and device times on, per call, longest first."""
    from bakeoff.harness.measure.device_time import MARK_NAME, KernelSpan, figures_of, segment_calls

    events, t0 = [], 0.0
    for _ in range(5):
        events += [KernelSpan("flush", t0, t0 + 5), KernelSpan(MARK_NAME, t0 + 5.5, t0 + 5.9),
                   KernelSpan(MARK_NAME, t0 + 6, t0 + 8), KernelSpan(MARK_NAME, t0 + 8, t0 + 11),
                   KernelSpan("k0", t0 + 20, t0 + 60), KernelSpan("k1", t0 + 60, t0 + 70),
                   KernelSpan(MARK_NAME, t0 + 79.5, t0 + 79.9), KernelSpan(MARK_NAME, t0 + 80, t0 + 82),
                   KernelSpan(MARK_NAME, t0 + 82, t0 + 85)]
        t0 += 100
    figs = figures_of(segment_calls(events, 5))
    assert figs.kernel_count == 2 and figs.kernel_sum.median_ms == pytest.approx(0.05)
    assert [(k["name"], k["launches"], round(k["share"], 3)) for k in figs.kernel_times] == [("k0", 1.0, 0.8),
                                                                                           ("k1", 1.0, 0.2)]
