"""Running Triton's compiler for sm_90 in a process of its own, away from the interpreter that tritongen's test
modules set for themselves (tests only)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


def run_uninterpreted(args: list[str], tmp_path: Path, timeout: int = 600) -> str:
    """stdout of `python ARGS` without TRITON_INTERPRET, with this process's path and caches under `tmp_path`;
    skips the test where this machine's Triton has no ptxas for sm_90, fails on any other error."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(BAKEOFF_TRITONGEN_CACHE_DIR=str(tmp_path), TRITON_CACHE_DIR=str(tmp_path / "triton"),
               PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=timeout,
                         check=False)
    if "ptxas" in out.stderr and out.returncode:
        pytest.skip("no ptxas for sm_90 here")
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def last_json(stdout: str) -> Any:
    """The JSON value a script printed last."""
    return json.loads(stdout.strip().splitlines()[-1])
