"""CLI runs that start as the test session begins, on the CPU time the other tests leave idle.

The suite is CPU-bound on CI's two cores, yet most tests drive one CLI process at a time and leave about a
core idle. A test module whose fixture is one long `bakeoff run` that judges no timing (the numerics suite,
the training steps, the smoke config on the other backends) declares `background_run_args(work: Path) ->
list[str]`; tests/conftest.py then starts that run once the tests are collected and moves the module's
tests to the end of the session, where its fixture collects the run's output (`collect`). The assertions
are the same as when the fixture ran it in the foreground.

The run is kept out of the other tests' way:
- at the lowest CPU priority (nice 19; the workers carry it to their own sessions' scheduling groups): a
  test's processes take a core first;
- with its own temporary folder (its workers' folders, Inductor's headers; no other run's leftover sweep
  sees them), its own timing-gate folder (no foreground case waits for its slow, deprioritized compiles,
  nor it for theirs) and its own Inductor probe folder;
- in its own process group, killed at the end of the session if it is still running (its workers die with
  their orchestrator: worker/entry.py, die_with_parent).
A foreground case's record may say that other processes used the CPU during its timing: that is true.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bakeoff.harness.worker.entry import keep_niceness

NICE = 19


@dataclass
class BackgroundRun:
    work: Path
    args: list[str]
    proc: subprocess.Popen | None = None
    started_at: float = field(default_factory=time.monotonic)

    @property
    def log(self) -> Path:
        return self.work / "run.log"

    def start(self, command: list[str]) -> None:
        tmp = self.work / "tmp"
        tmp.mkdir(parents=True)
        env = dict(os.environ, COLUMNS="220", TMPDIR=str(tmp), BAKEOFF_GATE_DIR=str(self.work / "gates"),
                   BAKEOFF_PROBE_CACHE=str(self.work / "probe_cache"))
        with self.log.open("w") as out:  # a file, not a pipe: nobody reads it until the run has ended
            self.proc = subprocess.Popen(command + self.args, cwd=self.work, env=env, stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                                         start_new_session=True, preexec_fn=_lowest_priority)

    def collect(self, timeout_s: float) -> str:
        """Wait for the run to end; its output. Fails, with the output's tail, if it exited non-zero."""
        assert self.proc is not None, "the background run was not started (its module was not collected)"
        try:
            code = self.proc.wait(timeout=max(1.0, timeout_s - (time.monotonic() - self.started_at)))
        except subprocess.TimeoutExpired:
            self.stop()
            raise AssertionError(f"bakeoff {' '.join(self.args)} ran over {timeout_s} s:\n{self.log.read_text()[-3000:]}")
        out = self.log.read_text()
        assert code == 0, f"bakeoff {' '.join(self.args)} exited {code}\n{out[-6000:]}"
        return out

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()


def _lowest_priority() -> None:
    """nice 19 for the process and its new session's scheduling group, as its workers carry theirs."""
    os.nice(NICE)
    keep_niceness()


_runs: dict[str, BackgroundRun] = {}


def start_for(items: list, command: list[str]) -> list:
    """Start the background run of each collected module that declares one; `items` with those modules'
    tests moved to the end (in their order)."""
    modules = {}
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and hasattr(module, "background_run_args"):
            modules.setdefault(module.__name__, module)
    for name, module in modules.items():
        if name not in _runs:
            work = Path(tempfile.mkdtemp(prefix=f"bakeoff-bg-{name}-"))
            run = BackgroundRun(work, list(module.background_run_args(work)))
            run.start(command)
            _runs[name] = run
    late = [i for i in items if getattr(getattr(i, "module", None), "__name__", None) in modules]
    return [i for i in items if i not in late] + late


def collect(module_name: str, timeout_s: float) -> tuple[Path, str]:
    """The folder and output of `module_name`'s background run, once it has ended."""
    run = _runs.get(module_name)
    assert run is not None, f"no background run was started for {module_name}"
    return run.work, run.collect(timeout_s)


def stop_all() -> None:
    """Kill what is still running and remove the runs' folders (the end of the session)."""
    for run in _runs.values():
        run.stop()
        shutil.rmtree(run.work, ignore_errors=True)
    _runs.clear()
