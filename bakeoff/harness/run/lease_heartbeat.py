"""One orchestrator per run, wherever it starts: the run's lease, held in the store (results/leases.py).

The orchestrator takes the lease before it runs a case and holds it until it ends; a thread renews its
heartbeat every `stale_s / 4` seconds. Another orchestrator asking for the run, from any folder or host
sharing the store, is refused (RunBusyError, naming the holder) while the lease is live. A lease is taken
over when its holder has gone without a heartbeat for its `stale_s` (LEASE_STALE_S, or
BAKEOFF_LEASE_STALE_S seconds), or at once when the holder ran on this machine and its process has ended.
A holder that finds its lease taken (it was suspended, or cut off from the store) stops its workers and
writes nothing more: every write it makes checks the lease in the write's own transaction.
"""
from __future__ import annotations

import _thread
import os
import secrets
import socket
import threading
import time
from contextlib import contextmanager
from typing import Iterator

from bakeoff.results.leases import LeaseClaim, LeaseHolder, LeaseLost
from bakeoff.results.store import Store

from bakeoff.owner import ProcessId

LEASE_STALE_S = 60.0  # a lease with no heartbeat for this long (seconds) may be taken over
ENV_STALE = "BAKEOFF_LEASE_STALE_S"
TAKE_ATTEMPTS = 3  # rounds of read-then-swap before giving up to a lease that keeps changing hands


class LeaseError(RuntimeError):
    """The run's lease cannot be had; the CLI exits 2."""


class RunBusyError(LeaseError):
    """The run is held by a live orchestrator."""


def stale_after_s() -> float:
    """LEASE_STALE_S, or the seconds given in BAKEOFF_LEASE_STALE_S."""
    raw = os.environ.get(ENV_STALE)
    if raw is None or raw == "":
        return LEASE_STALE_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise LeaseError(f"{ENV_STALE} must be a number of seconds greater than 0, not {raw[:40]!r}")
    return value


def _replaceable(holder: LeaseHolder) -> str | None:
    """Why the holder's lease may be taken over; None while it is live."""
    if holder.stale:
        return f"no heartbeat for {holder.age_s:.3g} s (stale after {holder.claim.stale_s:g} s)"
    owner = ProcessId(holder.claim.machine, holder.claim.pid, holder.claim.process_start)
    if owner.alive() is False:
        return "its process has ended"
    return None


class RunLease:
    """This orchestrator's claim on one run. Take it with `acquire(run_id)` (a resume) or by passing `claim`
    to Store.create_run and then `adopt(run_id)` (a new run); `release()` when done. `token` goes with
    every write; `lost` says why the lease was lost (None while held)."""

    def __init__(self, store: Store, stale_s: float | None = None) -> None:
        me = ProcessId.current()
        self.store = store
        self.claim = LeaseClaim(token=secrets.token_hex(16), host=socket.gethostname(), pid=me.pid,
                                folder=os.getcwd(), machine=me.machine, process_start=me.start,
                                stale_s=stale_s if stale_s is not None else stale_after_s())
        self.run_id: str | None = None
        self.took_over: str | None = None  # whom it was taken from, and why
        self.lost: str | None = None
        self._lost_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def token(self) -> str:
        return self.claim.token

    def acquire(self, run_id: str) -> None:
        """Take `run_id`'s lease; RunBusyError while a live orchestrator holds it."""
        for _ in range(TAKE_ATTEMPTS):
            holder = self.store.lease_holder(run_id)
            if holder is None:
                if self.store.take_lease(run_id, self.claim):
                    return self.adopt(run_id)
                continue
            why = _replaceable(holder)
            if why is None:
                raise RunBusyError(f"run {run_id} is still being run by another orchestrator ({holder.describe()}); "
                                   f"wait for it to end or stop it. A lease with no heartbeat for "
                                   f"{holder.claim.stale_s:g} s is taken over")
            if self.store.take_lease(run_id, self.claim, replacing=holder.claim.token):
                self.took_over = f"{holder.owner()}: {why}"
                return self.adopt(run_id)
        raise RunBusyError(f"run {run_id}: its lease kept changing hands while this orchestrator asked for it; "
                           f"another orchestrator is starting it")

    def adopt(self, run_id: str) -> None:
        """Hold `run_id`, whose lease row this claim already took; start the heartbeat."""
        self.run_id = run_id
        self._thread = threading.Thread(target=self._beat, name=f"lease-{run_id}", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        """Renew every stale_s / 4 seconds. On losing the lease (renewal refused, or no renewal for stale_s
        seconds, after which others may take it), record why and interrupt the main thread, which stops the
        workers (orchestrator.run_cases)."""
        assert self.run_id is not None
        interval = self.claim.stale_s / 4
        last_ok = time.monotonic()
        while not self._stop.wait(interval):
            try:
                held = self.store.renew_lease(self.run_id, self.token)
            except Exception as exc:  # the store is unreachable: keep trying while the lease cannot lapse
                if time.monotonic() - last_ok <= self.claim.stale_s:
                    continue
                reason = f"could not renew it for {time.monotonic() - last_ok:.0f} s ({type(exc).__name__}: {exc})"
            else:
                if held:
                    last_ok = time.monotonic()
                    continue
                found = self._holder()
                reason = f"it was taken over by {found.owner() if found else 'another orchestrator'}"
            first = self.mark_lost(f"run {self.run_id}: this orchestrator lost its lease: {reason}"[:1000])
            if first and not self._stop.is_set():  # the run goes on unaware: stop it now, not at its next record
                _thread.interrupt_main()
            return

    def _holder(self) -> LeaseHolder | None:
        try:
            return self.store.lease_holder(self.run_id) if self.run_id else None
        except Exception:
            return None

    def mark_lost(self, reason: str) -> bool:
        """Record that the lease is lost (the heartbeat found it, or a write was refused); True for the
        first to say so."""
        with self._lost_lock:
            if self.lost:
                return False
            self.lost = reason
            return True

    def check(self) -> None:
        """Raise LeaseLost once the heartbeat has found the lease lost."""
        if self.lost:
            raise LeaseLost(self.lost)

    def release(self) -> None:
        """Stop the heartbeat and give the lease up (left to go stale when the store cannot be reached)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
        if self.run_id is not None and not self.lost:
            try:
                self.store.release_lease(self.run_id, self.token)
            except Exception:
                pass  # it goes stale after stale_s; nothing else to do from here

    @contextmanager
    def held(self, run_id: str, acquire: bool = True) -> Iterator["RunLease"]:
        """Hold `run_id` for the block (taking it first unless it was taken with create_run)."""
        if acquire:
            self.acquire(run_id)
        elif self.run_id is None:
            self.adopt(run_id)
        try:
            yield self
        except LeaseLost as exc:
            self.mark_lost(str(exc))
            raise
        except KeyboardInterrupt:
            if self.lost:  # the heartbeat's interrupt, wherever it landed: the lease is lost, not Ctrl-C
                raise LeaseLost(self.lost) from None
            raise
        finally:
            self.release()
