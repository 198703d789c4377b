"""A fixture that yields a fresh, empty store URL for each database kind: SQLite and PostgreSQL."""
from __future__ import annotations

import pytest

from pgserver import fresh_database


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path) -> str:
    """An empty database: a SQLite file under tmp_path, or a new database on the session's PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return fresh_database(request.getfixturevalue("postgres_server"))
