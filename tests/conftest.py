"""Fixtures shared by the CLI tests: a way to call the real `bakeoff` command, and one smoke run."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pgserver import postgres_server, postgres_url  # noqa: F401  (fixtures: a throwaway PostgreSQL)
from store_urls import store_url  # noqa: F401  (fixture: an empty SQLite or PostgreSQL store)

REPO = Path(__file__).resolve().parent.parent


def bakeoff_cmd() -> list[str]:
    """The installed `bakeoff` entry point beside this Python, else `python -m bakeoff`."""
    exe = Path(sys.executable).parent / "bakeoff"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "bakeoff"]


def bakeoff(*args: str, cwd: Path, timeout: float = 1800, check: bool = False,
            columns: int = 220) -> subprocess.CompletedProcess:
    """Run `bakeoff ARGS` in `cwd`, capturing text output, as a terminal of `columns` would lay it out."""
    env = dict(os.environ, COLUMNS=str(columns))
    proc = subprocess.run(bakeoff_cmd() + list(args), cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"bakeoff {' '.join(args)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> dict:
    """`bakeoff run configs/smoke.yaml --backend eager --backend inductor` once; its store and records."""
    work = tmp_path_factory.mktemp("smoke")
    shutil.copytree(REPO / "configs", work / "configs")
    db = f"sqlite:///{work / 'smoke.db'}"
    proc = bakeoff("run", "configs/smoke.yaml", "--backend", "eager", "--backend", "inductor", "--db", db,
                   cwd=work, check=True)
    export = bakeoff("export", "latest", "--format", "json", "--db", db, cwd=work, check=True)
    return {"dir": work, "db": db, "stdout": proc.stdout, "records": json.loads(export.stdout)}
