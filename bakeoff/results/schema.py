"""The results schema (SQLAlchemy Core), versioned. Bump SCHEMA_VERSION and add a migration when it changes.

runs: one row per `bakeoff run`. records: one row per case, written in one transaction when the case
ends; its columns are the fields of the record model (results/record.py) marked `InTable`, and the other
fields are kept in `details` (JSON). run_leases: the orchestrator holding each running run (its owner and
heartbeat; harness/run/lease_heartbeat.py). ceilings: measured device ceilings per environment fingerprint
(`bakeoff calibrate`).

Versions (upgrades in results/migrations.py):
  1: runs, records, ceilings, schema_info.
  2: records.worker (where the case ran) and records.attempt (1 = the run's first session, k = its
     (k-1)-th resume); runs.resumes; records.case_id/shape/backend become unbounded text (PostgreSQL
     enforces VARCHAR lengths, and a long backend label must not fail a run).
  3: run_leases (one row per run held by a live orchestrator), so that two orchestrators started from
     different folders or hosts on one store never run one run at once.
  4: records.samples renamed records.samples_ms (names carry their unit; the record fields renamed with it,
     kept in `details`, read under their new names: results/renamed_fields.py).
"""
from __future__ import annotations

from typing import Any, Literal, get_args, get_origin

from sqlalchemy import (JSON, Boolean, Column, DateTime, Float, ForeignKey, Integer, MetaData, String, Table,
                        Text, UniqueConstraint)

from bakeoff.results.record import CaseRecord, InTable

SCHEMA_VERSION = 4

metadata = MetaData()

schema_info = Table(
    "schema_info", metadata,
    Column("key", String(64), primary_key=True),
    Column("value", String(256), nullable=False),
)

runs = Table(
    "runs", metadata,
    Column("run_id", String(64), primary_key=True),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("ended_at", DateTime(timezone=True)),
    Column("status", String(16), nullable=False),  # running, complete, interrupted
    Column("config_name", String(128)),
    Column("config_path", Text),
    Column("config_text", Text),
    Column("device", String(32)),
    Column("fingerprint", String(32), index=True),
    Column("environment", JSON),
    Column("harness_rev", String(64)),
    Column("schema_version", Integer, nullable=False),
    Column("n_cases", Integer),
    Column("resumes", Integer, nullable=False, server_default="0"),  # v2
)

def _sql_type(annotation: Any, mark: InTable) -> Any:
    """The column type of a record field: VARCHAR(n) when bounded, else from its Python type."""
    if mark.length is not None:
        return String(mark.length)
    kinds = {a for a in get_args(annotation) if a is not type(None)} or {annotation}
    for python, sql in ((bool, Boolean), (int, Integer), (float, Float), (str, Text)):
        if kinds <= {python}:
            return sql
    if all(get_origin(k) in (list, dict, tuple) for k in kinds):
        return JSON
    if all(get_origin(k) is Literal for k in kinds):
        return Text
    raise TypeError(f"no column type for {annotation!r}")


def record_columns() -> list[tuple[str, Any, InTable]]:
    """(name, Python annotation, InTable) of every record column marked InTable (results/record.py), in
    export order."""
    columns = {c.name: c for c in CaseRecord.declared_columns()}
    return [(name, c.annotation, c.in_table) for name in CaseRecord.export_columns()
            if (c := columns[name]).in_table is not None]


# (name, type) of record columns besides the keys, from the record model (results/record.py); the rest of
# a record's fields are kept in `details`.
RECORD_FIELDS: list[tuple[str, Any]] = [(name, _sql_type(ann, mark)) for name, ann, mark in record_columns()]
RECORD_FIELDS.append(("details", JSON))
RECORD_COLUMNS = [name for name, _ in RECORD_FIELDS]

records = Table(
    "records", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(64), ForeignKey("runs.run_id"), nullable=False, index=True),
    *[Column(name, typ) for name, typ in RECORD_FIELDS],
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("run_id", "case_id", name="uq_record_case"),
)

ceilings = Table(
    "ceilings", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("fingerprint", String(32), nullable=False, index=True),
    Column("device", String(32), nullable=False),
    Column("name", String(64), nullable=False),  # copy_gbps, matmul_tflops_bfloat16, ...
    Column("value", Float, nullable=False),
    Column("unit", String(16), nullable=False),
    Column("method", Text),
    Column("measured_at", DateTime(timezone=True), nullable=False),
    Column("environment", JSON),
)

# The lease of a run: held by one orchestrator at a time (harness/run/lease_heartbeat.py). Times are seconds on the
# database's clock (one clock for every host); a lease whose heartbeat is older than its holder's `stale_s`
# may be taken over.
run_leases = Table(
    "run_leases", metadata,
    Column("run_id", String(64), ForeignKey("runs.run_id"), primary_key=True),
    Column("token", String(32), nullable=False),  # the holder's secret: only it renews or releases
    Column("host", Text, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("folder", Text, nullable=False),  # the holder's working folder (its artifacts are there)
    Column("machine", String(64), nullable=False),  # boot and process namespace: where the pid means something
    Column("process_start", String(32), nullable=False),  # the pid's start time there (pid reuse)
    Column("stale_s", Float, nullable=False),  # no heartbeat for this long: stale
    Column("taken_s", Float, nullable=False),
    Column("heartbeat_s", Float, nullable=False),
)
