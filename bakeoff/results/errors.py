"""The store's errors, importable without the store (SQLAlchemy): the CLI names them in `except` clauses of
commands that may never open a store."""
from __future__ import annotations


class StoreError(RuntimeError):
    """The store cannot do what was asked: no such run, no runs yet, a store of another schema."""


class LeaseLost(RuntimeError):
    """This orchestrator no longer holds its run's lease (another took it over): it must stop writing."""
