"""A throwaway PostgreSQL server for the store tests: initdb into a temporary folder, listen on loopback.

Run as root (CI containers), the server runs as the `postgres` user through `runuser`, since initdb and
postgres refuse to run as root. Tests that need it skip, with the reason, when no PostgreSQL binaries or
no psycopg are installed; under BAKEOFF_CI=1 (.ci/run) they fail instead (ci_required.py). `.ci/setup.sh`
installs Debian's `postgresql`.
"""
from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from ci_required import skip_or_fail


def _bin_dir() -> Path | None:
    """The folder holding initdb and pg_ctl: Debian's newest /usr/lib/postgresql/N/bin, else PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[4]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user(args: list[str]) -> list[str]:
    """Prefix `args` to run as `postgres` when we are root."""
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


def why_no_postgres() -> str | None:
    """None when a server can be started here, else the reason."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'bakeoff[scale]')"
    if _bin_dir() is None:
        return "no PostgreSQL server binaries (initdb) found; .ci/setup.sh installs Debian's postgresql"
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            return "running as root without runuser: cannot start postgres as another user"
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no `postgres` user to run the server as"
    return None


def start_server() -> Iterator[str]:
    """Start a server; yields the URL of its maintenance database; stops it and deletes its files after."""
    reason = why_no_postgres()
    if reason:
        skip_or_fail(reason)
    bindir = _bin_dir()
    base = Path(tempfile.mkdtemp(prefix="bakeoff-pg-"))  # under /tmp, which the server user can reach
    data, log = base / "data", base / "server.log"
    if os.geteuid() == 0:
        entry = pwd.getpwnam("postgres")
        os.chown(base, entry.pw_uid, entry.pw_gid)
    port = _free_port()
    subprocess.run(_as_server_user([str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "bakeoff",
                                    "-E", "UTF8", "--locale=C", "-N"]),
                   check=True, capture_output=True, timeout=120)
    options = f"-h 127.0.0.1 -p {port} -k {base} -c fsync=off -c max_connections=100"
    started = subprocess.run(_as_server_user([str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w",
                                              "-t", "60", "-o", options, "start"]),
                             capture_output=True, text=True, timeout=90)
    if started.returncode != 0:
        text = log.read_text() if log.exists() else ""
        shutil.rmtree(base, ignore_errors=True)
        raise RuntimeError(f"pg_ctl start failed: {started.stdout}{started.stderr}\n{text[-2000:]}")
    try:
        yield f"postgresql+psycopg://bakeoff@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(_as_server_user([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w",
                                        "stop"]), capture_output=True, timeout=60)
        shutil.rmtree(base, ignore_errors=True)


def fresh_database(server_url: str) -> str:
    """Create an empty database on the server; returns its URL."""
    import psycopg

    name = "t_" + secrets.token_hex(6)
    dsn = server_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")  # a generated identifier, not input
    return server_url.rsplit("/", 1)[0] + "/" + name


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A PostgreSQL server for this test session (skips with the reason when there is none)."""
    yield from start_server()


@pytest.fixture
def postgres_url(postgres_server: str) -> str:
    """A new, empty database on the session's server."""
    return fresh_database(postgres_server)
