"""Fixtures shared by the CLI tests: a way to call the real `bakeoff` command, one smoke run, and the hooks
that start the long background runs (tests/background_runs.py)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import background_runs
from pgserver import postgres_server, postgres_url  # noqa: F401  (fixtures: a throwaway PostgreSQL)
from store_urls import store_url  # noqa: F401  (fixture: an empty SQLite or PostgreSQL store)

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session", autouse=True)
def probe_cache(tmp_path_factory):
    """Inductor's CPU probe answer kept for this session only (bakeoff/backends/inductor_cpu_cache.py): the first
    run that needs it probes, later runs read it back, and no test reads or writes the user's own cache."""
    from bakeoff.backends.inductor_cpu_cache import ENV_CACHE

    before = os.environ.get(ENV_CACHE)
    os.environ[ENV_CACHE] = str(tmp_path_factory.mktemp("probe_cache"))
    yield os.environ[ENV_CACHE]
    if before is None:
        os.environ.pop(ENV_CACHE, None)
    else:
        os.environ[ENV_CACHE] = before


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected what they do
def pytest_collection_modifyitems(session, config, items):
    """Start the background runs of the collected modules that declare one (tests/background_runs.py)."""
    if not config.option.collectonly:
        items[:] = background_runs.start_for(items, bakeoff_cmd())


def pytest_sessionfinish(session, exitstatus):
    background_runs.stop_all()


def bakeoff_cmd() -> list[str]:
    """The installed `bakeoff` entry point beside this Python, else `python -m bakeoff`."""
    exe = Path(sys.executable).parent / "bakeoff"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "bakeoff"]


def bakeoff(*args: str, cwd: Path, timeout: float = 1800, check: bool = False,
            columns: int = 220, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run `bakeoff ARGS` in `cwd`, capturing text output, as a terminal of `columns` would lay it out; `env`
    adds variables to the environment it inherits."""
    env = dict(os.environ, COLUMNS=str(columns), **(env or {}))
    proc = subprocess.run(bakeoff_cmd() + list(args), cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"bakeoff {' '.join(args)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


# Two slots overlap the work on CI's two cores. No test of the smoke run judges timing quality (latencies are
# checked positive and ordered, not against a spread), so a compile may run beside a timing phase (timers_only:
# timing phases still exclude each other). Under the CPU's `auto` policy (exclusive) a slot timing eager's
# short case would wait out the other slot's Inductor compile. What auto picks is checked in
# tests/test_phases.py on a run of its own.
SMOKE_JOBS, SMOKE_GATE = 2, "timers_only"


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> dict:
    """`bakeoff run configs/smoke.yaml --backend eager --backend inductor --jobs 2 --gate timers_only` once; its
    store and records."""
    work = tmp_path_factory.mktemp("smoke")
    shutil.copytree(REPO / "configs", work / "configs")
    db = f"sqlite:///{work / 'smoke.db'}"
    proc = bakeoff("run", "configs/smoke.yaml", "--backend", "eager", "--backend", "inductor",
                   "--jobs", str(SMOKE_JOBS), "--gate", SMOKE_GATE, "--db", db, cwd=work, check=True)
    export = bakeoff("export", "latest", "--format", "json", "--db", db, cwd=work, check=True)
    return {"dir": work, "db": db, "stdout": proc.stdout, "records": json.loads(export.stdout), "jobs": SMOKE_JOBS,
            "gate": SMOKE_GATE}
