"""Execute one case in worker subprocesses (cold, then warm) with a timeout; always return a record.

A worker that crashes, hangs or runs out of memory becomes a record with status crash, timeout or oom and
the tail of its stderr. This module never touches the store: the orchestrator writes what it returns.
A worker runs in a slot (harness/slots.py): pinned to a device, sharing that device's timing gate. Time
it spends waiting for the gate is not counted against its timeout.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bakeoff.results.record import CaseFields

from bakeoff.harness.run.gate import ENV_PREFIX, ENV_WAIT_FILE, waited_s
from bakeoff.harness.run.leftovers import CACHE_PREFIX, CASE_TMP_PREFIX, owned_prefix
from bakeoff.harness.run.worker.entry import ENV_PARENT
from bakeoff.harness.plan.cases import Case
from bakeoff.harness.run.slots import Slot
from bakeoff.harness.run.staging import discard, final_dir, staging_dir
from bakeoff.harness.run.worker.steps import mentions_oom

STDERR_TAIL_CHARS = 3000
REPO_ROOT = Path(__file__).resolve().parents[3]
POLL_S = 0.25  # longest pause between two looks at a running worker, in seconds


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


def _worker_env(case: Case, cache_root: Path, extra_env: dict[str, str] | None) -> dict[str, str]:
    """The worker's environment: this one, plus the backend's cache folders under `cache_root`."""
    from bakeoff.backends import backend_class

    backend = backend_class(case.backend)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    env.setdefault("PYTHONUNBUFFERED", "1")
    for name in backend.cache_env:
        folder = cache_root / name.lower()
        folder.mkdir(parents=True, exist_ok=True)
        env[name] = str(folder)
    env.update(backend.worker_env(case.device))  # e.g. TRITON_INTERPRET=1 for tritongen on the CPU
    env.update(extra_env or {})
    return env


def _run_worker(case: Case, phase: str, env: dict[str, str], artifacts_dir: Path | None,
                workers: Workers | None) -> dict[str, Any]:
    # Named for this process (harness/run/leftovers.py), so a later run removes it should this one be killed.
    with tempfile.TemporaryDirectory(prefix=owned_prefix(CASE_TMP_PREFIX)) as tmp:
        case_file, out_file, err_file = Path(tmp, "case.json"), Path(tmp, "record.json"), Path(tmp, "stderr.txt")
        wait_file, worker_tmp = Path(tmp, "gate_wait.txt"), Path(tmp, "tmp")
        worker_tmp.mkdir()  # the worker's TMPDIR: what its compilers leave in temporary files goes with it
        case_file.write_text(case.to_json())
        args = [sys.executable, "-m", "bakeoff.harness.run.worker.entry", str(case_file), str(out_file), phase]
        if artifacts_dir is not None:
            args.append(str(artifacts_dir))
        env = {**env, ENV_WAIT_FILE: str(wait_file), ENV_PARENT: str(os.getpid()), "TMPDIR": str(worker_tmp)}
        oom_before = oom_kill_counts()
        with open(err_file, "wb") as err:
            proc = subprocess.Popen(args, env=env, stdout=err, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, cwd=os.getcwd())
            if workers is not None:
                workers.add(proc)
            try:
                rc, timed_out = _wait(proc, case.timeout_s, wait_file)
            finally:
                if proc.returncode is None:
                    kill_group(proc)
                    proc.wait()
                if workers is not None:
                    workers.discard(proc)
        tail = err_file.read_text(errors="replace")[-STDERR_TAIL_CHARS:]
        gate_wait_s = waited_s(wait_file)
        if timed_out:
            return {"status": "timeout", "reason": f"{phase} worker exceeded timeout_s={case.timeout_s:g}"
                    + (f" (not counting {gate_wait_s:.1f} s waiting for the timing gate)" if gate_wait_s else ""),
                    "stderr_tail": tail}
        if out_file.exists():
            record = json.loads(out_file.read_text())
            if tail.strip():
                record["stderr_tail"] = tail
            record[f"gate_wait_{phase}_s"] = gate_wait_s
            return record
        return _death_record(rc, phase, tail, oom_before, oom_kill_counts(),
                             killed_by_harness=workers is not None and workers.closed)


def _wait(proc: subprocess.Popen, timeout_s: float, wait_file: Path) -> tuple[int, bool]:
    """Wait for the worker; kill it after `timeout_s` seconds of its own time, i.e. not counting the time
    it waited for the device's timing gate. Returns (exit code, timed out). Either way its process group
    is killed before the worker is reaped (while its id cannot be reused), so nothing it started lingers."""
    start, pause = time.time(), 0.01
    while True:
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


def _death_record(rc: int, phase: str, tail: str, oom_kills_before: dict[str, int] | None = None,
                  oom_kills_after: dict[str, int] | None = None, killed_by_harness: bool = False) -> dict[str, Any]:
    """A record for a worker that exited without writing its result.

    It is `oom` only with evidence: its output says it ran out of memory (MemoryError, which the host memory
    cap, RLIMIT_AS, raises; a C++ std::bad_alloc; CUDA's "out of memory"), or it died from SIGKILL while an
    out-of-memory kill counter (`oom_kill_counts`: its cgroup's, the system's) went up. Any other death is a
    `crash`: a SIGKILL can also come from a person, a supervisor or the harness itself."""
    text_oom = mentions_oom(tail)
    if rc < 0:
        sig = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
        rose = _counters_rose(oom_kills_before or {}, oom_kills_after or {})
        if -rc == signal.SIGKILL and killed_by_harness:
            status, reason = "crash", f"{phase} worker killed by SIGKILL (stopped by the harness: run interrupted)"
        elif -rc == signal.SIGKILL and rose:
            status, reason = "oom", f"{phase} worker killed by SIGKILL by the out-of-memory killer ({rose})"
        elif text_oom:
            status, reason = "oom", f"{phase} worker ran out of memory (died from signal {sig})"
        elif -rc == signal.SIGKILL:
            status, reason = "crash", f"{phase} worker killed by SIGKILL (no out-of-memory kill was counted)"
        else:
            status, reason = "crash", f"{phase} worker died from signal {sig}"
    elif text_oom:
        status, reason = "oom", f"{phase} worker ran out of memory (exit code {rc})"
    else:
        status, reason = "crash", f"{phase} worker exited with code {rc} without a result"
    return {"status": status, "reason": reason, "stderr_tail": tail}


def _counters_rose(before: dict[str, int], after: dict[str, int]) -> str:
    """'' when no out-of-memory kill counter went up, else which did, e.g. 'cgroup oom_kill 0 -> 1'."""
    return "; ".join(f"{name} oom_kill {before[name]} -> {after[name]}" for name in sorted(after)
                     if name in before and after[name] > before[name])


def oom_kill_counts() -> dict[str, int]:
    """Out-of-memory kills counted so far, by whom: this process's memory cgroup (v2 `memory.events`, v1
    `memory.oom_control`; its kills include those of its descendants, the workers) and the whole system
    (`/proc/vmstat`). Counters that cannot be read are left out."""
    counts: dict[str, int] = {}
    cgroup = _cgroup_oom_kills()
    if cgroup is not None:
        counts["cgroup"] = cgroup
    value = _read_counter(Path("/proc/vmstat"), "oom_kill")
    if value is not None:
        counts["system"] = value
    return counts


def _cgroup_oom_kills() -> int | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    root = Path("/sys/fs/cgroup")
    candidates = []
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        rel = path.strip().lstrip("/")
        if controllers == "":  # cgroup v2
            candidates += [root / rel / "memory.events", root / "memory.events"]
        elif "memory" in controllers.split(","):  # cgroup v1
            candidates += [root / "memory" / rel / "memory.oom_control", root / "memory" / "memory.oom_control"]
    for file in candidates:
        value = _read_counter(file, "oom_kill")
        if value is not None:
            return value
    return None


def _read_counter(file: Path, key: str) -> int | None:
    """The integer after `key` in a 'key value' per line file; None when unreadable or absent."""
    try:
        for line in file.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == key:
                return int(parts[1])
    except (OSError, ValueError):
        pass
    return None


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the worker and everything it started (it leads its own process group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # gone (and its group id possibly reused)
        pass


def execute_case(case: Case, work_dir: Path, *, slot: Slot | None = None,
                 extra_env: dict[str, str] | None = None, workers: Workers | None = None) -> dict[str, Any]:
    """Run `case` cold (fresh caches) and, if asked and the cold run compiled, warm. Returns the record.

    `work_dir` holds this case's cache folders (deleted afterwards) and staged artifacts (under
    `work_dir/staging`; the orchestrator moves them to `work_dir/artifacts` once the record commits, and
    the record's `artifacts_dir` names that final place). `slot` pins the worker to a device and its gate;
    `workers` registers the processes so that an interrupt can kill them.
    """
    t0 = time.perf_counter()
    cache_root = Path(tempfile.mkdtemp(prefix=owned_prefix(CACHE_PREFIX), dir=work_dir))
    staged = staging_dir(work_dir, case)
    discard(work_dir, case)  # whatever an earlier, killed attempt left half-written
    run_case = dataclasses.replace(case, device=slot.device) if slot and slot.device else case
    try:
        env = _worker_env(run_case, cache_root, {**dict(slot.env if slot else ()), **(extra_env or {})})
        if slot and slot.gate:
            env[ENV_PREFIX] = slot.gate
        record = _run_worker(run_case, "cold", env, staged, workers)
        compiled = record.get("status") in ("ok", "mismatch")
        if case.warm_compile and compiled and case.backend != "eager":
            warm = _run_worker(run_case, "warm", env, None, workers)
            warm_tail = warm.pop("stderr_tail", None)
            if warm_tail:  # the cold run's tail stays `stderr_tail`; the warm one is kept beside it
                record["stderr_tail_warm"] = warm_tail
            if "compile_warm_s" in warm:
                record.update(warm)
            else:
                record["warm_error"] = warm.get("reason")
        if staged.exists():
            record["artifacts_dir"] = str(final_dir(work_dir, case))
    finally:
        shutil.rmtree(cache_root, ignore_errors=True)
    if slot is not None:
        record["worker"] = slot.label
    record["wall_s"] = time.perf_counter() - t0
    return record


def case_fields(case: Case) -> CaseFields:
    """The record fields that come from the case itself."""
    return CaseFields(case_id=case.case_id, workload=case.workload, preset=case.preset, shape=case.shape,
                      dtype=case.dtype, backend=case.label, adapter=case.backend, device=case.device,
                      flops=case.flops, bytes_moved=case.bytes_moved, dims=case.dims, options=case.options,
                      seeds=list(case.seeds))
