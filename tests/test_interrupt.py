"""Interrupting a run through the real CLI: Ctrl-C (SIGINT to the process group) and SIGKILL of the
orchestrator, then `--resume`, end in a complete run with every case recorded exactly once."""
from __future__ import annotations

import json
import os
import signal
from collections import Counter
from pathlib import Path

from cli_process import count_records, start_bakeoff, wait_for_records, workers_left
from conftest import bakeoff

WORKLOADS = ["ew_sigmoid_relu", "ew_gelu_silu_gate", "layernorm_gelu", "rmsnorm", "softmax", "gemm_bias_gelu"]
CONFIG = f"""
name: interrupt
device: cpu
preset: smoke
dtypes: [float32]
workloads: [{", ".join(WORKLOADS)}]
backends: [eager]
seeds: [0, 1]
timing: {{warmup_s: 0.01, budget_s: 0.05, min_reps: 3}}
compile: {{warm: false}}
timeout_s: 300
"""


def assert_artifacts_match(records: list[dict], work: Path) -> None:
    """Exactly the recorded cases have an artifacts folder, each complete; nothing is left in staging."""
    folders = {str(p) for p in (work / "artifacts").iterdir()} if (work / "artifacts").exists() else set()
    assert folders == {r["artifacts_dir"] for r in records}
    for folder in folders:
        assert {p.name for p in Path(folder).iterdir()} == {"graph", "torch_code"}  # eager's two artifacts
    assert not list((work / "staging").glob("*"))


def test_sigint_then_sigkill_then_resume_completes(tmp_path):
    (tmp_path / "c.yaml").write_text(CONFIG)
    db_file = tmp_path / "r.db"
    db = f"sqlite:///{db_file}"

    # 1. Ctrl-C after the first record: workers stop, records are kept, the run is marked interrupted.
    proc = start_bakeoff("run", "c.yaml", "--jobs", "2", "--db", db, cwd=tmp_path)
    wait_for_records(db_file, 1, proc)
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    assert "interrupted" in out and "Resume with: bakeoff run --resume" in out, out
    run_id = out.split("Resume with: bakeoff run --resume ")[1].split()[0]
    assert f"--db {db}" in out
    assert not workers_left(tmp_path)
    kept = count_records(db_file)
    assert 1 <= kept < len(WORKLOADS)
    runs = json.loads(bakeoff("export", run_id, "--db", db, cwd=tmp_path, check=True).stdout)
    assert all(r["status"] == "ok" for r in runs)  # killed workers left no records
    work = tmp_path / "results" / "artifacts" / run_id
    assert_artifacts_match(runs, work)  # and no artifacts

    # 2. Resume, then SIGKILL the orchestrator once it has written one more record.
    proc = start_bakeoff("run", "--resume", run_id, "--jobs", "2", "--db", db, cwd=tmp_path)
    wait_for_records(db_file, kept + 1, proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert not workers_left(tmp_path)  # its workers died with it
    left = len(WORKLOADS) - count_records(db_file)
    assert left > 0

    # 3. Resume again: only the cases without a record run; the run completes with no duplicates.
    done = bakeoff("run", "--resume", run_id, "--jobs", "2", "--db", db, cwd=tmp_path, check=True)
    assert f"{left} of {len(WORKLOADS)} cases left" in done.stdout
    records = json.loads(bakeoff("export", run_id, "--db", db, cwd=tmp_path, check=True).stdout)
    ids = Counter(r["case_id"] for r in records)
    assert len(ids) == len(WORKLOADS) and max(ids.values()) == 1, ids
    assert {r["workload"] for r in records} == set(WORKLOADS)
    assert all(r["status"] == "ok" and r["latency_ms_median"] > 0 for r in records), done.stdout
    attempts = Counter(r["attempt"] for r in records)
    assert attempts[1] == kept and attempts[2] >= 1 and attempts[3] >= 1, attempts
    shown = bakeoff("show", run_id, "--db", db, cwd=tmp_path, check=True).stdout
    assert "(complete)" in shown
    assert_artifacts_match(records, work)
