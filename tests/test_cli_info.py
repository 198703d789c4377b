"""The informational commands through the real CLI: `list workloads`, `list backends`, `doctor`, and
`calibrate` feeding `pct_of_ceiling` into a later run's records; and that importing the harness pulls in no
optional backend library (they are imported lazily, only for the cases that use them)."""
from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO, bakeoff
from bakeoff.backends import REGISTRY, backend_class
from bakeoff.workloads.suite import builtin_workloads

CONFIG = """
name: calibrated
device: cpu
preset: smoke
dtypes: [float32]
workloads: [ew_sigmoid_relu]
backends: {eager: {}}
timing: {warmup_s: 0.01, budget_s: 0.05, min_reps: 3}
compile: {warm: false}
timeout_s: 300
"""


def test_list_workloads_names_every_builtin(tmp_path):
    out = bakeoff("list", "workloads", cwd=tmp_path, check=True).stdout
    assert all(name in out for name in builtin_workloads())


def test_list_backends_says_available_or_why_not(tmp_path):
    out = bakeoff("list", "backends", cwd=tmp_path, check=True).stdout
    for name in REGISTRY:
        row = next(line for line in out.splitlines() if f" {name} " in line)
        reason = backend_class(name).available()
        assert ("available" in row) if reason is None else (reason[:40] in row), row


def test_doctor_prints_the_fingerprint_and_versions(tmp_path):
    out = bakeoff("doctor", "--device", "cpu", cwd=tmp_path, check=True).stdout
    for key in ("fingerprint", "hardware_id", "cpu_model", "versions", "harness_rev"):
        assert f"{key}:" in out, out


def test_calibrate_then_a_run_carries_pct_of_ceiling(tmp_path):
    db = f"sqlite:///{tmp_path / 'c.db'}"
    cal = bakeoff("calibrate", "--device", "cpu", "--dtype", "float32", "--db", db, cwd=tmp_path, check=True)
    assert "copy_gbps" in cal.stdout and "matmul_tflops_float32" in cal.stdout
    (tmp_path / "c.yaml").write_text(CONFIG)
    bakeoff("run", "c.yaml", "--db", db, cwd=tmp_path, check=True)
    [record] = json.loads(bakeoff("export", "latest", "--db", db, cwd=tmp_path, check=True).stdout)
    assert record["status"] == "ok" and record["eager_deterministic"] is True  # eager ran twice, bitwise equal
    # ew_sigmoid_relu is memory-bound: achieved GB/s over the stored copy ceiling.
    assert record["pct_of_ceiling"] > 0 and record["achieved_gbps"] > 0


def _loaded_after(modules: tuple[str, ...], watched: tuple[str, ...]) -> list[str]:
    """Which of `watched` a fresh Python has loaded after importing `modules` and every backend adapter."""
    code = (f"import sys, {', '.join(modules)}\n"
            "from bakeoff.backends import REGISTRY, backend_class\n"
            "[backend_class(n) for n in REGISTRY]\n"
            f"print(' '.join(sorted(m for m in {watched!r} if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_importing_the_harness_loads_no_optional_backend_library():
    assert _loaded_after(("bakeoff.harness.cli.app", "bakeoff.harness.run.orchestrator", "bakeoff.harness.worker.cold",
                          "bakeoff.harness.worker.main", "bakeoff.backends", "bakeoff.results.store"),
                         ("jax", "jaxlib", "iree", "onnx", "onnxruntime", "tensorrt", "ray", "plotly")) == []


def test_a_worker_imports_neither_the_store_nor_the_report():
    """Every case's process imports the worker: SQLAlchemy (0.3 s of a worker's start on the 2-core machine),
    pandas and plotly are the orchestrator's, not the worker's."""
    assert _loaded_after(("bakeoff.harness.worker.entry", "bakeoff.harness.worker.cold",
                          "bakeoff.harness.worker.main", "bakeoff.harness.worker.spare"),
                         ("sqlalchemy", "pandas", "plotly", "rich", "typer")) == []
