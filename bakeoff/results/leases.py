"""The run lease in the store: which orchestrator holds a run, and since when it last said it is alive.

One row of `run_leases` per held run. Taking, renewing and releasing are single statements conditioned on
the row's `token` (compare and swap), so two orchestrators racing for one run, from any folder or host, never
both win. Times come from the database's clock, the one clock every host of a shared store agrees on.
Whether a holder is alive is decided by the caller (harness/run/lease_heartbeat.py); this module only reads and swaps.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import delete, insert, select, text, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError, OperationalError

from bakeoff.results.errors import LeaseLost  # raised here; defined apart so that the CLI names it cheaply
from bakeoff.results.schema import run_leases


TAKEOVER_LOCK_WAIT_S = 5  # the longest a takeover waits for a write of the holder in progress (PostgreSQL)


@dataclass(frozen=True)
class LeaseClaim:
    """Who asks for (or holds) a run: `token` is its secret; host, pid and folder say who it is to people;
    `machine` and `process_start` let a process on the same machine tell whether the pid is still that
    process; `stale_s` is how long the holder may go without a heartbeat before others may take over."""

    token: str
    host: str
    pid: int
    folder: str
    machine: str
    process_start: str
    stale_s: float


@dataclass(frozen=True)
class LeaseHolder:
    """A lease row as read, with `age_s`: seconds since its last heartbeat, on the database's clock."""

    claim: LeaseClaim
    taken_s: float
    heartbeat_s: float
    age_s: float

    @property
    def stale(self) -> bool:
        """No heartbeat for longer than the holder promised."""
        return self.age_s > self.claim.stale_s

    def owner(self) -> str:
        c = self.claim
        return f"pid {c.pid} on {c.host} in {c.folder}"

    def describe(self) -> str:
        return f"{self.owner()}, last heartbeat {self.age_s:.3g} s ago"


def db_now_s(conn: Connection) -> float:
    """Seconds since the epoch on the database's clock (this host's clock for other databases)."""
    if conn.dialect.name == "postgresql":
        return float(conn.execute(text("SELECT EXTRACT(EPOCH FROM clock_timestamp())")).scalar_one())
    if conn.dialect.name == "sqlite":
        return float(conn.execute(text("SELECT (julianday('now') - 2440587.5) * 86400.0")).scalar_one())
    return time.time()


def holder(conn: Connection, run_id: str) -> LeaseHolder | None:
    """The lease of `run_id` as it stands; None when nobody holds it."""
    row = conn.execute(select(run_leases).where(run_leases.c.run_id == run_id)).mappings().first()
    if row is None:
        return None
    claim = LeaseClaim(row["token"], row["host"], row["pid"], row["folder"], row["machine"], row["process_start"],
                       row["stale_s"])
    return LeaseHolder(claim, row["taken_s"], row["heartbeat_s"], db_now_s(conn) - row["heartbeat_s"])


def take(conn: Connection, run_id: str, claim: LeaseClaim, replacing: str | None = None) -> bool:
    """Take the lease: insert it when nobody holds it (`replacing` None), or swap it from the holder whose
    token is `replacing`. False when someone else got there first (the row changed meanwhile)."""
    now = db_now_s(conn)
    values = dict(token=claim.token, host=claim.host, pid=claim.pid, folder=claim.folder, machine=claim.machine,
                  process_start=claim.process_start, stale_s=claim.stale_s, taken_s=now, heartbeat_s=now)
    if replacing is None:
        try:
            with conn.begin_nested():  # a lost race must not spoil the caller's transaction
                conn.execute(insert(run_leases).values(run_id=run_id, **values))
        except IntegrityError:
            return False
        return True
    try:
        with conn.begin_nested():
            if conn.dialect.name == "postgresql":  # a holder stopped inside a write holds the row: do not wait
                conn.execute(text(f"SET LOCAL lock_timeout = '{TAKEOVER_LOCK_WAIT_S}s'"))
            done = conn.execute(update(run_leases).where(run_leases.c.run_id == run_id,
                                                         run_leases.c.token == replacing).values(**values))
    except OperationalError:  # the lock wait timed out: the holder is inside a write
        return False
    return done.rowcount == 1


def renew(conn: Connection, run_id: str, token: str) -> bool:
    """Refresh the heartbeat; False when the lease is no longer this token's."""
    done = conn.execute(update(run_leases).where(run_leases.c.run_id == run_id, run_leases.c.token == token)
                        .values(heartbeat_s=db_now_s(conn)))
    return done.rowcount == 1


def release(conn: Connection, run_id: str, token: str) -> None:
    """Give the lease up (nothing happens when it is not this token's any more)."""
    conn.execute(delete(run_leases).where(run_leases.c.run_id == run_id, run_leases.c.token == token))


def check(conn: Connection, run_id: str, token: str) -> None:
    """Raise LeaseLost unless `token` holds `run_id`; inside a write transaction, the row stays locked
    (PostgreSQL: FOR UPDATE; SQLite: the caller's BEGIN IMMEDIATE) until the caller commits, so no takeover
    slips between this check and the caller's write."""
    found = conn.execute(select(run_leases.c.token, run_leases.c.host, run_leases.c.pid, run_leases.c.folder)
                         .where(run_leases.c.run_id == run_id).with_for_update()).first()
    if found is None or found.token != token:
        who = (f"it was taken over by pid {found.pid} on {found.host} in {found.folder}" if found is not None
               else "nobody holds it any more")
        raise LeaseLost(f"run {run_id}: this orchestrator lost its lease: {who}")
