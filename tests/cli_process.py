"""Helpers for tests that start `bakeoff run` in the background and interrupt it: start it in its own process
group, wait for its records to appear in the store, and look for worker processes it left behind."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import psutil

from conftest import bakeoff_cmd


def start_bakeoff(*args: str, cwd: Path) -> subprocess.Popen:
    """`bakeoff ARGS` in the background, leading a new process group (as a shell runs a job), with Ctrl-C's
    default disposition, as an interactive shell gives its jobs: a suite started in the background
    (`nohup ... &`) has SIGINT ignored, which its children would inherit and Python would keep."""
    env = dict(os.environ, COLUMNS="220")
    return subprocess.Popen(bakeoff_cmd() + list(args), cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def count_records(db_file: Path) -> int:
    """Records in a SQLite store (0 while it does not exist yet)."""
    if not db_file.exists():
        return 0
    with sqlite3.connect(db_file, timeout=30) as conn:
        try:
            return conn.execute("select count(*) from records").fetchone()[0]
        except sqlite3.OperationalError:  # the tables are not created yet
            return 0


def wait_for_records(db_file: Path, at_least: int, proc: subprocess.Popen, timeout_s: float = 300) -> int:
    """Wait until the store holds `at_least` records; returns the count. Fails if `proc` ends first."""
    deadline = time.monotonic() + timeout_s
    while (n := count_records(db_file)) < at_least:
        assert proc.poll() is None, f"bakeoff ended early ({proc.returncode}):\n{proc.stdout.read()[-3000:]}"
        assert time.monotonic() < deadline, f"only {n} records after {timeout_s} s"
        time.sleep(0.2)
    return n


def workers_left(cwd: Path, grace_s: float = 10) -> list[str]:
    """Worker processes still running in `cwd` after up to `grace_s` seconds (should be none)."""
    deadline = time.monotonic() + grace_s
    while True:
        left = []
        for proc in psutil.process_iter(["cmdline"]):
            try:
                cmd = " ".join(proc.info["cmdline"] or [])
                if "bakeoff.harness.worker.entry" in cmd and Path(proc.cwd()) == cwd:
                    left.append(f"{proc.pid}: {cmd}")
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)
