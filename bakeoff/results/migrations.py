"""Upgrade a results store written by an older bakeoff to the current schema, in place.

Each step takes a store from version N to N+1 inside the caller's transaction (the store holds an
exclusive lock meanwhile: SQLite `BEGIN IMMEDIATE`, a PostgreSQL advisory lock), so several processes
opening one old store at once upgrade it exactly once, and a failed step leaves it as it was.
Old rows are kept; columns a version adds are NULL for them ("not recorded then").
"""
from __future__ import annotations

from typing import Callable

from sqlalchemy import inspect, select, update
from sqlalchemy.engine import Connection

from bakeoff.results.schema import SCHEMA_VERSION, records, run_leases, schema_info


class MigrationError(RuntimeError):
    """The database cannot be brought to the current schema (unknown layout or a newer bakeoff's)."""


def stored_version(conn: Connection) -> int | None:
    """The schema version the database holds; None for an empty database (no bakeoff tables yet)."""
    tables = set(inspect(conn).get_table_names())
    if "schema_info" in tables:
        value = conn.execute(select(schema_info.c.value).where(schema_info.c.key == "schema_version")).scalar()
        if value is not None:
            return int(value)
    if tables & {"runs", "records", "ceilings"}:
        raise MigrationError(f"has tables {sorted(tables)} but no schema version: not a bakeoff store")
    return None


def _add_column(conn: Connection, table: str, column_ddl: str) -> None:
    conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {column_ddl}")


def add_record_columns(conn: Connection, *names: str) -> None:
    """Add record fields newly marked InTable (results/record.py) as columns of `records`, typed as the model
    declares them; existing rows read them as NULL. One migration step per schema version, e.g.
    `STEPS[3] = lambda conn: add_record_columns(conn, "headline_ms")`."""
    for name in names:
        column = records.c[name]
        _add_column(conn, "records", f"{column.name} {column.type.compile(dialect=conn.dialect)}")


def _v1_to_v2(conn: Connection) -> None:
    """records.worker, records.attempt, runs.resumes; unbounded text for case_id, shape and backend."""
    _add_column(conn, "records", "worker VARCHAR(128)")
    _add_column(conn, "records", "attempt INTEGER")
    _add_column(conn, "runs", "resumes INTEGER NOT NULL DEFAULT 0")
    if conn.dialect.name == "postgresql":  # SQLite never enforced VARCHAR lengths
        for column in ("case_id", "shape", "backend"):
            conn.exec_driver_sql(f"ALTER TABLE records ALTER COLUMN {column} TYPE TEXT")


def _v2_to_v3(conn: Connection) -> None:
    """run_leases: the orchestrator holding each running run (a v2 orchestrator held an flock file instead,
    which did not reach another folder or host; an older bakeoff refuses a v3 store, so none bypasses it)."""
    run_leases.create(conn, checkfirst=True)


def rename_record_columns(conn: Connection, renamed: dict[str, str]) -> None:
    """Rename columns of `records` (old name -> current name, a record field renamed; results/renamed_fields.py
    renames the same fields in the `details` of old rows as they are read). Their values stay as they are."""
    for old, new in renamed.items():
        conn.exec_driver_sql(f"ALTER TABLE records RENAME COLUMN {old} TO {new}")


def _v3_to_v4(conn: Connection) -> None:
    """records.samples becomes records.samples_ms: names carry their unit."""
    rename_record_columns(conn, {"samples": "samples_ms"})


# version N -> the step that takes a store from N to N+1
STEPS: dict[int, Callable[[Connection], None]] = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4}


def upgrade(conn: Connection, version: int) -> list[int]:
    """Apply every step from `version` to SCHEMA_VERSION; returns the versions reached, in order."""
    if version > SCHEMA_VERSION:
        raise MigrationError(f"schema version {version} is newer than this bakeoff's ({SCHEMA_VERSION}); "
                             f"upgrade bakeoff")
    reached = []
    for v in range(version, SCHEMA_VERSION):
        if v not in STEPS:
            raise MigrationError(f"no upgrade from schema version {v}")
        STEPS[v](conn)
        conn.execute(update(schema_info).where(schema_info.c.key == "schema_version").values(value=str(v + 1)))
        reached.append(v + 1)
    return reached
