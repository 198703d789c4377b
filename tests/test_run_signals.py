"""A run stopped by SIGTERM (a CI job's timeout or cancel) ends as Ctrl-C ends it, and a resume in another
environment than the run's (other code, another torch) is refused."""
from __future__ import annotations

import signal

import pytest
from typer.testing import CliRunner

from cli_process import count_records, start_bakeoff, wait_for_records, workers_left
from conftest import bakeoff
from bakeoff.harness.cli.app import app
from bakeoff.harness.measure.environment import environment
from bakeoff.harness.run import orchestrator
from bakeoff.harness.run.executors.local import LocalExecutor
from bakeoff.harness.run.resume_check import environment_changes
from bakeoff.harness.supervise.slots import local_slots
from bakeoff.results import leases
from bakeoff.results.deferred_interrupt import sigint_deferred
from bakeoff.results.store import Store

WORKLOADS = ["ew_sigmoid_relu", "layernorm_gelu", "rmsnorm", "softmax"]
CONFIG = f"""
name: signals
device: cpu
preset: smoke
dtypes: [float32]
workloads: [{", ".join(WORKLOADS)}]
backends: [eager]
timing: {{warmup_s: 0.01, budget_s: 0.05, min_reps: 3}}
compile: {{warm: false}}
timeout_s: 300
"""


def test_sigterm_interrupts_the_run_as_ctrl_c_does(tmp_path):
    (tmp_path / "c.yaml").write_text(CONFIG)
    db_file = tmp_path / "r.db"
    proc = start_bakeoff("run", "c.yaml", "--db", f"sqlite:///{db_file}", cwd=tmp_path)
    wait_for_records(db_file, 1, proc)
    proc.send_signal(signal.SIGTERM)  # the orchestrator alone, as `kill -TERM PID`
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    assert "interrupted" in out and "Resume with: bakeoff run --resume" in out, out
    assert "interrupted before" not in out  # the run was recorded
    run_id = out.split("Resume with: bakeoff run --resume ")[1].split()[0]
    assert not workers_left(tmp_path)
    assert 1 <= count_records(db_file) < len(WORKLOADS)
    store = Store(f"sqlite:///{db_file}")
    assert store.run(run_id)["status"] == "interrupted" and store.lease_holder(run_id) is None
    assert not (tmp_path / "results" / "artifacts" / run_id / "staging").exists()  # no empty folder left


def _interrupt(*_args, **_kwargs):
    raise KeyboardInterrupt  # as Ctrl-C, or SIGTERM under sigterm_interrupts, raises it


@pytest.mark.parametrize("where", ["planning", "the executor's environment"])
def test_an_interrupt_before_the_run_is_recorded_says_nothing_was_written(tmp_path, monkeypatch, where):
    if where == "planning":
        monkeypatch.setattr(orchestrator, "plan_run", _interrupt)
    else:  # in start_run, the store open: on Ray, a remote call
        monkeypatch.setattr(LocalExecutor, "environment", _interrupt)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.yaml").write_text(CONFIG)
    db = f"sqlite:///{tmp_path / 'r.db'}"
    result = CliRunner().invoke(app, ["run", "c.yaml", "--db", db, "--run-id-file", "id.txt"])
    assert result.exit_code == 130, result.output
    assert result.stderr == "interrupted before the run was recorded: nothing of it was written\n"
    assert result.stdout == ""
    assert count_records(tmp_path / "r.db") == 0 and not (tmp_path / "id.txt").exists()
    assert not (tmp_path / "r.db").exists() or Store(db).runs() == []


@pytest.mark.parametrize("where", ["the run's write", "the step before its cases"])
def test_an_interrupt_once_the_run_is_recorded_names_it_and_how_to_finish_it(tmp_path, monkeypatch, where):
    if where == "the run's write":  # inside the transaction of create_run: held until it commits
        take = leases.take

        def take_then_sigterm(*args, **kwargs):
            signal.raise_signal(signal.SIGTERM)
            return take(*args, **kwargs)

        monkeypatch.setattr(leases, "take", take_then_sigterm)
    else:  # the run in the store, its lease held
        monkeypatch.setattr(orchestrator, "clean_leftovers", _interrupt)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.yaml").write_text(CONFIG)
    db = f"sqlite:///{tmp_path / 'r.db'}"
    result = CliRunner().invoke(app, ["run", "c.yaml", "--db", db])
    assert result.exit_code == 130, result.output
    [run] = Store(db).runs()
    run_id = run["run_id"]
    assert result.stderr == (f"interrupted before run {run_id} ran a case: it stays in the store; finish it with: "
                             f"bakeoff run --resume {run_id} --db {db}\n")
    assert count_records(tmp_path / "r.db") == 0 and run["status"] == "running"
    if where == "the step before its cases":  # the command it names finishes the run (the lease was given back)
        command = result.stderr.split("finish it with: bakeoff ")[1].split()
        bakeoff(*command, cwd=tmp_path, timeout=300, check=True)
        assert Store(db).run(run_id)["status"] == "complete" and count_records(tmp_path / "r.db") == len(WORKLOADS)


def test_an_interrupt_once_a_resume_is_recorded_names_the_run_and_how_to_finish_it(tmp_path, monkeypatch):
    store, db, run_id = _stored_run(tmp_path)
    store.finish_run(run_id, "interrupted")
    monkeypatch.setattr(orchestrator, "clean_leftovers", _interrupt)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", "--resume", run_id, "--db", db, "--jobs", "2"])
    assert result.exit_code == 130, result.output
    assert result.stderr == (f"interrupted before the resume of run {run_id} ran a case: the run stays in the "
                             f"store; finish it with: bakeoff run --resume {run_id} --jobs 2 --db {db}\n")
    run = store.run(run_id)
    assert run["resumes"] == 1 and store.lease_holder(run_id) is None and count_records(tmp_path / "r.db") == 0


def test_an_interrupt_before_a_resume_starts_says_the_run_is_as_it_was(tmp_path, monkeypatch):
    store, db, run_id = _stored_run(tmp_path)
    store.finish_run(run_id, "interrupted")
    monkeypatch.setattr(orchestrator, "resumed_cases", _interrupt)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", "--resume", run_id, "--db", db])
    assert result.exit_code == 130, result.output
    assert result.stderr == f"interrupted before the resume of run {run_id} started: the run is as it was\n"
    run = store.run(run_id)
    assert run["status"] == "interrupted" and run["resumes"] == 0 and store.lease_holder(run_id) is None


def test_the_resume_hint_keeps_the_workers_of_the_run():
    assert LocalExecutor(local_slots("cpu", 2)).resume_options() == " --jobs 2"
    assert LocalExecutor(local_slots("cpu", 1)).resume_options() == ""


def test_sigterm_handled_by_python_waits_for_the_store_write():
    got: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, _frame: got.append(signum))
    try:
        with sigint_deferred():  # as around each store transaction
            signal.raise_signal(signal.SIGTERM)
            assert got == []
        assert got == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_resume_in_another_environment_is_exit_2(tmp_path, monkeypatch):
    monkeypatch.setenv("BAKEOFF_HARNESS_REV", "39d18f7")
    db = f"sqlite:///{tmp_path / 'r.db'}"
    store = Store(db)
    run_id = store.create_run(config_name="signals", config_path="c.yaml", config_text=CONFIG, device="cpu",
                              environment={**environment("cpu"), "filters": {}}, n_cases=len(WORKLOADS))
    (tmp_path / "id.txt").write_text("an-older-run\n")
    proc = bakeoff("run", "--resume", run_id, "--db", db, "--run-id-file", "id.txt", cwd=tmp_path, timeout=120,
                   env={"BAKEOFF_HARNESS_REV": "39d18f7+dirty"})
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert (f"cannot resume run {run_id}: harness_rev 39d18f7 -> 39d18f7+dirty: resuming would mix records of "
            "two environments; start a new run") in " ".join(proc.stderr.split()), proc.stderr
    run = store.run(run_id)
    assert run["resumes"] == 0 and run["status"] == "running" and store.lease_holder(run_id) is None
    assert count_records(tmp_path / "r.db") == 0
    assert not (tmp_path / "id.txt").exists()  # a refused resume names no run: the CI step after it has none


def _stored_run(tmp_path) -> tuple[Store, str, str]:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    store = Store(db)
    run_id = store.create_run(config_name="signals", config_path="c.yaml", config_text=CONFIG, device="cpu",
                              environment={**environment("cpu"), "filters": {}}, n_cases=len(WORKLOADS))
    return store, db, run_id


def test_resume_of_a_complete_run_changes_nothing_and_names_it(tmp_path):
    store, db, run_id = _stored_run(tmp_path)
    store.finish_run(run_id, "complete")
    proc = bakeoff("run", "--resume", run_id, "--db", db, "--run-id-file", "id.txt", cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert f"run {run_id} is complete: nothing to resume" in proc.stdout
    run = store.run(run_id)
    assert run["resumes"] == 0 and run["status"] == "complete" and count_records(tmp_path / "r.db") == 0
    assert (tmp_path / "id.txt").read_text() == run_id + "\n"


def test_a_resumes_totals_line_says_the_resumes_elapsed_time(tmp_path):
    store, db, run_id = _stored_run(tmp_path)
    store.finish_run(run_id, "interrupted")
    proc = bakeoff("run", "--resume", run_id, "--db", db, cwd=tmp_path, timeout=300, check=True)
    line = next(x for x in proc.stdout.splitlines() if "of worker time" in x)
    assert line.startswith(f"this resume: {len(WORKLOADS)} cases ran for "), line
    assert " s elapsed): compiling " in line, line
    # A run found complete is not resumed: no elapsed time, as `show` gives a resumed run none.
    for args in (("run", "--resume", run_id), ("show", run_id)):
        again = bakeoff(*args, "--db", db, cwd=tmp_path, timeout=120, check=True).stdout
        line = next(x for x in again.splitlines() if "of worker time" in x)
        assert line.startswith(f"{len(WORKLOADS)} cases ran for ") and "elapsed" not in line, line


def test_ray_address_without_the_ray_executor_blames_the_option(tmp_path):
    store, db, run_id = _stored_run(tmp_path)
    proc = bakeoff("run", "--resume", run_id, "--ray-address", "127.0.0.1:6379", "--db", db, cwd=tmp_path,
                   timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip() == "error: --ray-address goes with --executor ray", proc.stderr
    assert store.run(run_id)["resumes"] == 0


def test_environment_changes_name_each_field_and_package():
    old = {"harness_rev": "a", "python": "3.11.9", "versions": {"torch": "2.4.0", "jax": None}}
    new = {"harness_rev": "a", "python": "3.11.9", "versions": {"torch": "2.5.1", "jax": "0.4.30"}}
    assert environment_changes(old, new) == ["jax None -> 0.4.30", "torch 2.4.0 -> 2.5.1"]
    assert environment_changes(old, old) == []
