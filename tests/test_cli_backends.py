"""configs/smoke.yaml through the real CLI on every backend, on two workloads: each runs and is checked
against the fp64 reference, or is skipped with the reason."""
import json
import shutil

from conftest import REPO, SMOKE_GATE, SMOKE_JOBS, bakeoff

BACKENDS = ("xla", "iree", "onnxruntime", "tensorrt")


def test_smoke_config_on_all_backends(tmp_path):
    shutil.copytree(REPO / "configs", tmp_path / "configs")
    db = f"sqlite:///{tmp_path / 'b.db'}"
    # Two slots, as the smoke run (conftest.py): nothing here judges timing.
    args = ["run", "configs/smoke.yaml", "--db", db, "-w", "layernorm_gelu", "-w", "attn_block",
            "--jobs", str(SMOKE_JOBS), "--gate", SMOKE_GATE]
    for b in BACKENDS:
        args += ["--backend", b]
    bakeoff(*args, cwd=tmp_path, check=True)
    records = json.loads(bakeoff("export", "latest", "--db", db, cwd=tmp_path, check=True).stdout)
    by = {(r["workload"], r["backend"]): r for r in records}
    assert len(by) == 2 * len(BACKENDS)
    for (workload, backend), r in by.items():
        if backend == "tensorrt":
            assert r["status"] == "skipped"
            assert "tensorrt" in r["reason"]
            continue
        assert r["status"] == "ok", (workload, backend, r["reason"], r.get("stderr_tail"))
        assert r["err_rel_l2_vs_fp64"] < 1e-4 and r["err_ratio_vs_eager"] < 2
        assert r["latency_ms_median"] > 0 and r["compile_s"] > 0
        assert r["compile_stages_s"], (backend, "stages recorded apart")
    assert by[("layernorm_gelu", "xla")]["cache_hit_warm"] is True
    assert by[("layernorm_gelu", "iree")]["artifacts"]["dispatch_count"] >= 1
