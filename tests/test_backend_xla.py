"""The JAX/XLA backend: numerics against fp64 on every suite workload, stages, artifacts, flags, cache."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from backend_check import REL_L2_TOL, WORKLOADS, rel_l2_vs_reference, smoke_graph
from core_site import core_site
from bakeoff.backends import get_backend
from bakeoff.workloads.suite import builtin_workloads

REPO = Path(__file__).resolve().parents[1]
REASON = get_backend("xla").available()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")
HALF = ["layernorm_gelu", "softmax_large", "gemm_bias_gelu", "attention", "mlp_block"]


def _compile(workload: str, dtype: str = "float32", options: dict | None = None, device: str = "cpu"):
    b = get_backend("xla")
    return b.compile(smoke_graph(workload, dtype), [], device, b.parse_options(options))


@pytest.mark.parametrize("workload", WORKLOADS)
def test_matches_reference_float32(workload):
    assert rel_l2_vs_reference("xla", workload, "float32") < REL_L2_TOL["float32"]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("workload", HALF)
def test_matches_reference_half(workload, dtype):
    assert rel_l2_vs_reference("xla", workload, dtype) < REL_L2_TOL[dtype]


def test_stages_and_artifacts():
    c = _compile("attn_block")
    assert set(c.info.stages_s) == {"trace", "lower", "compile"}
    assert all(v > 0 for v in c.info.stages_s.values()), c.info.stages_s
    a = c.artifacts()
    assert "stablehlo.dot_general" in a["stablehlo"]
    assert "fusion" in a["hlo_optimized"]
    assert isinstance(a["fusion_count"], int) and a["fusion_count"] > 0
    assert a["flags"] == os.environ.get("XLA_FLAGS", "").split()


def test_inputs_are_xla_buffers_and_outputs_share_memory_through_dlpack():
    c = _compile("ew_sigmoid_relu")
    w = builtin_workloads()["ew_sigmoid_relu"]
    x, y = (torch.randn(tuple(w.presets["smoke"].values())) for _ in range(2))
    prepared = c.prepare([x, y])
    # The inputs are XLA's own buffers (a JAX program's arrays), equal to the tensors they came from.
    assert prepared[0].unsafe_buffer_pointer() != x.data_ptr()
    assert torch.equal(torch.from_dlpack(prepared[0]), x)
    raw = c.run(prepared)
    out = c.to_torch(raw)[0]
    c.sync()
    assert out.data_ptr() == raw[0].unsafe_buffer_pointer()  # the output is not copied back
    assert torch.allclose(out, torch.sigmoid(torch.relu(x * 1.5 + y)) * x, rtol=1e-5, atol=1e-6)


def test_unknown_option_is_named():
    with pytest.raises(ValueError, match="bogus"):
        _compile("softmax", options={"bogus": 1})


def test_xla_flags_after_import_must_match():
    import jax  # noqa: F401  (jax is now imported in this process)

    current = os.environ.get("XLA_FLAGS", "")
    _compile("softmax", options={"xla_flags": current})  # unchanged flags are fine
    with pytest.raises(RuntimeError, match="already imported"):
        _compile("softmax", options={"xla_flags": current + " --xla_dump_hlo_as_text"})


def _run_fresh(code: str, env: dict) -> str:
    """Run `code` in a fresh interpreter at the repo root; its last stdout line."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **env}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=full_env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


_PROBE = """
import json
from bakeoff.backends import get_backend
from bakeoff.workloads.ir import bind
from bakeoff.workloads.suite import builtin_workloads
w = builtin_workloads()["layernorm_gelu"]
b = get_backend("xla")
c = b.compile(bind(w.graph, w.presets["smoke"], "float32"), [], "cpu", b.parse_options({options}))
print(json.dumps({{"hit": c.info.cache_hit, "notes": c.info.notes, "flags": c.artifacts()["flags"]}}))
"""


def test_persistent_cache_hits_in_a_second_process(tmp_path):
    env = {"JAX_COMPILATION_CACHE_DIR": str(tmp_path / "jax-cache"), "XLA_FLAGS": ""}
    first = json.loads(_run_fresh(_PROBE.format(options="{}"), env))
    files_after_first = len(list((tmp_path / "jax-cache").iterdir()))
    second = json.loads(_run_fresh(_PROBE.format(options="{}"), env))
    files_after_second = len(list((tmp_path / "jax-cache").iterdir()))
    assert first["hit"] is False and files_after_first >= 1
    assert second["hit"] is True and files_after_second == files_after_first


def test_xla_flags_take_effect_in_a_fresh_process(tmp_path):
    dump = tmp_path / "dump"
    options = repr({"xla_flags": f"--xla_dump_to={dump}"})
    out = json.loads(_run_fresh(_PROBE.format(options=options), {"XLA_FLAGS": ""}))
    assert out["flags"] == [f"--xla_dump_to={dump}"] and any("xla_dump_to" in n for n in out["notes"])
    assert any(dump.iterdir()), "XLA wrote no dump: the flag did not reach XLA"


def test_available_names_what_to_install_when_jax_is_missing(tmp_path):
    """Without site-packages (python -S; pydantic only) the module still imports and says what to pip install."""
    code = ("from bakeoff.backends import get_backend; import bakeoff.workloads.lower_jax; "
            "b = get_backend('xla'); print(b.available()); print(b.version())")
    done = subprocess.run([sys.executable, "-S", "-c", code], cwd=REPO,
                          env={"PYTHONPATH": os.pathsep.join([str(REPO), str(core_site(tmp_path / "site"))])},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["jax not installed (pip install 'bakeoff[xla]')", "None"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("workload", ["layernorm_gelu", "gemm_bias_gelu", "attn_block"])
def test_matches_reference_on_gpu(workload, dtype):
    assert rel_l2_vs_reference("xla", workload, dtype, device="cuda") < REL_L2_TOL[dtype]
