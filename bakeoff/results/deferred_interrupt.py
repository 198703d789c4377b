"""Ctrl-C that lands inside a store transaction takes effect once the transaction has ended.

Why: a KeyboardInterrupt raised while a SQLite statement of a write transaction is still open (e.g. the lease
check's SELECT, its rows not yet read) makes SQLAlchemy drop the connection, but SQLite keeps that connection's
write lock until the statement is finalized, and the interrupt's own traceback keeps the statement alive. The
orchestrator's cleanup, which runs while it handles that very interrupt (keep the records that ended, mark the
run interrupted), then waits for the lock and fails with "database is locked" (seen in a CI run of
tests/test_interrupt.py). Deferring the signal makes every transaction commit or roll back whole first.

Only the main thread receives signals; elsewhere (the lease's heartbeat thread) this does nothing. A signal
that arrives is delivered again, once, to whatever handler was in place before (the default raises
KeyboardInterrupt; the orchestrator's cleanup ignores it), so nesting and `_thread.interrupt_main` behave
as without the deferral, only later. A store write normally takes milliseconds; one waiting for another
process's lock holds Ctrl-C back for at most the busy timeout.

SIGTERM is held the same way while a Python handler is in place for it: during a run the orchestrator makes
SIGTERM stop the run as Ctrl-C does (harness/run/orchestrator.py). Under its default disposition SIGTERM
still ends the process at once.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def sigint_deferred() -> Iterator[None]:
    """SIGINT (and SIGTERM, where Python handles it) inside the block is held and delivered again, to the
    previous handler, as the block ends."""
    # Off the main thread, or under a handler installed outside Python (which could not be put back): as is.
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is None:
        yield
        return
    held = [signal.SIGINT]
    if callable(signal.getsignal(signal.SIGTERM)):  # the orchestrator's, during a run
        held.append(signal.SIGTERM)
    arrived: list[int] = []
    previous = {signum: signal.signal(signum, lambda got, _frame: arrived.append(got)) for signum in held}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in held:
            if signum in arrived:
                signal.raise_signal(signum)
