"""Execute one case in worker subprocesses (cold, then warm) with a timeout; always return a record.

A worker that crashes, hangs or runs out of memory becomes a record with status crash, timeout or oom and
the tail of its stderr. This module never touches the store: the orchestrator writes what it returns.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .plan import Case

STDERR_TAIL_CHARS = 3000
REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class WorkerResult:
    record: dict[str, Any]
    wall_s: float


def case_slug(case: Case) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in case.case_id)[:200]


def _worker_env(case: Case, cache_root: Path, extra_env: dict[str, str] | None) -> dict[str, str]:
    """The worker's environment: this one, plus the backend's cache folders under `cache_root`."""
    from backends import backend_class

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    env.setdefault("PYTHONUNBUFFERED", "1")
    for name in backend_class(case.adapter).cache_env:
        folder = cache_root / name.lower()
        folder.mkdir(parents=True, exist_ok=True)
        env[name] = str(folder)
    if case.adapter == "tritongen" and case.device == "cpu":
        env["TRITON_INTERPRET"] = "1"  # Triton kernels run on the CPU only through its interpreter
    env.update(extra_env or {})
    return env


def _run_worker(case: Case, phase: str, env: dict[str, str], artifacts_dir: Path | None,
                procs: list[subprocess.Popen] | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bakeoff-case-") as tmp:
        case_file, out_file, err_file = Path(tmp, "case.json"), Path(tmp, "record.json"), Path(tmp, "stderr.txt")
        case_file.write_text(case.to_json())
        args = [sys.executable, "-m", "harness.worker", str(case_file), str(out_file), phase]
        if artifacts_dir is not None:
            args.append(str(artifacts_dir))
        with open(err_file, "wb") as err:
            proc = subprocess.Popen(args, env=env, stdout=err, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, cwd=os.getcwd())
            if procs is not None:
                procs.append(proc)
            try:
                rc = proc.wait(timeout=case.timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                kill_group(proc)
                rc, timed_out = proc.wait(), True
            finally:
                if procs is not None:
                    procs.remove(proc)
        tail = err_file.read_text(errors="replace")[-STDERR_TAIL_CHARS:]
        if timed_out:
            return {"status": "timeout", "reason": f"{phase} worker exceeded timeout_s={case.timeout_s:g}",
                    "stderr_tail": tail}
        if out_file.exists():
            record = json.loads(out_file.read_text())
            if tail.strip():
                record["stderr_tail"] = tail
            return record
        return _death_record(rc, phase, tail)


def _death_record(rc: int, phase: str, tail: str) -> dict[str, Any]:
    """A record for a worker that exited without writing its result."""
    low = tail.lower()
    if rc < 0:
        sig = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
        if -rc == signal.SIGKILL:
            status = "oom"
            reason = f"{phase} worker killed by SIGKILL (the kernel's out-of-memory killer, most likely)"
        else:
            status, reason = "crash", f"{phase} worker died from signal {sig}"
    elif "memoryerror" in low or "out of memory" in low:
        status, reason = "oom", f"{phase} worker ran out of memory (exit code {rc})"
    else:
        status, reason = "crash", f"{phase} worker exited with code {rc} without a result"
    return {"status": status, "reason": reason, "stderr_tail": tail}


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the worker and everything it started (it leads its own process group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def execute_case(case: Case, work_dir: Path, *, extra_env: dict[str, str] | None = None,
                 procs: list[subprocess.Popen] | None = None) -> dict[str, Any]:
    """Run `case` cold (fresh caches) and, if asked and the cold run compiled, warm. Returns the record.

    `work_dir` holds this case's cache folders (deleted afterwards) and artifacts (kept, under
    `work_dir/artifacts`, only if the record says where).
    """
    t0 = time.perf_counter()
    cache_root = Path(tempfile.mkdtemp(prefix="cache-", dir=work_dir))
    artifacts_dir = work_dir / "artifacts" / case_slug(case)
    try:
        env = _worker_env(case, cache_root, extra_env)
        record = _run_worker(case, "cold", env, artifacts_dir, procs)
        compiled = record.get("status") in ("ok", "mismatch")
        if case.warm_compile and compiled and case.adapter != "eager":
            warm = _run_worker(case, "warm", env, None, procs)
            if "compile_warm_s" in warm:
                record.update(warm)
            else:
                record["warm_error"] = warm.get("reason")
        if artifacts_dir.exists():
            record["artifacts_dir"] = str(artifacts_dir)
    finally:
        shutil.rmtree(cache_root, ignore_errors=True)
    record["wall_s"] = time.perf_counter() - t0
    return record


def case_fields(case: Case) -> dict[str, Any]:
    """The record fields that come from the case itself."""
    return {"case_id": case.case_id, "workload": case.workload, "preset": case.preset, "shape": case.shape,
            "dtype": case.dtype, "backend": case.backend, "adapter": case.adapter, "device": case.device, "flops": case.flops,
            "bytes_moved": case.bytes_moved, "dims": case.dims, "options": case.options, "seeds": list(case.seeds)}
