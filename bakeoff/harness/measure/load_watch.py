"""What else ran while a case was timed: other processes' CPU time on this worker's CPUs, how long the timing
thread waited for a CPU, the load average, and other processes running on the GPU (NVML). Read at the start
and the end of the timing window; the rules that judge these numbers are in `noise.py`."""
from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bakeoff.harness.measure import environment  # NVML through the module: one place to stand in for it
from bakeoff.harness.supervise.gate import ENV_PREFIX as GATE_ENV

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# /proc/stat counts in clock ticks (usually 10 ms): a window shorter than this many ticks over all our CPUs
# would judge others' share to worse than 2% (two ticks of rounding), so it is not judged (None).
MIN_TICKS = 100


def _cpus() -> set[int]:
    """The CPUs this process may run on."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def _busy_s(cpus: set[int]) -> float | None:
    """Seconds the CPUs `cpus` have spent busy since boot (/proc/stat: all but idle and iowait); None when
    unreadable (not Linux)."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return None
    total, seen = 0, 0
    for line in lines:
        name, *values = line.split()
        if name.startswith("cpu") and name != "cpu" and int(name[3:]) in cpus:
            ticks = [int(v) for v in values[:8]]  # user nice system idle iowait irq softirq steal
            total += sum(ticks) - ticks[3] - ticks[4]
            seen += 1
    return total / _CLOCK_TICKS if seen else None


def _own_cpu_s() -> float:
    """CPU seconds of this process (every thread) and of its waited-for children."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _run_delay_s() -> float | None:
    """Seconds this thread has waited on a run queue (runnable, not running): /proc/thread-self/schedstat."""
    try:
        return int(Path("/proc/thread-self/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def _cpu_quota() -> float | None:
    """CPUs allowed by the cgroup's quota (cgroup v2 cpu.max), None when unlimited or unknown."""
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    return None if quota == "max" else int(quota) / int(period)


@dataclass
class _Snapshot:
    wall_s: float
    busy_s: float | None
    own_s: float
    run_delay_s: float | None
    load_1m: float

    @classmethod
    def now(cls, cpus: set[int]) -> "_Snapshot":
        return cls(time.monotonic(), _busy_s(cpus), _own_cpu_s(), _run_delay_s(), os.getloadavg()[0])


@dataclass
class LoadWatch:
    """A context manager around the timing window; `fields()` gives the record's host_* and gpu_* fields."""

    device: str
    cpus: set[int] = field(default_factory=_cpus)
    start: _Snapshot | None = None
    end: _Snapshot | None = None
    gpu: Any = None

    def __enter__(self) -> "LoadWatch":
        if self.device.startswith("cuda"):
            self.gpu = GpuWatch(self.device)
        self.start = _Snapshot.now(self.cpus)
        return self

    def __exit__(self, *exc: object) -> None:
        self.end = _Snapshot.now(self.cpus)
        if self.gpu is not None:
            self.gpu.finish()

    def fields(self) -> dict[str, Any]:
        """host_cpus (CPUs available: affinity, capped by a cgroup quota), host_other_cpu_share (other
        processes' CPU time on those CPUs over window x host_cpus; None where /proc/stat is unreadable or the
        window is under MIN_TICKS clock ticks of all those CPUs together),
        host_run_delay_share (time the timing thread waited for a CPU over the window), host_load_avg (1-minute
        load at the start and the end), timing_window_s, and on a GPU gpu_other_processes."""
        assert self.start is not None and self.end is not None
        s, e = self.start, self.end
        wall = max(e.wall_s - s.wall_s, 1e-9)
        quota = _cpu_quota()
        ncpu = min(len(self.cpus), quota) if quota else len(self.cpus)
        other = None
        if s.busy_s is not None and e.busy_s is not None and wall * ncpu * _CLOCK_TICKS >= MIN_TICKS:
            # Busy time on our CPUs minus our own; never below 0 (tick rounding, our threads elsewhere).
            other = max(0.0, (e.busy_s - s.busy_s) - (e.own_s - s.own_s)) / (wall * ncpu)
        delay = None
        if s.run_delay_s is not None and e.run_delay_s is not None:
            delay = (e.run_delay_s - s.run_delay_s) / wall
        out: dict[str, Any] = {"timing_window_s": wall, "host_cpus": ncpu, "host_other_cpu_share": other,
                               "host_run_delay_share": delay, "host_load_avg": [s.load_1m, e.load_1m]}
        if self.gpu is not None:
            out["gpu_other_processes"] = self.gpu.others
            if self.gpu.error:
                out["gpu_process_error"] = self.gpu.error
        return out


class GpuWatch:
    """Other processes on this worker's GPU during the window, from NVML: those with SM or memory utilization
    samples in the window (nvmlDeviceGetProcessUtilization), or, where NVML gives no per-process utilization,
    every other process holding a compute context (activity unknown). In a container NVML may report host
    process ids: see `others_than_me`.

    The samples are read from LOOKBACK_S before the window: NVML samples each process's utilization at its own
    rate, and on the H200 an outsider running 8192^2 matmuls throughout a run had no sample inside two of twelve
    timing windows of about 1 s (those cases came out clean). A process busy just before the window counts
    (conservatively) as busy during it."""

    LOOKBACK_S = 2.0

    def __init__(self, device: str) -> None:
        self.device, self.error = device, None
        self.others: list[dict[str, Any]] | None = None
        self.t0_us = int((time.time() - self.LOOKBACK_S) * 1e6)

    def finish(self) -> None:
        nv = environment._nvml()
        if nv is None:
            self.error = "NVML unavailable"
            return
        try:
            h = environment._nvml_handle(nv, int(self.device.split(":")[1]) if ":" in self.device else 0)
            procs = {int(p.pid) for p in nv.nvmlDeviceGetComputeRunningProcesses(h)}
            try:
                samples = nv.nvmlDeviceGetProcessUtilization(h, self.t0_us)
                active = {int(s.pid): {"pid": int(s.pid), "sm_util_pct": int(s.smUtil),
                                          "mem_util_pct": int(s.memUtil)}
                          for s in samples if s.timeStamp >= self.t0_us and (s.smUtil > 0 or s.memUtil > 0)}
                self.others = others_than_me(active, os.getpid(), same_namespace=os.getpid() in procs)
            except nv.NVMLError as exc:
                if "not found" in str(exc).lower():  # no samples in the window: nobody ran anything
                    self.others = []
                else:
                    self.error = f"per-process utilization unavailable ({exc}): listing compute contexts"
                    self.others = others_than_me({p: {"pid": p, "activity": "unknown"} for p in procs},
                                                 os.getpid(), same_namespace=os.getpid() in procs)
            self.others = mark_gated_siblings(self.others) if self.others else self.others
        except Exception as exc:  # NVML failures cost this check, not the case
            self.error = f"{type(exc).__name__}: {exc}"


def mark_gated_siblings(others: list[dict[str, Any]], gate: str | None = None) -> list[dict[str, Any]]:
    """`others` with `gated_sibling: True` on each process whose environment names this worker's timing gate
    (BAKEOFF_GATE): a worker of a bakeoff run on this device. A process whose environment cannot be read (another
    user, another pid namespace) stays unmarked: an outsider."""
    gate = gate if gate is not None else os.environ.get(GATE_ENV)
    if not gate:
        return others
    mine = f"{GATE_ENV}={gate}".encode()
    out = []
    for proc in others:
        try:
            sibling = not proc.get("pid_namespace_unknown") and mine in Path(
                f"/proc/{int(proc['pid'])}/environ").read_bytes().split(b"\0")
        except OSError:
            sibling = False
        out.append(dict(proc, gated_sibling=True) if sibling else proc)
    return out


def others_than_me(by_pid: dict[int, dict[str, Any]], my_pid: int,
                   same_namespace: bool | None = None) -> list[dict[str, Any]]:
    """The entries of processes other than this one. `same_namespace`: NVML reports this process's own pid space
    (True when its list of compute contexts, which holds ours while we time, has `my_pid`); then every entry but
    `my_pid` is another process, whether or not we have a utilization sample of our own (on the H200 an outsider
    running matmuls was sometimes the only process sampled in a window, and was taken for us). Otherwise, when
    `my_pid` is not among the entries (another pid namespace's ids), this process is one of them: the most active
    one (largest sm_util_pct; we were timing) is taken to be us, and the others are marked `pid_namespace_unknown`."""
    if same_namespace or my_pid in by_pid:
        return [v for p, v in sorted(by_pid.items()) if p != my_pid]
    ranked = sorted(by_pid.values(), key=lambda v: (-int(v.get("sm_util_pct") or 0), v["pid"]))
    return [dict(v, pid_namespace_unknown=True) for v in ranked[1:]]
