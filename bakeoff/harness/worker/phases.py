"""Where a case's wall time goes: named phases, written by the worker as each ends and read by the orchestrator.

A worker appends one line per finished phase, ``NAME SECONDS``, to the file named by BAKEOFF_PHASES_FILE
(flushed at once), so the phases a worker finished are known even when it crashes or is killed later.
A compile also marks its start, ``begin compile EPOCH`` (and ``begin compile_setup EPOCH``): the slot
starts its spare workers while a long compile runs (supervise/prestart.py), and the record says how much of their
getting ready overlapped the compiles. The
orchestrator adds its own (setup, collect, cleanup), prefixes the warm process's with ``warm_`` and puts
what no phase covers in ``other``: the record's `phases_s` sums to its `wall_s`.

Time spent waiting for the device's timing gate inside a phase is taken out of that phase and counted as
``gate_wait`` (the gate's own tally, `Gate.waited_s`), so no second is counted twice. The worker's time
between two of its phases is ``between_phases``: together they cover the worker from the end of
``process_start`` to its end mark, and ``other`` is only what the orchestrator's own steps leave unnamed.
"""
from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from bakeoff.harness.supervise.gate import note as gate_note

ENV_PHASES_FILE = "BAKEOFF_PHASES_FILE"
ENV_SPAWNED_AT = "BAKEOFF_SPAWNED_AT"  # epoch seconds: when the orchestrator started the worker (or handed over)
END_MARK = "end"  # the last line: epoch seconds at which the worker finished writing its record
BEGIN_MARK = "begin"  # "begin NAME EPOCH": when a phase of BEGIN_MARKED started
BEGIN_MARKED = ("compile_setup", "compile")  # the compiles: a slot's spares get ready while they run
BETWEEN = "between_phases"  # the worker's time outside every named phase (PhaseLog._count_between)

# The phases, in the order a case goes through them (the table of benchmarks/harness_overhead.py).
# Measuring = what the case is for (compile and timing); the rest is the harness's overhead.
COMPILE_PHASES = ("compile_setup", "compile", "warm_compile_setup", "warm_compile")
TIMING_PHASES = ("timing", "host_latency", "graph_replay", "profiling")
PROCESS_PHASES = ("process_start", "case_load", "imports", "device_init", "gpu_state", "inputs", "eager_baseline",
                  "reference_wait", "reference", "compile_setup", "compile", "checks", "output_check", "artifacts",
                  "timing", "host_latency", "graph_replay", "profiling", "figures", "post_timing_check", "gate_wait",
                  "record", BETWEEN, "exit", "collect", "unfinished")
ORCHESTRATOR_PHASES = ("setup", "cleanup", "other")


class PhaseLog:
    """One worker process's phases. `gate_waited` returns the seconds this process has waited for its gate
    so far (0 when ungated); waits inside a phase are moved to ``gate_wait``."""

    def __init__(self, path: str | None, gate_waited: Callable[[], float] = lambda: 0.0) -> None:
        self.path = path
        self.gate_waited = gate_waited
        self.totals: dict[str, float] = {}
        self._gate_counted = 0.0
        self._outside_since = time.perf_counter()  # when the worker last left a phase (or began logging)
        self._depth = 0  # phases open now (a phase inside another is not time between phases)
        self._pending = ""  # a line not written yet
        self._waited_outside = 0.0  # gate waits counted since the worker last left a phase

    def add(self, name: str, seconds: float) -> None:
        """Count `seconds` for phase `name` (appended to the phase file at once)."""
        self.totals[name] = self.totals.get(name, 0.0) + seconds
        self._write(f"{name} {seconds:.6f}\n")

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the body as phase `name`, less any gate wait inside it (counted as gate_wait)."""
        self.take_gate_wait()  # a wait before the phase began is not part of it
        if self._depth == 0:
            self._count_between()
        self._depth += 1
        gate_note(f"phase {name}")
        if name in BEGIN_MARKED:
            self._write(f"{BEGIN_MARK} {name} {time.time():.6f}\n")
        t0 = time.perf_counter()
        try:
            yield
        finally:
            span = time.perf_counter() - t0
            waited = self.take_gate_wait()
            self.add(name, max(span - waited, 0.0))
            gate_note(f"end {name}")
            self._depth -= 1
            if self._depth == 0:
                self._outside_since = time.perf_counter()

    def _count_between(self) -> None:
        """Count the time since the worker left its last phase, less the gate waits in it, as BETWEEN: the
        worker's own steps between its named ones (this log's writes, handing results from one step to the
        next), a few tenths of a millisecond each, which on a case of half a second add up to some percent."""
        now = time.perf_counter()
        between = now - self._outside_since - self._waited_outside
        self._outside_since, self._waited_outside = now, 0.0
        if between > 0:  # written with the next line (one write fewer per phase)
            self.totals[BETWEEN] = self.totals.get(BETWEEN, 0.0) + between
            self._pending += f"{BETWEEN} {between:.6f}\n"

    def take_gate_wait(self) -> float:
        """Count the gate wait not counted yet as gate_wait; returns it (seconds)."""
        waited = self.gate_waited() - self._gate_counted
        if waited > 0:
            self._gate_counted += waited
            if self._depth == 0:
                self._waited_outside += waited
            self.add("gate_wait", waited)
            return waited
        return 0.0

    def end(self) -> None:
        """The last line: when the worker finished its record (epoch seconds), so the orchestrator can tell
        the process's exit apart."""
        self.take_gate_wait()
        self._count_between()
        self._write(f"{END_MARK} {time.time():.6f}\n")

    def _write(self, line: str) -> None:
        line, self._pending = self._pending + line, ""
        if self.path:
            with open(self.path, "a") as f:
                f.write(line)


@dataclass
class PhaseFile:
    """What a worker's phase file holds: seconds by phase (summed), its end mark (epoch seconds; None when
    it never finished) and the start of each marked phase (epoch seconds, in order)."""

    totals: dict[str, float] = field(default_factory=dict)
    end: float | None = None
    begins: dict[str, list[float]] = field(default_factory=dict)

    def running(self, name: str) -> float | None:
        """Since when phase `name` has been running (epoch seconds); None when it is not running now."""
        starts = self.begins.get(name, [])
        ended = self.count.get(name, 0)
        return starts[-1] if len(starts) > ended else None

    def window(self, name: str, now: float) -> tuple[float, float] | None:
        """When phase `name` ran, (start, end) epoch seconds: from its first marked start for its seconds,
        or up to `now` while it runs; None when it never started. (A worker runs each compile once.)"""
        starts = self.begins.get(name)
        if not starts:
            return None
        return (starts[0], now) if self.running(name) is not None else (starts[0], starts[0] + self.totals[name])

    count: dict[str, int] = field(default_factory=dict)  # finished phases, by name


def read_phases(path: Path) -> PhaseFile:
    """The phase file a worker wrote; a missing or half-written file gives what could be read."""
    out = PhaseFile()
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        parts = line.split()
        try:
            if len(parts) == 3 and parts[0] == BEGIN_MARK:
                out.begins.setdefault(parts[1], []).append(float(parts[2]))
            elif len(parts) == 2 and parts[0] == END_MARK:
                out.end = float(parts[1])
            elif len(parts) == 2:
                out.totals[parts[0]] = out.totals.get(parts[0], 0.0) + float(parts[1])
                out.count[parts[0]] = out.count.get(parts[0], 0) + 1
        except ValueError:
            continue
    return out


def spawned_at() -> float | None:
    """When the orchestrator started or handed over to this worker (epoch seconds), from the environment."""
    value = os.environ.get(ENV_SPAWNED_AT)
    try:
        return float(value) if value else None
    except ValueError:
        return None
