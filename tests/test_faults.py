"""A worker that crashes, hangs or fails yields the right record while the other cases complete."""
import json

from conftest import bakeoff

CONFIG = """
name: faults
device: cpu
preset: smoke
dtypes: [float32]
workloads: [ew_sigmoid_relu]
backends:
  eager: {}
  abort: {backend: faulty, mode: abort}
  segfault: {backend: faulty, mode: segfault}
  hang: {backend: faulty, mode: hang}
  compile_error: {backend: faulty, mode: compile_error}
  run_error: {backend: faulty, mode: run_error}
  nan: {backend: faulty, mode: nan}
  wrong_shape: {backend: faulty, mode: wrong_shape}
  unwritten: {backend: faulty, mode: unwritten}
  perturb: {backend: faulty, mode: perturb, scale: 0.05}
  host_oom: {backend: faulty, mode: host_oom}
seeds: [0, 1]
timing: {warmup_s: 0.01, budget_s: 0.05, min_reps: 3}
compile: {warm: false}
timeout_s: 60
memory_limit_gb: 3
"""

EXPECTED = {"eager": "ok", "abort": "crash", "segfault": "crash", "hang": "timeout",
            "compile_error": "compile_error", "run_error": "runtime_error", "nan": "mismatch",
            "wrong_shape": "mismatch", "unwritten": "mismatch", "perturb": "mismatch", "host_oom": "oom"}


def test_fault_injection_statuses(tmp_path):
    (tmp_path / "faults.yaml").write_text(CONFIG)
    db = f"sqlite:///{tmp_path / 'f.db'}"
    bakeoff("run", "faults.yaml", "--db", db, cwd=tmp_path, check=True)
    records = json.loads(bakeoff("export", "latest", "--db", db, cwd=tmp_path, check=True).stdout)
    got = {r["backend"]: r for r in records}
    assert {k: got[k]["status"] for k in EXPECTED} == EXPECTED
    assert "SIGABRT" in got["abort"]["reason"]
    assert "SIGSEGV" in got["segfault"]["reason"]
    assert "injected compile error" in got["compile_error"]["reason"]
    assert "non-finite" in got["nan"]["reason"]
    assert "shape" in got["wrong_shape"]["reason"]
    assert got["perturb"]["err_ratio_vs_eager"] > 2  # numbers are kept beside the verdict
    assert got["eager"]["latency_ms_median"] > 0
