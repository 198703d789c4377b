"""The results schema (SQLAlchemy Core), versioned. Bump SCHEMA_VERSION and add a migration when it changes.

runs: one row per `bakeoff run`. records: one row per case, written in one transaction when the case
ends. ceilings: measured device ceilings per environment fingerprint (`bakeoff calibrate`).
Record fields that are not columns are kept in `details` (JSON), so nothing measured is lost.

Versions (upgrades in results/migrations.py):
  1: runs, records, ceilings, schema_info.
  2: records.worker (where the case ran) and records.attempt (1 = the run's first session, k = its
     (k-1)-th resume); runs.resumes; records.case_id/shape/backend become unbounded text (PostgreSQL
     enforces VARCHAR lengths, and a long backend label must not fail a run).
"""
from __future__ import annotations

from sqlalchemy import (JSON, Boolean, Column, DateTime, Float, ForeignKey, Integer, MetaData, String, Table,
                        Text, UniqueConstraint)

SCHEMA_VERSION = 2

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

# (name, type) of record columns besides the keys; order is the export order.
RECORD_FIELDS: list[tuple[str, type]] = [
    ("case_id", Text), ("workload", String(128)), ("preset", String(32)), ("shape", Text),
    ("dtype", String(16)), ("backend", Text), ("device", String(32)), ("status", String(16)),
    ("reason", Text),
    ("compile_s", Float), ("compile_warm_s", Float), ("cache_hit_warm", Boolean),
    ("latency_ms_median", Float), ("latency_ms_p20", Float), ("latency_ms_p80", Float),
    ("latency_iqr_rel", Float), ("n_samples", Integer), ("samples", JSON),
    ("eager_latency_ms_median", Float), ("speedup_vs_eager", Float),
    ("graph_latency_ms", Float), ("kernel_count", Integer), ("device_ms", Float), ("launch_overhead_share", Float),
    ("err_max_abs_vs_eager", Float), ("err_rel_l2_vs_eager", Float),
    ("err_max_abs_vs_fp64", Float), ("err_max_rel_vs_fp64", Float), ("err_rel_l2_vs_fp64", Float),
    ("err_rmse_vs_fp64", Float), ("err_cosine_vs_fp64", Float), ("err_ulp_max_vs_fp64", Float),
    ("err_ulp_p99_vs_fp64", Float), ("eager_err_rel_l2_vs_fp64", Float), ("eager_err_rmse_vs_fp64", Float),
    ("err_ratio_vs_eager", Float), ("eager_deterministic", Boolean),
    ("flops", Float), ("bytes_moved", Float), ("achieved_gbps", Float), ("achieved_tflops", Float),
    ("pct_of_ceiling", Float), ("break_even_calls", Float),
    ("worker", String(128)), ("attempt", Integer),  # v2
    ("details", JSON),
]
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
