"""The timing gate between real processes: timing waits for every busy worker, and holds off new ones.

Each process is a small Python program using harness.gate (no torch), printing epoch times of its events.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

PROGRAM = """
import sys, time
from bakeoff.harness.run.gate import Gate
prefix, role, hold_s, wait_file = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
gate = Gate(prefix, wait_file, sys.argv[5])
if role == "busy":                    # a worker compiling: shared for its whole life
    gate.enter_shared()
    print("in", time.time(), flush=True)
    time.sleep(hold_s)
    print("out", time.time(), flush=True)
else:                                 # a worker that starts busy, then times
    gate.enter_shared()
    print("in", time.time(), flush=True)
    with gate.exclusive():
        print("timing", time.time(), flush=True)
        time.sleep(hold_s)
        print("timed", time.time(), flush=True)
print("waited", gate.waited_s, flush=True)
"""


def start(prefix: Path, role: str, hold_s: float, wait_file: Path, policy: str = "exclusive") -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", PROGRAM, str(prefix), role, str(hold_s), str(wait_file), policy],
                            cwd=REPO, stdout=subprocess.PIPE, text=True)


def events(proc: subprocess.Popen, seen: str = "") -> dict[str, float]:
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    return {line.split()[0]: float(line.split()[1]) for line in (seen + out).splitlines()}


def raw_line(proc: subprocess.Popen) -> str:
    """One line of `proc`'s output read byte by byte, so nothing after it is left in a buffer."""
    data = b""
    while not data.endswith(b"\n"):
        byte = os.read(proc.stdout.fileno(), 1)
        assert byte, "the process ended before writing a line"
        data += byte
    return data.decode()


def wait_for_line(path: Path, timeout_s: float = 30) -> None:
    deadline = time.time() + timeout_s
    while not (path.exists() and path.read_text().strip()):
        assert time.time() < deadline, f"{path} never written"
        time.sleep(0.02)


def test_timing_waits_for_busy_workers_and_blocks_new_ones(tmp_path):
    prefix = tmp_path / "cpu"
    busy = start(prefix, "busy", 4.0, tmp_path / "busy.wait")
    entered = busy.stdout.readline()  # it holds the gate shared now
    timer = start(prefix, "timer", 1.0, tmp_path / "timer.wait")
    wait_for_line(tmp_path / "timer.wait")  # the timer is now waiting for the busy worker
    late = start(prefix, "busy", 0.1, tmp_path / "late.wait")
    b, t, late_ev = events(busy, entered), events(timer), events(late)
    assert t["timing"] >= b["out"]  # timing starts only once the busy worker has left
    assert late_ev["in"] >= t["timed"]  # a worker arriving while timing was pending waits for it to end
    assert t["waited"] > 0.5 and late_ev["waited"] > 0.5 and b["waited"] == 0


def test_a_killed_timer_releases_the_gate(tmp_path):
    prefix = tmp_path / "cpu"
    timer = start(prefix, "timer", 600.0, tmp_path / "timer.wait")
    deadline = time.time() + 30
    while True:  # wait until it holds the gate exclusively
        probe = subprocess.run([sys.executable, "-c", "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR);"
                                "fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)", str(prefix) + ".gate"], cwd=REPO)
        if probe.returncode != 0:
            break
        assert time.time() < deadline
        time.sleep(0.1)
    os.kill(timer.pid, signal.SIGKILL)
    timer.wait()
    busy = start(prefix, "busy", 0.0, tmp_path / "busy.wait")
    assert events(busy)["waited"] < 5  # the kernel dropped the dead process's locks


def test_timers_only_serializes_timing_phases_and_nothing_else(tmp_path):
    prefix = tmp_path / "cpu"
    busy = start(prefix, "busy", 3.0, tmp_path / "busy.wait", "timers_only")
    entered = busy.stdout.readline()
    first = start(prefix, "timer", 1.5, tmp_path / "t1.wait", "timers_only")
    first_in = raw_line(first)  # unbuffered: its next line follows at once, and communicate() must see it
    second = start(prefix, "timer", 0.5, tmp_path / "t2.wait", "timers_only")
    b, t1, t2 = events(busy, entered), events(first, first_in), events(second)
    assert t1["timing"] < b["out"]  # a busy worker holds nothing: timing does not wait for it
    assert t1["waited"] < 1.0
    assert t2["timing"] >= t1["timed"] or t1["timing"] >= t2["timed"]  # the two timing phases never overlap
    assert b["waited"] == 0
