"""Command-line arguments and resumes that must be refused (exit 2, nothing written), and --backend narrowing
a config to its own labels."""
from __future__ import annotations

import json

import pytest

from conftest import bakeoff
from bakeoff.harness.config.schema import BUILTIN_CONFIG_PATH, default_config_text
from bakeoff.harness.run.lease_heartbeat import RunBusyError, RunLease
from bakeoff.harness.run.orchestrator import Filters, plan_run, resumed_cases
from bakeoff.harness.config.yaml_lines import ConfigError
from bakeoff.results.store import Store

CONFIG = """
name: labels
device: cpu
preset: smoke
dtypes: [float32]
workloads: [softmax]
backends:
  eager: {}
  eager-again: {backend: eager}
timing: {warmup_s: 0.01, budget_s: 0.05, min_reps: 3}
compile: {warm: false}
timeout_s: 300
"""


def refused(proc, tmp_path, needle: str) -> None:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert needle in proc.stderr, proc.stderr
    assert not (tmp_path / "s.db").exists() and not (tmp_path / "results").exists()  # nothing written


def test_backend_selects_a_config_label(tmp_path):
    (tmp_path / "c.yaml").write_text(CONFIG)
    db = f"sqlite:///{tmp_path / 'r.db'}"
    bakeoff("run", "c.yaml", "--backend", "eager-again", "--db", db, cwd=tmp_path, check=True)
    records = json.loads(bakeoff("export", "latest", "--db", db, cwd=tmp_path, check=True).stdout)
    assert [(r["backend"], r["status"]) for r in records] == [("eager-again", "ok")]


def test_backend_not_in_the_config_is_exit_2(tmp_path):
    (tmp_path / "c.yaml").write_text(CONFIG)
    proc = bakeoff("run", "c.yaml", "--backend", "inductor", "--db", f"sqlite:///{tmp_path / 's.db'}", cwd=tmp_path)
    refused(proc, tmp_path, "--backend 'inductor' is not a backend of this config; its labels: eager, eager-again")


def test_backend_narrows_but_the_default_config_may_add_registered_backends():
    cases = plan_run(CONFIG, "c.yaml", Filters(backends=("eager-again",))).cases
    assert {(c.label, c.backend) for c in cases} == {("eager-again", "eager")}
    with pytest.raises(ConfigError, match="not a backend of this config"):
        plan_run(CONFIG, "c.yaml", Filters(backends=("tritongen",)))
    # The built-in default: a registered backend it lacks is added, an unknown name refused.
    default = default_config_text()
    planned = plan_run(default, BUILTIN_CONFIG_PATH, Filters(backends=("eager", "tritongen"), device="cpu"))
    assert {c.label for c in planned.cases} == {"eager", "tritongen"}
    with pytest.raises(ConfigError, match="'nosuch' is unknown"):
        plan_run(default, BUILTIN_CONFIG_PATH, Filters(backends=("nosuch",), device="cpu"))


def test_bad_device_option_is_exit_2(tmp_path):
    (tmp_path / "c.yaml").write_text(CONFIG)
    proc = bakeoff("run", "c.yaml", "--device", "gpu", "--db", f"sqlite:///{tmp_path / 's.db'}", cwd=tmp_path)
    refused(proc, tmp_path, "--device must be auto, cpu, cuda or cuda:N, not 'gpu'")


def test_calibrate_bad_dtype_is_exit_2_before_measuring(tmp_path):
    proc = bakeoff("calibrate", "--device", "cpu", "--dtype", "float32", "--dtype", "float8",
                   "--db", f"sqlite:///{tmp_path / 's.db'}", cwd=tmp_path, timeout=120)
    refused(proc, tmp_path, "--dtype must be one of float32, float16, bfloat16, not 'float8'")
    assert "Traceback" not in proc.stderr


def _stored_run(tmp_path, device: str, config: str = CONFIG) -> tuple[str, str]:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    run_id = Store(db).create_run(config_name="labels", config_path="c.yaml", config_text=config, device=device,
                                  environment={"fingerprint": "f", "filters": {}}, n_cases=1)
    return db, run_id


def test_resume_plans_on_the_stored_device_and_preset():
    config = CONFIG.replace("device: cpu", "device: auto").replace("preset: smoke", "preset: auto") \
                   .replace("dtypes: [float32]\n", "")
    run = {"device": "cuda", "config_text": config, "config_path": "c.yaml", "environment": {"filters": {}}}
    device, cases = resumed_cases(run)
    assert device == "cuda"
    assert {(c.device, c.preset, c.dtype) for c in cases} == {("cuda", "gpu", "bfloat16")}  # not this host's


def test_resume_of_a_cuda_run_on_a_host_without_it_is_exit_2(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has CUDA")
    db, run_id = _stored_run(tmp_path, "cuda")
    proc = bakeoff("run", "--resume", run_id, "--db", db, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert f"run {run_id} ran on cuda, which this host cannot present" in proc.stderr
    assert Store(db).run(run_id)["resumes"] == 0  # nothing written


def test_resume_of_a_run_still_held_is_exit_2(tmp_path):
    db, run_id = _stored_run(tmp_path, "cpu")
    store = Store(db)
    with RunLease(store).held(run_id) as lease:  # the lease is in the store: any folder sees it
        with pytest.raises(RunBusyError, match="is still being run"):  # a second holder, even in one process
            with RunLease(store).held(run_id):
                pass
        (tmp_path / "elsewhere").mkdir()
        proc = bakeoff("run", "--resume", run_id, "--db", db, cwd=tmp_path / "elsewhere", timeout=120)
        assert proc.returncode == 2, (proc.stdout, proc.stderr)
        assert f"run {run_id} is still being run by another orchestrator (pid {lease.claim.pid} on " in proc.stderr
    assert store.run(run_id)["resumes"] == 0 and store.lease_holder(run_id) is None  # released at its end
    with RunLease(store).held(run_id):
        pass


def test_preset_option_no_workload_has_is_exit_2_naming_the_flag(tmp_path):
    (tmp_path / "c.yaml").write_text(CONFIG)
    proc = bakeoff("run", "c.yaml", "--preset", "huge", "--db", f"sqlite:///{tmp_path / 's.db'}", cwd=tmp_path)
    refused(proc, tmp_path, "c.yaml: preset: --preset 'huge' is not a preset of workload softmax (smoke, cpu, gpu)")


NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}  # no CUDA device visible, whatever the host has


def test_calibrate_on_cuda_without_a_gpu_is_exit_2_before_the_store(tmp_path):
    proc = bakeoff("calibrate", "--device", "cuda", "--db", f"sqlite:///{tmp_path / 's.db'}", cwd=tmp_path,
                   timeout=120, env=NO_GPU)
    refused(proc, tmp_path, "--device cuda: device cuda asked for, but no CUDA device is visible")
    assert "Traceback" not in proc.stderr


def test_doctor_on_cuda_without_a_gpu_is_exit_2(tmp_path):
    proc = bakeoff("doctor", "--device", "cuda:0", cwd=tmp_path, timeout=120, env=NO_GPU)
    refused(proc, tmp_path, "--device cuda:0: device cuda:0 asked for, but no CUDA device is visible")
    assert "fingerprint" not in proc.stdout
