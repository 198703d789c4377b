"""One orchestrator per run, wherever it starts: the run's lease is a row in the store (SQLite and PostgreSQL).
A second orchestrator is refused while the holder lives; a stale lease (no heartbeat) or one whose process
has ended is taken over; an orchestrator that lost its lease stops and writes nothing more."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from dataclasses import replace

import pytest

from cli_process import start_bakeoff
from conftest import bakeoff, bakeoff_cmd
from bakeoff.harness.run.lease_heartbeat import RunBusyError, RunLease
from bakeoff.results.leases import LeaseLost
from bakeoff.results.store import Store


def _run(store: Store, lease: RunLease | None = None) -> str:
    return store.create_run(config_name="c", config_path=None, config_text="", device="cpu", environment={},
                            n_cases=1, lease=lease.claim if lease else None)


def _silence(lease: RunLease) -> None:
    """Stop the lease's heartbeat, as if its process were suspended (the row stays)."""
    lease._stop.set()
    lease._thread.join()


def test_lease_refuses_a_live_holder_and_takes_over_a_stale_one(store_url):
    store = Store(store_url)
    first = RunLease(store, stale_s=1.0)
    run_id = _run(store, first)
    first.adopt(run_id)
    time.sleep(1.5)  # longer than stale_s: only the heartbeat (every stale_s / 4) keeps it live
    with pytest.raises(RunBusyError, match=f"pid {os.getpid()} on .* last heartbeat"):
        RunLease(store, stale_s=1.0).acquire(run_id)
    assert store.add_record(run_id, {"case_id": "a", "status": "ok"}, lease=first.token)

    _silence(first)
    time.sleep(1.3)
    second = RunLease(store, stale_s=1.0)
    second.acquire(run_id)
    assert "no heartbeat for" in second.took_over
    with pytest.raises(LeaseLost, match=f"lost its lease: it was taken over by pid {os.getpid()}"):  # every write checks the lease
        store.add_record(run_id, {"case_id": "b", "status": "ok"}, lease=first.token)
    with pytest.raises(LeaseLost):
        store.finish_run(run_id, "interrupted", lease=first.token)
    assert store.done_case_ids(run_id) == {"a"} and store.run(run_id)["status"] == "running"
    first.release()  # a lost lease's release leaves the new holder's row alone
    assert store.lease_holder(run_id).claim.token == second.token
    second.release()
    assert store.lease_holder(run_id) is None


def test_lease_of_an_ended_process_on_this_machine_is_taken_at_once(store_url):
    store = Store(store_url)
    run_id = _run(store)
    ended = subprocess.Popen(["true"])
    ended.wait()
    dead = RunLease(store, stale_s=3600)
    dead.claim = replace(dead.claim, pid=ended.pid)
    assert store.take_lease(run_id, dead.claim)
    other_host = RunLease(store, stale_s=3600)  # the same pid on another machine cannot be judged from here
    other_host.claim = replace(other_host.claim, pid=ended.pid, machine="0123456789ab", token="t" * 32)
    mine = RunLease(store)
    mine.acquire(run_id)
    assert mine.took_over.endswith("its process has ended")
    mine.release()
    assert store.take_lease(run_id, other_host.claim)
    with pytest.raises(RunBusyError, match="still being run"):
        RunLease(store).acquire(run_id)


def test_a_bad_staleness_setting_is_exit_2(tmp_path):
    (tmp_path / "c.yaml").write_text("name: x\ndevice: cpu\npreset: smoke\nworkloads: [softmax]\nbackends: [eager]\n")
    env = dict(os.environ, BAKEOFF_LEASE_STALE_S="soon")
    proc = subprocess.run([*bakeoff_cmd(), "run", "c.yaml", "--db", f"sqlite:///{tmp_path / 'r.db'}"], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2 and "BAKEOFF_LEASE_STALE_S must be a number of seconds" in proc.stderr
    assert not (tmp_path / "r.db").exists()  # nothing written


CONFIG = """
name: lease
device: cpu
preset: smoke
dtypes: [float32]
workloads: [ew_sigmoid_relu, ew_gelu_silu_gate, rmsnorm, softmax]
backends: [eager]
seeds: [0, 1]
timing: {warmup_s: 0.01, budget_s: 0.05, min_reps: 3}
compile: {warm: false}
timeout_s: 300
"""
STALE_S = 10  # long enough for the refused resume to ask while A, suspended, still holds a live lease
# Four cases are enough: A is suspended at its first record (it holds one, or two that landed together), B
# is killed at its first, C runs the rest.


def _wait(condition, proc: subprocess.Popen, what: str, timeout_s: float = 300):
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        assert proc.poll() is None, f"bakeoff ended ({proc.returncode}) before {what}:\n{proc.stdout.read()[-3000:]}"
        assert time.monotonic() < deadline, f"no {what} after {timeout_s} s"
        time.sleep(0.2)
    return value


def _flat(text: str) -> str:
    return " ".join(text.split())  # rich wraps long lines


def test_two_orchestrators_on_one_postgresql_store_from_two_folders(tmp_path, postgres_url, monkeypatch):
    monkeypatch.setenv("BAKEOFF_LEASE_STALE_S", str(STALE_S))
    folders = {name: tmp_path / name for name in "abc"}
    for folder in folders.values():
        folder.mkdir()
    (folders["a"] / "c.yaml").write_text(CONFIG)
    store = Store(postgres_url)

    # A runs the config from folder a and is suspended at its first record: alive, its heartbeat stopped.
    a = start_bakeoff("run", "c.yaml", "--db", postgres_url, cwd=folders["a"])
    run_id = _wait(lambda: store.runs() and store.runs()[0]["run_id"], a, "a run")
    _wait(lambda: store.count_records(run_id) >= 1, a, "a first record")
    os.kill(a.pid, signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        kept = store.count_records(run_id)
        # B, from folder b, is refused while A's lease is live, and writes nothing.
        refused = bakeoff("run", "--resume", run_id, "--db", postgres_url, cwd=folders["b"], timeout=300)
        assert time.monotonic() - stopped < STALE_S - 2, "the refused resume took too long to test a live lease"
        assert refused.returncode == 2, refused.stdout + refused.stderr
        message = _flat(refused.stderr)
        assert f"run {run_id} is still being run by another orchestrator (pid {a.pid} on " in message
        assert f"in {folders['a']}, last heartbeat" in message
        assert store.run(run_id)["resumes"] == 0
        # Once A's lease is stale, B takes it over.
        time.sleep(max(0.0, stopped + STALE_S + 1 - time.monotonic()))
        b = start_bakeoff("run", "--resume", run_id, "--db", postgres_url, cwd=folders["b"])
        _wait(lambda: (h := store.lease_holder(run_id)) is not None and h.claim.pid == b.pid, b, "B's lease")
    finally:
        os.kill(a.pid, signal.SIGCONT)
    # A wakes up, finds its lease taken, stops its workers and exits 2 without writing.
    out_a, _ = a.communicate(timeout=120)
    assert a.returncode == 2, out_a
    assert f"this orchestrator lost its lease: it was taken over by pid {b.pid}" in _flat(out_a)

    # B is killed outright; C, from folder c on this machine, takes over at once (B's process has ended).
    _wait(lambda: store.count_records(run_id) > kept, b, "a record by B")
    b.kill()
    out_b, _ = b.communicate(timeout=60)
    assert f"took over the lease of run {run_id} from pid {a.pid}" in _flat(out_b)
    assert "no heartbeat for" in _flat(out_b)
    c = bakeoff("run", "--resume", run_id, "--db", postgres_url, cwd=folders["c"], check=True)
    assert f"took over the lease of run {run_id} from pid {b.pid}" in _flat(c.stdout)
    assert "its process has ended" in c.stdout

    records = store.case_records(run_id)
    ids = Counter(r.case_id for r in records)
    assert len(ids) == 4 and max(ids.values()) == 1, ids
    attempts = Counter(r.attempt for r in records)
    assert attempts[1] == kept and attempts[2] >= 1, attempts  # A wrote nothing after it was suspended
    assert all(r.status == "ok" for r in records)
    assert store.run(run_id)["status"] == "complete" and store.lease_holder(run_id) is None
