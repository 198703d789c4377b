"""A worker leads its own session; under autogroup scheduling it carries its inherited nice value to that
session's group (bakeoff/harness/worker/entry.py, keep_niceness), so that `nice bakeoff run` lowers the
workers' priority against other sessions, not only within their own."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/autogroup").exists(), reason="no autogroup scheduling here")

SHOW = ("from bakeoff.harness.worker.entry import keep_niceness; keep_niceness(); "
        "print(os.getpriority(os.PRIO_PROCESS, 0), open('/proc/self/autogroup').read().split()[-1])")


def _group_nice(process_nice: int) -> tuple[int, int]:
    """(process nice, group nice) of a new session that inherited `process_nice`, after keep_niceness."""
    out = subprocess.run([sys.executable, "-c", "import os; " + SHOW], capture_output=True, text=True, check=True,
                         start_new_session=True, preexec_fn=lambda: os.nice(process_nice) if process_nice else None)
    got = out.stdout.split()
    return int(got[0]), int(got[1])


def test_a_niced_worker_gives_its_session_group_the_same_nice():
    assert _group_nice(7) == (7, 7)


def test_a_worker_at_nice_0_leaves_its_group_alone():
    assert _group_nice(0) == (0, 0)
