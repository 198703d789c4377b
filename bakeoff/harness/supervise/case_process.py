"""Execute one case in worker subprocesses (cold, then warm) with a timeout; always return a record.

A worker that crashes, hangs or runs out of memory becomes a record with status crash, timeout or oom and
the tail of its stderr. This module never touches the store: the orchestrator writes what it returns.
A worker runs in a slot (harness/supervise/slots.py): pinned to a device, sharing that device's timing gate. Time
it spends waiting for the gate is not counted against its timeout.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from bakeoff.harness.measure.extra_checks import fold_extra_check
from bakeoff.harness.plan.cases import Case
from bakeoff.harness.supervise.deaths import death_record as _death_record, kill_group, oom_kill_counts
from bakeoff.harness.supervise.gate import ENV_POLICY, ENV_PREFIX, ENV_WAIT_FILE, waited_s
from bakeoff.harness.supervise.gate_policy import resolve_gate_policy
from bakeoff.harness.supervise.leftovers import CACHE_PREFIX, CASE_TMP_PREFIX, owned_prefix
from bakeoff.harness.supervise.prestart import Prestarter, Spare, SpareSpec
from bakeoff.harness.supervise.slots import Slot
from bakeoff.harness.supervise.staging import discard, final_dir, staging_dir
from bakeoff.harness.worker.entry import ENV_PARENT
from bakeoff.harness.worker.phases import BEGIN_MARKED, ENV_PHASES_FILE, ENV_SPAWNED_AT, PhaseFile, read_phases
from bakeoff.backends import backend_class

ENV_REFERENCE_DIR = "BAKEOFF_REFERENCE_DIR"  # worker/shared_reference.py (not imported here: it imports torch)

STDERR_TAIL_CHARS = 3000
REPO_ROOT = Path(__file__).resolve().parents[3]
POLL_S = 0.05  # longest pause between two looks at a running worker, in seconds (its exit is seen this late)


class Workers:
    """The worker processes in flight, for one run. `kill_all` kills them, and any started after it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen] = set()
        self.closed = False

    def add(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._procs.add(proc)
            if self.closed:
                kill_group(proc)

    def discard(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._procs.discard(proc)

    def kill_all(self) -> None:
        with self._lock:
            self.closed = True
            for proc in self._procs:
                kill_group(proc)


def slot_vars(slot: Slot | None, extra_env: dict[str, str] | None) -> dict[str, str]:
    """The variables a slot (and the executor) set for its workers; they win over everything else."""
    return {**dict(slot.env if slot else ()), **(extra_env or {})}


def base_env(slot: Slot | None, extra_env: dict[str, str] | None, gate_policy: str) -> dict[str, str]:
    """What every worker process of a slot gets, whatever its case: this environment, the harness on
    PYTHONPATH, the slot's variables and its gate (a pre-started worker starts with exactly this)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    env.setdefault("PYTHONUNBUFFERED", "1")
    env[ENV_PARENT] = str(os.getpid())
    env.update(slot_vars(slot, extra_env))
    if slot and slot.gate:
        env[ENV_PREFIX] = slot.gate
        env[ENV_POLICY] = gate_policy
    return env


def _worker_env(case: Case, cache_root: Path, base: dict[str, str], overrides: dict[str, str]) -> dict[str, str]:
    """The case's worker environment: `base` plus the backend's cache folders under `cache_root` and the
    variables it needs before its compiler is imported; `overrides` (the slot's) win."""
    backend = backend_class(case.backend)
    env = dict(base)
    for name in backend.cache_env:
        folder = cache_root / name.lower()
        folder.mkdir(parents=True, exist_ok=True)
        env[name] = str(folder)
    env.update(backend.worker_env(case.device))  # e.g. TRITON_INTERPRET=1 for tritongen on the CPU
    env.update(overrides)
    return env


@dataclass
class WorkerRun:
    """One worker process's outcome: its record (or death record) and where its time went (seconds)."""

    record: dict[str, Any]
    phases_s: dict[str, float]
    start: str  # "prestarted" or "fresh"
    fresh_reason: str | None = None
    warmup_overlap_compile_s: float | None = None  # spares getting ready while it compiled, seconds
    compile_windows: list[tuple[float, float]] = dataclasses.field(default_factory=list)  # epoch (start, end)

    def start_fields(self, suffix: str) -> dict[str, Any]:
        """worker_start{suffix}, and where known its _reason and warmup_overlap_compile{suffix}_s; suffix is ""
        for the cold worker, "_warm" for the warm one."""
        out: dict[str, Any] = {f"worker_start{suffix}": self.start}
        if self.fresh_reason:
            out[f"worker_start{suffix}_reason"] = self.fresh_reason
        if self.warmup_overlap_compile_s is not None:
            out[f"warmup_overlap_compile{suffix}_s"] = self.warmup_overlap_compile_s
        return out


def _run_worker(case: Case, phase: str, env: dict[str, str], artifacts_dir: Path | None,
                workers: Workers | None, prestarter: Prestarter | None = None,
                spare_env: dict[str, str] | None = None) -> WorkerRun:
    """Run one worker process for `case` (the slot's pre-started one when it may, else a fresh one) and
    collect its record and phases. With `spare_env`, the slot needs another worker after this one: its
    spares start with that environment."""
    t_begin = time.time()
    profiler = case.timing.profile and case.timing.profiler_warmup
    # Named for this process (harness/supervise/leftovers.py), so a later run removes it should this one be killed.
    with tempfile.TemporaryDirectory(prefix=owned_prefix(CASE_TMP_PREFIX)) as tmp:
        case_file, out_file = Path(tmp, "case.json"), Path(tmp, "record.json")
        wait_file, phases_file, worker_tmp = Path(tmp, "gate_wait.txt"), Path(tmp, "phases.txt"), Path(tmp, "tmp")
        worker_tmp.mkdir()  # the worker's TMPDIR: what its compilers leave in temporary files goes with it
        case_file.write_text(case.to_json())
        argv = [str(case_file), str(out_file), phase] + ([str(artifacts_dir)] if artifacts_dir is not None else [])
        env = {**env, ENV_WAIT_FILE: str(wait_file), ENV_PHASES_FILE: str(phases_file),
               ENV_SPAWNED_AT: f"{t_begin:.6f}",
               "TMPDIR": str(worker_tmp)}
        spare, why_fresh = _choose_spare(prestarter, env, case.device, profiler, spare_env)

        def top_up() -> None:  # while it runs: more spares while it is in a long compile
            if prestarter is not None and prestarter.wants_more():
                prestarter.tick(read_phases(phases_file))

        oom_before = oom_kill_counts()
        err_file = spare.output if spare else Path(tmp, "stderr.txt")
        try:
            proc = _spawn(spare, argv, env, err_file)
            rc, timed_out = _supervise(proc, case.timeout_s, wait_file, workers, top_up)
            t_exit = time.time()
            tail = err_file.read_text(errors="replace")[-STDERR_TAIL_CHARS:]
        finally:
            if spare is not None:
                spare.discard()
        written = read_phases(phases_file)
        phases = _process_phases(written, t_begin, t_exit)
        overlap = None
        windows = [w for w in (written.window(name, t_exit) for name in BEGIN_MARKED) if w is not None]
        if prestarter is not None:
            overlap = sum(prestarter.warmup_overlap_s(start, end) for start, end in windows) if windows else None
        if timed_out:
            gate_wait_s = waited_s(wait_file)
            record = {"status": "timeout", "reason": f"{phase} worker exceeded timeout_s={case.timeout_s:g}"
                      + (f" (not counting {gate_wait_s:.1f} s waiting for the timing gate)" if gate_wait_s else ""),
                      "stderr_tail": tail}
        elif out_file.exists():
            record = _written_record(out_file, tail, phase, waited_s(wait_file))
        else:
            record = _death_record(rc, phase, tail, oom_before, oom_kill_counts(),
                                   killed_by_harness=workers is not None and workers.closed)
    phases["collect"] = time.time() - t_exit  # reading its record and output, deleting its folder
    return WorkerRun(record, phases, "prestarted" if spare is not None else "fresh", why_fresh, overlap, windows)


def _spawn(spare: Spare | None, argv: list[str], env: dict[str, str], err_file: Path) -> subprocess.Popen:
    """The worker process: the slot's spare, handed the case, or a fresh one whose output goes to `err_file`."""
    if spare is not None:
        return spare.hand(argv, env)
    with open(err_file, "wb") as err:
        return subprocess.Popen([sys.executable, "-m", "bakeoff.harness.worker.entry", *argv],
                                env=env, stdout=err, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, cwd=os.getcwd())


def _written_record(out_file: Path, tail: str, phase: str, gate_wait_s: float) -> dict[str, Any]:
    """The record a worker wrote, with its output's tail and the seconds it waited for the gate."""
    record = json.loads(out_file.read_text())
    if tail.strip():
        record["stderr_tail"] = tail
    record[f"gate_wait_{phase}_s"] = gate_wait_s
    return record


def _choose_spare(prestarter: Prestarter | None, env: dict[str, str], device: str, profiler: bool,
                  spare_env: dict[str, str] | None) -> tuple[Spare | None, str | None]:
    """The slot's spare for a worker with `env`, or (None, why not); plans the slot's next spares and,
    when none is left, starts one now."""
    if prestarter is None:
        return None, None
    spare, why_fresh = prestarter.take(env, device, profiler)
    prestarter.plan(SpareSpec(spare_env, device, profiler) if spare_env is not None else None)
    if not prestarter.spares:
        prestarter.start_one()  # none left: start getting the next one ready now
    return spare, why_fresh


def _supervise(proc: subprocess.Popen, timeout_s: float, wait_file: Path, workers: Workers | None,
               on_poll: Callable[[], None]) -> tuple[int, bool]:
    """Wait for the worker (registered with `workers` meanwhile, so an interrupt kills it); (exit code,
    timed out)."""
    if workers is not None:
        workers.add(proc)
    try:
        return _wait(proc, timeout_s, wait_file, on_poll)
    finally:
        if proc.returncode is None:
            kill_group(proc)
            proc.wait()
        if workers is not None:
            workers.discard(proc)


def _process_phases(written: PhaseFile, t_begin: float, t_exit: float) -> dict[str, float]:
    """A worker process's phases: what it wrote, `exit` from its end mark to its reaping, and for one that
    died or was killed, `unfinished` from its last finished phase to its end."""
    phases = dict(written.totals)
    if written.end is not None:
        phases["exit"] = phases.get("exit", 0.0) + max(t_exit - written.end, 0.0)
    else:
        unreported = (t_exit - t_begin) - sum(phases.values())
        if unreported > 0:
            phases["unfinished"] = unreported
    return phases


def _wait(proc: subprocess.Popen, timeout_s: float, wait_file: Path,
          on_poll: Callable[[], None] = lambda: None) -> tuple[int, bool]:
    """Wait for the worker; kill it after `timeout_s` seconds of its own time, i.e. not counting the time
    it waited for the device's timing gate. Returns (exit code, timed out). Either way its process group
    is killed before the worker is reaped (while its id cannot be reused), so nothing it started lingers.
    `on_poll` runs at every look."""
    start, pause = time.time(), 0.01
    while True:
        on_poll()
        if _exited(proc):
            kill_group(proc)
            return proc.wait(), False
        if time.time() > start + timeout_s + waited_s(wait_file):
            kill_group(proc)
            return proc.wait(), True
        time.sleep(pause)
        pause = min(pause * 2, POLL_S)


def _exited(proc: subprocess.Popen) -> bool:
    """Whether the worker has exited, without reaping it (so its process group id stays reserved)."""
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # reaped elsewhere (SIGCHLD ignored by a host process): ask Popen
        return proc.poll() is not None


def execute_case(case: Case, work_dir: Path, *, slot: Slot | None = None,
                 extra_env: dict[str, str] | None = None, workers: Workers | None = None,
                 prestarter: Prestarter | None = None, more_cases: bool = False) -> dict[str, Any]:
    """Run `case` cold (fresh caches) and, if asked and the cold run compiled, warm. Returns the record.

    `work_dir` holds this case's cache folders (deleted afterwards) and staged artifacts (under
    `work_dir/staging`; the orchestrator moves them to `work_dir/artifacts` once the record commits, and
    the record's `artifacts_dir` names that final place). `slot` pins the worker to a device and its gate;
    `workers` registers the processes so that an interrupt can kill them. With a `prestarter`, each worker
    process is the slot's pre-started one where it may be (supervise/prestart.py) and a new one starts for the
    slot's next worker; `more_cases` says whether the slot will run another case after this one.
    The record's `phases_s` says where `wall_s` went (worker/phases.py).
    """
    t0 = time.perf_counter()
    phases: dict[str, float] = {}
    cache_root = Path(tempfile.mkdtemp(prefix=owned_prefix(CACHE_PREFIX), dir=work_dir))
    staged = staging_dir(work_dir, case)
    discard(work_dir, case)  # whatever an earlier, killed attempt left half-written
    run_case = dataclasses.replace(case, device=slot.device) if slot and slot.device else case
    policy, policy_reason = _gate_policy(run_case)
    overrides = slot_vars(slot, extra_env)
    base = {**base_env(slot, extra_env, policy), ENV_REFERENCE_DIR: str(references_dir(work_dir))}
    record: dict[str, Any] = {}
    try:
        env = _worker_env(run_case, cache_root, base, overrides)
        warm_planned = case.warm_compile and case.backend != "eager"
        phases["setup"] = time.perf_counter() - t0
        cold = _run_worker(run_case, "cold", env, staged, workers, prestarter,
                           base if (warm_planned or more_cases) else None)
        record = cold.record
        compile_windows = list(cold.compile_windows)
        _add_phases(phases, cold.phases_s, "")
        record.update(cold.start_fields(""))
        compiled = record.get("status") in ("ok", "mismatch")
        if warm_planned and compiled:
            warm = _run_worker(run_case, "warm", env, None, workers, prestarter, base if more_cases else None)
            _add_phases(phases, warm.phases_s, "warm_")
            compile_windows += warm.compile_windows
            _add_warm(record, warm)
        elif prestarter is not None and not more_cases:
            prestarter.drop()  # started for a warm run that will not happen, and no case follows
        if staged.exists():
            record["artifacts_dir"] = str(final_dir(work_dir, case))
        if compile_windows:
            record["compile_windows_epoch_s"] = [[round(a, 6), round(b, 6)] for a, b in compile_windows]
    finally:
        t_cleanup = time.perf_counter()
        shutil.rmtree(cache_root, ignore_errors=True)
        phases["cleanup"] = time.perf_counter() - t_cleanup
    if slot is not None:
        record["worker"] = slot.label
    record["gate_policy"], record["gate_policy_reason"] = policy, policy_reason
    record["wall_s"] = time.perf_counter() - t0
    phases["other"] = max(record["wall_s"] - sum(phases.values()), 0.0)
    record["phases_s"] = {k: round(v, 6) for k, v in phases.items()}
    return record


def _add_warm(record: dict[str, Any], warm: WorkerRun) -> None:
    """The warm worker's fields into the cold record: its start, its output's tail, and its figures (a wrong
    cache-loaded executable fails the case) or its error."""
    record.update(warm.start_fields("_warm"))
    warm_tail = warm.record.pop("stderr_tail", None)
    if warm_tail:  # the cold run's tail stays `stderr_tail`; the warm one is kept beside it
        record["stderr_tail_warm"] = warm_tail
    if "compile_warm_s" in warm.record:
        record.update(warm.record)
        fold_extra_check(record, "warm")
    else:
        record["warm_error"] = warm.record.get("reason")


def _gate_policy(case: Case) -> tuple[str, str]:
    """The timing-gate policy `case` runs under and why (supervise/gate_policy.py: `auto` by its timing method)."""
    try:
        cls = backend_class(case.backend)
        events = bool(cls.timed_with_events)
        on_device = cls.graph_compile_times_on_device(case.bound_graph(), case.options, case.grad)
    except Exception:  # noqa: BLE001 - a backend that cannot load fails on its own; time it alone meanwhile
        return "exclusive", f"{case.backend} could not be loaded to choose a policy: it times alone"
    return resolve_gate_policy(case.timing.gate, case.device, case.timing, events, case.backend, on_device)


def references_dir(work_dir: Path) -> Path:
    """Where the cases of a run keep the float64 references they share (worker/shared_reference.py)."""
    return work_dir / "references"


def _add_phases(total: dict[str, float], phases: dict[str, float], prefix: str) -> None:
    for name, seconds in phases.items():
        total[prefix + name] = total.get(prefix + name, 0.0) + seconds
