"""What a SIGKILLed orchestrator leaves (its case folder in the temporary folder, the worker's TMPDIR inside
it, its pre-started workers' folders, the case's cache folder under the run's artifacts) is removed by the
next run started on this machine; folders of live processes, of other machines, and folders not named by
bakeoff are left alone."""
from __future__ import annotations

import os
import time
from pathlib import Path

import psutil

from cli_process import start_bakeoff, workers_left
from conftest import bakeoff
from bakeoff.harness.supervise.leftovers import CASE_TMP_PREFIX, SPARE_TMP_PREFIX, owned_prefix, remove_dead
from bakeoff.owner import ProcessId

HANG = """
name: hang
device: cpu
preset: smoke
dtypes: [float32]
workloads: [ew_sigmoid_relu]
backends: {hang: {backend: faulty, mode: hang}}
seeds: [0, 1]
compile: {warm: false}
timeout_s: 600
"""
QUICK = HANG.replace("backends: {hang: {backend: faulty, mode: hang}}", "backends: [eager]").replace(
    "name: hang", "name: quick") + "timing: {warmup_s: 0.01, budget_s: 0.05, min_reps: 3}\n"


def test_sweep_removes_only_what_ended_processes_on_this_machine_made(tmp_path):
    ended = psutil.Popen(["true"])
    ended.wait()
    me = ProcessId.current()
    names = {"dead": f"{CASE_TMP_PREFIX}{ProcessId(me.machine, ended.pid, '1').tag()}-x",
             "live": f"{owned_prefix(CASE_TMP_PREFIX)}y",
             "elsewhere": f"{CASE_TMP_PREFIX}{ProcessId('0123456789ab', ended.pid, '1').tag()}-z",
             "untagged": f"{CASE_TMP_PREFIX}abc123", "other": "unrelated-1-2-3"}
    for name in names.values():
        (tmp_path / name / "tmp").mkdir(parents=True)
    assert remove_dead(tmp_path, CASE_TMP_PREFIX) == [tmp_path / names["dead"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(v for k, v in names.items() if k != "dead")


def _worker(cwd: Path, timeout_s: float = 300) -> psutil.Process:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for proc in psutil.process_iter(["cmdline"]):
            try:
                if "bakeoff.harness.worker.entry" in " ".join(proc.info["cmdline"] or []) and \
                        Path(proc.cwd()) == cwd:
                    return proc
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        time.sleep(0.2)
    raise AssertionError(f"no worker started in {cwd} after {timeout_s} s")


def test_leftovers_of_a_sigkilled_run_are_removed_by_the_next_run(tmp_path, monkeypatch):
    tmp = tmp_path / "tmp"  # this test's temporary folder: the cleaning must not touch other processes' /tmp
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    (tmp_path / "hang.yaml").write_text(HANG)
    (tmp_path / "quick.yaml").write_text(QUICK)
    db = f"sqlite:///{tmp_path / 'r.db'}"

    proc = start_bakeoff("run", "hang.yaml", "--db", db, cwd=tmp_path)
    worker = _worker(tmp_path)
    (case_dir,) = tmp.glob(f"{CASE_TMP_PREFIX}*")
    spare_dirs = list(tmp.glob(f"{SPARE_TMP_PREFIX}*"))  # pre-started workers (supervise/prestart.py)
    # What its compilers write goes with its folders: a fresh worker starts with its case's TMPDIR; a
    # pre-started one with its own folder's, replaced by its case's when the case arrives.
    started_in = case_dir if "--spare" not in worker.cmdline() else next(
        d for d in spare_dirs if str(d) in " ".join(worker.cmdline()))
    assert worker.environ()["TMPDIR"] == str(started_in / "tmp")
    (cache_dir,) = (tmp_path / "results" / "artifacts").glob("*/cache-*")
    proc.kill()  # SIGKILL: nothing of the orchestrator's cleanup runs
    proc.communicate(timeout=60)
    assert not workers_left(tmp_path)  # the worker died with it
    assert case_dir.is_dir() and cache_dir.is_dir() and all(d.is_dir() for d in spare_dirs)
    untagged = tmp / f"{CASE_TMP_PREFIX}from-an-older-bakeoff"
    untagged.mkdir()

    done = bakeoff("run", "quick.yaml", "--db", db, cwd=tmp_path, check=True)
    removed = 2 + len(spare_dirs)
    assert f"removed {removed} folder(s) left by killed bakeoff processes" in " ".join(done.stdout.split())
    assert not case_dir.exists() and not cache_dir.exists() and not any(d.exists() for d in spare_dirs)
    assert untagged.is_dir()  # no owner in its name: not ours to judge
    assert set(os.listdir(tmp)) - {"bakeoff-gates"} == {untagged.name}  # the quick run cleaned up after itself
