"""Pre-started workers, orchestrator side: one spare process per slot, ready before its case arrives.

A slot keeps one spare (worker/spare.py) getting ready while its current case runs; the next worker process
the slot needs (a case's cold run, then its warm run) is that spare, and a new spare starts at once. Each
case still runs in a process of its own, started for it and ended after it: a crash, hang or OOM takes
down that case's process only. What a spare saves is the interpreter start, the imports and the device's
context, paid while the case before it ran.

A spare is handed a case only if that cannot change what the case measures: the case's environment may
differ from the spare's only in variables read after the case arrives (a case's empty cache folders,
TRITON_INTERPRET, XLA_FLAGS, ...), i.e. by modules the spare has not imported (its READY_FILE lists the
watched ones it has). Any other difference gets the case a fresh process, and the record says why.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from bakeoff.harness.run.worker.spare import ENV_SPARE_DEVICE, ENV_SPARE_PROFILER

# Variable prefixes and the modules that may read them when imported. A variable a case changes is safe
# for a spare only when its prefix is listed and none of those modules is imported in the spare; the
# harness's own variables (BAKEOFF_) are read where they are used, except those fixed at the spare's start.
LATE_READ_PREFIXES: dict[str, tuple[str, ...]] = {
    "TORCHINDUCTOR_": ("torch._inductor",),
    "TORCH_COMPILE_": ("torch._inductor", "torch._dynamo"),
    "TORCHDYNAMO_": ("torch._dynamo",),
    "TRITON_": ("triton",),
    "JAX_": ("jax", "jaxlib"),
    "XLA_": ("jax", "jaxlib"),
    "IREE_": ("iree.compiler", "iree.runtime"),
    "ORT_": ("onnxruntime",),
    "BAKEOFF_": (),
}
# Read by the spare itself before its case arrives: a case must see the same values.
FIXED_AT_START = ("BAKEOFF_GATE", "BAKEOFF_GATE_POLICY", "BAKEOFF_PARENT_PID")
READY_TIMEOUT_S = 600.0  # longest wait for a spare still getting ready, in seconds
POLL_S = 0.02


def refusal(spawn_env: dict[str, str], case_env: dict[str, str], imported: list[str]) -> str | None:
    """None when a spare started with `spawn_env`, having imported the watched modules `imported`, may run a
    case whose environment is `case_env`; else why not."""
    for name in sorted(set(spawn_env) | set(case_env)):
        if spawn_env.get(name) == case_env.get(name):
            continue
        if name in FIXED_AT_START:
            return f"{name} differs from the pre-started worker's"
        prefix = next((p for p in LATE_READ_PREFIXES if name.startswith(p)), None)
        if prefix is None:
            return f"{name} may be read when torch is imported"
        readers = [m for m in LATE_READ_PREFIXES[prefix] if m in imported]
        if readers:
            return f"{name} may already have been read by {readers[0]} in the pre-started worker"
    return None


@dataclass
class Spare:
    """One pre-started worker process; `output` is the file its stdout and stderr go to."""

    proc: subprocess.Popen
    folder: Path
    env: dict[str, str]
    device: str
    profiler: bool
    started_at: float

    @property
    def output(self) -> Path:
        return self.folder / "output.txt"

    @classmethod
    def start(cls, env: dict[str, str], device: str, profiler: bool) -> "Spare":
        folder = Path(tempfile.mkdtemp(prefix="bakeoff-spare-"))
        spawn_env = {**env, ENV_SPARE_DEVICE: device, ENV_SPARE_PROFILER: "1" if profiler else "0"}
        with open(folder / "output.txt", "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "bakeoff.harness.run.worker.entry", "--spare",
                                     str(folder / "ready.json")], env=spawn_env, stdin=subprocess.PIPE,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=os.getcwd())
        return cls(proc, folder, spawn_env, device, profiler, time.time())

    def ready(self) -> dict[str, Any] | None:
        """What the spare reported once ready (seconds per step, watched modules imported); None before."""
        try:
            return json.loads((self.folder / "ready.json").read_text())
        except (OSError, ValueError):
            return None

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> dict[str, Any] | str:
        """Its ready report, or why it will never be ready (it exited, or took longer than `timeout_s`)."""
        deadline = time.time() + timeout_s
        while (report := self.ready()) is None:
            if self.proc.poll() is not None:
                tail = self.output.read_text(errors="replace")[-500:].strip()
                return f"the pre-started worker exited with code {self.proc.returncode} before it was ready" + (
                    f": {tail}" if tail else "")
            if time.time() > deadline:
                return f"the pre-started worker was not ready after {timeout_s:g} s"
            time.sleep(POLL_S)
        return report

    def hand(self, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
        """Give it its case; returns its process, which now runs the case like a fresh worker."""
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps({"argv": argv, "env": env}) + "\n").encode())
        self.proc.stdin.close()
        return self.proc

    def discard(self) -> None:
        """Kill it if it still runs (with anything it started) and delete its folder."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        shutil.rmtree(self.folder, ignore_errors=True)


class Prestarter:
    """The spare of one slot. `register`/`unregister` tell the run's worker list about its processes, so an
    interrupt kills a spare as it kills a worker."""

    def __init__(self, register: Callable[[subprocess.Popen], None] | None = None,
                 unregister: Callable[[subprocess.Popen], None] | None = None) -> None:
        self.spare: Spare | None = None
        self._register = register or (lambda proc: None)
        self._unregister = unregister or (lambda proc: None)
        self.closed = False

    def start(self, env: dict[str, str], device: str, profiler: bool) -> None:
        """Start a spare for the slot's next worker (none while one is waiting already)."""
        if self.closed or self.spare is not None:
            return
        self.spare = Spare.start(env, device, profiler)
        self._register(self.spare.proc)

    def take(self, case_env: dict[str, str], device: str, profiler: bool) -> tuple[Spare | None, str | None]:
        """The waiting spare if it may run a case with `case_env` on `device` (it is then the caller's),
        else (None, why not); a spare unfit for this case is kept for later ones, a dead one is dropped."""
        spare = self.spare
        if spare is None:
            return None, None
        if spare.device != device or spare.profiler != profiler:
            self.drop()
            return None, f"the pre-started worker was made for {spare.device}"
        report = spare.wait_ready()
        if isinstance(report, str):
            self.drop()
            return None, report
        why = refusal(spare.env, case_env, report.get("watched_modules_imported", []))
        if why:
            return None, why
        self.spare = None
        return spare, None

    def drop(self) -> None:
        """Kill the waiting spare, if any."""
        spare, self.spare = self.spare, None
        if spare is not None:
            spare.discard()
            self._unregister(spare.proc)

    def close(self) -> None:
        self.closed = True
        self.drop()
