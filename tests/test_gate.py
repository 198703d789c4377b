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

import pytest

REPO = Path(__file__).resolve().parent.parent

PROGRAM = """
import sys, time
from bakeoff.harness.supervise.gate import Gate
prefix, role, hold_s, wait_file = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
gate = Gate(prefix, wait_file, sys.argv[5])
if role == "busy":                    # a worker compiling: shared for its whole life
    gate.enter_shared()
    print("in", time.time(), flush=True)
    time.sleep(hold_s)
    print("out", time.time(), flush=True)
elif role == "host":                  # a worker compiling on the host (Gate.host_work), then device work
    gate.enter_shared()
    with gate.host_work() as outside:
        print("in", time.time(), flush=True)
        time.sleep(hold_s)
        print("out", time.time(), flush=True)
    print("back", time.time(), flush=True)
    print("outside", float(outside), flush=True)
elif role == "marked":                # host work (a compile) with a device-work section (its autotuner's timing)
    gate.enter_shared()
    with gate.host_work() as outside:
        print("in", time.time(), flush=True)
        time.sleep(hold_s)                # compiling the candidates: beside timing
        with gate.device_work() as rejoined:
            print("device", time.time(), flush=True)
            time.sleep(hold_s)            # timing them: never beside another case's timing
            print("undevice", time.time(), flush=True)
        time.sleep(hold_s)
        print("out", time.time(), flush=True)
    print("outside", float(outside), flush=True)
    print("rejoined", float(rejoined), flush=True)
elif role == "search":                # a config search: candidates compiled on the host, then timed alone
    gate.enter_shared()
    with gate.host_work() as outside:
        with gate.device_work(alone=True) as rejoined:
            print("device", time.time(), flush=True)
            time.sleep(hold_s)
            print("undevice", time.time(), flush=True)
        print("out", time.time(), flush=True)
    print("outside", float(outside), flush=True)
    print("rejoined", float(rejoined), flush=True)
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


def test_an_exclusive_timer_waits_for_busy_workers_of_any_policy(tmp_path):
    """Policies mix on one device (auto resolves per case): a timers_only worker compiling still holds the
    gate shared, so an exclusive timer waits for it; a timers_only timer does not wait for busy workers but
    never overlaps an exclusive timer."""
    prefix = tmp_path / "gpu-0"
    busy = start(prefix, "busy", 3.0, tmp_path / "busy.wait", "timers_only")
    entered = busy.stdout.readline()
    strict = start(prefix, "timer", 1.0, tmp_path / "strict.wait", "exclusive")
    b, s = events(busy, entered), events(strict)
    assert s["timing"] >= b["out"] and s["waited"] > 1.0  # the exclusive timer had the device alone

    busy = start(prefix, "busy", 4.0, tmp_path / "busy2.wait", "exclusive")
    entered = busy.stdout.readline()
    loose = start(prefix, "timer", 0.5, tmp_path / "loose.wait", "timers_only")
    loose_in = raw_line(loose)
    strict = start(prefix, "timer", 1.0, tmp_path / "strict2.wait", "exclusive")
    b, lo, s = events(busy, entered), events(loose, loose_in), events(strict)
    assert lo["timing"] < b["out"] and lo["waited"] < 1.0  # timers_only: not held off by a compile
    assert s["timing"] >= max(b["out"], lo["timed"])  # exclusive: after every busy worker and the other timer
    assert lo["timed"] <= s["timing"] or lo["timing"] >= s["timed"]  # never overlapping


def test_beside_compiles_times_beside_host_compiles_but_not_beside_device_work(tmp_path):
    """beside_compiles: a worker's host-side compile (Gate.host_work) does not hold off a beside_compiles
    timer, its return to device work waits for that timer, and device work (a busy worker) still does hold
    it off; an exclusive timer waits for the host-side compile too."""
    prefix = tmp_path / "gpu-0"
    host = start(prefix, "host", 3.0, tmp_path / "host.wait", "beside_compiles")
    entered = host.stdout.readline()
    timer = start(prefix, "timer", 1.5, tmp_path / "t.wait", "beside_compiles")
    h, t = events(host, entered), events(timer)
    assert h["outside"] == 1.0
    assert t["timing"] < h["out"] and t["waited"] < 1.0  # timed while the other compiled on the host
    assert h["back"] >= t["timed"] or h["back"] < t["timing"]  # device work never overlaps the timing

    busy = start(prefix, "busy", 2.5, tmp_path / "busy.wait", "beside_compiles")
    entered = busy.stdout.readline()
    timer = start(prefix, "timer", 0.5, tmp_path / "t2.wait", "beside_compiles")
    b, t = events(busy, entered), events(timer)
    assert t["timing"] >= b["out"] and t["waited"] > 1.0  # device work holds a beside_compiles timer off

    host = start(prefix, "host", 2.5, tmp_path / "host2.wait", "beside_compiles")
    entered = host.stdout.readline()
    strict = start(prefix, "timer", 0.5, tmp_path / "strict.wait", "exclusive")
    h, s = events(host, entered), events(strict)
    assert s["timing"] >= h["out"] and s["waited"] > 1.0  # exclusive: the host-side compile is waited for


def test_host_work_keeps_the_shared_hold_under_the_other_policies(tmp_path):
    prefix = tmp_path / "gpu-0"
    host = start(prefix, "host", 2.5, tmp_path / "host.wait", "exclusive")
    entered = host.stdout.readline()
    timer = start(prefix, "timer", 0.5, tmp_path / "t.wait", "exclusive")
    h, t = events(host, entered), events(timer)
    assert h["outside"] == 0.0 and t["timing"] >= h["out"]


def test_a_marked_device_work_section_of_a_host_compile_holds_timers_off(tmp_path):
    """beside_compiles: a compile that marks its device work (Backend.marks_device_work) is timed beside
    while it compiles, and a timer never overlaps the marked section; under exclusive the section is a no-op
    (the compile kept its shared hold throughout)."""
    prefix = tmp_path / "gpu-0"
    marked = start(prefix, "marked", 2.0, tmp_path / "m.wait", "beside_compiles")
    entered = marked.stdout.readline()
    first = start(prefix, "timer", 0.4, tmp_path / "t1.wait", "beside_compiles")
    while time.time() < float(entered.split()[1]) + 2.5:  # the second arrives in the section (2 s to 4 s)
        time.sleep(0.05)
    second = start(prefix, "timer", 0.4, tmp_path / "t2.wait", "beside_compiles")
    m, a, b = events(marked, entered), events(first), events(second)
    assert m["outside"] == 1.0 and m["rejoined"] == 1.0
    assert a["timed"] <= m["device"] + 0.05  # timed while the candidates compiled
    for t in (a, b):  # no timing inside the marked section
        assert t["timed"] <= m["device"] + 0.05 or t["timing"] >= m["undevice"] - 0.05
    assert b["timing"] >= m["undevice"] - 0.05 and b["timing"] < m["out"]  # after it, beside the rest

    marked = start(prefix, "marked", 0.3, tmp_path / "m2.wait", "exclusive")
    m = events(marked)
    assert m["outside"] == 0.0 and m["rejoined"] == 0.0


@pytest.mark.parametrize("policy", ["beside_compiles", "exclusive", "timers_only"])
def test_a_config_searchs_timing_has_the_device_alone(tmp_path, policy):
    """device_work(alone=True), tritongen's candidates timed: it waits for every busy worker (another case's
    inputs, references or search on the device), and one arriving meanwhile waits for it, under every policy,
    from host work (beside_compiles) or from the shared hold (the others)."""
    prefix = tmp_path / "gpu-0"
    busy = start(prefix, "busy", 1.5, tmp_path / "busy.wait", policy)
    entered = busy.stdout.readline()
    search = start(prefix, "search", 1.5, tmp_path / "search.wait", policy)
    while time.time() < float(entered.split()[1]) + 2.2:  # the busy worker left at 1.5 s: the search times now
        time.sleep(0.05)
    late = start(prefix, "busy", 0.2, tmp_path / "late.wait", policy)
    b, s, late_ev = events(busy, entered), events(search), events(late)
    assert s["rejoined"] == 1.0 and s["outside"] == float(policy == "beside_compiles")
    assert s["device"] >= b["out"] - 0.05  # not beside another worker's device work
    assert late_ev["in"] >= s["undevice"] - 0.05  # nor the other way round
