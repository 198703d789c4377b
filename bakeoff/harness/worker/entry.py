"""The worker entry the orchestrator starts: join the device's timing gate, then run `bakeoff.harness.worker.main`.

``python -m bakeoff.harness.worker.entry CASE_JSON OUT_JSON PHASE [ARTIFACTS_DIR]`` takes the same arguments as
`worker.main`. Before anything heavy (importing torch and the compiler is itself a load on the CPU)
it (1) asks Linux to kill it if the process that started it dies, so an orchestrator killed with SIGKILL
leaves no worker behind, (2) gives its own session's scheduling group the nice value it inherited
(`keep_niceness`), and (3) joins the gate named in the environment as a shared holder
(harness/supervise/gate.py); it holds it until it exits, and exclusively while it times.

``python -m bakeoff.harness.worker.entry --spare READY_FILE`` starts a pre-started worker instead
(worker/spare.py): it gets ready (imports, device context), then waits on its stdin for the one case it
will run, and runs it exactly as above.
"""
from __future__ import annotations

import ctypes
import os
from contextlib import nullcontext
import signal
import sys
import time

# Light modules only (no torch): this runs before the process asks to die with its parent.
from bakeoff.harness.supervise.gate import current_gate, note
from bakeoff.harness.worker.phases import ENV_PHASES_FILE, PhaseLog, spawned_at
from bakeoff.harness.worker.spare import serve

PR_SET_PDEATHSIG = 1
ENV_PARENT = "BAKEOFF_PARENT_PID"


def die_with_parent() -> None:
    """SIGKILL this process when its parent dies (Linux); exit now if the parent is already gone."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    expected = os.environ.get(ENV_PARENT)
    if expected and os.getppid() != int(expected):  # the parent died before prctl took effect
        os._exit(1)


def keep_niceness() -> None:
    """Carry the nice value this worker inherited to its scheduling group (Linux).

    A worker leads a session of its own (so that its whole process group can be killed), and where the
    kernel groups processes by session for scheduling (autogroup, the default of most distributions) a new
    session is a new group at nice 0, which competes with every other session as an equal: the process's
    inherited nice then only ranks it within its own group. So `nice bakeoff run ...` would leave the
    workers, which do all the work, at full priority. Giving the group the process's nice value makes a niced
    run yield the CPU as any niced program does. Never raises a priority; nothing to do at nice 0 or
    without autogroup."""
    if not sys.platform.startswith("linux"):
        return
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    if nice <= 0:
        return
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(nice))
    except OSError:  # a kernel without autogroup: the process's nice value already applies
        pass


def run_case(argv: list[str]) -> int:
    """Join the gate, import the worker, run the case of `argv`. Phases go to the phase file named in the
    environment; `process_start` lasts from the spawn (or hand-over) until here."""
    gate = current_gate()
    phases = PhaseLog(os.environ.get(ENV_PHASES_FILE), lambda: gate.waited_s if gate is not None else 0.0)
    born = spawned_at()
    if born is not None:
        # Up to now: this worker's own first modules (gate, phases; the entry module again in a spare) are part
        # of its start; ending it where the process began left them in no phase (tens of ms without bytecode).
        phases.add("process_start", max(time.time() - born, 0.0))
    if gate is not None:
        gate.enter_shared()
    # Importing is host work: beside other cases' timing under `beside_compiles` (harness/supervise/gate.py).
    with phases.phase("imports"), (gate.host_work() if gate is not None else nullcontext()):
        import bakeoff.harness.worker.cold  # noqa: F401  (torch and the measuring code)
        from bakeoff.harness.worker.main import main as worker_main
    return worker_main(argv, phases)


def finish(code: int) -> None:
    """Exit at once once the record is written: flush what the worker printed, then skip the interpreter's
    teardown (atexit hooks, compile worker pools, module finalizers), which measures nothing and can take
    seconds with torch loaded. Nothing is left behind: the orchestrator kills the process group."""
    note("exit")  # the kernel drops this process's locks as it exits
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def main(argv: list[str]) -> int:
    die_with_parent()
    keep_niceness()
    if argv and argv[0] == "--spare":
        finish(serve(argv[1], run_case))
    finish(run_case(argv))
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
