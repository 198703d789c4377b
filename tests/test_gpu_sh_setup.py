"""benchmarks/gpu.sh's setup: IREE must have travelled (`.gpu`) or be installed already, except for the jobs
that run no IREE case (tritongen, timing, a suite whose BACKENDS leave it out, a config run whose backend options
leave it out), which go on without it and say so."""
from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest
from test_gpu_sh_ort import _function


def _setup(tmp_path: Path, job: str, backends: str | None = None, args: str = "") -> subprocess.CompletedProcess:
    """setup() as JOB `job` (its arguments `args`) in a checkout that carried .gpudeps but not .gpu, IREE not
    installed, nvidia-smi a stub."""
    root = tmp_path / "repo"
    (root / ".gpudeps").mkdir(parents=True)
    with zipfile.ZipFile(root / ".gpudeps" / "pydeps.zip", "w") as z:
        z.writestr("stub_dep/__init__.py", "")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'name\nStub GPU'\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    script = "\n".join(["set -uo pipefail", _function("runs_iree"), _function("setup"), _function("install_ort"),
                        f'R="{root}"; JOB="{job}"', f"setup {args}", 'echo "setup done in $PWD"'])
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SITE": str(tmp_path / "site"), "WORK": str(tmp_path / "work"),
           "OUT": str(tmp_path / "out"), "HOME": str(tmp_path)} | ({"BACKENDS": backends} if backends else {})
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.parametrize("job", ["tritongen", "timing"])
def test_a_job_that_runs_no_iree_case_goes_on_without_it(tmp_path, job):
    got = _setup(tmp_path, job)
    assert got.returncode == 0, got.stderr
    assert f"the {job} job runs no IREE case" in got.stdout
    assert "setup done in" in got.stdout and (tmp_path / "site" / "stub_dep").is_dir()


@pytest.mark.parametrize("job", ["suite", "checks"])
def test_a_job_that_may_run_iree_stops_and_says_what_to_carry(tmp_path, job):
    got = _setup(tmp_path, job)
    assert got.returncode == 2
    assert "carry .gpu" in got.stderr and "setup done" not in got.stdout


def test_a_suite_whose_backends_leave_out_iree_goes_on_without_it(tmp_path):
    got = _setup(tmp_path, "suite", backends="eager inductor tritongen xla")
    assert got.returncode == 0, got.stderr
    assert "the suite job runs no IREE case" in got.stdout


@pytest.mark.parametrize("backends", ["eager iree", "iree"])
def test_a_suite_whose_backends_name_iree_stops_without_it(tmp_path, backends):
    got = _setup(tmp_path, "suite", backends=backends)
    assert got.returncode == 2
    assert "carry .gpu" in got.stderr


@pytest.mark.parametrize("args", ["configs/numerics.yaml -b eager -b tritongen -w matmul_long_k",
                                  "configs/numerics.yaml --backend inductor --backend=tritongen",
                                  "configs/numerics.yaml -w iree -b eager"])
def test_a_config_run_whose_backend_options_leave_out_iree_goes_on_without_it(tmp_path, args):
    """Backends named without iree; a workload named like a backend (-w iree) is not a backend."""
    got = _setup(tmp_path, "config", args=args)
    assert got.returncode == 0, got.stderr
    assert "the config job runs no IREE case" in got.stdout


@pytest.mark.parametrize("args", ["configs/numerics.yaml", "configs/numerics.yaml -b eager -b iree",
                                  "configs/numerics.yaml --backend=iree"])
def test_a_config_run_that_may_run_iree_stops_without_it(tmp_path, args):
    """No backend named (the config's own list) or iree named (either spelling): carry .gpu."""
    got = _setup(tmp_path, "config", args=args)
    assert got.returncode == 2
    assert "carry .gpu" in got.stderr
