"""Pre-started workers, orchestrator side: spare processes per slot, ready before their case arrives.

A slot keeps up to BAKEOFF_PRESTART (default 2) spares (worker/spare.py); the next worker process the slot
needs (a case's cold run, then its warm run) is the oldest spare, and new spares start while the slot's
worker compiles (its process-setup compile or the case's) for longer than REFILL_AFTER_S (a long compile
hides their getting ready), or at once when none is left. Each case still runs in a process of its own, started for it and ended after it: a
crash, hang or OOM takes down that case's process only. What a spare saves is the interpreter start, the
imports and the device's context, paid while earlier cases ran. A spare getting ready holds the device's
gate as a busy worker does, so it never overlaps a timing phase; it may overlap a compile, and each record
says by how much (`warmup_overlap_compile_s`, `warmup_overlap_compile_warm_s`). BAKEOFF_PRESTART=0 starts
every worker fresh.

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

from bakeoff.harness.supervise.leftovers import SPARE_TMP_PREFIX, owned_prefix
from bakeoff.harness.worker.phases import BEGIN_MARKED, PhaseFile
from bakeoff.harness.worker.spare import ENV_SPARE_DEVICE, ENV_SPARE_PROFILER

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
# Read by the spare itself before its case arrives: a case must see the same values (the gate's policy is
# read again when the case arrives: it only changes how the case times).
FIXED_AT_START = ("BAKEOFF_GATE", "BAKEOFF_PARENT_PID")
# The process's own temporary folder (inside its case folder, supervise/leftovers.py): where scratch files go, never
# what a case measures; the spare takes the case's value (worker/spare.py resets tempfile's cached choice).
PER_PROCESS = ("TMPDIR",)
READY_TIMEOUT_S = 600.0  # longest wait for a spare still getting ready, in seconds
POLL_S = 0.02
ENV_PRESTART = "BAKEOFF_PRESTART"  # spares kept per slot; 0 = every worker starts fresh
DEFAULT_DEPTH = 2
REFILL_AFTER_S = 1.0  # a compile running this long (seconds) hides a spare's getting ready


def refusal(spawn_env: dict[str, str], case_env: dict[str, str], imported: list[str]) -> str | None:
    """None when a spare started with `spawn_env`, having imported the watched modules `imported`, may run a
    case whose environment is `case_env`; else why not."""
    for name in sorted(set(spawn_env) | set(case_env)):
        if spawn_env.get(name) == case_env.get(name) or name in PER_PROCESS:
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
    stopped_at: float | None = None  # when it was discarded (epoch seconds)
    _report: dict[str, Any] | None = None

    @property
    def output(self) -> Path:
        return self.folder / "output.txt"

    @classmethod
    def start(cls, env: dict[str, str], device: str, profiler: bool) -> "Spare":
        folder = Path(tempfile.mkdtemp(prefix=owned_prefix(SPARE_TMP_PREFIX)))  # cleaned up by a later run if we are killed
        (folder / "tmp").mkdir()  # its TMPDIR until its case's arrives: what it writes goes with the folder
        spawn_env = {**env, ENV_SPARE_DEVICE: device, ENV_SPARE_PROFILER: "1" if profiler else "0",
                     "TMPDIR": str(folder / "tmp")}
        with open(folder / "output.txt", "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "bakeoff.harness.worker.entry", "--spare",
                                     str(folder / "ready.json")], env=spawn_env, stdin=subprocess.PIPE,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=os.getcwd())
        return cls(proc, folder, spawn_env, device, profiler, time.time())

    def ready(self) -> dict[str, Any] | None:
        """What the spare reported once ready (seconds per step, watched modules imported, `ready_at`
        epoch seconds); None before."""
        if self._report is None:
            try:
                self._report = json.loads((self.folder / "ready.json").read_text())
            except (OSError, ValueError):
                return None
        return self._report

    def warmup_window(self, now: float) -> tuple[float, float]:
        """When it was getting ready (epoch seconds): from its start to its ready report (or its end, or now)."""
        report = self.ready() if self.stopped_at is None else self._report
        end = report.get("ready_at") if report else None
        return self.started_at, float(end or self.stopped_at or now)

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
        self.ready()  # keep its ready time for the overlap figures
        self.stopped_at = self.stopped_at or time.time()
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


@dataclass(frozen=True)
class SpareSpec:
    """What the slot's next spares start with: the slot's environment, the device, whether to start CUPTI."""

    env: dict[str, str]
    device: str
    profiler: bool


class Prestarter:
    """The spares of one slot. `register`/`unregister` tell the run's worker list about their processes, so
    an interrupt kills a spare as it kills a worker."""

    def __init__(self, register: Callable[[subprocess.Popen], None] | None = None,
                 unregister: Callable[[subprocess.Popen], None] | None = None, depth: int | None = None) -> None:
        self.depth = depth if depth is not None else int(os.environ.get(ENV_PRESTART) or DEFAULT_DEPTH)
        self.spares: list[Spare] = []  # oldest first
        self.history: list[Spare] = []  # every spare started lately, for the overlap figures
        self.spec: SpareSpec | None = None  # None: the slot needs no more workers
        self._register = register or (lambda proc: None)
        self._unregister = unregister or (lambda proc: None)
        self.closed = False

    def plan(self, spec: SpareSpec | None) -> None:
        """What later spares start with; None when the slot will need no worker after the current one."""
        self.spec = spec

    def start_one(self) -> None:
        """Start a spare (none beyond `depth`, none when no more workers are needed)."""
        if self.closed or self.spec is None or len(self.spares) >= self.depth:
            return
        spare = Spare.start(self.spec.env, self.spec.device, self.spec.profiler)
        self._register(spare.proc)
        self.spares.append(spare)
        self.history.append(spare)

    def wants_more(self) -> bool:
        """Whether another spare would be started now if the worker were in a long compile."""
        return not self.closed and self.spec is not None and len(self.spares) < self.depth

    def tick(self, phases: PhaseFile) -> None:
        """Called while the slot's worker runs: top the spares up while it is in a long compile."""
        since = [t for t in (phases.running(name) for name in BEGIN_MARKED) if t is not None]
        if since and time.time() - min(since) >= REFILL_AFTER_S:
            while len(self.spares) < self.depth and self.spec is not None and not self.closed:
                self.start_one()

    def take(self, case_env: dict[str, str], device: str, profiler: bool) -> tuple[Spare | None, str | None]:
        """The oldest spare if it may run a case with `case_env` on `device` (it is then the caller's), else
        (None, why not). Spares made for another device, or that died, are dropped; one whose environment
        does not fit this case is kept for later ones."""
        now = time.time()
        self.history = [s for s in self.history if s in self.spares or s.warmup_window(now)[1] > now - 3600]
        while self.spares:
            spare = self.spares[0]
            if spare.device != device or spare.profiler != profiler:
                self._drop(spare)
                continue
            report = spare.wait_ready()
            if isinstance(report, str):
                self._drop(spare)
                return None, report
            why = refusal(spare.env, case_env, report.get("watched_modules_imported", []))
            if why:
                return None, why
            self.spares.pop(0)
            return spare, None
        return None, None

    def warmup_overlap_s(self, start: float, end: float) -> float:
        """Seconds of spares getting ready within [start, end] (epoch seconds), summed over spares."""
        total = 0.0
        for spare in self.history:
            w0, w1 = spare.warmup_window(end)
            total += max(0.0, min(w1, end) - max(w0, start))
        return total

    def _drop(self, spare: Spare) -> None:
        self.spares.remove(spare)
        spare.discard()
        self._unregister(spare.proc)

    def drop(self) -> None:
        """Kill the waiting spares."""
        for spare in list(self.spares):
            self._drop(spare)

    def close(self) -> None:
        self.closed = True
        self.drop()
