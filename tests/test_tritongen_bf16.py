"""tritongen's bfloat16 loads, converted to float32 two at a time from the 32-bit word that holds them: inline PTX,
which no interpreter runs, so checked in the generated source, in sm_90 PTX compiled here, and on a GPU."""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported anywhere in this process

import pytest  # noqa: E402

from ci_required import importorskip  # noqa: E402

importorskip("triton", reason="triton is not installed (pip install 'bakeoff[triton]')")

import torch  # noqa: E402

from bakeoff.backends.tritongen import TritonGenBackend, target_from_options  # noqa: E402
from bakeoff.backends.tritongen.codegen import generate_all  # noqa: E402
from bakeoff.backends.tritongen.fusion import fuse  # noqa: E402
from bakeoff.workloads.ir import bind  # noqa: E402
from bakeoff.workloads.suite import builtin_workloads  # noqa: E402
from sm90_offline import last_json, run_uninterpreted  # noqa: E402

def _gpu_text(workload: str, dtype: str) -> str:
    w = builtin_workloads()[workload]
    plan = fuse(bind(w.graph, w.presets["gpu"], dtype))
    target = target_from_options(TritonGenBackend.parse_options({}), False, dtype, 90)
    return "\n".join(src.text for src in generate_all(plan, target))


@pytest.mark.parametrize("workload", ["layernorm_gelu", "rmsnorm", "softmax", "ew_gelu_silu_gate"])
def test_bfloat16_loads_take_the_pair_conversion_other_dtypes_do_not(workload):
    """Every load of a bfloat16 buffer in the row and pointwise kernels (and the row-loop twin's prefetched rows)
    reaches float32 through `_bf16_f32`; float16 keeps Triton's conversion."""
    bf16, fp16 = _gpu_text(workload, "bfloat16"), _gpu_text(workload, "float16")
    kernels = lambda text: text[text.index("def k0_"):]  # noqa: E731 - past the shared header
    assert "_bf16_f32(tl.load(" in kernels(bf16) and ".to(tl.float32)" not in kernels(bf16)
    assert "_bf16_f32(" not in kernels(fp16) and ").to(tl.float32)" in kernels(fp16)
    if "norm" in workload or "softmax" in workload:
        assert "= _bf16_f32(p0)" in kernels(bf16)  # the row loop's prefetched block


_PTX = """
import json, pathlib, re, sys, tempfile
from bakeoff.backends.tritongen import TritonGenBackend, target_from_options
from bakeoff.backends.tritongen.codegen import generate_all
from bakeoff.backends.tritongen.fusion import fuse
from bakeoff.backends.tritongen.offline import compile_offline
from bakeoff.backends.tritongen.tune import load_kernels
from bakeoff.workloads.ir import bind
from bakeoff.workloads.suite import builtin_workloads
w = builtin_workloads()["layernorm_gelu"]
plan = fuse(bind(w.graph, w.presets["gpu"], "bfloat16"))
src = generate_all(plan, target_from_options(TritonGenBackend.parse_options({}), False, "bfloat16", 90))[0]
ck = compile_offline(load_kernels([src], pathlib.Path(tempfile.mkdtemp()))[0], src,
                     {"BLOCK_M": 2, "BLOCK_N": 4096, "num_warps": 8, "num_stages": 1}, plan)
ptx = ck.asm["ptx"]
print(json.dumps({"pairs": len(re.findall(r"shl\\.b32 %r\\d+, (%r\\d+), 16; and\\.b32 %r\\d+, \\1, 0xFFFF0000;", ptx)),
                  "cvt": len(re.findall(r"cvt\\.f32\\.bf16", ptx))}))
"""


def test_bfloat16_loads_convert_two_to_a_word_in_sm90_ptx(tmp_path):
    """LayerNorm+GELU in bfloat16 compiled for sm_90 here (no device): every bfloat16 load reaches float32 through
    the pair conversion (x: 32 elements a thread, weight and bias: 16 each, two to a word), none through cvt."""
    got = last_json(run_uninterpreted(["-c", _PTX], tmp_path))
    assert got == {"pairs": (32 + 16 + 16) // 2, "cvt": 0}, got


_ON_GPU = """
import json, sys
from backend_check import rel_l2_vs_reference
cases = [("layernorm_gelu", "bfloat16", "gpu"), ("rmsnorm", "bfloat16", "gpu"), ("softmax", "bfloat16", "gpu"),
         ("ew_gelu_silu_gate", "bfloat16", "gpu"), ("mlp_block", "bfloat16", "smoke"),
         ("layernorm_gelu", "float16", "gpu")]  # the GEMMs' float64 reference runs on the CPU: smoke sizes
print(json.dumps({f"{w} {d}": [rel_l2_vs_reference(b, w, d, preset=p, device="cuda",
                                                  options={"autotune": False} if b == "tritongen" else None)
                               for b in ("tritongen", "eager")] for w, d, p in cases}))
"""


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_bfloat16_paths_match_eagers_error_on_the_gpu(tmp_path):
    """On the device, where the inline PTX runs: the bfloat16 kernels' error against float64 stays within eager's
    (a pair converted in the wrong order would be far off), in a process without the interpreter."""
    errors = last_json(run_uninterpreted(["-c", _ON_GPU], tmp_path, timeout=900))
    worse = {case: (tg, eager) for case, (tg, eager) in errors.items() if tg > 2.0 * eager + 1e-6}
    assert not worse, worse
