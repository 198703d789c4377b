"""The IREE backend: numerics against fp64 on every suite workload, stages, artifacts, CUDA target choice."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from backend_check import REL_L2_TOL, WORKLOADS, rel_l2_vs_reference, smoke_graph
from core_site import core_site
from bakeoff.backends import get_backend

REPO = Path(__file__).resolve().parents[1]
IREE = get_backend("iree")
REASON = IREE.available()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")
HALF = ["layernorm_gelu", "softmax_large", "gemm_bias_gelu", "attention"]


_graph = smoke_graph


@pytest.mark.parametrize("workload", WORKLOADS)
def test_matches_reference_float32(workload):
    assert rel_l2_vs_reference("iree", workload, "float32") < REL_L2_TOL["float32"]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("workload", HALF)
def test_matches_reference_half(workload, dtype):
    assert rel_l2_vs_reference("iree", workload, dtype) < REL_L2_TOL[dtype]


def test_stages_and_artifacts():
    c = IREE.compile(_graph("attn_block"), [], "cpu", IREE.Options())
    assert {"compile", "load"} <= set(c.info.stages_s)
    assert all(v > 0 for v in c.info.stages_s.values()), c.info.stages_s
    a = c.artifacts()
    assert a["vmfb_bytes"] > 0
    # LayerNorm, 3 projections, attention and the output projection cannot fit in fewer than 3 dispatches.
    assert isinstance(a["dispatch_count"], int) and a["dispatch_count"] >= 3
    assert 0 < a["executable_count"] <= a["dispatch_count"]
    assert "--iree-hal-local-target-device-backends=llvm-cpu" in a["flags"]
    assert a["target"] == "llvm-cpu host"


def test_unknown_option_is_named():
    with pytest.raises(ValueError, match="bogus"):
        IREE.parse_options({"bogus": 1})


def test_run_returns_finished_results_on_reused_inputs():
    c = IREE.compile(_graph("ew_sigmoid_relu"), [], "cpu", IREE.Options())
    x, y = torch.randn(61, 257), torch.randn(61, 257)
    prepared = c.prepare([x, y])
    expected = torch.sigmoid(torch.relu(x * 1.5 + y)) * x
    for _ in range(2):  # the uploaded inputs serve every run
        out = c.to_torch(c.run(prepared))[0]
        c.sync()
        assert torch.allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_cuda_target_falls_back_to_one_the_compiler_knows(tmp_path, monkeypatch):
    """Compiling for CUDA needs no GPU: check the target choice and that a workload compiles for it.

    attn_block in bfloat16 has bf16 matmuls, which IREE 3.13's CUDA codegen rejects unless they accumulate
    in float32 (as workloads.lower_jax writes them).
    """
    import iree.compiler as ireec

    from bakeoff.backends import iree as iree_backend
    from bakeoff.workloads.lower_jax import stablehlo_text

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(iree_backend, "_known_targets", {})
    target, note = iree_backend.cuda_target("sm_90")
    if target != "sm_90":
        assert note and "sm_90" in note and target in note
    assert iree_backend.cuda_target("sm_80") == ("sm_80", None)
    assert (tmp_path / "bakeoff" / "iree_cuda_targets.json").exists()
    vmfb = ireec.compile_str(stablehlo_text(_graph("attn_block", "bfloat16"), "cuda"), input_type="stablehlo",
                             extra_args=["--iree-hal-target-device=cuda", f"--iree-cuda-target={target}"])
    assert len(vmfb) > 0


@pytest.mark.parametrize("workload", ["gemm_bias_gelu", "attn_block"])
def test_tuned_preset_compiles_for_cuda_offline(workload):
    """The tuned preset's flags reach the GPU codegen: compile for the CUDA target the H200 gets (no GPU needed)."""
    import iree.compiler as ireec

    from bakeoff.backends.iree_presets import preset_flags
    from bakeoff.workloads.lower_jax import stablehlo_text

    flags = ["--iree-hal-target-device=cuda", "--iree-cuda-target=sm_89", "--iree-execution-model=async-internal"]
    vmfb = ireec.compile_str(stablehlo_text(_graph(workload, "bfloat16"), "cuda"), input_type="stablehlo",
                             extra_args=flags + preset_flags("tuned"))
    assert len(vmfb) > 0


def test_preset_flags_are_passed_and_recorded():
    backend = get_backend("iree")
    assert backend.parse_options({}).preset == "tuned"
    tuned = backend.compile(_graph("mlp_block"), [], "cpu", backend.parse_options({}))
    plain = backend.compile(_graph("mlp_block"), [], "cpu", backend.parse_options({"preset": "plain"}))
    extra = backend.compile(_graph("mlp_block"), [], "cpu", backend.parse_options({"extra_flags": ["--iree-opt-level=O1"]}))
    assert "--iree-opt-level=O3" in tuned.artifacts()["flags"]
    assert "--iree-dispatch-creation-enable-aggressive-fusion=true" in tuned.artifacts()["flags"]
    assert not any(f.startswith("--iree-opt-level") for f in plain.artifacts()["flags"])
    assert ("preset=tuned: --iree-opt-level=O3 --iree-dispatch-creation-enable-aggressive-fusion=true"
            in tuned.info.notes)
    assert "preset=plain: none: iree-compile's defaults (O0)" in plain.info.notes
    # the user's flag comes after the preset's, so it is the one iree-compile keeps
    flags = extra.artifacts()["flags"]
    assert flags.index("--iree-opt-level=O1") > flags.index("--iree-opt-level=O3")
    assert "extra_flags=--iree-opt-level=O1" in extra.info.notes
    torch.manual_seed(0)
    xs = [torch.randn(tuple(n.shape)) for n in _graph("mlp_block").inputs]
    for a, b in zip(tuned(*xs), plain(*xs)):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError) as err:
        backend.parse_options({"preset": "fast"})
    assert all(word in str(err.value) for word in ("preset", "tuned", "plain")), str(err.value)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("workload", ["layernorm_gelu", "gemm_bias_gelu", "attn_block"])
def test_matches_reference_on_gpu(workload, dtype):
    assert rel_l2_vs_reference("iree", workload, dtype, device="cuda") < REL_L2_TOL[dtype]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_target_is_recorded():
    c = IREE.compile(_graph("softmax"), [], "cuda", IREE.Options())
    major, minor = torch.cuda.get_device_capability(0)
    target = c.artifacts()["target"]
    assert target.startswith("sm_") and f"target={target}" in c.info.notes
    if target != f"sm_{major}{minor}":
        assert any("PTX JIT" in n for n in c.info.notes)


def test_available_names_what_to_install_when_nothing_is_installed(tmp_path):
    """Without site-packages (python -S; pydantic only) the modules still import and say what to pip install."""
    code = ("from bakeoff.backends import get_backend; import bakeoff.workloads.lower_jax; "
            "b = get_backend('iree'); print(b.available()); print(b.version())")
    done = subprocess.run([sys.executable, "-S", "-c", code], cwd=REPO,
                          env={"PYTHONPATH": os.pathsep.join([str(REPO), str(core_site(tmp_path / "site"))])},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["iree not installed (pip install 'bakeoff[iree]')", "None"]


def test_headline_compile_time_is_iree_compile():
    from types import SimpleNamespace

    from bakeoff.harness.worker.input_tensors import make_inputs
    from bakeoff.harness.worker.compile_step import compile_and_first_run

    g = _graph("softmax")
    case = SimpleNamespace(device="cpu", options=IREE.Options())
    compiled, _, _, seconds, total = compile_and_first_run(IREE, g, [], case, make_inputs(g, 0, "cpu"))
    stages = compiled.info.stages_s
    assert seconds == stages["compile"]   # module load and the first run are recorded apart
    assert {"stablehlo", "compile", "load", "first_run"} <= set(stages)
    assert total >= stages["compile"] + stages["load"] + stages["first_run"]
