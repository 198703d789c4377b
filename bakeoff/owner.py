"""Who a process is, in a form another process can check later: is that pid still the same process?

A pid names a process only on one machine (one boot, one pid namespace: containers on one host each have
their own) and only until it is reused. `ProcessId` keeps all three: the machine key, the pid and the pid's
start time. The harness's run lease uses it to take over at once from an orchestrator that died on this
machine, and its cleaning of leftovers to delete only what dead processes left. It sits below every layer:
a backend names its scratch folders with it too (backends/inductor_cpu.py).
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path


@functools.lru_cache(maxsize=1)
def machine_key() -> str:
    """12 hex digits naming this boot of this machine and this pid namespace: two processes see the same
    key exactly when a pid means the same process to both."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:  # not Linux: the host name and its boot time
        import psutil

        boot, namespace = socket.gethostname(), str(int(psutil.boot_time()))
    return hashlib.sha256(f"{boot}/{namespace}".encode()).hexdigest()[:12]


def process_start(pid: int) -> str | None:
    """When `pid` started, as digits (Linux: clock ticks since boot, exact); None when no such process."""
    if not Path("/proc/self/stat").exists():  # no /proc: psutil's creation time, in hundredths of a second
        import psutil

        try:
            return str(int(psutil.Process(pid).create_time() * 100))
        except psutil.Error:
            return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22 (starttime), counted after the command name


@dataclass(frozen=True)
class ProcessId:
    machine: str
    pid: int
    start: str

    @classmethod
    def current(cls) -> "ProcessId":
        pid = os.getpid()
        return cls(machine_key(), pid, process_start(pid) or "0")

    def alive(self) -> bool | None:
        """True while the process runs, False once it has ended; None when it ran on another machine (or
        pid namespace), where this one cannot tell."""
        if self.machine != machine_key():
            return None
        return process_start(self.pid) == self.start

    def tag(self) -> str:
        """'<machine>-<pid>-<start>', for the names of folders this process owns."""
        return f"{self.machine}-{self.pid}-{self.start}"

    @classmethod
    def from_tag(cls, name: str, prefix: str) -> "ProcessId | None":
        """The owner encoded in folder `name` (made with prefix + tag); None for a name without one."""
        found = re.match(re.escape(prefix) + r"([0-9a-f]{12})-(\d+)-(\d+)-", name)
        return cls(found[1], int(found[2]), found[3]) if found else None


# A case's temporary folder (harness/supervise/leftovers.py cleans what dead processes left of these).
CASE_TMP_PREFIX = "bakeoff-case-"


def owned_prefix(prefix: str) -> str:
    """A tempfile prefix naming this process as the owner: `prefix` + its tag + '-'."""
    return f"{prefix}{ProcessId.current().tag()}-"
