"""Ctrl-C inside a store write (bakeoff/results/deferred_interrupt.py): the transaction ends whole, the interrupt
follows, and the writes of the cleanup that handles it are not locked out (seen once in CI: an interrupt during
a record's lease check left SQLite's write lock held, and marking the run interrupted failed with "database
is locked")."""
from __future__ import annotations

import signal
import time

import pytest
from sqlalchemy import event, text

from bakeoff.results.deferred_interrupt import sigint_deferred
from bakeoff.results.store import Store


@pytest.fixture(autouse=True)
def default_sigint():
    """Python's own SIGINT handler (KeyboardInterrupt) for each test, whatever the suite inherited: a process
    started with SIGINT ignored (`nohup ... &`) keeps it ignored, and the raised signal would then do nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupt_on_select(store: Store) -> dict:
    """Send this process SIGINT right after the next SELECT inside a write transaction, its rows unread."""
    armed = {"on": False}

    @event.listens_for(store.engine, "after_cursor_execute")
    def _sigint(conn, _cursor, statement, *_):
        if armed["on"] and statement.lstrip().upper().startswith("SELECT") and conn.in_transaction():
            armed["on"] = False
            signal.raise_signal(signal.SIGINT)

    return armed


def test_a_write_cut_by_ctrl_c_commits_and_the_cleanup_can_write(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    with store._write() as conn:
        conn.execute(text("CREATE TABLE marker (x INTEGER)"))
        conn.execute(text("INSERT INTO marker VALUES (0), (0)"))
    armed = _interrupt_on_select(store)
    armed["on"] = True
    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        try:
            with store._write() as conn:
                conn.execute(text("SELECT x FROM marker"))  # rows unread when the signal arrives
                conn.execute(text("INSERT INTO marker VALUES (1)"))
        except KeyboardInterrupt:
            assert not armed["on"]
            with store._write() as conn:  # the cleanup, while the interrupt's traceback is alive
                conn.execute(text("INSERT INTO marker VALUES (2)"))
            raise
    assert time.perf_counter() - t0 < 10  # not a wait for the busy timeout (60 s)
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT x FROM marker")).scalars().all() == [0, 0, 1, 2]  # the cut write committed whole


def test_the_deferred_signal_reaches_the_handler_that_was_in_place():
    got = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: got.append(signum))
    try:
        with sigint_deferred():
            with sigint_deferred():
                signal.raise_signal(signal.SIGINT)
            assert got == []  # the outer block still holds it
        assert got == [signal.SIGINT]
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        with sigint_deferred():
            signal.raise_signal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # ignored before, ignored after
    finally:
        signal.signal(signal.SIGINT, previous)
