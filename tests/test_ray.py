"""`--executor ray` through the real CLI on a local Ray instance (`ray.init(num_cpus=2)` in the driver):
Ctrl-C kills the in-flight tasks and keeps the finished records; resuming on Ray completes the run."""
from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from ci_required import importorskip
from cli_process import count_records, start_bakeoff, wait_for_records, workers_left
from conftest import bakeoff

importorskip("ray", reason="Ray is not installed (pip install 'bakeoff[scale]')")

WORKLOADS = ["ew_sigmoid_relu", "layernorm_gelu", "rmsnorm", "softmax", "gemm_bias_gelu"]
CONFIG = f"""
name: ray
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


def _folders_of_ended_processes() -> set[str]:
    """Case, spare and Ray task folders in the temporary folder whose maker on this machine has ended."""
    from bakeoff.harness.supervise.leftovers import CASE_TMP_PREFIX, RAY_TMP_PREFIX, SPARE_TMP_PREFIX
    from bakeoff.owner import ProcessId

    return {path.name for path in Path(tempfile.gettempdir()).iterdir()
            for prefix in (CASE_TMP_PREFIX, SPARE_TMP_PREFIX, RAY_TMP_PREFIX)
            if (owner := ProcessId.from_tag(path.name, prefix)) is not None and owner.alive() is False}


def test_ray_interrupt_then_resume_on_ray(tmp_path):
    (tmp_path / "c.yaml").write_text(CONFIG)
    db_file = tmp_path / "r.db"
    db = f"sqlite:///{db_file}"
    left_before = _folders_of_ended_processes()
    proc = start_bakeoff("run", "c.yaml", "--executor", "ray", "--jobs", "2", "--db", db, cwd=tmp_path)
    wait_for_records(db_file, 1, proc)  # a result came back from a Ray task and the driver wrote it
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 130, out
    assert "Resume with: bakeoff run --resume" in out, out
    run_id = out.split("Resume with: bakeoff run --resume ")[1].split()[0]
    assert f"Resume with: bakeoff run --resume {run_id} --executor ray --jobs 2 --db {db}" in out, out  # on Ray again
    assert not workers_left(tmp_path, grace_s=30)  # cancelled tasks took their workers with them
    assert not _folders_of_ended_processes() - left_before  # and the killed tasks' folders went with them
    kept = count_records(db_file)
    assert 1 <= kept < len(WORKLOADS)

    done = bakeoff("run", "--resume", run_id, "--executor", "ray", "--jobs", "2", "--db", db, cwd=tmp_path,
                   check=True)
    assert f"{len(WORKLOADS) - kept} of {len(WORKLOADS)} cases left" in done.stdout
    records = json.loads(bakeoff("export", run_id, "--db", db, cwd=tmp_path, check=True).stdout)
    assert Counter(r["case_id"] for r in records).most_common(1)[0][1] == 1 and len(records) == len(WORKLOADS)
    assert all(r["status"] == "ok" and r["latency_ms_median"] > 0 for r in records), done.stdout
    assert all(r["worker"].startswith("ray:") and r["worker"].endswith("/cpu") for r in records)
    for r in records:  # artifacts came back from the task and were moved into place after the commit
        assert {p.name for p in Path(r["artifacts_dir"]).iterdir()} == {"graph", "torch_code"}
    windows = sorted(tuple(w) for r in records for w in r["timing_windows_epoch_s"])
    for (_, end), (start, _) in itertools.pairwise(windows):
        assert end <= start  # tasks on one node share its CPU timing gate
    assert "(complete)" in bakeoff("show", run_id, "--db", db, cwd=tmp_path, check=True).stdout
    from bakeoff.results.store import Store

    env = Store(db).run(run_id)["environment"]
    assert env["ray_node"] and env["hardware_id"]  # the run's environment came from a node of the cluster
    assert all(r["node_hardware_id"] == env["hardware_id"] and r["node_fingerprint"] for r in records)


def test_an_address_where_no_ray_listens_is_exit_2_at_once(tmp_path):
    (tmp_path / "c.yaml").write_text(CONFIG)
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = bakeoff("run", "c.yaml", "--executor", "ray", "--ray-address", f"127.0.0.1:{port}",
                   "--db", f"sqlite:///{tmp_path / 'r.db'}", cwd=tmp_path, timeout=90)  # ray.init alone retries for minutes
    assert proc.returncode == 2, proc.stderr
    assert f"nothing accepts connections at 127.0.0.1:{port} (Connection refused)" in " ".join(proc.stderr.split())
    assert "Traceback" not in proc.stderr and not (tmp_path / "r.db").exists()


SIGTERM_AFTER_RAY_STARTS = """
import os, signal, sys
from bakeoff.harness.run.executors.ray_executor import RayExecutor

def interrupt(signum, frame):
    raise KeyboardInterrupt

signal.signal(signal.SIGTERM, interrupt)  # as `bakeoff run` sets it, before it starts Ray
executor = RayExecutor("cpu", 1, None)
try:
    os.kill(os.getpid(), signal.SIGTERM)
    signal.pause()
except KeyboardInterrupt:
    print("interrupted")
finally:
    executor.close()
"""


def test_sigterm_after_ray_starts_still_reaches_the_driver(tmp_path):
    proc = subprocess.run([sys.executable, "-c", SIGTERM_AFTER_RAY_STARTS], cwd=tmp_path, capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0 and proc.stdout.strip() == "interrupted", (proc.returncode, proc.stdout, proc.stderr)
    assert "SIGTERM received" not in proc.stderr  # Ray's handler, which prints a stack and aborts, is gone


def _failing_task() -> None:
    raise RuntimeError("the task's node died")


def test_stop_keeps_ended_results_and_drops_failed_tasks(tmp_path):
    """On Ctrl-C the executor keeps every task that already ended with a record (an ok record has no
    reason: reason is None), leaves a task that failed for --resume, and cancels what still runs."""
    import ray

    from bakeoff.harness.run.executors.ray_executor import RayExecutor
    from test_staging import case

    executor = RayExecutor("cpu", jobs=1, address=None)
    try:
        ok, failed, running = case("w/N=4/float32/ok"), case("w/N=4/float32/failed"), case("w/N=4/float32/slow")
        ok_ref = ray.put({"record": {"status": "ok", "reason": None}, "artifacts": {"kernel.txt": b"k"}})
        failed_ref = ray.remote(_failing_task).options(max_retries=0).remote()
        slow_ref = ray.remote(lambda: __import__("time").sleep(600)).remote()
        ray.wait([failed_ref], timeout=60)
        executor._work_dir = tmp_path
        executor._inflight = {ok_ref: ok, failed_ref: failed, slow_ref: running}
        executor.stop()
        kept = executor.drain()
        assert [(c.case_id, r["status"]) for c, r in kept] == [(ok.case_id, "ok")]
        assert kept[0][1]["artifacts_dir"]  # its artifacts were staged for the commit
        assert not executor._inflight
        with pytest.raises(ray.exceptions.RayError):  # cancelled
            ray.get(slow_ref, timeout=60)
    finally:
        executor.close()
