"""How a worker that wrote no record died: crash, out of memory (with evidence) or stopped by the harness."""
from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from bakeoff.harness.worker.errors import mentions_oom


def death_record(rc: int, phase: str, tail: str, oom_kills_before: dict[str, int] | None = None,
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
