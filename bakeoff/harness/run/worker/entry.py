"""The worker entry the orchestrator starts: join the device's timing gate, then run `bakeoff.harness.run.worker.main`.

``python -m bakeoff.harness.run.worker.entry CASE_JSON OUT_JSON PHASE [ARTIFACTS_DIR]`` takes the same arguments as
`harness.worker`. Before anything heavy (importing torch and the compiler is itself a load on the CPU)
it (1) asks Linux to kill it if the process that started it dies, so an orchestrator killed with SIGKILL
leaves no worker behind, and (2) joins the gate named in the environment as a shared holder
(harness/gate.py); it holds it until it exits, and exclusively while it times.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys

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


def main(argv: list[str]) -> int:
    die_with_parent()
    from bakeoff.harness.run.gate import current_gate

    gate = current_gate()
    if gate is not None:
        gate.enter_shared()
    from bakeoff.harness.run.worker.main import main as worker_main

    return worker_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
